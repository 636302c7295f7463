//! `kfdrt emu-run`: run an unmodified program on the emulated device through the
//! `kfdrt-preload` LD_PRELOAD library.

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use crate::out::out;

use crate::args::Args;

/// `kfdrt help emu-run`.
pub const HELP: &str = "\
kfdrt emu-run — run an unmodified program (rocminfo, a ROCr or HIP program) on the emulated
device: /dev/kfd, its render nodes /dev/dri/renderD*, the KFD sysfs topology and the
/sys/class/drm entries are served in-process by kfd-emu through an LD_PRELOAD library
(libkfdrt_preload.so). Doorbells the program writes are found by polling.

USAGE:
    kfdrt emu-run [--device emu:SPEC] [--trace] -- PROGRAM [ARGS...]

OPTIONS:
    --device SPEC   the emulated device (default: $KFDRT_EMU_DEVICE, else emu = one MI300X);
                    e.g. emu:mi250x*2, emu:rx7900xtx, emu:mi210[vram=1G]
    --trace         log every intercepted device/sysfs access and unmodelled request
                    to stderr ($KFDRT_PRELOAD_TRACE=1)

The library is found at $KFDRT_PRELOAD_LIB, else next to the kfdrt executable (cargo puts
both in target/<profile>/; build it with `cargo build -p kfdrt-preload`).

Each process has its own emulated device, created when it first opens /dev/kfd. Children
inherit LD_PRELOAD: a forked or exec'd child that opens /dev/kfd gets a fresh device of the
same spec; KFD fds inherited from the parent fail with EBADF (as on KFD). Memory is never
shared between processes' devices.

The emulated topology and DRM sysfs entries are served from memory: nothing is written
to disk.

EXIT CODES:
    the program's exit status (128+N when killed by signal N); 2 usage error; 3 the preload
    library or program cannot be run
";

fn find_lib() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("KFDRT_PRELOAD_LIB") {
        return Some(PathBuf::from(p));
    }
    let exe = std::env::current_exe().ok()?;
    let dir = exe.parent()?;
    [
        dir.join("libkfdrt_preload.so"),
        dir.join("deps").join("libkfdrt_preload.so"),
        dir.parent()?.join("libkfdrt_preload.so"),
    ]
    .into_iter()
    .find(|p| p.is_file())
}

/// Run `kfdrt emu-run`.
pub fn cmd(argv: &[String]) -> ExitCode {
    if argv
        .iter()
        .take_while(|a| *a != "--")
        .any(|a| a == "--help" || a == "-h")
    {
        out!("{HELP}");
        return ExitCode::SUCCESS;
    }
    let args = match Args::parse(argv, &["device"], &["trace"]) {
        Ok(a) => a,
        Err(e) => return usage(&e),
    };
    if !args.positional.is_empty() {
        return usage(&format!(
            "unexpected argument {:?} (put the program after --)",
            args.positional[0]
        ));
    }
    let Some((program, prog_args)) = args.rest.split_first() else {
        return usage("no PROGRAM given after --");
    };
    let spec = args
        .value("device")
        .map(str::to_owned)
        .or_else(|| std::env::var("KFDRT_EMU_DEVICE").ok())
        .unwrap_or_else(|| "emu".to_owned());
    if let Err(e) = kfd_emu::spec::parse(&spec) {
        return usage(&format!("--device {spec:?}: {e}"));
    }
    let Some(lib) = find_lib() else {
        eprintln!(
            "kfdrt emu-run: libkfdrt_preload.so not found next to {} (build it with \
             `cargo build -p kfdrt-preload`, or set KFDRT_PRELOAD_LIB)",
            std::env::current_exe()
                .map(|p| p.display().to_string())
                .unwrap_or_default()
        );
        return ExitCode::from(3);
    };
    let lib = lib.canonicalize().unwrap_or(lib);
    let preload = match std::env::var("LD_PRELOAD") {
        Ok(old) if !old.is_empty() => format!("{}:{old}", lib.display()),
        _ => lib.display().to_string(),
    };
    let mut c = Command::new(program);
    c.args(prog_args)
        .env("LD_PRELOAD", preload)
        .env("KFDRT_EMU_DEVICE", &spec);
    if args.flag("trace") {
        c.env("KFDRT_PRELOAD_TRACE", "1");
    }
    let status = match c.status() {
        Ok(s) => s,
        Err(err) => {
            eprintln!(
                "kfdrt emu-run: cannot run {}: {err}",
                Path::new(program).display()
            );
            return ExitCode::from(3);
        }
    };
    match (status.code(), status.signal()) {
        (Some(c), _) => ExitCode::from(c as u8),
        // The shell's convention for a child killed by a signal.
        (None, Some(sig)) => ExitCode::from((128 + sig) as u8),
        (None, None) => ExitCode::from(3),
    }
}

fn usage(msg: &str) -> ExitCode {
    eprintln!("kfdrt emu-run: {msg}\n\n{HELP}");
    ExitCode::from(2)
}
