//! events: KFD events through raw ioctls (SET, RESET, WAIT with timeouts, wait-any and
//! wait-all, destroy) with the kernel's results and errno.

use std::time::{Duration, Instant};

use kfd::abi::{self, CreateEventArgs, EventData};
use kfd::Errno;

use super::{ensure, pass, pass_with, Check, CheckResult, Ctx, OrFail};

/// The KFD event checks.
pub fn checks() -> Vec<Check> {
    vec![
        Check {
            name: "events.set_wait_auto_reset",
            what: "SET_EVENT then WAIT_EVENTS completes; an auto-reset event is consumed by the wait",
            run: set_wait_auto_reset,
        },
        Check {
            name: "events.wait_timeout",
            what: "WAIT_EVENTS on an unsignalled event returns KFD_IOC_WAIT_RESULT_TIMEOUT after its timeout",
            run: wait_timeout,
        },
        Check {
            name: "events.set_wakes_sleeper",
            what: "a thread sleeping in WAIT_EVENTS wakes when another thread sets the event",
            run: set_wakes_sleeper,
        },
        Check {
            name: "events.wait_any_vs_all",
            what: "with one of two events set, wait-any completes and wait-all times out",
            run: wait_any_vs_all,
        },
        Check {
            name: "events.reset_and_destroy",
            what: "RESET_EVENT clears a manual-reset event; a destroyed event id gives EINVAL",
            run: reset_and_destroy,
        },
    ]
}

/// A KFD signal event destroyed on drop. The runtime's event page is set up first (a
/// signal of a stream), so CREATE_EVENT needs no page of its own.
struct Ev<'a> {
    ctx: &'a Ctx,
    id: u32,
}

impl<'a> Ev<'a> {
    fn new(ctx: &'a Ctx, auto_reset: bool) -> Result<Ev<'a>, String> {
        // Make sure the process has its event page (the runtime creates it with the
        // first signal, e.g. a stream's timeline).
        drop(ctx.dev.create_stream(0).or_fail("create_stream")?);
        let mut a = CreateEventArgs {
            event_type: abi::KFD_IOC_EVENT_SIGNAL,
            auto_reset: auto_reset as u32,
            ..Default::default()
        };
        kfd::ioctl::create_event(ctx.backend(), &mut a).or_fail("CREATE_EVENT")?;
        Ok(Ev {
            ctx,
            id: a.event_id,
        })
    }
    fn wait(&self, timeout_ms: u32) -> Result<u32, String> {
        let mut e = [EventData::for_signal(self.id, 0)];
        kfd::ioctl::wait_events(self.ctx.backend(), &mut e, false, timeout_ms)
            .or_fail("WAIT_EVENTS")
    }
    fn set(&self) -> Result<(), String> {
        kfd::ioctl::set_event(self.ctx.backend(), self.id).or_fail("SET_EVENT")
    }
}

impl Drop for Ev<'_> {
    fn drop(&mut self) {
        let _ = kfd::ioctl::destroy_event(self.ctx.backend(), self.id);
    }
}

fn set_wait_auto_reset(ctx: &Ctx) -> CheckResult {
    let e = Ev::new(ctx, true)?;
    e.set()?;
    let r = e.wait(1000)?;
    ensure!(
        r == abi::KFD_IOC_WAIT_RESULT_COMPLETE,
        "wait after SET returned {r}"
    );
    let r = e.wait(10)?;
    ensure!(
        r == abi::KFD_IOC_WAIT_RESULT_TIMEOUT,
        "second wait returned {r}: the auto-reset event stayed signalled"
    );
    pass()
}

fn wait_timeout(ctx: &Ctx) -> CheckResult {
    let e = Ev::new(ctx, true)?;
    let t = Instant::now();
    let r = e.wait(30)?;
    let dt = t.elapsed();
    ensure!(
        r == abi::KFD_IOC_WAIT_RESULT_TIMEOUT,
        "wait returned {r}, want TIMEOUT (1)"
    );
    ensure!(
        dt >= Duration::from_millis(20),
        "a 30 ms wait returned after {dt:?}"
    );
    pass_with(format!("{:.1} ms", dt.as_secs_f64() * 1e3))
}

fn set_wakes_sleeper(ctx: &Ctx) -> CheckResult {
    let e = Ev::new(ctx, true)?;
    let dt = woken_by(ctx.backend(), e.id, "the SET", || e.set())?;
    pass_with(format!("woke after {:.1} ms", dt.as_secs_f64() * 1e3))
}

/// Sleeps in WAIT_EVENTS (5 s timeout) on signal event `id` on a second thread while
/// `wake` runs here 20 ms later: the sleeper must return COMPLETE well before its timeout,
/// woken by `by`. Returns how long it slept.
pub(crate) fn woken_by(
    b: &dyn kfd::Backend,
    id: u32,
    by: &str,
    wake: impl FnOnce() -> Result<(), String>,
) -> Result<Duration, String> {
    let t = Instant::now();
    let (slept, woke) = std::thread::scope(|s| {
        let h = s.spawn(|| {
            let mut ev = [EventData::for_signal(id, 0)];
            let r = kfd::ioctl::wait_events(b, &mut ev, false, 5000);
            (r, t.elapsed())
        });
        std::thread::sleep(Duration::from_millis(20));
        let woke = wake();
        (h.join(), woke)
    });
    woke?;
    let (res, dt) = slept.map_err(|_| "the sleeper panicked".to_string())?;
    let res = res.or_fail("WAIT_EVENTS")?;
    ensure!(
        res == abi::KFD_IOC_WAIT_RESULT_COMPLETE,
        "WAIT_EVENTS returned {res} (want COMPLETE)"
    );
    ensure!(
        dt < Duration::from_millis(4000),
        "the sleeper woke only after {dt:?} (the timeout, not {by})"
    );
    Ok(dt)
}

fn wait_any_vs_all(ctx: &Ctx) -> CheckResult {
    let a = Ev::new(ctx, false)?;
    let b = Ev::new(ctx, false)?;
    a.set()?;
    let mut evs = [
        EventData::for_signal(a.id, 0),
        EventData::for_signal(b.id, 0),
    ];
    let any = kfd::ioctl::wait_events(ctx.backend(), &mut evs, false, 1000).or_fail("WAIT any")?;
    ensure!(
        any == abi::KFD_IOC_WAIT_RESULT_COMPLETE,
        "wait-any returned {any}"
    );
    let mut evs = [
        EventData::for_signal(a.id, 0),
        EventData::for_signal(b.id, 0),
    ];
    let all = kfd::ioctl::wait_events(ctx.backend(), &mut evs, true, 20).or_fail("WAIT all")?;
    ensure!(
        all == abi::KFD_IOC_WAIT_RESULT_TIMEOUT,
        "wait-all returned {all} with one event unset"
    );
    b.set()?;
    let mut evs = [
        EventData::for_signal(a.id, 0),
        EventData::for_signal(b.id, 0),
    ];
    let all = kfd::ioctl::wait_events(ctx.backend(), &mut evs, true, 1000).or_fail("WAIT all")?;
    ensure!(
        all == abi::KFD_IOC_WAIT_RESULT_COMPLETE,
        "wait-all returned {all} with both events set"
    );
    pass()
}

fn reset_and_destroy(ctx: &Ctx) -> CheckResult {
    let e = Ev::new(ctx, false)?;
    e.set()?;
    kfd::ioctl::reset_event(ctx.backend(), e.id).or_fail("RESET_EVENT")?;
    let r = e.wait(10)?;
    ensure!(
        r == abi::KFD_IOC_WAIT_RESULT_TIMEOUT,
        "wait after RESET returned {r}"
    );
    let id = e.id;
    drop(e);
    match kfd::ioctl::set_event(ctx.backend(), id) {
        Ok(()) => Err(format!("SET_EVENT on destroyed event {id} succeeded")),
        Err(err) if err.errno == Errno::INVAL => pass(),
        Err(err) => Err(format!("SET on a destroyed event: want EINVAL, got {err}")),
    }
}
