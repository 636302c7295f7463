//! Optional CPU pinning of the engine threads (`KFDRT_EMU_CP_CPU`).
//!
//! A GPU's command processor never shares a core with the host thread that rings its
//! doorbells. An emulated engine thread can: Linux tends to place a futex-woken thread
//! next to its waker, and then every doorbell that wakes the parked engine lets it
//! preempt the submitter (bench-results/2026-11-24-s8-launch-row.txt). Pinning the
//! engine threads to one CPU of their own is an opt-in experiment; unset, nothing
//! changes. Only the engine threads (CP, SDMA) are pinned, never the shader workers.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

/// The environment variable: `auto` pins to the last CPU the thread may run on (when it
/// may run on at least two), a number pins to that CPU, unset or empty pins nothing.
pub const CP_CPU_ENV: &str = "KFDRT_EMU_CP_CPU";

/// What the variable asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PinSetting {
    /// No pinning (unset or empty).
    Off,
    /// The last allowed CPU, if at least two are allowed.
    Auto,
    /// This CPU.
    Cpu(usize),
}

impl PinSetting {
    /// Parses the variable's value; `Err` carries the text for the one-time message.
    pub(crate) fn parse(v: Option<&str>) -> Result<PinSetting, String> {
        match v.map(str::trim) {
            None | Some("") => Ok(PinSetting::Off),
            Some(s) if s.eq_ignore_ascii_case("auto") => Ok(PinSetting::Auto),
            Some(s) => s
                .parse::<usize>()
                .map(PinSetting::Cpu)
                .map_err(|_| format!("{CP_CPU_ENV}={s:?} is neither `auto` nor a CPU number")),
        }
    }

    /// The CPU to pin to, given the CPUs the thread may run on now.
    pub(crate) fn choose(self, allowed: &[usize]) -> Option<usize> {
        match self {
            PinSetting::Off => None,
            // One allowed CPU: the engine shares it with everything anyway.
            PinSetting::Auto if allowed.len() >= 2 => allowed.last().copied(),
            PinSetting::Auto => None,
            PinSetting::Cpu(c) => Some(c),
        }
    }
}

/// The CPUs an engine thread could use before it pinned itself: threads it starts (the
/// dispatch pool, shader workers) would inherit its pin and go back to these.
static UNPINNED: OnceLock<Vec<usize>> = OnceLock::new();

/// One message per process for a failed pin: every engine thread would print the same.
static WARNED: AtomicBool = AtomicBool::new(false);

fn warn_once(msg: &str) {
    if !WARNED.swap(true, Ordering::Relaxed) {
        eprintln!("kfd-emu: {msg}");
    }
}

/// The host CPU the calling thread runs on now (-1 where unknown).
pub(crate) fn current_cpu() -> i32 {
    // SAFETY: sched_getcpu takes no arguments and only reads the calling thread's state.
    unsafe { libc::sched_getcpu() }
}

/// The CPUs the calling thread may run on, ascending.
fn allowed_cpus() -> std::io::Result<Vec<usize>> {
    // SAFETY: `set` is a plain bit array owned by this frame; sched_getaffinity writes at
    // most `size_of::<cpu_set_t>()` bytes into it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok((0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect())
    }
}

fn set_allowed(cpus: &[usize]) -> std::io::Result<()> {
    if cpus.iter().any(|&c| c >= libc::CPU_SETSIZE as usize) {
        return Err(std::io::Error::from_raw_os_error(libc::EINVAL));
    }
    // SAFETY: as in `allowed_cpus`; every CPU is below CPU_SETSIZE (checked above), so
    // CPU_SET stays inside the set.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &c in cpus {
            libc::CPU_SET(c, &mut set);
        }
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Reads [`CP_CPU_ENV`] and pins the calling (engine) thread as it asks. Returns the CPU
/// the thread is now pinned to, `None` when it is not pinned (unset, one allowed CPU, or
/// a failure, which is reported once on stderr and never fatal).
pub(crate) fn pin_engine_thread() -> Option<usize> {
    let v = std::env::var(CP_CPU_ENV).ok();
    let setting = match PinSetting::parse(v.as_deref()) {
        Ok(s) => s,
        Err(e) => {
            warn_once(&format!("{e}; engine threads stay unpinned"));
            return None;
        }
    };
    if setting == PinSetting::Off {
        return None;
    }
    let allowed = match allowed_cpus() {
        Ok(a) => a,
        Err(e) => {
            warn_once(&format!(
                "{CP_CPU_ENV}: sched_getaffinity failed: {e}; engine threads stay unpinned"
            ));
            return None;
        }
    };
    let cpu = setting.choose(&allowed)?;
    match set_allowed(&[cpu]) {
        Ok(()) => {
            let _ = UNPINNED.set(allowed);
            Some(cpu)
        }
        Err(e) => {
            warn_once(&format!(
                "{CP_CPU_ENV}: sched_setaffinity to CPU {cpu} failed: {e}"
            ));
            None
        }
    }
}

/// An unpinned CP thread that woke from an idle park on `woke_on`, the CPU of the thread
/// whose doorbell woke it (`kicker`): moves to another CPU it may run on, and keeps every
/// allowed CPU allowed. Linux tends to wake a futex waiter next to its waker; left there,
/// the engine preempts the submitter at each doorbell that wakes it, and both crawl while
/// another CPU idles (a GPU's CP never shares the host's core). Returns the CPU it moved
/// to (read while `woke_on` was excluded).
/// No-op with one allowed CPU, an unknown CPU, or a failed call (the engine just stays).
/// The set written back is the one `sched_getaffinity` reports (the requested CPUs that
/// are online): a CPU brought online later is not added for the CP thread.
pub(crate) fn step_aside(kicker: i32, woke_on: i32) -> Option<i32> {
    if kicker < 0 || kicker != woke_on {
        return None;
    }
    let allowed = allowed_cpus().ok()?;
    let others: Vec<usize> = allowed
        .iter()
        .copied()
        .filter(|&c| c as i32 != woke_on)
        .collect();
    if others.is_empty() {
        return None;
    }
    // Two calls: the first migrates the thread off `woke_on`, the second lets the
    // scheduler use every CPU again without moving it back.
    set_allowed(&others).ok()?;
    let moved_to = current_cpu();
    if let Err(e) = set_allowed(&allowed) {
        // Left on `others` (and threads it starts would inherit that): say so once.
        warn_once(&format!(
            "the CP could not be allowed its CPUs {allowed:?} again after moving off CPU \
             {woke_on}: {e}"
        ));
        return None;
    }
    Some(moved_to)
}

/// Called first by the threads an engine thread may start (dispatch pool, shader
/// workers): undoes the engine's pin they inherited, so only the engines are pinned. No-op
/// when no engine pinned itself.
pub(crate) fn unpin_worker_thread() {
    if let Some(cpus) = UNPINNED.get() {
        if let Err(e) = set_allowed(cpus) {
            warn_once(&format!("{CP_CPU_ENV}: restoring a worker thread's CPUs failed: {e}; it stays on the engine's CPU"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Stepping aside moves the thread off its CPU when it may run elsewhere, and leaves
    /// every CPU it could use allowed; a waker on another CPU, or an unknown one, moves
    /// nothing.
    #[test]
    fn step_aside_leaves_the_kickers_cpu_and_keeps_the_allowed_set() {
        std::thread::spawn(|| {
            let allowed = allowed_cpus().unwrap();
            let on = current_cpu();
            assert_eq!(step_aside(-1, on), None, "unknown kicker");
            if on < 0 {
                // sched_getcpu unsupported: the CPU is unknown, nothing moves.
                assert_eq!(step_aside(on, on), None);
                return;
            }
            assert_eq!(step_aside(on + 1, on), None, "kicker on another CPU");
            if allowed.len() < 2 {
                // One CPU: nowhere to go.
                assert_eq!(step_aside(on, on), None);
                return;
            }
            let to = step_aside(on, on).expect("moved");
            assert_ne!(to, on, "still on the kicker's CPU");
            assert!(
                allowed.contains(&(to as usize)),
                "moved to {to}, not allowed"
            );
            assert_eq!(allowed_cpus().unwrap(), allowed, "allowed CPUs changed");
            // Pinned to one CPU: nowhere to go, and the pin stays.
            set_allowed(&[allowed[0]]).unwrap();
            assert_eq!(step_aside(allowed[0] as i32, allowed[0] as i32), None);
            assert_eq!(allowed_cpus().unwrap(), vec![allowed[0]]);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn parse_reads_auto_numbers_and_unset() {
        assert_eq!(PinSetting::parse(None), Ok(PinSetting::Off));
        assert_eq!(PinSetting::parse(Some("")), Ok(PinSetting::Off));
        assert_eq!(PinSetting::parse(Some("AUTO")), Ok(PinSetting::Auto));
        assert_eq!(PinSetting::parse(Some(" 3 ")), Ok(PinSetting::Cpu(3)));
        assert!(PinSetting::parse(Some("last")).is_err());
        assert!(PinSetting::parse(Some("-1")).is_err());
    }

    #[test]
    fn auto_takes_the_last_allowed_cpu_only_with_two_or_more() {
        assert_eq!(PinSetting::Auto.choose(&[4, 5]), Some(5));
        assert_eq!(PinSetting::Auto.choose(&[0, 2, 7]), Some(7));
        assert_eq!(PinSetting::Auto.choose(&[3]), None);
        assert_eq!(PinSetting::Auto.choose(&[]), None);
        assert_eq!(PinSetting::Cpu(1).choose(&[0]), Some(1));
        assert_eq!(PinSetting::Off.choose(&[0, 1]), None);
    }
}
