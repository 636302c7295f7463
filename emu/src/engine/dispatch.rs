//! Kernel dispatches off the CP thread.
//!
//! The CP hands a dispatch (AQL KERNEL_DISPATCH or PM4 DISPATCH_DIRECT) to the shader
//! core and goes on scheduling its other queues, as the hardware's CP does once the SPI
//! launches the waves. The dispatching queue itself stays on the packet (it reports
//! "blocked") until the dispatch finished: only then does the CP complete the packet's
//! signal, release its slot or execute the next packet (a RELEASE_MEM after a
//! DISPATCH_DIRECT, a barrier), so completion stays in packet order on the queue.
//!
//! Dispatches run on a small pool of threads (each dispatch then spreads its work-groups
//! over the shader core's worker threads), except small loop-free ones, which the CP runs
//! on its own thread ([`Pool::start`]). A pool thread that finishes a dispatch kicks
//! the CP, which re-polls its blocked queues at once. Idle pool threads exit after
//! [`POOL_IDLE_EXIT`].
//! `remove_queue` and `pause` wait for the queue's (every queue's) dispatch to finish,
//! as they waited for the CP to leave the packet before.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use super::Inner;
use crate::shader::{DispatchStats, Prepared, ShaderError};

/// An idle pool thread exits after this long without work.
const POOL_IDLE_EXIT: Duration = Duration::from_secs(2);

/// One dispatch handed to the pool: its result once it finished.
pub(crate) struct Inflight {
    /// The queue that dispatched it.
    pub(crate) queue_id: u32,
    /// When the CP started it (host ns, GPU ticks), for the trace.
    pub(crate) started: (u64, u64),
    done: AtomicBool,
    result: Mutex<Option<Result<DispatchStats, ShaderError>>>,
}

impl std::fmt::Debug for Inflight {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inflight")
            .field("queue_id", &self.queue_id)
            .field("done", &self.done.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

/// `f`'s result; a panic in the shader core (an emulator bug) becomes a fault of the
/// dispatch instead of a queue blocked forever or a dead CP thread.
fn guarded<T>(f: impl FnOnce() -> Result<T, ShaderError>) -> Result<T, ShaderError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|_| {
        Err(ShaderError::new(
            "internal error in the emulated shader core".into(),
        ))
    })
}

impl Inflight {
    /// Publishes the dispatch's result.
    fn finish(&self, r: Result<DispatchStats, ShaderError>) {
        *self.result.lock().unwrap_or_else(|e| e.into_inner()) = Some(r);
        self.done.store(true, Ordering::Release);
    }

    /// The result, once the dispatch finished (taken: a second call returns `None`).
    pub(crate) fn take(&self) -> Option<Result<DispatchStats, ShaderError>> {
        if !self.done.load(Ordering::Acquire) {
            return None;
        }
        self.result.lock().unwrap_or_else(|e| e.into_inner()).take()
    }
}

type Job = Box<dyn FnOnce() + Send + 'static>;

#[derive(Default)]
struct PoolState {
    jobs: VecDeque<Job>,
    idle: usize,
    threads: usize,
    shutdown: bool,
    /// Queue ids with a dispatch running (one entry per dispatch).
    running: Vec<u32>,
}

/// The dispatch threads of one GPU.
pub(crate) struct Pool {
    shared: Arc<(Mutex<PoolState>, Condvar)>,
    /// Small loop-free dispatches run on the CP thread ([`Pool::set_inline`]).
    inline: AtomicBool,
    /// Dispatches run on the CP thread.
    inlined: AtomicU64,
}

impl Default for Pool {
    fn default() -> Self {
        Pool {
            shared: Default::default(),
            inline: AtomicBool::new(true),
            inlined: AtomicU64::new(0),
        }
    }
}

impl Pool {
    /// Starts a dispatch; the CP polls the returned [`Inflight`]. `prepare` sets it up
    /// (`prepare(inner, true)` first, on the calling CP thread: without decoding a kernel
    /// not yet decoded, which then happens off the CP, `prepare(inner, false)`). A small
    /// loop-free dispatch (`Prepared::inline`, see `shader::INLINE_MAX_COST`) runs here at
    /// once, the [`Inflight`] returned finished: no hand-off to a pool thread (a futex wake
    /// and a context switch each way on a loaded host) for a launch loop's tiny kernels.
    /// Any other runs on a pool thread.
    pub(crate) fn start(
        &self,
        inner: &Arc<Inner>,
        queue_id: u32,
        prepare: impl Fn(&Inner, bool) -> Result<Option<Prepared>, ShaderError> + Send + 'static,
    ) -> Arc<Inflight> {
        let fl = Arc::new(Inflight {
            queue_id,
            started: inner.stamp(),
            done: AtomicBool::new(false),
            result: Mutex::new(None),
        });
        let prepared = guarded(|| prepare(inner, true));
        match prepared {
            Ok(Some(p)) if p.inline && self.inline.load(Ordering::Relaxed) => {
                self.inlined.fetch_add(1, Ordering::Relaxed);
                fl.finish(guarded(|| p.run_on_cp()));
            }
            Ok(Some(p)) => self.submit(inner, &fl, move |_| p.run()),
            Ok(None) => self.submit(inner, &fl, move |inner| match prepare(inner, false)? {
                Some(p) => p.run(),
                None => Err(ShaderError::new(
                    "internal error: the kernel's code was not decoded".into(),
                )),
            }),
            Err(e) => fl.finish(Err(e)),
        }
        fl
    }

    /// Whether small loop-free dispatches run on the CP thread (the default). A test hook:
    /// with `false` every dispatch runs on a pool thread, for comparing both paths.
    pub(crate) fn set_inline(&self, on: bool) {
        self.inline.store(on, Ordering::Relaxed);
    }

    /// Dispatches run on the CP thread so far.
    pub(crate) fn inlined(&self) -> u64 {
        self.inlined.load(Ordering::Relaxed)
    }

    /// Runs `f` (the dispatch) on a pool thread; it completes `fl` and kicks the CP.
    fn submit(
        &self,
        inner: &Arc<Inner>,
        fl: &Arc<Inflight>,
        f: impl FnOnce(&Inner) -> Result<DispatchStats, ShaderError> + Send + 'static,
    ) {
        let queue_id = fl.queue_id;
        let (fl2, inner2, shared2) = (fl.clone(), inner.clone(), self.shared.clone());
        let job: Job = Box::new(move || {
            fl2.finish(guarded(|| f(&inner2)));
            {
                let (m, cv) = &*shared2;
                let mut st = m.lock().unwrap_or_else(|e| e.into_inner());
                if let Some(p) = st.running.iter().position(|&q| q == fl2.queue_id) {
                    st.running.swap_remove(p);
                }
                cv.notify_all();
            }
            if let Some(cp) = inner2.engines.first() {
                cp.kick();
            }
        });
        let (m, cv) = &*self.shared;
        let mut st = m.lock().unwrap_or_else(|e| e.into_inner());
        st.running.push(queue_id);
        st.jobs.push_back(job);
        if st.idle == 0 {
            st.threads += 1;
            let shared = self.shared.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("kfd-emu-dispatch-{:x}", inner.cfg.gpu_id))
                .spawn(move || pool_main(shared));
            if spawned.is_err() {
                st.threads -= 1;
                // No thread: run the job here rather than never.
                if let Some(job) = st.jobs.pop_back() {
                    drop(st);
                    job();
                }
            }
        } else {
            cv.notify_all();
        }
    }

    /// Returns when no dispatch of `queue_id` (of any queue when `None`) is running.
    pub(crate) fn wait_idle(&self, queue_id: Option<u32>) {
        let (m, cv) = &*self.shared;
        let mut st = m.lock().unwrap_or_else(|e| e.into_inner());
        while st
            .running
            .iter()
            .any(|&q| queue_id.is_none_or(|id| id == q))
        {
            st = match cv.wait_timeout(st, Duration::from_millis(50)) {
                Ok((g, _)) => g,
                Err(e) => e.into_inner().0,
            };
        }
    }

    /// Lets idle pool threads exit (running dispatches finish first).
    pub(crate) fn shutdown(&self) {
        let (m, cv) = &*self.shared;
        m.lock().unwrap_or_else(|e| e.into_inner()).shutdown = true;
        cv.notify_all();
    }
}

fn pool_main(shared: Arc<(Mutex<PoolState>, Condvar)>) {
    super::pin::unpin_worker_thread();
    let (m, cv) = &*shared;
    let mut st = m.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        if let Some(job) = st.jobs.pop_front() {
            drop(st);
            job();
            st = m.lock().unwrap_or_else(|e| e.into_inner());
            continue;
        }
        if st.shutdown {
            st.threads -= 1;
            return;
        }
        st.idle += 1;
        let (g, to) = match cv.wait_timeout(st, POOL_IDLE_EXIT) {
            Ok(x) => x,
            Err(e) => e.into_inner(),
        };
        st = g;
        st.idle -= 1;
        if to.timed_out() && st.jobs.is_empty() {
            st.threads -= 1;
            return;
        }
    }
}
