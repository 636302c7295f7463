//! `kfdrt`: the kfdrt command-line tool.
//!
//! Exit codes: 0 success; 1 a check failed (`check`) or input could not be decoded
//! cleanly (`disasm`); 2 usage error; 3 the device could not be opened or queried.

mod args;
mod bench;
mod disasm;
mod info;

use std::path::Path;
use std::process::ExitCode;

use args::Args;

const USAGE: &str = "\
kfdrt — userspace AMD GPU runtime on KFD, with an emulated device

USAGE:
    kfdrt <COMMAND> [OPTIONS]

COMMANDS:
    info      Print the device's agents (rocminfo's essentials)
    disasm    Decode PM4, AQL or SDMA packets from a file
    bench     Host-side cost and latency of stream, event and callback calls
    help      Print this help, or `kfdrt help COMMAND` for one command

DEVICE SELECTION (every command that opens a device):
    --device SPEC   auto | hw | emu[:PRESET[*N][,PRESET...]]   (default: $KFDRT_DEVICE, else auto)
                    auto = hardware when /dev/kfd can be opened, else the emulator

EXIT CODES:
    0 success, 1 check failure / undecodable input, 2 usage error, 3 device error
";

const INFO_HELP: &str = "\
kfdrt info — print each GPU agent: name, gfx target, CUs, SIMDs, wave size, XCCs, VRAM,
SDMA engines, KFD version, queue and doorbell facts.

USAGE:
    kfdrt info [--device SPEC] [--sysfs DIR] [--json]

OPTIONS:
    --device SPEC   device to open (see `kfdrt help`)
    --sysfs DIR     read a KFD sysfs topology tree instead of opening a device
                    (DIR holds system_properties and nodes/)
    --json          machine-readable output

EXAMPLES:
    kfdrt info
    kfdrt info --device emu:mi300x
    kfdrt info --sysfs /sys/devices/virtual/kfd/kfd/topology --json
";

const DISASM_HELP: &str = "\
kfdrt disasm — decode a file of little-endian dwords into one packet per line:
`OFFSET NAME field=value ...`. Unknown or truncated packets are printed as such with
their offset, and decoding continues where it can.

USAGE:
    kfdrt disasm --engine pm4|aql|sdma --gfx TARGET [--hex] [--json] FILE

OPTIONS:
    --engine E   pm4 (type-3 packets / IBs), aql (64-byte slots), sdma
    --gfx T      gfx90a, gfx942, gfx1100, gfx1201, ... (selects family and SDMA version)
    --hex        FILE holds hex words (whitespace/comma separated, # comments) instead of
                 raw binary
    --json       one JSON object per packet, in an array

EXIT CODES:
    0 every packet decoded; 1 some packet was unknown, malformed or truncated;
    2 usage error or unreadable file

EXAMPLES:
    kfdrt disasm --engine pm4 --gfx gfx942 ib.bin
    echo 'c0053c00 00000015 ...' > w.txt && kfdrt disasm --engine pm4 --gfx gfx90a --hex w.txt
";

const BENCH_HELP: &str = "\
kfdrt bench — host-side cost and round-trip latency of the runtime's calls, as medians
over repeats, under the names of the CUDA anchor (shared/anchors/cuda_h200.txt).

USAGE:
    kfdrt bench [--device SPEC] [--filter PATTERN] [--json] [--quick] [--compare FILE]

OPTIONS:
    --device SPEC     device to measure (see `kfdrt help`)
    --filter PATTERN  only figures whose name contains PATTERN
    --json            machine-readable output
    --quick           fewer repeats (a smoke run, not a report)
    --compare FILE    also print the ratio kfdrt / FILE for every figure FILE has
                      (FILE in the anchor format: `NAME VALUE UNIT` lines)

EXAMPLES:
    kfdrt bench
    kfdrt bench --filter writeValue --compare ../shared/anchors/cuda_h200.txt
";

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let Some(cmd) = argv.first() else {
        eprint!("{USAGE}");
        return ExitCode::from(2);
    };
    let rest = &argv[1..];
    match cmd.as_str() {
        "info" => cmd_info(rest),
        "disasm" => cmd_disasm(rest),
        "bench" => cmd_bench(rest),
        "help" | "--help" | "-h" => {
            match rest.first().map(String::as_str) {
                Some("info") => print!("{INFO_HELP}"),
                Some("disasm") => print!("{DISASM_HELP}"),
                Some("bench") => print!("{BENCH_HELP}"),
                _ => print!("{USAGE}"),
            }
            ExitCode::SUCCESS
        }
        other => {
            eprintln!("kfdrt: unknown command {other:?}\n\n{USAGE}");
            ExitCode::from(2)
        }
    }
}

fn usage_error(cmd: &str, msg: &str, help: &str) -> ExitCode {
    eprintln!("kfdrt {cmd}: {msg}\n\n{help}");
    ExitCode::from(2)
}

fn wants_help(argv: &[String]) -> bool {
    argv.iter().any(|a| a == "--help" || a == "-h")
}

/// Open the device named by `--device`, else `KFDRT_DEVICE`, else auto.
fn open_device(args: &Args) -> Result<std::sync::Arc<dyn kfd::Backend>, String> {
    let spec = match args.value("device") {
        Some(s) => kfdrt::DeviceSpec::parse(s),
        None => kfdrt::DeviceSpec::from_env(),
    }
    .map_err(|e| e.to_string())?;
    kfdrt::open_backend(&spec).map_err(|e| e.to_string())
}

fn cmd_info(argv: &[String]) -> ExitCode {
    if wants_help(argv) {
        print!("{INFO_HELP}");
        return ExitCode::SUCCESS;
    }
    let args = match Args::parse(argv, &["device", "sysfs"], &["json"]) {
        Ok(a) => a,
        Err(e) => return usage_error("info", &e, INFO_HELP),
    };
    if let Some(p) = args.positional.first() {
        return usage_error("info", &format!("unexpected argument {p:?}"), INFO_HELP);
    }
    let src = match args.value("sysfs") {
        Some(dir) => info::InfoSource::from_sysfs(Path::new(dir)),
        None => open_device(&args).and_then(|b| info::InfoSource::from_backend(b.as_ref())),
    };
    match src {
        Ok(src) => {
            if args.flag("json") {
                println!("{}", info::render_json(&src));
            } else {
                print!("{}", info::render_text(&src));
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("kfdrt info: {e}");
            ExitCode::from(3)
        }
    }
}

fn cmd_disasm(argv: &[String]) -> ExitCode {
    if wants_help(argv) {
        print!("{DISASM_HELP}");
        return ExitCode::SUCCESS;
    }
    let args = match Args::parse(argv, &["engine", "gfx"], &["hex", "json"]) {
        Ok(a) => a,
        Err(e) => return usage_error("disasm", &e, DISASM_HELP),
    };
    let (Some(engine), Some(gfx)) = (args.value("engine"), args.value("gfx")) else {
        return usage_error("disasm", "--engine and --gfx are required", DISASM_HELP);
    };
    let engine = match disasm::engine(engine) {
        Ok(e) => e,
        Err(e) => return usage_error("disasm", &e, DISASM_HELP),
    };
    let family = match disasm::family(gfx) {
        Ok(f) => f,
        Err(e) => return usage_error("disasm", &e, DISASM_HELP),
    };
    let [file] = args.positional.as_slice() else {
        return usage_error("disasm", "exactly one FILE is required", DISASM_HELP);
    };
    let bytes = match std::fs::read(file) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("kfdrt disasm: reading {file}: {e}");
            return ExitCode::from(2);
        }
    };
    let words = if args.flag("hex") {
        match std::str::from_utf8(&bytes)
            .map_err(|e| format!("{file} is not text: {e}"))
            .and_then(disasm::parse_hex)
        {
            Ok(w) => w,
            Err(e) => {
                eprintln!("kfdrt disasm: {e}");
                return ExitCode::from(2);
            }
        }
    } else {
        match disasm::parse_binary(&bytes) {
            Ok(w) => w,
            Err(e) => {
                eprintln!("kfdrt disasm: {file}: {e}");
                return ExitCode::from(2);
            }
        }
    };
    let (text, problem) = disasm::run(engine, family, &words, args.flag("json"));
    print!("{text}");
    if !text.ends_with('\n') {
        println!();
    }
    if problem {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

/// The host CPU and core count, for reports.
fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|s| s.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(0);
    format!("{cpu}, {cores} cores")
}

fn cmd_bench(argv: &[String]) -> ExitCode {
    if wants_help(argv) {
        print!("{BENCH_HELP}");
        return ExitCode::SUCCESS;
    }
    let args = match Args::parse(argv, &["device", "filter", "compare"], &["json", "quick"]) {
        Ok(a) => a,
        Err(e) => return usage_error("bench", &e, BENCH_HELP),
    };
    let anchor = match args.value("compare") {
        Some(f) => match std::fs::read_to_string(f) {
            Ok(t) => Some(bench::parse_anchor(&t)),
            Err(e) => {
                eprintln!("kfdrt bench: reading {f}: {e}");
                return ExitCode::from(2);
            }
        },
        None => None,
    };
    let dev = match open_device(&args)
        .and_then(|b| kfdrt::Device::with_backend(b).map_err(|e| e.to_string()))
    {
        Ok(d) => d,
        Err(e) => {
            eprintln!("kfdrt bench: {e}");
            return ExitCode::from(3);
        }
    };
    let gpu = &dev.gpus()[0];
    let device = format!(
        "{:?} {} ({} CUs), KFD {}.{}",
        dev.backend().kind(),
        gpu.gfx_name(),
        gpu.cu_count(),
        dev.kfd_version().0,
        dev.kfd_version().1
    );
    let scale = if args.flag("quick") {
        bench::Scale::QUICK
    } else {
        bench::Scale::FULL
    };
    let json = args.flag("json");
    if !json {
        println!("# machine {}", machine());
        println!("# device {device}");
    }
    let figs = match bench::run(&dev, scale, args.value("filter"), |name| {
        if !json {
            eprintln!("bench: {name} ...");
        }
    }) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("kfdrt bench: {e}");
            return ExitCode::from(3);
        }
    };
    let ratio = |name: &str, v: f64| -> Option<f64> {
        anchor
            .as_ref()?
            .iter()
            .find(|(n, _, _)| n == name)
            .map(|(_, a, _)| v / a)
    };
    if json {
        let list: Vec<serde_json::Value> = figs
            .iter()
            .map(|f| serde_json::json!({"name": f.name, "value": f.value, "unit": f.unit, "ratio_vs_compare": ratio(f.name, f.value)}))
            .collect();
        let v = serde_json::json!({"machine": machine(), "device": device, "figures": list, "not_measured_yet": bench::NOT_YET});
        println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
    } else {
        for f in &figs {
            match ratio(f.name, f.value) {
                Some(r) => println!(
                    "{:<44} {:>12.1} {:<12} x{r:.3} of compare",
                    f.name, f.value, f.unit
                ),
                None => println!("{:<44} {:>12.1} {}", f.name, f.value, f.unit),
            }
        }
        let (lo, hi) = dev.stream_priority_range();
        println!("priority range least={lo} greatest={hi}");
        if args.value("filter").is_none() {
            println!(
                "# not measured yet (later issues): {}",
                bench::NOT_YET.join(", ")
            );
        }
    }
    ExitCode::SUCCESS
}
