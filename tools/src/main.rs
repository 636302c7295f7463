//! `kfdrt`: the kfdrt command-line tool.
//!
//! Exit codes: 0 success; 1 a check failed (`check`) or input could not be decoded
//! cleanly (`disasm`); 2 usage error; 3 the device could not be opened or queried.

mod args;
mod bench;
mod check;
mod disasm;
mod emu_run;
mod info;
mod trace;

use std::path::Path;
use std::process::ExitCode;

use args::Args;

const USAGE: &str = "\
kfdrt — userspace AMD GPU runtime on KFD, with an emulated device

USAGE:
    kfdrt <COMMAND> [OPTIONS]

COMMANDS:
    check     Conformance run of the device: named checks, a table, non-zero exit on failure
    info      Print the device's agents (rocminfo's essentials)
    disasm    Decode PM4, AQL or SDMA packets from a file
    bench     Host-side cost and latency of stream, event and callback calls
    trace     Record a workload's packets and engine events (Chrome trace JSON + packet log)
    emu-run   Run an unmodified program (rocminfo, ROCr, HIP) on the emulated device
    help      Print this help, or `kfdrt help COMMAND` for one command

DEVICE SELECTION (every command that opens a device):
    --device SPEC   auto | hw | emu[:PRESET[*N][,PRESET...]]   (default: $KFDRT_DEVICE, else auto)
                    auto = hardware when /dev/kfd can be opened, else the emulator

EXIT CODES:
    0 success, 1 check failure / undecodable input, 2 usage error, 3 device error
";

const CHECK_HELP: &str = "\
kfdrt check — conformance run of the device (real or emulated) through kfdrt: named checks
grouped as topology, memory, queues, pm4, aql, sdma, events, signals, streams, xstream
(events across streams and GPUs), callbacks, memops (stream memory ops) and faults. Each
check asserts values and order. A check that needs something the device lacks (a second
GPU, SVM, a private KFD process) is SKIPPED with the reason, never passed.

Prints a progress line per check to stderr, then a table (check, result, time, detail on
failure or skip) and a summary `N passed, N failed, N skipped` to stdout.

USAGE:
    kfdrt check [--device SPEC] [--only PATTERN] [--json] [--repeat N] [--timeout SECS]
                [--list] [--inject-fault]

OPTIONS:
    --device SPEC     device to check (see `kfdrt help`)
    --only PATTERN    only checks whose name or group contains PATTERN (comma-separated
                      patterns: any may match)
    --json            machine-readable report (an object with results and summary)
    --repeat N        run the selected checks N times (default 1)
    --timeout SECS    per-check deadline; a check still running then FAILS as
                      \"timeout\" (default 20)
    --list            list the checks with what each asserts, and exit
    --inject-fault    self-test of the checker: add `selftest.injected_fault`, which
                      provokes a queue fault while expecting a fault-free run, so it
                      FAILS and the run exits 1

EXIT CODES:
    0 every check passed or was skipped; 1 some check failed; 2 usage error (including
    a PATTERN that matches no check); 3 the device could not be opened

EXAMPLES:
    kfdrt check
    kfdrt check --device emu:mi250x*2 --only xstream,memory
    kfdrt check --only sdma --repeat 10 --json > sdma.json
    kfdrt check --inject-fault; echo $?      # prints the failing self-test, exits 1
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
        "check" => cmd_check(rest),
        "info" => cmd_info(rest),
        "disasm" => cmd_disasm(rest),
        "bench" => cmd_bench(rest),
        "trace" => trace::cmd(rest),
        "emu-run" => emu_run::cmd(rest),
        "help" | "--help" | "-h" => {
            match rest.first().map(String::as_str) {
                Some("check") => print!("{CHECK_HELP}"),
                Some("info") => print!("{INFO_HELP}"),
                Some("disasm") => print!("{DISASM_HELP}"),
                Some("bench") => print!("{BENCH_HELP}"),
                Some("trace") => print!("{}", trace::HELP),
                Some("emu-run") => print!("{}", emu_run::HELP),
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

fn cmd_check(argv: &[String]) -> ExitCode {
    if wants_help(argv) {
        print!("{CHECK_HELP}");
        return ExitCode::SUCCESS;
    }
    let args = match Args::parse(
        argv,
        &["device", "only", "repeat", "timeout"],
        &["json", "list", "inject-fault"],
    ) {
        Ok(a) => a,
        Err(e) => return usage_error("check", &e, CHECK_HELP),
    };
    if let Some(p) = args.positional.first() {
        return usage_error("check", &format!("unexpected argument {p:?}"), CHECK_HELP);
    }
    let repeat = match args.value("repeat").map(str::parse::<u32>) {
        None => 1,
        Some(Ok(n)) if (1..=10_000).contains(&n) => n,
        Some(_) => {
            return usage_error(
                "check",
                "--repeat needs a number from 1 to 10000",
                CHECK_HELP,
            )
        }
    };
    let timeout = match args.value("timeout").map(str::parse::<f64>) {
        None => std::time::Duration::from_secs(20),
        Some(Ok(s)) if s > 0.0 && s <= 86_400.0 => std::time::Duration::from_secs_f64(s),
        Some(_) => {
            return usage_error(
                "check",
                "--timeout needs a number of seconds > 0",
                CHECK_HELP,
            )
        }
    };
    let checks = check::select(
        check::registry(args.flag("inject-fault")),
        args.value("only"),
    );
    if checks.is_empty() {
        return usage_error(
            "check",
            &format!(
                "--only {:?} matches no check (see `kfdrt check --list`)",
                args.value("only").unwrap_or_default()
            ),
            CHECK_HELP,
        );
    }
    if args.flag("list") {
        print!("{}", check::render_list(&checks));
        return ExitCode::SUCCESS;
    }
    let spec = match args.value("device") {
        Some(s) => kfdrt::DeviceSpec::parse(s),
        None => kfdrt::DeviceSpec::from_env(),
    };
    let dev = match spec.and_then(|spec| {
        kfdrt::open_backend(&spec)
            .and_then(kfdrt::Device::with_backend)
            .map(|d| (d, spec))
    }) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("kfdrt check: {e}");
            return ExitCode::from(3);
        }
    };
    let device = describe_device(&dev.0);
    let ctx = std::sync::Arc::new(check::Ctx::new(dev.0, &dev.1));
    let json = args.flag("json");
    if !json {
        println!("# device {device}");
    }
    let t = std::time::Instant::now();
    let records = check::run(&ctx, &checks, repeat, timeout, |i, n, name| {
        eprintln!("[{i}/{n}] {name} ...");
    });
    let wall = t.elapsed();
    if json {
        println!("{}", check::render_json(&records, &device, repeat, wall));
    } else {
        print!("{}", check::render_table(&records, repeat));
        println!("{}", check::summary_line(&records, wall));
        let failed: Vec<&str> = records
            .iter()
            .filter(|r| matches!(r.outcome, check::Outcome::Fail(_)))
            .map(|r| r.name)
            .collect();
        if !failed.is_empty() {
            println!("FAILED: {}", failed.join(", "));
        }
    }
    if check::summary(&records).1 > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

/// One line naming the device: backend, GPUs and KFD version.
fn describe_device(dev: &kfdrt::Device) -> String {
    let gpus: Vec<String> = dev
        .gpus()
        .iter()
        .map(|g| format!("{} ({} CUs)", g.gfx_name(), g.cu_count()))
        .collect();
    format!(
        "{:?}: {}, KFD {}.{}",
        dev.backend().kind(),
        gpus.join(", "),
        dev.kfd_version().0,
        dev.kfd_version().1
    )
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
        let v = serde_json::json!({"machine": machine(), "device": device, "figures": list, "not_measured": bench::NOT_YET});
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
        if args.value("filter").is_none() && !bench::NOT_YET.is_empty() {
            println!("# not measured yet: {}", bench::NOT_YET.join(", "));
        }
    }
    ExitCode::SUCCESS
}
