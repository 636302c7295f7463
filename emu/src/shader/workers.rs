//! The shader core's worker threads: one process-wide pool, created on first use and kept
//! (parked on a condition variable while idle), that helps every dispatch run its
//! work-groups, as the hardware's compute units take work-groups from the SPI.
//!
//! A dispatch publishes itself as a [`Job`] with a number of helper slots; idle pool
//! threads take a slot each and claim work-groups from the job's shared counter, while
//! the dispatching thread claims work-groups too. The dispatching thread then withdraws
//! the job and waits for the helpers still inside it.
//!
//! Work-groups are claimed in runs of consecutive ones ([`Job::claim_size`]): about
//! [`CHUNK_LANE_INSTRUCTIONS`] of work per claim, fewer towards the end of the grid, so a
//! thread that finishes early still takes more (the load balances itself). One work-group
//! per claim made the threads interleave work-group by work-group: each claim bounced the
//! counter's cache line between the cores, and neighbouring work-groups' buffers (saxpy's
//! `x[gid]`, `y[gid]`) were split between the cores' caches line by line, which cost a
//! streaming kernel 10-20% more CPU on two workers than on one.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock, Weak};
use std::time::Instant;

use super::mem::MemPort;
use super::{run_workgroup, DispatchStats, Program, Setup, ShaderError, WorkerState};
use crate::engine::GpuClock;
use crate::gpumem::GpuMemory;

/// Work (lane-instructions) a claim of consecutive work-groups aims at: about 0.1-0.3 ms
/// of interpreting, so claims are rare next to the work while the grid's tail still
/// splits finely.
pub(crate) const CHUNK_LANE_INSTRUCTIONS: u64 = 1 << 18;
/// At most this many work-groups per claim.
pub(crate) const MAX_CHUNK: u64 = 64;

/// The claim counter and the fault flag, written while the job runs, on a cache line of
/// their own: the read-mostly dispatch constants next to them are read by every
/// work-group on every thread. Padded by 128 bytes on either side rather than aligned to
/// 128: an over-aligned [`Job`] made every dispatch's `Arc` allocation a
/// `posix_memalign` (~900 instructions, most of a small dispatch's set-up).
struct Claims {
    _before: [u8; 128],
    next: AtomicU64,
    abort: AtomicBool,
    /// Threads the dispatch runs on (the tail of the grid is split between them).
    threads: AtomicUsize,
    _after: [u8; 128],
}

/// One dispatch's work-groups, shared by the threads that run them.
pub(crate) struct Job {
    pub(crate) setup: Setup,
    pub(crate) prog: Arc<Program>,
    pub(crate) mem: Arc<dyn GpuMemory>,
    pub(crate) gpu_id: u32,
    /// The emulator's GPU clock (`s_memtime`/`s_memrealtime`).
    pub(crate) clock: GpuClock,
    pub(crate) total: u64,
    claims: Claims,
    /// Threads that joined so far: each one's index picks its scratch slots.
    joined: AtomicU32,
    first_err: Mutex<Option<ShaderError>>,
    stats: Mutex<DispatchStats>,
    /// Helpers inside the job, and the dispatching thread's wait for them to leave.
    active: Mutex<usize>,
    left: Condvar,
    /// When profiling is on ([`set_profiling`]): when the job was published, and each
    /// thread's part.
    profile: Option<(Instant, Mutex<Vec<ThreadProfile>>)>,
}

/// One thread's part in a dispatch, recorded while [`set_profiling`] is on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ThreadProfile {
    /// The thread joined the dispatch this long after it started (ns).
    pub joined_ns: u64,
    /// The thread left it (found no work-group left) this long after it started (ns).
    pub left_ns: u64,
    /// CPU time the thread used in between (CLOCK_THREAD_CPUTIME_ID, ns).
    pub cpu_ns: u64,
    /// Work-groups it ran.
    pub workgroups: u64,
    /// Claims it made (runs of consecutive work-groups).
    pub claims: u64,
    /// Work-groups in its last claim.
    pub last_claim: u64,
    /// The host CPU it ran on when it joined and when it left (`sched_getcpu`; -1 where
    /// unknown): with the work-groups per CPU millisecond, whether one host CPU ran slower.
    pub cpus: (i32, i32),
}

/// A profiled dispatch: its grid and every thread that ran work-groups of it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DispatchProfile {
    /// Work-groups in the grid.
    pub workgroups: u64,
    /// Threads the dispatch asked for (the dispatching thread and its helpers).
    pub threads_wanted: usize,
    /// From the dispatch's start until its last thread left (ns).
    pub wall_ns: u64,
    /// The threads in the order they left.
    pub threads: Vec<ThreadProfile>,
}

static PROFILING: AtomicBool = AtomicBool::new(false);

fn profiles() -> &'static Mutex<Vec<DispatchProfile>> {
    static P: OnceLock<Mutex<Vec<DispatchProfile>>> = OnceLock::new();
    P.get_or_init(Default::default)
}

/// Turns per-thread profiling of shader dispatches on or off (process-wide, as the worker
/// pool is): while on, every dispatch records a [`DispatchProfile`] (two clock reads per
/// thread per dispatch), which [`take_profiles`] returns. For `kfdrt bench`'s scaling
/// figures.
pub fn set_profiling(on: bool) {
    PROFILING.store(on, Ordering::Relaxed);
}

/// The profiles recorded since the last call, oldest first.
pub fn take_profiles() -> Vec<DispatchProfile> {
    std::mem::take(&mut *profiles().lock().unwrap_or_else(|e| e.into_inner()))
}

/// This thread's CPU time (ns), through glibc's clock_gettime: rustix's raw vDSO call
/// crashes under valgrind, which measures the bench's instruction counts.
fn thread_cpu_ns() -> u64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a valid, writable timespec.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) } != 0 {
        return 0;
    }
    (t.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(t.tv_nsec as u64)
}

impl Job {
    pub(crate) fn new(
        setup: Setup,
        prog: Arc<Program>,
        mem: Arc<dyn GpuMemory>,
        gpu_id: u32,
        clock: GpuClock,
        total: u64,
    ) -> Job {
        Job {
            setup,
            prog,
            mem,
            gpu_id,
            clock,
            total,
            claims: Claims {
                _before: [0; 128],
                _after: [0; 128],
                next: AtomicU64::new(0),
                abort: AtomicBool::new(false),
                threads: AtomicUsize::new(1),
            },
            joined: AtomicU32::new(0),
            first_err: Mutex::new(None),
            stats: Mutex::new(DispatchStats::default()),
            active: Mutex::new(0),
            left: Condvar::new(),
            profile: PROFILING
                .load(Ordering::Relaxed)
                .then(|| (Instant::now(), Mutex::new(Vec::new()))),
        }
    }

    /// Claims and runs work-groups until none is left or one faulted.
    pub(crate) fn work(&self, port: &mut MemPort) {
        let worker = self.joined.fetch_add(1, Ordering::Relaxed);
        let prof_start = self.profile.as_ref().map(|(t0, _)| {
            (
                t0.elapsed().as_nanos() as u64,
                thread_cpu_ns(),
                crate::engine::pin::current_cpu(),
            )
        });
        let mut local = DispatchStats::default();
        let (owner, mut ws) = take_state(self);
        let (claims, last_claim) = claim_loop(&self.claims, self.total, |g| {
            let lanes_before = local.lane_instructions;
            let r = run_workgroup(
                &self.setup,
                &self.prog,
                port,
                &mut ws,
                &|| self.clock.now(),
                g,
                worker,
                &mut local,
            );
            match r {
                Ok(()) => Some(local.lane_instructions - lanes_before),
                Err(e) => {
                    self.fail(e);
                    None
                }
            }
        });
        if let (Some((t0, list)), Some((joined_ns, cpu0, on0))) = (&self.profile, prof_start) {
            let p = ThreadProfile {
                joined_ns,
                left_ns: t0.elapsed().as_nanos() as u64,
                cpu_ns: thread_cpu_ns().saturating_sub(cpu0),
                workgroups: local.workgroups,
                claims,
                last_claim,
                cpus: (on0, crate::engine::pin::current_cpu()),
            };
            list.lock().unwrap_or_else(|e| e.into_inner()).push(p);
        }
        keep_state(&self.setup, owner, ws);
        let mut s = self.stats.lock().unwrap_or_else(|e| e.into_inner());
        s.workgroups += local.workgroups;
        s.waves += local.waves;
        s.instructions += local.instructions;
        s.lane_instructions += local.lane_instructions;
    }

    fn fail(&self, e: ShaderError) {
        self.claims.abort.store(true, Ordering::Relaxed);
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

/// One thread's part in a grid of `total` work-groups: claims runs of consecutive
/// work-groups from `claims` and runs each (`run(g)`: its lane-instructions, or `None` to
/// stop: it faulted) until none is left or a thread set `claims.abort`. Returns the
/// claims made and the size of the last one.
fn claim_loop(claims: &Claims, total: u64, mut run: impl FnMut(u64) -> Option<u64>) -> (u64, u64) {
    let (mut made, mut last) = (0u64, 0u64);
    let mut chunk = 1;
    loop {
        if claims.abort.load(Ordering::Relaxed) {
            break;
        }
        let first = claims.next.fetch_add(chunk, Ordering::Relaxed);
        if first >= total {
            break;
        }
        let end = first.saturating_add(chunk).min(total);
        made += 1;
        last = end - first;
        let mut lanes = 0u64;
        for g in first..end {
            match run(g) {
                Some(l) => lanes = lanes.saturating_add(l),
                None => return (made, last),
            }
            // Another thread's fault stops this one within its claim too.
            if claims.abort.load(Ordering::Relaxed) {
                return (made, last);
            }
        }
        let per_group = lanes / (end - first);
        let threads = claims.threads.load(Ordering::Relaxed) as u64;
        // What no thread claimed yet: the other threads' claims since this one's count
        // too, or the tail's claims come out too large.
        let left = total.saturating_sub(claims.next.load(Ordering::Relaxed));
        chunk = claim_size(per_group, left, threads);
    }
    (made, last)
}

/// Whose registers a kept [`WorkerState`] holds: GPU `gpu_id` in memory `mem` (one
/// emulated process's). `mem` is held weakly: the memory is not kept alive, but its
/// allocation's address cannot go to another memory while the state is kept.
struct Owner {
    mem: Weak<dyn GpuMemory>,
    gpu_id: u32,
}

impl Owner {
    fn is(&self, job: &Job) -> bool {
        self.gpu_id == job.gpu_id && std::ptr::addr_eq(self.mem.as_ptr(), Arc::as_ptr(&job.mem))
    }
}

/// A thread's work-group state kept between dispatches, with its owner and the register
/// counts (`nregs`, `acc_base`) its waves were made for.
struct Spare {
    owner: Owner,
    regs: (usize, usize),
    ws: WorkerState,
}

thread_local! {
    /// The thread's work-group state from its last dispatch: a dispatch of small grids
    /// (one work-group: a launch loop) reuses it instead of allocating (and zeroing) each
    /// wave's register file again (~6000 instructions per wave).
    static SPARE: RefCell<Option<Spare>> = const { RefCell::new(None) };
}

/// This thread's reusable [`WorkerState`] for `job`, with its owner: its waves when they
/// have the dispatch's register counts and were last used by the same GPU and memory
/// (their VGPRs keep whatever that GPU's last wave left, as on hardware, where VGPRs
/// start undefined), LDS of the dispatch's size. The pool threads run the dispatches of
/// every emulated process: waves another GPU's dispatch used are dropped (new ones start
/// zeroed), so no process reads registers another left (firmware-notes/isa-gfx9.md
/// "VGPRs at wave launch").
fn take_state(job: &Job) -> (Owner, WorkerState) {
    let setup = &job.setup;
    let regs = (setup.nregs, setup.acc_base);
    let (owner, mut ws) = match SPARE.with(|s| s.borrow_mut().take()) {
        Some(sp) if sp.owner.is(job) => {
            let mut ws = sp.ws;
            if sp.regs != regs {
                ws.pool.clear();
            }
            (sp.owner, ws)
        }
        kept => {
            let mut ws = kept.map_or_else(
                || WorkerState {
                    lds: Vec::new(),
                    pool: Vec::new(),
                    done: Vec::new(),
                    at_barrier: Vec::new(),
                },
                |sp| sp.ws,
            );
            ws.pool.clear();
            let owner = Owner {
                mem: Arc::downgrade(&job.mem),
                gpu_id: job.gpu_id,
            };
            (owner, ws)
        }
    };
    // Zeroed per work-group by `run_workgroup`.
    ws.lds.resize(setup.lds_bytes, 0);
    ws.lds.truncate(setup.lds_bytes);
    (owner, ws)
}

/// Keeps `ws` (of `owner`, last used for `setup`) for this thread's next dispatch.
fn keep_state(setup: &Setup, owner: Owner, ws: WorkerState) {
    let regs = (setup.nregs, setup.acc_base);
    SPARE.with(|s| *s.borrow_mut() = Some(Spare { owner, regs, ws }));
}

/// Work-groups a thread's next claim takes, after work-groups of `per_group`
/// lane-instructions each, with `left` work-groups not yet claimed by it and `threads`
/// threads on the dispatch: about [`CHUNK_LANE_INSTRUCTIONS`] of work, at most
/// [`MAX_CHUNK`], at most an eighth of each thread's share of what is left (so the threads
/// finish together), and at least one.
fn claim_size(per_group: u64, left: u64, threads: u64) -> u64 {
    let by_work = (CHUNK_LANE_INSTRUCTIONS / per_group.max(1)).clamp(1, MAX_CHUNK);
    by_work.min((left / (8 * threads.max(1))).max(1))
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
    job.claims.threads.store(helpers + 1, Ordering::Relaxed);
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
    let withdraw = Withdraw {
        job: &job,
        published: helpers > 0,
    };
    job.work(port);
    drop(withdraw);
    if let Some((t0, list)) = &job.profile {
        let p = DispatchProfile {
            workgroups: job.total,
            threads_wanted: helpers + 1,
            wall_ns: t0.elapsed().as_nanos() as u64,
            threads: std::mem::take(&mut *list.lock().unwrap_or_else(|e| e.into_inner())),
        };
        profiles().lock().unwrap_or_else(|e| e.into_inner()).push(p);
    }
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
    crate::engine::pin::unpin_worker_thread();
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

#[cfg(test)]
mod tests {
    use super::*;

    fn claims(threads: usize) -> Claims {
        Claims {
            _before: [0; 128],
            _after: [0; 128],
            next: AtomicU64::new(0),
            abort: AtomicBool::new(false),
            threads: AtomicUsize::new(threads),
        }
    }

    /// Runs a grid of `total` work-groups of `lanes(g)` lane-instructions on `threads`
    /// threads; returns how often each work-group ran and each thread's claims.
    fn run_grid(total: u64, threads: usize, lanes: fn(u64) -> u64) -> (Vec<u32>, Vec<u64>) {
        let c = claims(threads);
        let runs: Vec<AtomicU32> = (0..total).map(|_| AtomicU32::new(0)).collect();
        let made: Vec<u64> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..threads)
                .map(|_| {
                    s.spawn(|| {
                        claim_loop(&c, total, |g| {
                            runs[g as usize].fetch_add(1, Ordering::Relaxed);
                            Some(lanes(g))
                        })
                        .0
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        (
            runs.iter().map(|r| r.load(Ordering::Relaxed)).collect(),
            made,
        )
    }

    #[test]
    fn every_work_group_runs_exactly_once_on_any_number_of_threads() {
        let sizes: [fn(u64) -> u64; 4] = [
            // saxpy-like (many per claim), SGEMM-like (one per claim), none (an empty
            // kernel) and uneven (long and short work-groups mixed).
            |_| 3_000,
            |_| 10 * CHUNK_LANE_INSTRUCTIONS,
            |_| 0,
            |g| {
                if g % 7 == 0 {
                    4 * CHUNK_LANE_INSTRUCTIONS
                } else {
                    64
                }
            },
        ];
        for total in [1u64, 2, 7, 64, 65, 1024, 3001, 65_536] {
            for threads in [1, 2, 3] {
                for (k, lanes) in sizes.iter().enumerate() {
                    let (runs, made) = run_grid(total, threads, *lanes);
                    if let Some(g) = runs.iter().position(|&r| r != 1) {
                        panic!(
                            "grid {total}, {threads} threads, sizes {k}: work-group {g} ran {} times",
                            runs[g]
                        );
                    }
                    // Never more claims than work-groups.
                    assert!(made.iter().sum::<u64>() <= total, "{total} {threads} {k}");
                }
            }
        }
    }

    #[test]
    fn a_fault_stops_every_thread_within_its_claim() {
        let c = claims(2);
        let ran = AtomicU64::new(0);
        std::thread::scope(|s| {
            for _ in 0..2 {
                s.spawn(|| {
                    claim_loop(&c, 100_000, |g| {
                        ran.fetch_add(1, Ordering::Relaxed);
                        if g == 500 {
                            c.abort.store(true, Ordering::Relaxed);
                            return None;
                        }
                        Some(3_000)
                    })
                });
            }
        });
        // Work-group 500 is in the first 4000 claimed (claims of at most 64 from the
        // start); after the abort each thread finishes at most the group it runs.
        let n = ran.load(Ordering::Relaxed);
        assert!((501..100_000).contains(&n), "{n} work-groups ran");
        assert!(c.abort.load(Ordering::Relaxed));
    }

    #[test]
    fn the_tail_is_claimed_in_single_work_groups() {
        // One thread, small work-groups: claims shrink to one work-group before the end
        // (an eighth of what is left), so another thread could split the tail finely.
        let c = claims(1);
        let mut sizes = Vec::new();
        let mut last_first = 0;
        claim_loop(&c, 10_000, |g| {
            if g == 0 || c.next.load(Ordering::Relaxed) != last_first {
                last_first = c.next.load(Ordering::Relaxed);
                sizes.push(g);
            }
            Some(3_000)
        });
        let gaps: Vec<u64> = sizes.windows(2).map(|w| w[1] - w[0]).collect();
        assert_eq!(gaps.iter().max(), Some(&MAX_CHUNK), "{gaps:?}");
        assert_eq!(gaps.last(), Some(&1), "{gaps:?}");
        assert!(c.next.load(Ordering::Relaxed) >= 10_000);
    }

    #[test]
    fn claims_follow_the_work_per_group_and_shrink_at_the_tail() {
        // saxpy-sized work-groups (4 waves of ~12 instructions): the most per claim.
        assert_eq!(claim_size(3_000, 60_000, 2), MAX_CHUNK);
        // Work-groups of a quarter of the target: four per claim.
        assert_eq!(claim_size(CHUNK_LANE_INSTRUCTIONS / 4, 60_000, 2), 4);
        // A work-group of more than the target (a tiled SGEMM's): one per claim.
        assert_eq!(claim_size(10 * CHUNK_LANE_INSTRUCTIONS, 60_000, 2), 1);
        // The tail: an eighth of each thread's share of what is left, never none.
        assert_eq!(claim_size(3_000, 800, 2), 50);
        assert_eq!(claim_size(3_000, 3, 2), 1);
        assert_eq!(claim_size(3_000, 0, 2), 1);
        // Degenerate counts do not divide by zero.
        assert_eq!(claim_size(0, 0, 0), 1);
        assert_eq!(claim_size(0, 1 << 20, 1), MAX_CHUNK);
    }
}
