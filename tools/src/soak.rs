//! `kfdrt soak`: the runtime's soak workload ([`kfdrt::soak`], the same code the stress
//! test runs) for minutes, with a progress line per minute.

use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kfdrt::raw::soak::{Config, Counts};

use crate::out::{out, outln};

/// `kfdrt help soak`.
pub const HELP: &str = "\
kfdrt soak — stress run: THREADS host threads x STREAMS streams each, mixing every stream
command (write/wait value, events across streams, callbacks, mallocAsync/memset/memcpy/
freeAsync, destroying busy streams). At every checkpoint each stream is synchronized and
every write, every callback (exactly once) and every allocation's bytes are checked; the
first mismatch or failure stops the run. Prints the operation counts.

USAGE:
    kfdrt soak [--device SPEC] [--minutes N] [--seconds N] [--threads T] [--streams M]
               [--gpu G] [--seed S]

OPTIONS:
    --device SPEC   device to run on (see `kfdrt help`)
    --minutes N     run time in minutes (default 1)
    --seconds N     run time in seconds (instead of --minutes)
    --threads T     host threads (default 8)
    --streams M     streams per thread (default 64)
    --gpu G         GPU index (default 0)
    --seed S        random seed (default 1)

ENVIRONMENT:
    KFDRT_MAX_HW_QUEUES=N   shared hardware queues per GPU and priority (default 4)

EXIT CODES:
    0 every check held; 1 a check failed; 2 usage error; 3 the device could not be opened

EXAMPLES:
    kfdrt soak --minutes 10
    KFDRT_MAX_HW_QUEUES=1 kfdrt soak --minutes 10 --threads 8 --streams 64
";

fn usage(msg: &str) -> ExitCode {
    eprintln!("kfdrt soak: {msg}\n\n{HELP}");
    ExitCode::from(2)
}

/// `kfdrt soak`.
pub fn cmd(argv: &[String]) -> ExitCode {
    if argv.iter().any(|a| a == "--help" || a == "-h") {
        out!("{HELP}");
        return ExitCode::SUCCESS;
    }
    let args = match crate::args::Args::parse(
        argv,
        &[
            "device", "minutes", "seconds", "threads", "streams", "gpu", "seed",
        ],
        &[],
    ) {
        Ok(a) => a,
        Err(e) => return usage(&e),
    };
    if !args.positional.is_empty() || !args.rest.is_empty() {
        return usage("unexpected arguments");
    }
    let num = |name: &str, default: u64| -> Result<u64, String> {
        match args.value(name) {
            None => Ok(default),
            Some(v) => v
                .parse::<u64>()
                .map_err(|_| format!("--{name} {v:?}: expected a whole number")),
        }
    };
    let parsed = (|| -> Result<Config, String> {
        let duration = match args.value("seconds") {
            Some(_) => Duration::from_secs(num("seconds", 60)?),
            None => Duration::from_secs(num("minutes", 1)?.saturating_mul(60)),
        };
        let threads = num("threads", 8)? as usize;
        let streams = num("streams", 64)? as usize;
        if threads == 0 || streams < 2 {
            return Err("--threads must be at least 1 and --streams at least 2".into());
        }
        Ok(Config {
            threads,
            streams,
            duration,
            gpu: num("gpu", 0)? as usize,
            seed: num("seed", 1)?,
        })
    })();
    let cfg = match parsed {
        Ok(c) => c,
        Err(e) => return usage(&e),
    };
    let spec = match args.value("device") {
        Some(s) => kfdrt::DeviceSpec::parse(s),
        None => kfdrt::DeviceSpec::from_env(),
    };
    let dev = match spec.and_then(|s| kfdrt::Device::open_spec(&s)) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("kfdrt soak: opening the device: {e}");
            return ExitCode::from(3);
        }
    };
    if let Err(e) = dev.gpu(cfg.gpu) {
        eprintln!("kfdrt soak: {e}");
        return ExitCode::from(2);
    }
    eprintln!(
        "kfdrt soak: {} threads x {} streams for {} s on {:?} (KFDRT_MAX_HW_QUEUES={})",
        cfg.threads,
        cfg.streams,
        cfg.duration.as_secs(),
        dev,
        kfdrt::raw::max_hw_queues()
    );
    let counts = Arc::new(Counts::default());
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let progress = {
        let counts = counts.clone();
        let done = done.clone();
        std::thread::spawn(move || {
            let t0 = Instant::now();
            let mut next = Duration::from_secs(60);
            while !done.load(Ordering::Acquire) {
                std::thread::sleep(Duration::from_millis(200));
                if t0.elapsed() >= next {
                    eprintln!("[{:>4} s] {counts}", t0.elapsed().as_secs());
                    next += Duration::from_secs(60);
                }
            }
        })
    };
    let t0 = Instant::now();
    let r = kfdrt::raw::soak::run(&dev, &cfg, &counts);
    done.store(true, Ordering::Release);
    let _ = progress.join();
    let secs = t0.elapsed().as_secs_f64();
    outln!(
        "{counts} in {secs:.0} s ({:.0} ops/s)",
        counts.total() as f64 / secs.max(1e-9)
    );
    match r {
        Ok(()) => {
            outln!("soak passed");
            ExitCode::SUCCESS
        }
        Err(e) => {
            outln!("soak FAILED: {e}");
            ExitCode::from(1)
        }
    }
}
