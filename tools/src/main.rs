//! `kfdrt`: the kfdrt command-line tool.
//!
//! Exit codes: 0 success; 1 a check failed (`check`) or input could not be decoded
//! cleanly (`disasm`); 2 usage error; 3 the device could not be opened or queried.
//! A closed output pipe (`kfdrt check | head -1`) ends any command quietly with 0.

mod args;
mod bench;
mod bench_kernels;
mod check;
mod disasm;
mod disasm_codeobj;
mod disasm_isa;
mod emu_run;
mod info;
mod out;
mod soak;
mod trace;

use std::path::Path;
use std::process::ExitCode;

use args::Args;
use out::{err, errln, out, outln};

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
    soak      Stress run: threads x streams mixing every stream command, every result checked
    emu-run   Run an unmodified program (rocminfo, ROCr, HIP) on the emulated device
    help      Print this help, or `kfdrt help COMMAND` for one command
    --version Print the version

DEVICE SELECTION (every command that opens a device):
    --device SPEC   auto | hw | emu[:PRESET[OPTIONS][*N][,PRESET...]]
                    (default: $KFDRT_DEVICE, else auto)
                    auto = hardware when /dev/kfd can be opened, else the emulator
                    OPTIONS = [vram=SIZE,xnack=on|off], SIZE like 512M, 16G or 16GiB
                    e.g. emu:mi300x, emu:mi250x*2,rx7900xtx, emu:mi300x[vram=4GiB,xnack=on]

EXIT CODES:
    0 success, 1 check failure / undecodable input / failed workload, 2 usage error
    (bad option or value, bad device spec, unreadable input, unwritable output),
    3 the device could not be opened or queried
    A closed output pipe (`kfdrt check | head -1`) ends the command quietly with 0.
";

/// The full `kfdrt help`: [`USAGE`], the emulator presets and the check groups.
fn usage() -> String {
    let mut s = String::from(USAGE);
    s.push_str("\nEMULATOR PRESETS (emu:PRESET):\n");
    for p in kfd_emu::Preset::ALL {
        let gfx = kfd::topology::GfxVersion::from_target_version(p.gfx_target_version)
            .and_then(|v| v.name())
            .unwrap_or_default();
        s.push_str(&format!(
            "    {:<10} {} ({gfx}, {} CUs, {} GiB VRAM){}\n",
            p.name,
            p.marketing_name,
            p.cu_count(),
            p.vram_size >> 30,
            if p.name == kfd_emu::Preset::DEFAULT.name {
                " (default)"
            } else {
                ""
            }
        ));
    }
    s.push_str("\nCHECK GROUPS (kfdrt check --only GROUP):\n");
    s.push_str(&check::render_groups());
    s
}

const CHECK_HELP: &str = "\
kfdrt check — conformance run of the device (real or emulated) through kfdrt: named checks
in the groups listed below. Each check asserts values and order. A check that needs
something the device lacks (a second GPU, SVM, a private KFD process) is SKIPPED with the
reason, never passed; a check that runs out of time says what it was waiting for.

Prints a progress line per check to stderr and each result row to stdout as soon as the
check finishes (so an interrupted run keeps what ran), then a summary
`N passed, N failed, N skipped`. With --json the report is printed at the end.

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
    --list            list the checks with what each asserts, and exit (JSON with --json)
    --inject-fault    self-test of the checker: add `selftest.injected_fault`, which
                      provokes a queue fault while expecting a fault-free run, so it
                      FAILS and the run exits 1, and the cleanup self-tests (a check
                      ending early or panicking while its stream waits)

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
    --sysfs DIR     read KFD sysfs topology instead of opening a device: either a whole
                    tree (DIR holds system_properties and nodes/) or one node directory
                    as posted in bug reports (DIR holds properties, and optionally name,
                    gpu_id, mem_banks/); values that are not numbers (template
                    placeholders) and missing keys are shown as 0, with a note on stderr
    --json          machine-readable output

EXIT CODES:
    0 printed; 2 usage error, bad device spec or unreadable DIR; 3 the device could not
    be opened or the topology is malformed

EXAMPLES:
    kfdrt info
    kfdrt info --device emu:mi300x
    kfdrt info --sysfs /sys/devices/virtual/kfd/kfd/topology --json
    kfdrt info --sysfs ./nodes/2          # one node directory from a bug report
";

const DISASM_HELP: &str = "\
kfdrt disasm — decode a file of little-endian dwords into one packet per line:
`OFFSET NAME field=value ...`. Unknown or truncated packets are printed as such with
their offset, and decoding continues where it can. The input is read and decoded in
chunks, so lines appear at once and memory stays small whatever the input's size.

USAGE:
    kfdrt disasm --engine pm4|aql|sdma [--gfx TARGET] [--hex] [--json] [--progress] FILE
    kfdrt disasm --engine isa --gfx TARGET [--hex] FILE   (gfx9 machine code or code object)
    kfdrt disasm [--gfx TARGET] [--json] CODE_OBJECT
        an AMDGPU code object (ELF) or clang offload bundle (--gfx picks the entry):
        each kernel's descriptor and metadata

OPTIONS:
    --engine E   pm4 (type-3 packets / IBs), aql (64-byte slots), sdma
    --gfx T      gfx90a, gfx942, gfx1100, gfx1201, ... (the PM4 family: required for
                 pm4; for sdma it selects the SDMA version, which only changes the width
                 of the copy/fill count field: without it the 30-bit field of SDMA 5.x+
                 is read, which decodes well-formed 4.x packets the same; aql does not
                 depend on it)
    --hex        FILE holds hex words (whitespace/comma separated, # comments) instead of
                 raw binary
    --json       one JSON object per packet, in an array
    --progress   report bytes decoded on stderr (default: when stderr is a terminal and
                 FILE is larger than 16 MiB)
    FILE         a file, or - for standard input

EXIT CODES:
    0 every packet decoded; 1 some packet was unknown, malformed or truncated, or the
    input is empty; 2 usage error or unreadable file

EXAMPLES:
    kfdrt disasm --engine pm4 --gfx gfx942 ib.bin
    kfdrt disasm --engine sdma ring.bin | head
    echo 'c0053c00 00000015 ...' > w.txt && kfdrt disasm --engine pm4 --gfx gfx90a --hex w.txt
    kfdrt trace --dump-rings rings/ && kfdrt disasm --engine aql rings/gpu0-gfx942-q1-aql-ring.bin
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
    --quick           fewer repeats (a smoke run, not a report; the shader figures
                      then run 1/16 of the named sizes)
    --compare FILE    also print the ratio kfdrt / FILE for every figure FILE has
                      (FILE in the anchor format: `NAME VALUE UNIT` lines)

SHADER FIGURES (emulated device only; a private emulated MI300X, gfx942):
    for saxpy over 16M floats, a 16x16-tiled SGEMM 512^3, an LDS reduction of 16M uints
    and an ALU-bound FMA chain. Each kernel runs 5 pairs of runs (2 with --quick) on one
    worker thread and on all cores, interleaved (1, N, N, 1, 1, N, ...: both see the same
    drift in the machine's load); every figure is a median over its runs:
    `shader KERNEL: 1 worker` and `...: all cores` (ms), `...: lane-instructions/s per
    core` (one worker), `...: speed-up on all cores` (median 1-worker time / median
    all-cores time), `...: emulator/host Rust time` (one worker against the same
    computation in plain Rust on one host core) and `...: CPU time on all cores / 1
    worker` (process CPU time: 1.0 when more workers add no work; unlike the speed-up,
    it does not depend on how much CPU other processes leave). The machine's ceiling
    is measured in the same interleaved pairs: `...: native speed-up on all cores
    (machine ceiling)` (the same kind of work in plain Rust on 1 and all threads, each
    bound to a CPU) and `...: speed-up / native speed-up`. `...: parallel efficiency
    (all cores / 1 worker)`: work-groups per wall ms over the sum of the workers' own
    work-groups per CPU ms (1.0 when every worker worked the whole dispatch, whatever
    each host CPU's speed), all-core runs over one-worker runs (a loaded machine lowers
    both). `...: per-CPU rate, all cores / 1 worker`: work-groups per CPU ms on the same
    host CPU in the two runs of a pair (below 1.0 when running together slows each
    worker down). `...: speed-up at equal CPU speeds`: cores x efficiency x that rate
    ratio, the speed-up without the share that depends on which host CPU the one-worker
    runs got (a VM's CPUs need not run equally fast).
    Each run is described on stderr: the dispatch's threads (when each joined and left,
    CPU time, work-groups, claims, the time the last one ran alone) and every thread of
    the process that ran meanwhile (CPU and run-queue wait ms, voluntary/involuntary
    context switches, from /proc/self/task).

EXAMPLES:
    kfdrt bench
    kfdrt bench --filter shader
    kfdrt bench --filter writeValue --compare ../shared/anchors/cuda_h200.txt
";

/// `kfdrt bench-insn --device SPEC OP CALLS`: the probe child of the instruction counts.
fn cmd_bench_insn(argv: &[String]) -> ExitCode {
    let args = match Args::parse(argv, &["device"], &[]) {
        Ok(a) => a,
        Err(e) => return usage_error("bench-insn", &e, BENCH_HELP),
    };
    let (Some(op), Some(calls)) = (
        args.positional.first(),
        args.positional.get(1).and_then(|c| c.parse::<usize>().ok()),
    ) else {
        return usage_error("bench-insn", "expected OP CALLS", BENCH_HELP);
    };
    let dev = match open_device("bench-insn", &args) {
        Ok((d, _)) => d,
        Err(code) => return code,
    };
    match bench::insn_child(&dev, op, calls) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            errln!("kfdrt bench-insn: {e}");
            ExitCode::from(3)
        }
    }
}

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let Some(cmd) = argv.first() else {
        err!("{}", usage());
        return ExitCode::from(2);
    };
    let rest = &argv[1..];
    match cmd.as_str() {
        "check" => cmd_check(rest),
        "info" => cmd_info(rest),
        "disasm" => cmd_disasm(rest),
        "bench" => cmd_bench(rest),
        // The child `kfdrt bench` runs under callgrind for its instruction counts.
        "bench-insn" => cmd_bench_insn(rest),
        "trace" => trace::cmd(rest),
        "emu-run" => emu_run::cmd(rest),
        "soak" => soak::cmd(rest),
        "--version" | "-V" | "version" => {
            outln!("kfdrt {}", env!("CARGO_PKG_VERSION"));
            ExitCode::SUCCESS
        }
        "help" | "--help" | "-h" => {
            match rest.first().map(String::as_str) {
                Some("check") => out!("{CHECK_HELP}\nGROUPS:\n{}", check::render_groups()),
                Some("info") => out!("{INFO_HELP}"),
                Some("disasm") => out!("{DISASM_HELP}"),
                Some("bench") => out!("{BENCH_HELP}"),
                Some("trace") => out!("{}", trace::HELP),
                Some("soak") => out!("{}", soak::HELP),
                Some("emu-run") => out!("{}", emu_run::HELP),
                None => out!("{}", usage()),
                Some(other) => {
                    errln!("kfdrt help {other}: no such command\n\n{}", usage());
                    return ExitCode::from(2);
                }
            }
            ExitCode::SUCCESS
        }
        other => {
            errln!("kfdrt: unknown command {other:?}\n\n{}", usage());
            ExitCode::from(2)
        }
    }
}

fn usage_error(cmd: &str, msg: &str, help: &str) -> ExitCode {
    errln!("kfdrt {cmd}: {msg}\n\n{help}");
    ExitCode::from(2)
}

fn wants_help(argv: &[String]) -> bool {
    argv.iter().any(|a| a == "--help" || a == "-h")
}

/// A kfdrt error's message without the internal call name and kind that its `Display`
/// starts with (`open_backend(emu): InvalidDevice: ...`): users read what they did and
/// what went wrong, not function names.
fn user_msg(e: &kfdrt::Error) -> String {
    let s = e.to_string();
    let prefix = format!("{}: {:?}: ", e.call(), e.kind());
    match s.strip_prefix(&prefix) {
        Some(m) => m.to_string(),
        None => s,
    }
}

/// Where the device spec came from, for messages.
fn spec_origin(args: &Args) -> String {
    match args.value("device") {
        Some(s) => format!("--device {s:?}"),
        None => match std::env::var(kfdrt::DEVICE_ENV) {
            Ok(v) => format!("{}={v:?}", kfdrt::DEVICE_ENV),
            Err(_) => "the default device (auto)".into(),
        },
    }
}

/// The device spec of `--device`, else `KFDRT_DEVICE`, else auto. `Err` is a usage
/// message (exit 2).
fn device_spec(args: &Args) -> Result<kfdrt::DeviceSpec, String> {
    let spec = match args.value("device") {
        Some(s) if s.trim().is_empty() => {
            return Err(
                "--device \"\" names no device: give auto, hw, emu or emu:PRESET[*N][,...] \
                 (see `kfdrt help`)"
                    .into(),
            )
        }
        Some(s) => kfdrt::DeviceSpec::parse(s),
        None => kfdrt::DeviceSpec::from_env(),
    };
    spec.map_err(|e| format!("{}: {}", spec_origin(args), user_msg(&e)))
}

/// Open the device of `args`; on failure print why and return the exit code: 2 for a
/// bad spec (unknown preset or option), 3 when the device could not be opened.
fn open_device(cmd: &str, args: &Args) -> Result<(kfdrt::Device, kfdrt::DeviceSpec), ExitCode> {
    let spec = device_spec(args).map_err(|m| {
        errln!("kfdrt {cmd}: {m}");
        ExitCode::from(2)
    })?;
    let fail = |e: kfdrt::Error| {
        errln!(
            "kfdrt {cmd}: opening {}: {}",
            spec_origin(args),
            user_msg(&e)
        );
        ExitCode::from(if e.kind() == kfdrt::ErrorKind::InvalidDevice {
            2
        } else {
            3
        })
    };
    let backend = kfdrt::open_backend(&spec).map_err(fail)?;
    let dev = kfdrt::Device::with_backend(backend).map_err(fail)?;
    Ok((dev, spec))
}

fn cmd_info(argv: &[String]) -> ExitCode {
    if wants_help(argv) {
        out!("{INFO_HELP}");
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
        Some(dir) => match info::InfoSource::from_sysfs(Path::new(dir)) {
            Ok(s) => s,
            Err(info::SysfsError::Unreadable(m)) => {
                errln!("kfdrt info: --sysfs {dir:?}: {m}");
                return ExitCode::from(2);
            }
            Err(info::SysfsError::Malformed(m)) => {
                errln!("kfdrt info: --sysfs {dir:?}: {m}");
                return ExitCode::from(3);
            }
        },
        None => {
            let dev = match open_device("info", &args) {
                Ok((d, _)) => d,
                Err(code) => return code,
            };
            match info::InfoSource::from_backend(dev.backend().as_ref()) {
                Ok(s) => s,
                Err(e) => {
                    errln!("kfdrt info: querying the device: {e}");
                    return ExitCode::from(3);
                }
            }
        }
    };
    for note in &src.notes {
        errln!("kfdrt info: note: {note}");
    }
    if args.flag("json") {
        outln!("{}", info::render_json(&src));
    } else {
        out!("{}", info::render_text(&src));
    }
    ExitCode::SUCCESS
}

fn cmd_disasm(argv: &[String]) -> ExitCode {
    if wants_help(argv) {
        out!("{DISASM_HELP}");
        return ExitCode::SUCCESS;
    }
    if let Some(code) = disasm_codeobj::maybe_run(argv) {
        return code;
    }
    if let Some(code) = disasm::isa(argv) {
        return code;
    }
    let args = match Args::parse(argv, &["engine", "gfx"], &["hex", "json", "progress"]) {
        Ok(a) => a,
        Err(e) => return usage_error("disasm", &e, DISASM_HELP),
    };
    let Some(engine) = args.value("engine") else {
        return usage_error(
            "disasm",
            "--engine is required (pm4, aql or sdma)",
            DISASM_HELP,
        );
    };
    let engine = match disasm::engine(engine) {
        Ok(e) => e,
        Err(e) => return usage_error("disasm", &e, DISASM_HELP),
    };
    let family = match (args.value("gfx"), engine) {
        (Some(gfx), _) => match disasm::family(gfx) {
            Ok(f) => f,
            Err(e) => return usage_error("disasm", &e, DISASM_HELP),
        },
        (None, pm4::disasm::Engine::Pm4) => {
            return usage_error(
                "disasm",
                "--engine pm4 needs --gfx TARGET (packet layouts differ between families)",
                DISASM_HELP,
            )
        }
        // AQL does not depend on the family. SDMA does only through the width of the
        // COPY_LINEAR / CONST_FILL count field (22 bits on 4.x, 30 from 5.x); reading 30
        // bits decodes every well-formed 4.x packet the same (its bits 29:22 are 0).
        (None, _) => pm4::GfxFamily::Gfx11,
    };
    let [file] = args.positional.as_slice() else {
        return usage_error("disasm", "exactly one FILE is required", DISASM_HELP);
    };
    let opts = disasm::Options {
        engine,
        family,
        hex: args.flag("hex"),
        json: args.flag("json"),
        progress: args.flag("progress"),
    };
    match disasm::run_file(file, &opts) {
        Ok(disasm::Outcome::Clean) => ExitCode::SUCCESS,
        Ok(disasm::Outcome::Problem) => ExitCode::from(1),
        Err(disasm::Failure::Input(m)) => {
            errln!("kfdrt disasm: {m}");
            ExitCode::from(2)
        }
    }
}

fn cmd_check(argv: &[String]) -> ExitCode {
    if wants_help(argv) {
        out!("{CHECK_HELP}\nGROUPS:\n{}", check::render_groups());
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
    let json = args.flag("json");
    if args.flag("list") {
        if json {
            outln!("{}", check::render_list_json(&checks));
        } else {
            out!("{}", check::render_list(&checks));
        }
        return ExitCode::SUCCESS;
    }
    let (dev, spec) = match open_device("check", &args) {
        Ok(d) => d,
        Err(code) => return code,
    };
    let device = describe_device(&dev);
    let ctx = std::sync::Arc::new(check::Ctx::new(dev, &spec));
    let table = check::Table::new(&checks, repeat);
    if !json {
        outln!("# device {device}");
        out!("{}", table.header());
    }
    let t = std::time::Instant::now();
    let records = check::run(
        &ctx,
        &checks,
        repeat,
        timeout,
        |i, n, name| errln!("[{i}/{n}] {name} ..."),
        |r| {
            if !json {
                out!("{}", table.row(r));
            }
        },
    );
    let wall = t.elapsed();
    if json {
        outln!("{}", check::render_json(&records, &device, repeat, wall));
    } else {
        outln!("{}", check::summary_line(&records, wall));
        let failed: Vec<&str> = records
            .iter()
            .filter(|r| matches!(r.outcome, check::Outcome::Fail(_)))
            .map(|r| r.name)
            .collect();
        if !failed.is_empty() {
            outln!("FAILED: {}", failed.join(", "));
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
        out!("{BENCH_HELP}");
        return ExitCode::SUCCESS;
    }
    let args = match Args::parse(argv, &["device", "filter", "compare"], &["json", "quick"]) {
        Ok(a) => a,
        Err(e) => return usage_error("bench", &e, BENCH_HELP),
    };
    if let Some(p) = args.positional.first() {
        return usage_error("bench", &format!("unexpected argument {p:?}"), BENCH_HELP);
    }
    if let Some(f) = args.value("filter") {
        if !bench::filter_matches(f) {
            return usage_error(
                "bench",
                &format!(
                    "--filter {f:?} matches no figure; figures:\n    {}",
                    bench::NAMES.join("\n    ")
                ),
                BENCH_HELP,
            );
        }
    }
    let anchor = match args.value("compare") {
        Some(f) => match std::fs::read_to_string(f) {
            Ok(t) => Some(bench::parse_anchor(&t)),
            Err(e) => {
                errln!("kfdrt bench: --compare {f:?}: cannot read it: {e}");
                return ExitCode::from(2);
            }
        },
        None => None,
    };
    let dev = match open_device("bench", &args) {
        Ok((d, _)) => d,
        Err(code) => return code,
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
        outln!("# machine {}", machine());
        outln!("# device {device}");
    }
    let figs = match bench::run(&dev, scale, args.value("filter"), |name| {
        if !json {
            errln!("bench: {name} ...");
        }
    }) {
        Ok(f) => f,
        Err(e) => {
            errln!("kfdrt bench: measuring on the device: {}", user_msg(&e));
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
        outln!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
    } else {
        // The instruction counts (callgrind) first, so a wall figure that has one prints it
        // beside it.
        let insn = if args.flag("quick") {
            Vec::new()
        } else {
            let spec = args
                .value("device")
                .map(str::to_string)
                .or_else(|| std::env::var(kfdrt::DEVICE_ENV).ok())
                .unwrap_or_else(|| "auto".into());
            let filter = args.value("filter");
            let want = |n: &str| filter.is_none_or(|f| n.contains(f));
            bench::insn_figures(&spec, &want, &mut |n: &str| {
                errln!("bench: {n} (callgrind) ...")
            })
        };
        for f in &figs {
            let beside = insn
                .iter()
                .find(|i| i.name.strip_prefix("instructions/call ") == Some(f.name))
                .and_then(|i| i.value.as_ref().ok())
                .map(|v| format!("  ({v:.1} insn/call)"))
                .unwrap_or_default();
            match ratio(f.name, f.value) {
                Some(r) => outln!(
                    "{:<44} {:>12.1} {:<12} x{r:.3} of compare{beside}",
                    f.name,
                    f.value,
                    f.unit
                ),
                None => outln!("{:<44} {:>12.1} {}{beside}", f.name, f.value, f.unit),
            }
        }
        let (lo, hi) = dev.stream_priority_range();
        outln!("priority range least={lo} greatest={hi}");
        if !args.flag("quick") {
            let floor = insn
                .iter()
                .find(|f| f.name.contains("floor"))
                .and_then(|f| f.value.as_ref().ok().copied());
            for f in &insn {
                match (&f.value, floor) {
                    (Ok(v), Some(fl)) if !f.name.contains("floor") => outln!(
                        "{:<44} {:>12.1} insn         {:+.1} above the floor",
                        f.name,
                        v,
                        v - fl
                    ),
                    (Ok(v), _) => outln!("{:<44} {:>12.1} insn", f.name, v),
                    (Err(why), _) => outln!("{:<44} {why}", f.name),
                }
            }
        }
        if args.value("filter").is_none() && !bench::NOT_YET.is_empty() {
            outln!("# not measured yet: {}", bench::NOT_YET.join(", "));
        }
    }
    ExitCode::SUCCESS
}
