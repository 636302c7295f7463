//! The shader core's worker threads: one process-wide pool, created on first use and kept
//! (parked on a condition variable while idle), that helps every dispatch run its
//! work-groups, as the hardware's compute units take work-groups from the SPI.
//!
//! A dispatch publishes itself as a [`Job`] with a number of helper slots; idle pool
//! threads take a slot each and claim work-groups from the job's shared counter (one
//! work-group at a time, so a thread that finishes early takes more: the load balances
//! itself), while the dispatching thread claims work-groups too. The dispatching thread
//! then withdraws the job and waits for the helpers still inside it.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};

use super::mem::MemPort;
use super::{run_workgroup, DispatchStats, Program, Setup, ShaderError, WorkerState};
use crate::gpumem::GpuMemory;

/// One dispatch's work-groups, shared by the threads that run them.
pub(crate) struct Job {
    pub(crate) setup: Setup,
    pub(crate) prog: Arc<Program>,
    pub(crate) mem: Arc<dyn GpuMemory>,
    pub(crate) gpu_id: u32,
    pub(crate) clock: Box<dyn Fn() -> u64 + Send + Sync>,
    pub(crate) total: u64,
    next: AtomicU64,
    /// Threads that joined so far: each one's index picks its scratch slots.
    joined: AtomicU32,
    abort: AtomicBool,
    first_err: Mutex<Option<ShaderError>>,
    stats: Mutex<DispatchStats>,
    /// Helpers inside the job, and the dispatching thread's wait for them to leave.
    active: Mutex<usize>,
    left: Condvar,
}

impl Job {
    pub(crate) fn new(
        setup: Setup,
        prog: Arc<Program>,
        mem: Arc<dyn GpuMemory>,
        gpu_id: u32,
        clock: Box<dyn Fn() -> u64 + Send + Sync>,
        total: u64,
    ) -> Job {
        Job {
            setup,
            prog,
            mem,
            gpu_id,
            clock,
            total,
            next: AtomicU64::new(0),
            joined: AtomicU32::new(0),
            abort: AtomicBool::new(false),
            first_err: Mutex::new(None),
            stats: Mutex::new(DispatchStats::default()),
            active: Mutex::new(0),
            left: Condvar::new(),
        }
    }

    /// Claims and runs work-groups until none is left or one faulted.
    pub(crate) fn work(&self, port: &mut MemPort) {
        let worker = self.joined.fetch_add(1, Ordering::Relaxed);
        let mut local = DispatchStats::default();
        let mut ws = WorkerState {
            lds: vec![0u8; self.setup.lds_bytes],
            pool: Vec::new(),
            done: Vec::new(),
            at_barrier: Vec::new(),
        };
        loop {
            if self.abort.load(Ordering::Relaxed) {
                break;
            }
            let g = self.next.fetch_add(1, Ordering::Relaxed);
            if g >= self.total {
                break;
            }
            let r = run_workgroup(
                &self.setup,
                &self.prog,
                port,
                &mut ws,
                &*self.clock,
                g,
                worker,
                &mut local,
            );
            if let Err(e) = r {
                self.fail(e);
                break;
            }
        }
        let mut s = self.stats.lock().unwrap_or_else(|e| e.into_inner());
        s.workgroups += local.workgroups;
        s.waves += local.waves;
        s.instructions += local.instructions;
        s.lane_instructions += local.lane_instructions;
    }

    fn fail(&self, e: ShaderError) {
        self.abort.store(true, Ordering::Relaxed);
        let mut fe = self.first_err.lock().unwrap_or_else(|e| e.into_inner());
        if fe.is_none() {
            *fe = Some(e);
        }
    }

    /// The dispatch's result once every thread left it.
    pub(crate) fn result(&self) -> Result<DispatchStats, ShaderError> {
        if let Some(e) = self
            .first_err
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        {
            return Err(e);
        }
        Ok(*self.stats.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

#[derive(Default)]
struct PoolState {
    /// Published jobs and their free helper slots.
    jobs: Vec<(Arc<Job>, usize)>,
    threads: usize,
}

fn pool() -> &'static (Mutex<PoolState>, Condvar) {
    static POOL: OnceLock<(Mutex<PoolState>, Condvar)> = OnceLock::new();
    POOL.get_or_init(Default::default)
}

/// Runs `job` on the calling thread and up to `helpers` pool threads; returns when every
/// thread left it.
pub(crate) fn run(job: Arc<Job>, port: &mut MemPort, helpers: usize) {
    let (m, cv) = pool();
    if helpers > 0 {
        let mut st = m.lock().unwrap_or_else(|e| e.into_inner());
        st.jobs.push((job.clone(), helpers));
        while st.threads < helpers {
            let spawned = std::thread::Builder::new()
                .name(format!("kfd-emu-shader-{}", st.threads))
                .spawn(pool_main);
            if spawned.is_err() {
                // Fewer helpers: the dispatching thread does the rest.
                break;
            }
            st.threads += 1;
        }
        cv.notify_all();
    }
    // Withdrawn however `work` ends (a panic included: the dispatch thread reports it).
    let _withdraw = Withdraw {
        job: &job,
        published: helpers > 0,
    };
    job.work(port);
}

/// Withdraws a published job (no new helper joins) and waits for the helpers inside it.
struct Withdraw<'a> {
    job: &'a Arc<Job>,
    published: bool,
}

impl Drop for Withdraw<'_> {
    fn drop(&mut self) {
        if !self.published {
            return;
        }
        let (m, _) = pool();
        let mut st = m.lock().unwrap_or_else(|e| e.into_inner());
        st.jobs.retain(|(j, _)| !Arc::ptr_eq(j, self.job));
        drop(st);
        let mut active = self.job.active.lock().unwrap_or_else(|e| e.into_inner());
        while *active > 0 {
            active = self
                .job
                .left
                .wait(active)
                .unwrap_or_else(|e| e.into_inner());
        }
    }
}

fn pool_main() {
    let (m, cv) = pool();
    let mut st = m.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        let Some(i) = st.jobs.iter().position(|(_, slots)| *slots > 0) else {
            st = cv.wait(st).unwrap_or_else(|e| e.into_inner());
            continue;
        };
        let job = st.jobs[i].0.clone();
        st.jobs[i].1 -= 1;
        // Joined under the pool lock: the dispatching thread, which withdraws the job under
        // it too, then waits for this helper.
        *job.active.lock().unwrap_or_else(|e| e.into_inner()) += 1;
        drop(st);
        let mut port = MemPort::new(job.gpu_id, job.mem.clone());
        // A panic here is an emulator bug: fault the dispatch rather than leave it waiting.
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| job.work(&mut port)));
        if r.is_err() {
            job.fail(ShaderError::new(
                "internal error in the emulated shader core".into(),
            ));
        }
        {
            let mut active = job.active.lock().unwrap_or_else(|e| e.into_inner());
            *active -= 1;
            job.left.notify_all();
        }
        drop(job);
        st = m.lock().unwrap_or_else(|e| e.into_inner());
    }
}
