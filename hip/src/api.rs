//! The exported C entry points.

use crate::error::*;
use crate::handles::{self, Cache, Registry};
use crate::types::*;
use kfdrt::stream::{IdleProbe, IdleSlot};
use kfdrt::{AllocationKind, Buffer, Device, ErrorKind, Event, MemoryKind, Stream};
use kfdrt::{EventFlags, StreamFlags, WaitCompare, WriteValueFlags};
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::ffi::{c_char, c_int, c_uchar, c_uint, c_ushort, c_void};
use std::mem::MaybeUninit;
use std::pin::Pin;
use std::sync::{Arc, Mutex, OnceLock};

thread_local! {
    /// The thread's state that needs a destructor (cached `Arc`s). Reached through
    /// [`with_tls`]: a cdylib's `thread_local!` is general-dynamic (a `__tls_get_addr`
    /// call and a lazy-registration check per access), so the hot path reads a pointer to
    /// it from [`Fast`] instead.
    static TLS: Tls = const { Tls::new(0) };
}

/// The calling thread's HIP state.
pub(crate) struct Tls {
    /// The current GPU (`hipSetDevice`).
    gpu: Cell<usize>,
    /// Recent stream and event lookups ([`handles::with`]).
    streams: RefCell<Cache<Stream>>,
    events: RefCell<Cache<HipEvent>>,
    /// The null stream of the last null-stream lookup, with its GPU.
    null: RefCell<Option<(usize, Arc<Stream>)>>,
    /// The thread's per-thread default streams (`hipStreamPerThread`): (GPU, token in
    /// [`STREAMS`]), created at first use, destroyed at thread exit.
    per_thread: RefCell<Vec<(usize, usize)>>,
    /// `<<<>>>` configurations pushed beyond the [`CALL_SLOTS`] of the [`Fast`] slot.
    pub(crate) call_config: RefCell<Vec<CallConfig>>,
    /// The launch targets used so far ([`crate::kernel::LaunchCache`]).
    pub(crate) launch_cache: RefCell<crate::kernel::LaunchCache>,
}

impl Tls {
    /// A thread's state before its first call, on GPU `gpu`.
    const fn new(gpu: usize) -> Tls {
        Tls {
            gpu: Cell::new(gpu),
            streams: RefCell::new(Cache::new()),
            events: RefCell::new(Cache::new()),
            null: RefCell::new(None),
            per_thread: RefCell::new(Vec::new()),
            call_config: RefCell::new(Vec::new()),
            launch_cache: RefCell::new(crate::kernel::LaunchCache::new()),
        }
    }
}

/// A `<<<grid, block, shared, stream>>>` configuration.
pub(crate) type CallConfig = (crate::kernel::dim3, crate::kernel::dim3, usize, *mut c_void);

/// `<<<>>>` configurations held in the [`Fast`] slot; deeper nesting (a launch inside the
/// argument expressions of a launch inside...) goes to [`Tls::call_config`].
pub(crate) const CALL_SLOTS: usize = 4;

/// A thread's fixed-offset slot (initial-exec TLS, `%fs`-relative: no call): HIP's last
/// error, the address of the thread's [`Tls`] (null until its first use and again once
/// it is destroyed), the `<<<>>>` configurations pushed and not yet popped and the
/// [`Hot`] streams, and the `Idle` ones (plain data: fixed arrays, offsets and raw
/// pointers, no allocation, no destructor; all zero at thread start).
#[repr(C)]
pub(crate) struct Fast {
    /// First, so that the slot's base is the `Fast` address itself (no `lea`).
    idle: Idle,
    tls: *const Tls,
    pub(crate) last_error: hipError_t,
    /// Configurations pushed and not popped; the first [`CALL_SLOTS`] are in `calls`.
    pub(crate) call_depth: u32,
    pub(crate) calls: [CallConfig; CALL_SLOTS],
    hot: Hot,
    /// The thread's warm `<<<>>>` launch target ([`crate::kernel::WarmSlot`]).
    pub(crate) warm: crate::kernel::WarmSlot,
    /// The current GPU when the thread's [`Tls`] was destroyed, for the state that
    /// [`link_tls`] makes for calls after that (off the hot path).
    exit_gpu: usize,
}

/// The streams of the thread's last `hipStreamQuery` / `hipStreamSynchronize` for
/// `hipLaunchKernel` ([`hot_created`], [`hot_null`]), with no `RefCell` and no cache walk.
///
/// A created stream is named by its token and the state word of its registry slot (equal
/// to the token while it is live): registry segments are never freed, so the check is
/// one load and a compare with the token, and a destroyed handle (another thread's
/// `hipStreamDestroy` moved the state on) fails it. `stream` is a bitwise copy of the
/// `Stream` (an `Arc` pointer) held by the thread's handle cache ([`Tls::streams`]),
/// taking no reference count and never dropped. `token` is cleared ([`drop_hot`]) before
/// anything changes that cache, so it is not used after its owner is gone. All-zero is
/// "nothing cached": a token is never 0.
#[repr(C)]
struct Hot {
    token: usize,
    state: *const std::sync::atomic::AtomicU64,
    stream: MaybeUninit<Stream>,
    /// The null stream of the thread's current GPU (null streams live as long as the
    /// process: [`null_stream`]): its probe, and a bitwise copy like `stream`, valid
    /// while `null_probe` is set; cleared by `hipSetDevice`.
    null_probe: Option<IdleProbe>,
    null: MaybeUninit<Stream>,
}

impl Hot {
    const EMPTY: Hot = Hot {
        token: 0,
        state: std::ptr::null(),
        stream: MaybeUninit::uninit(),
        null_probe: None,
        null: MaybeUninit::uninit(),
    };
}

/// The created stream `s` (non-zero) names if it is the thread's [`Hot`] one and still
/// live; None sends the caller to the full path (which refreshes the entry,
/// [`promote_hot`]).
#[inline(always)]
fn hot_created<'a>(f: *mut Fast, s: *mut c_void) -> Option<&'a Stream> {
    // SAFETY: the calling thread's own slot. `state` is a never-freed registry slot word
    // whenever `token` is non-zero (and `s` is non-zero here); `stream` is initialised
    // and its owner (the thread's handle cache) alive while `token` is set (see `Hot`).
    // The reference is used only by the calling entry point, before it returns, with no
    // call that changes the cache.
    unsafe {
        let h = &(*f).hot;
        if s as usize != h.token
            || (*h.state).load(std::sync::atomic::Ordering::Acquire) != s as u64
        {
            return None;
        }
        Some(h.stream.assume_init_ref())
    }
}

/// The streams of the thread's last two idle `hipStreamQuery` / `hipStreamSynchronize`
/// calls, so that the next such call on an idle stream is a compare of the handle with
/// `key` and kfdrt's idle predicates from `slot` ([`IdleSlot`]: three loads from the
/// `Fast` base), with no `RefCell`, no cache walk and no null/created dispatch: the key is
/// the handle itself, 0 for the null stream of the thread's current GPU. The all-zero
/// entry (thread start) has key 0 and an empty slot, which is never idle, so the null
/// stream's first call takes the full path like any other miss.
///
/// A created stream is matched by its token alone (no registry check): every removal of
/// a stream from [`STREAMS`] closes its idle predicates
/// ([`Stream::close_idle_predicates`]), so a destroyed stream is never idle to them, and
/// the full path rejects its handle. A slot names a stream held by the thread's handle
/// cache (or a null stream, kept for the process's lifetime): both entries are cleared
/// ([`drop_hot`]) before anything changes that cache, and by `hipSetDevice`.
///
/// The entry points read only `slot`/`key`; `prev` (the entry the last promotion
/// replaced) is tried by the full paths before their lookup and swapped in on a hit, so
/// that a program alternating two streams stays off the lookup.
#[repr(C)]
struct Idle {
    slot: IdleSlot,
    key: usize,
    prev: IdleSlot,
    prev_key: usize,
}

impl Idle {
    const EMPTY: Idle = Idle {
        slot: IdleSlot::EMPTY,
        key: 0,
        prev: IdleSlot::EMPTY,
        prev_key: 0,
    };

    /// The slots, pinned where they are.
    fn pinned(slot: &mut IdleSlot) -> Pin<&mut IdleSlot> {
        // SAFETY: an `Idle` lives only in the thread's `Fast` slot (static TLS), which
        // never moves; it is only ever overwritten whole by `Idle::EMPTY` (empty slots,
        // valid anywhere).
        unsafe { Pin::new_unchecked(slot) }
    }

    /// Make `prev` the current entry (and the current one `prev`), rebasing the slots.
    fn swap(&mut self) {
        let mut t = std::pin::pin!(IdleSlot::EMPTY);
        t.as_mut().set_from(&self.slot);
        Self::pinned(&mut self.slot).set_from(&self.prev);
        Self::pinned(&mut self.prev).set_from(&t);
        std::mem::swap(&mut self.key, &mut self.prev_key);
    }

    /// Make `st`, named by `key`, the current entry; the current one becomes `prev`.
    fn promote(&mut self, key: usize, st: &Stream) {
        if self.key != key {
            Self::pinned(&mut self.prev).set_from(&self.slot);
            self.prev_key = self.key;
        }
        Self::pinned(&mut self.slot).set(st);
        self.key = key;
    }
}

/// The null stream of the thread's current GPU if it is [`Hot`].
#[inline(always)]
fn hot_null<'a>(f: *mut Fast) -> Option<&'a Stream> {
    // SAFETY: the calling thread's own slot; `null` is initialised while `null_probe` is
    // set and copies a null stream kept for the process's lifetime.
    unsafe {
        let h = &(*f).hot;
        h.null_probe?;
        Some(h.null.assume_init_ref())
    }
}

/// Forget the thread's hot created stream and its idle streams (before its handle cache
/// changes).
#[inline(always)]
fn drop_hot() {
    // SAFETY: the calling thread's own slot.
    unsafe {
        (*fast()).hot.token = 0;
        (*fast()).idle = Idle::EMPTY;
    }
}

/// Make `s` the thread's [`Hot`] stream when the thread's caches hold it (after a full
/// lookup, which cached it).
#[cold]
#[inline(never)]
fn promote_hot(s: *mut c_void) {
    with_tls(|t| {
        // SAFETY: the calling thread's own slot.
        let h = unsafe { &mut (*fast()).hot };
        // SAFETY: as above.
        let idle = unsafe { &mut (*fast()).idle };
        match s as usize {
            0 => {
                if let Ok(n) = t.null.try_borrow() {
                    if let Some((g, a)) = &*n {
                        if *g == t.gpu.get() {
                            // SAFETY: a bitwise copy that is never dropped (see `Hot`).
                            h.null = MaybeUninit::new(unsafe { std::ptr::read(Arc::as_ptr(a)) });
                            h.null_probe = Some(a.idle_probe());
                            idle.promote(0, a);
                        }
                    }
                }
            }
            HIP_STREAM_PER_THREAD => {}
            tok => {
                if let Some((state, p)) = handles::cached(&t.streams, tok) {
                    h.token = tok;
                    h.state = state;
                    // SAFETY: `p` is alive in the thread's cache; a bitwise copy that is
                    // never dropped (see `Hot`).
                    h.stream = MaybeUninit::new(unsafe { std::ptr::read(p) });
                    // SAFETY: as above.
                    idle.promote(tok, unsafe { &*p });
                }
            }
        }
    })
}

// The slot lives in this library's static TLS block (`.tbss`, zeroed per thread) and is
// reached with the initial-exec model: one GOT load of its offset from the thread pointer.
// glibc places static TLS of libraries loaded at startup in the initial block, and keeps a
// surplus for ones loaded later with dlopen (this slot, a few hundred bytes, fits it).
core::arch::global_asm!(
    ".pushsection .tbss,\"awT\",@nobits",
    ".p2align 3",
    ".type kfdrt_hip_fast, @object",
    ".size kfdrt_hip_fast, {size}",
    "kfdrt_hip_fast:",
    ".zero {size}",
    ".popsection",
    size = const std::mem::size_of::<Fast>(),
);

/// The calling thread's [`Fast`] slot (zeroed at thread start: no error, no `Tls` yet,
/// no configuration pushed).
#[inline(always)]
pub(crate) fn fast() -> *mut Fast {
    let p: usize;
    // SAFETY: reads the thread pointer (`%fs:0` holds its own address on x86-64) and adds
    // the slot's TP offset from the GOT (the initial-exec `add` form); neither touches
    // Rust-visible memory.
    unsafe {
        std::arch::asm!(
            "mov {p}, qword ptr fs:[0]",
            "add {p}, qword ptr [rip + kfdrt_hip_fast@GOTTPOFF]",
            p = out(reg) p,
            options(pure, readonly, nostack),
        );
    }
    p as *mut Fast
}

impl Drop for Tls {
    /// Thread exit: unlink the [`Fast`] slot first (a later call on this thread takes the
    /// slow path), then destroy the thread's per-thread streams (kfdrt drains a dropped
    /// stream in the background).
    fn drop(&mut self) {
        // SAFETY: the calling thread's own slot.
        unsafe {
            (*fast()).exit_gpu = self.gpu.get();
            (*fast()).tls = std::ptr::null();
            (*fast()).hot = Hot::EMPTY;
            (*fast()).idle = Idle::EMPTY;
            // Names a kernel held by `launch_cache`, dropped with this `Tls`.
            (*fast()).warm = crate::kernel::WarmSlot::EMPTY;
        }
        for (_, token) in self.per_thread.get_mut().drain(..) {
            remove_stream(token);
        }
    }
}

/// Run `f` on the calling thread's [`Tls`] (one `%fs` load once the thread has used it).
#[inline(always)]
pub(crate) fn with_tls<R>(f: impl FnOnce(&Tls) -> R) -> R {
    // SAFETY: the calling thread's own slot.
    let mut p = unsafe { (*fast()).tls };
    if p.is_null() {
        p = link_tls();
    }
    // SAFETY: `p` is the address of this thread's live `TLS` (set by `link_tls`, cleared
    // by `Tls::drop`), used only during this call on this thread.
    f(unsafe { &*p })
}

/// Point the calling thread's [`Fast`] slot at its [`Tls`] (first use on the thread).
///
/// A call after the thread's `TLS` was destroyed (glibc runs thread-local destructors
/// before `atexit` handlers and static destructors, and in registration order against a
/// C++ `thread_local`'s: a global object's destructor calling HIP at exit) gets a new
/// state, leaked: it lives as long as the thread (whose remaining exit code may call
/// again), and dropping it would destroy streams the caller may still name. One per
/// thread: the slot keeps pointing at it.
#[cold]
#[inline(never)]
fn link_tls() -> *const Tls {
    let p = TLS.try_with(|t| t as *const Tls).unwrap_or_else(|_| {
        // SAFETY: the calling thread's own slot.
        let gpu = unsafe { (*fast()).exit_gpu };
        Box::leak(Box::new(Tls::new(gpu))) as *const Tls
    });
    // SAFETY: the calling thread's own slot; `TLS` lives until the thread's TLS
    // destructors run, and `Tls::drop` clears the pointer then; a leaked one lives on.
    unsafe { (*fast()).tls = p };
    p
}

/// Store HIP's last error of the calling thread.
#[inline(always)]
pub(crate) fn set_last_error(e: hipError_t) {
    // SAFETY: the calling thread's own slot.
    unsafe { (*fast()).last_error = e };
}

/// kfdrt's error class as `hipError_t`.
pub fn map_err(e: &kfdrt::Error) -> hipError_t {
    match e.kind() {
        ErrorKind::InvalidValue => hipErrorInvalidValue,
        ErrorKind::InvalidHandle => hipErrorInvalidHandle,
        ErrorKind::NotReady => hipErrorNotReady,
        ErrorKind::NotSupported => hipErrorNotSupported,
        ErrorKind::OutOfMemory => hipErrorOutOfMemory,
        ErrorKind::NoDevice => hipErrorNoDevice,
        ErrorKind::InvalidDevice => hipErrorInvalidDevice,
        ErrorKind::LaunchFailure => hipErrorLaunchFailure,
        ErrorKind::PeerAccessAlreadyEnabled => hipErrorPeerAccessAlreadyEnabled,
        ErrorKind::PeerAccessNotEnabled => hipErrorPeerAccessNotEnabled,
        ErrorKind::Driver => hipErrorUnknown,
    }
}

/// HIP 5.2's `HIP_RETURN`: the result becomes the thread's last error.
pub(crate) fn ret(r: Result<(), hipError_t>) -> hipError_t {
    let e = r.err().unwrap_or(hipSuccess);
    set_last_error(e);
    e
}

/// [`ret`] of `f` run on a stream ([`with_stream`]), with one thread-local access.
#[inline(always)]
pub(crate) fn ret_stream(
    s: *mut c_void,
    f: impl FnOnce(&Arc<Stream>) -> Result<(), hipError_t>,
) -> hipError_t {
    let e = with_tls(|t| with_stream_in(t, s, f))
        .err()
        .unwrap_or(hipSuccess);
    set_last_error(e);
    e
}

/// [`ret_stream`] with the thread's [`Tls`] passed on to `f`.
#[inline(always)]
pub(crate) fn ret_stream_tls(
    s: *mut c_void,
    f: impl FnOnce(&Tls, &Arc<Stream>) -> Result<(), hipError_t>,
) -> hipError_t {
    let e = with_tls(|t| with_stream_in(t, s, |st| f(t, st)))
        .err()
        .unwrap_or(hipSuccess);
    set_last_error(e);
    e
}

/// The thread's [`Hot`] stream `s` (null: the null stream of the thread's current GPU)
/// with its [`Tls`], or None when `s` is not hot (the caller takes [`ret_stream_miss`]):
/// a handle check, no `RefCell`, no cache walk. The `<<<>>>` launch's entry point runs
/// its hit path on it inline.
#[inline(always)]
pub(crate) fn hot_stream<'a>(s: *mut c_void) -> Option<(&'a Tls, &'a Stream)> {
    hot_stream_in(fast(), s)
}

/// [`hot_stream`] with the thread's [`Fast`] slot `fp` at hand.
#[inline(always)]
pub(crate) fn hot_stream_in<'a>(fp: *mut Fast, s: *mut c_void) -> Option<(&'a Tls, &'a Stream)> {
    let hot = if s.is_null() {
        hot_null(fp)
    } else {
        hot_created(fp, s)
    };
    // SAFETY: the calling thread's own slot; a non-null `tls` is this thread's live
    // `Tls` (cleared by `Tls::drop`, which also empties `hot`).
    match (hot, unsafe { (*fp).tls.as_ref() }) {
        (Some(st), Some(t)) => Some((t, st)),
        _ => None,
    }
}

/// [`ret_stream_tls`] that first tries the thread's [`Hot`] stream ([`hot_stream`]): a
/// miss takes the cached lookup and makes the stream hot for the next call. `f` runs
/// once, either way, with every check of its own.
#[inline(always)]
pub(crate) fn ret_stream_hot(
    s: *mut c_void,
    f: impl Fn(&Tls, &Stream) -> Result<(), hipError_t> + Copy,
) -> hipError_t {
    if let Some((t, st)) = hot_stream(s) {
        let e = f(t, st).err().unwrap_or(hipSuccess);
        set_last_error(e);
        return e;
    }
    ret_stream_miss(s, f)
}

/// [`ret`] of a kfdrt result, its error mapped out of line (so that the success path of
/// the entry point needs no frame of its own for it).
#[inline(always)]
pub(crate) fn ret_kfdrt(r: kfdrt::Result<()>) -> hipError_t {
    match r {
        Ok(()) => {
            set_last_error(hipSuccess);
            hipSuccess
        }
        Err(e) => ret_kfdrt_err(e),
    }
}

/// [`ret_kfdrt`]'s error.
#[cold]
#[inline(never)]
fn ret_kfdrt_err(e: kfdrt::Error) -> hipError_t {
    let c = map_err(&e);
    set_last_error(c);
    c
}

/// [`ret_stream_hot`] on a miss: out of line, so that the entry point's own copy of `f`
/// (its one call site there) is inlined into the hit path.
#[cold]
#[inline(never)]
pub(crate) fn ret_stream_miss(
    s: *mut c_void,
    f: impl Fn(&Tls, &Stream) -> Result<(), hipError_t>,
) -> hipError_t {
    let e = ret_stream_tls(s, move |t, st| f(t, st));
    promote_hot(s);
    e
}

pub(crate) trait Hip<T> {
    fn hip(self) -> Result<T, hipError_t>;
}
impl<T> Hip<T> for kfdrt::Result<T> {
    #[inline]
    fn hip(self) -> Result<T, hipError_t> {
        self.map_err(|e| map_err(&e))
    }
}

/// The process's device, opened on first use from `KFDRT_DEVICE`.
pub(crate) fn device() -> Result<&'static Device, hipError_t> {
    static DEV: OnceLock<Result<Device, hipError_t>> = OnceLock::new();
    DEV.get_or_init(|| Device::open().hip())
        .as_ref()
        .map_err(|e| *e)
}

pub(crate) fn current_gpu() -> usize {
    with_tls(|t| t.gpu.get())
}

/// A flag or enumerated argument: InvalidValue for a value HIP does not define.
pub(crate) fn arg<T>(v: Option<T>) -> Result<T, hipError_t> {
    v.ok_or(hipErrorInvalidValue)
}

/// Write `v` through a C out-pointer, InvalidValue when null.
pub(crate) fn out<T>(p: *mut T, v: T) -> Result<(), hipError_t> {
    if p.is_null() {
        return Err(hipErrorInvalidValue);
    }
    // SAFETY: non-null out-pointer supplied by the caller per the HIP contract.
    unsafe { p.write(v) };
    Ok(())
}

static STREAMS: Registry<Stream> = Registry::new(1);

/// Unregister the stream `token` (every removal from [`STREAMS`] goes through here or
/// closes the stream's idle predicates itself): its idle predicates are closed, so that
/// other threads' [`Hot`] copies, which check only the token, take the full path (and
/// find the handle gone).
fn remove_stream(token: usize) -> Option<Arc<Stream>> {
    let st = STREAMS.remove(token)?;
    st.close_idle_predicates();
    Some(st)
}
static EVENTS: Registry<HipEvent> = Registry::new(2);

/// A `hipEvent_t`: a kfdrt event, or an interprocess one (`hipEventInterprocess`).
pub(crate) enum HipEvent {
    Local(Event),
    Ipc(kfdrt::IpcEvent),
}
/// hipMalloc/hipHostMalloc/hipExtMallocWithFlags buffers by address.
static BUFFERS: Mutex<BTreeMap<u64, Buffer>> = Mutex::new(BTreeMap::new());

/// The flags `hipHostMalloc` / `hipHostRegister` were given, by buffer address (for
/// `hipHostGetFlags`); written at every such allocation, dropped with the buffer.
static HOST_FLAGS: Mutex<BTreeMap<u64, c_uint>> = Mutex::new(BTreeMap::new());

fn buffers() -> std::sync::MutexGuard<'static, BTreeMap<u64, Buffer>> {
    BUFFERS.lock().unwrap_or_else(|e| e.into_inner())
}

/// Registers a new object; its handle (OutOfMemory when the registry is full).
pub(crate) fn register<T>(reg: &Registry<T>, v: T) -> Result<*mut c_void, hipError_t> {
    reg.insert(v)
        .map(|t| t as *mut c_void)
        .ok_or(hipErrorOutOfMemory)
}

/// Run `f` on the stream of a `hipStream_t`: null is the current GPU's null stream,
/// `hipStreamPerThread` the thread's per-thread stream on it. No lock and no atomic read-modify-write when the
/// thread used the handle recently.
#[inline]
pub(crate) fn with_stream<R>(
    s: *mut c_void,
    f: impl FnOnce(&Arc<Stream>) -> Result<R, hipError_t>,
) -> Result<R, hipError_t> {
    with_tls(|t| with_stream_in(t, s, f))
}

/// The hot path is inlined into each entry point: a created stream's cached lookup, or
/// the cached null stream borrowed in place (no `Arc` clone: no atomic read-modify-write).
/// First lookups and the per-thread stream go out of line.
#[inline(always)]
fn with_stream_in<R>(
    t: &Tls,
    s: *mut c_void,
    f: impl FnOnce(&Arc<Stream>) -> Result<R, hipError_t>,
) -> Result<R, hipError_t> {
    // One call site of `f` on the hot path (so it is inlined into the entry point): the
    // stream borrowed from the null-stream slot or from the handle cache.
    let cached = match s as usize {
        0 => t.null.try_borrow().ok().and_then(|n| {
            std::cell::Ref::filter_map(n, |n| match n {
                Some((g, a)) if *g == t.gpu.get() => Some(a),
                _ => None,
            })
            .ok()
        }),
        HIP_STREAM_PER_THREAD => None,
        tok => handles::hit(&t.streams, tok),
    };
    match cached {
        Some(a) => f(&a),
        None => stream_slow(t, s, f),
    }
}

/// [`with_stream_in`] when the thread has not cached the stream.
#[cold]
#[inline(never)]
fn stream_slow<R>(
    t: &Tls,
    s: *mut c_void,
    f: impl FnOnce(&Arc<Stream>) -> Result<R, hipError_t>,
) -> Result<R, hipError_t> {
    match s as usize {
        0 => null_stream_slow(t, f),
        HIP_STREAM_PER_THREAD => per_thread_slow(t, f),
        tok => {
            // A miss may evict the way the hot stream borrows.
            drop_hot();
            handles::with(&t.streams, &STREAMS, tok, f).unwrap_or(Err(hipErrorInvalidHandle))
        }
    }
}

/// [`with_stream_in`] on the null stream when the thread has not cached it for its
/// current GPU.
#[cold]
#[inline(never)]
fn null_stream_slow<R>(
    t: &Tls,
    f: impl FnOnce(&Arc<Stream>) -> Result<R, hipError_t>,
) -> Result<R, hipError_t> {
    let gpu = t.gpu.get();
    let a = null_stream(gpu)?;
    // Not cached while an outer call on this thread borrows it (a nested lookup).
    if let Ok(mut n) = t.null.try_borrow_mut() {
        *n = Some((gpu, a.clone()));
    }
    f(&a)
}

/// [`with_stream_in`] on `hipStreamPerThread`.
#[inline(never)]
fn per_thread_slow<R>(
    t: &Tls,
    f: impl FnOnce(&Arc<Stream>) -> Result<R, hipError_t>,
) -> Result<R, hipError_t> {
    let tok = per_thread_stream(t)?;
    drop_hot();
    handles::with(&t.streams, &STREAMS, tok, f).unwrap_or(Err(hipErrorInvalidHandle))
}

/// `hipStreamPerThread` (`(hipStream_t)2`, hip_runtime_api.h).
pub(crate) const HIP_STREAM_PER_THREAD: usize = 2;

/// The `_spt` entry points' stream: null names the calling thread's per-thread stream.
#[inline]
pub(crate) fn spt(s: *mut c_void) -> *mut c_void {
    if s.is_null() {
        HIP_STREAM_PER_THREAD as *mut c_void
    } else {
        s
    }
}

/// The token of the calling thread's per-thread stream on its current GPU, created at
/// first use: a blocking stream of default priority, as CLR's (`getPerThreadDefaultStream`)
/// and CUDA's (it synchronizes with the null stream). It is a registered stream, so
/// `hipDeviceSynchronize` waits for it and `hipDeviceReset` destroys it (a new one is made
/// at the next use); it is destroyed at thread exit.
fn per_thread_stream(t: &Tls) -> Result<usize, hipError_t> {
    let gpu = t.gpu.get();
    let mut pt = t.per_thread.borrow_mut();
    if let Some(&(_, tok)) = pt.iter().find(|(g, _)| *g == gpu) {
        if STREAMS.is_live(tok) {
            return Ok(tok);
        }
    }
    let st = device()?
        .create_stream_with_flags(gpu, StreamFlags::DEFAULT)
        .hip()?;
    let tok = STREAMS.insert(st).ok_or(hipErrorOutOfMemory)?;
    pt.retain(|(g, _)| *g != gpu);
    pt.push((gpu, tok));
    Ok(tok)
}

/// The stream of a `hipStream_t` (see [`with_stream`]).
pub(crate) fn stream(s: *mut c_void) -> Result<Arc<Stream>, hipError_t> {
    with_stream(s, |a| Ok(a.clone()))
}

/// Run `f` on the event of a `hipEvent_t`.
#[inline]
fn with_event<R>(
    e: *mut c_void,
    f: impl FnOnce(&Arc<HipEvent>) -> Result<R, hipError_t>,
) -> Result<R, hipError_t> {
    with_tls(|t| handles::with(&t.events, &EVENTS, e as usize, f))
        .unwrap_or(Err(hipErrorInvalidHandle))
}

/// The kfdrt event of `e`; InvalidHandle for an interprocess event (no timing).
fn local_event(e: *mut c_void) -> Result<Arc<HipEvent>, hipError_t> {
    with_event(e, |a| match &**a {
        HipEvent::Local(_) => Ok(a.clone()),
        HipEvent::Ipc(_) => Err(hipErrorInvalidHandle),
    })
}

/// The GPUs' null streams created so far (see [`null_stream`]).
static NULLS: Mutex<Vec<(usize, Arc<Stream>)>> = Mutex::new(Vec::new());

/// Waits for every stream of every GPU: created, per-thread and null streams.
/// `hipFree`, `hipHostFree` and `hipModuleUnload` call it before they release anything,
/// as CLR 5.2's `ihipFree` synchronizes the device's streams first and `cudaFree` is
/// documented to synchronize implicitly: `k<<<..>>>(p); hipFree(p);` is a valid program,
/// and unmapping `p` under the queued kernel would fault it. A stream's fault is not
/// reported here (CLR's free returns success after a faulted stream too): it stays
/// reported by that stream's own synchronize and by `hipDeviceSynchronize`.
pub(crate) fn synchronize_all_streams() {
    for s in STREAMS.all() {
        let _ = s.synchronize();
    }
    let nulls: Vec<Arc<Stream>> = NULLS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .map(|(_, s)| s.clone())
        .collect();
    for s in nulls {
        let _ = s.synchronize();
    }
}

/// The null stream of GPU `gpu`, held for the life of the process: kfdrt keeps a GPU's
/// null stream only while someone holds it, and work enqueued on a dropped one would be
/// invisible to the next `hipDeviceSynchronize`.
pub(crate) fn null_stream(gpu: usize) -> Result<Arc<Stream>, hipError_t> {
    let mut n = NULLS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, s)) = n.iter().find(|(g, _)| *g == gpu) {
        return Ok(s.clone());
    }
    let s = Arc::new(device()?.null_stream(gpu).hip()?);
    n.push((gpu, s.clone()));
    Ok(s)
}

// ---- errors -----------------------------------------------------------------------------

/// `hipGetErrorName`.
#[no_mangle]
pub extern "C" fn hipGetErrorName(e: hipError_t) -> *const c_char {
    name(e).as_ptr()
}

/// `hipGetErrorString` (HIP 5.2: the same text as the name).
#[no_mangle]
pub extern "C" fn hipGetErrorString(e: hipError_t) -> *const c_char {
    name(e).as_ptr()
}

/// `hipGetLastError`: the thread's last error, then reset to hipSuccess.
#[no_mangle]
pub extern "C" fn hipGetLastError() -> hipError_t {
    // SAFETY: the calling thread's own slot.
    unsafe { std::mem::replace(&mut (*fast()).last_error, hipSuccess) }
}

/// `hipPeekAtLastError`: the thread's last error, kept.
#[no_mangle]
pub extern "C" fn hipPeekAtLastError() -> hipError_t {
    // SAFETY: the calling thread's own slot.
    unsafe { (*fast()).last_error }
}

// ---- device -----------------------------------------------------------------------------

/// `hipGetDeviceCount`.
#[no_mangle]
pub unsafe extern "C" fn hipGetDeviceCount(count: *mut c_int) -> hipError_t {
    ret((|| {
        let n = device()?.gpus().len();
        if n == 0 {
            return Err(hipErrorNoDevice);
        }
        out(count, n as c_int)
    })())
}

/// `hipSetDevice`: the calling thread's current GPU.
#[no_mangle]
pub extern "C" fn hipSetDevice(id: c_int) -> hipError_t {
    ret((|| {
        let n = device()?.gpus().len();
        let i = usize::try_from(id).map_err(|_| hipErrorInvalidDevice)?;
        if i >= n {
            return Err(hipErrorInvalidDevice);
        }
        with_tls(|t| t.gpu.set(i));
        // SAFETY: the calling thread's own slot (its hot null stream was the old GPU's).
        unsafe {
            (*fast()).hot.null_probe = None;
            (*fast()).idle = Idle::EMPTY;
        }
        Ok(())
    })())
}

/// `hipGetDevice`.
#[no_mangle]
pub unsafe extern "C" fn hipGetDevice(id: *mut c_int) -> hipError_t {
    ret((|| {
        device()?;
        out(id, current_gpu() as c_int)
    })())
}

/// `hipDeviceSynchronize`: every stream of the current GPU, then its null stream.
#[no_mangle]
pub extern "C" fn hipDeviceSynchronize() -> hipError_t {
    ret((|| {
        let gpu = current_gpu();
        for s in STREAMS.all() {
            if s.gpu_index() == gpu {
                s.synchronize().hip()?;
            }
        }
        null_stream(gpu)?.synchronize().hip()
    })())
}

/// `hipDeviceGetStreamPriorityRange`.
#[no_mangle]
pub unsafe extern "C" fn hipDeviceGetStreamPriorityRange(
    least: *mut c_int,
    greatest: *mut c_int,
) -> hipError_t {
    ret((|| {
        let (l, g) = device()?.stream_priority_range();
        if !least.is_null() {
            out(least, l)?;
        }
        if !greatest.is_null() {
            out(greatest, g)?;
        }
        Ok(())
    })())
}

/// `hipDeviceProp_t` of GPU `gpu` from its KFD topology node, plus the dispatch limits
/// every AMD GPU has (as CLR fills them). Fields neither gives (textures, memory clock
/// and bus width...) stay 0.
fn properties(gpu: usize) -> Result<hipDeviceProp_t, hipError_t> {
    let g = device()?.gpu(gpu).map_err(|_| hipErrorInvalidDevice)?;
    let n = &g.node;
    let p = &n.properties;
    // SAFETY: hipDeviceProp_t is integers, arrays and raw pointers: all-zero is valid.
    let mut d: hipDeviceProp_t = unsafe { std::mem::zeroed() };
    fn copy_name(dst: &mut [c_char; 256], s: &str) {
        for (d, b) in dst.iter_mut().zip(s.bytes().take(255)) {
            *d = b as c_char;
        }
    }
    copy_name(&mut d.name, &n.name);
    // The target ID with its features, as CLR's `isa.targetId()` ("gfx90a:sramecc+:xnack-").
    let target = g.target_id().to_string();
    let target = target.rsplit("--").next().unwrap_or(&target);
    copy_name(&mut d.gcnArchName, target);
    // gfx_target_version is major*10000 + minor*100 + stepping (KFD topology).
    let v = p.gfx_target_version;
    d.major = (v / 10000) as c_int;
    d.minor = (v / 100 % 100) as c_int;
    d.gcnArch = (d.major * 100 + d.minor * 10) + (v % 100) as c_int;
    d.totalGlobalMem = n.vram_size() as usize;
    d.sharedMemPerBlock = p.lds_size_in_kb as usize * 1024;
    d.maxSharedMemoryPerMultiProcessor = d.sharedMemPerBlock;
    d.warpSize = p.wave_front_size as c_int;
    d.multiProcessorCount = g.cu_count() as c_int;
    d.maxThreadsPerMultiProcessor =
        (p.wave_front_size * p.max_waves_per_simd * p.simd_per_cu) as c_int;
    d.l2CacheSize = n
        .caches
        .iter()
        .filter(|c| c.level == 2)
        .map(|c| c.size as c_int * 1024)
        .max()
        .unwrap_or(0);
    d.clockRate = p.max_engine_clk_fcompute.unwrap_or(0) as c_int * 1000;
    // The VRAM bank's clock (MHz, as kHz) and bus width (bits), ROCr's and so CLR's source.
    if let Some(b) = n.mem_banks.iter().find(|b| b.is_vram()) {
        d.memoryClockRate = b.mem_clk_max as c_int * 1000;
        d.memoryBusWidth = b.width as c_int;
    }
    d.pciDomainID = p.domain as c_int;
    d.pciBusID = (p.location_id >> 8 & 0xff) as c_int;
    d.pciDeviceID = (p.location_id >> 3 & 0x1f) as c_int;
    // kfdrt's device memory is CPU-visible VRAM (MemoryKind::Device), managed memory exists,
    // host memory is mapped for the GPUs, and streams run concurrently.
    d.isLargeBar = 1;
    d.managedMemory = 1;
    d.canMapHostMemory = 1;
    d.concurrentKernels = 1;
    // Managed memory is KFD SVM as CLR's on an HMM-capable device (kfdrt::managed), which
    // CLR 5.2 reports as concurrent access; the host reaches pageable memory through the
    // GPU only with XNACK on (CLR's hmmCpuMemoryAccessible_), and never accesses managed
    // memory directly (hmmDirectHostAccess_, 0 on these dGPUs).
    d.concurrentManagedAccess = 1;
    // An APU's node has CPU cores beside its SIMDs (libhsakmt's test).
    d.integrated = c_int::from(p.cpu_cores_count > 0);
    d.pageableMemoryAccess = c_int::from(device()?.xnack_enabled());
    // Every AMD GPU target has these (CLR sets them for all devices, hip_device.cpp):
    // 32- and 64-bit integer and float-exchange atomics on global and LDS memory, float
    // atomic add, doubles, wave vote/ballot/shuffle (DPP, ds_bpermute), system-scope
    // fences and 3-D grids; no funnel shift intrinsic, __syncthreads_* extensions, surface
    // functions or dynamic parallelism.
    d.arch = ARCH_ALL_AMD_GPUS;
    // Dispatch limits, as CLR 5.2 (hip_device.cpp): a work-group of at most 1024
    // work-items in any shape (ROCr's HSA_AGENT_INFO_WORKGROUP_MAX_SIZE/_DIM; the CP's
    // COMPUTE_NUM_THREAD_* fields, firmware-notes/cp-engine.md), a grid of INT32_MAX
    // work-groups in each dimension (kfdrt launches any grid whose work-items fit the AQL
    // packet's 32-bit grid size per dimension); constant memory and pitch capped at
    // INT32_MAX.
    d.maxThreadsPerBlock = MAX_THREADS_PER_BLOCK;
    d.maxThreadsDim = [MAX_THREADS_PER_BLOCK; 3];
    d.maxGridSize = [c_int::MAX; 3];
    d.totalConstMem = d.totalGlobalMem.min(c_int::MAX as usize);
    d.memPitch = d.totalConstMem;
    // CLR 5.2's availableRegistersPerCU_: 256 VGPRs per lane x SIMDs per CU x 64 lanes
    // (65536 on gfx90a, measured under `kfdrt emu-run`; 5.2 counts the architected VGPRs,
    // not gfx90a's AGPRs; it predates gfx942 and gfx1100, which get the same formula).
    d.regsPerBlock = (256 * p.simd_per_cu * 64) as c_int;
    Ok(d)
}

/// The work-items of a work-group, at most, on every device (`maxThreadsPerBlock`); a
/// launch of a larger block is InvalidConfiguration.
pub(crate) const MAX_THREADS_PER_BLOCK: c_int = 1024;

/// `hipDeviceArch_t` bits (header 5.2 order, from bit 0): hasGlobalInt32Atomics,
/// hasGlobalFloatAtomicExch, hasSharedInt32Atomics, hasSharedFloatAtomicExch,
/// hasFloatAtomicAdd, hasGlobalInt64Atomics, hasSharedInt64Atomics, hasDoubles,
/// hasWarpVote, hasWarpBallot, hasWarpShuffle, hasFunnelShift (0), hasThreadFenceSystem,
/// hasSyncThreadsExt (0), hasSurfaceFuncs (0), has3dGrid, hasDynamicParallelism (0).
const ARCH_ALL_AMD_GPUS: u32 = 0x7ff | 1 << 12 | 1 << 15;

/// `hipInit`: the device is opened on first use, so this only opens it; `flags` must be 0
/// (InvalidValue otherwise, as CUDA's `cuInit` documents; CLR 5.2 ignores them, measured).
#[no_mangle]
pub extern "C" fn hipInit(flags: c_uint) -> hipError_t {
    ret((|| {
        if flags != 0 {
            return Err(hipErrorInvalidValue);
        }
        device().map(|_| ())
    })())
}

/// `hipDeviceGetName`: `hipGetDeviceProperties`' name with its NUL; a buffer too short
/// for both (`len` <= its length), or a null one, is InvalidValue and stays untouched, as
/// CLR 5.2 answers (measured under `kfdrt emu-run`).
#[no_mangle]
pub unsafe extern "C" fn hipDeviceGetName(name: *mut c_char, len: c_int, dev: c_int) -> hipError_t {
    ret((|| {
        let gpu = usize::try_from(dev).map_err(|_| hipErrorInvalidDevice)?;
        let d = properties(gpu)?;
        let len = usize::try_from(len).map_err(|_| hipErrorInvalidValue)?;
        let n = d.name.iter().position(|&c| c == 0).unwrap_or(d.name.len());
        if name.is_null() || len <= n {
            return Err(hipErrorInvalidValue);
        }
        // SAFETY: the caller's buffer holds `len` bytes (HIP's contract); `n < len`.
        unsafe {
            std::ptr::copy_nonoverlapping(d.name.as_ptr(), name, n);
            name.add(n).write(0);
        }
        Ok(())
    })())
}

/// `hipDeviceTotalMem`: `totalGlobalMem` of `hipGetDeviceProperties`.
#[no_mangle]
pub unsafe extern "C" fn hipDeviceTotalMem(bytes: *mut usize, dev: c_int) -> hipError_t {
    ret((|| {
        let gpu = usize::try_from(dev).map_err(|_| hipErrorInvalidDevice)?;
        out(bytes, properties(gpu)?.totalGlobalMem)
    })())
}

/// `hipDeviceComputeCapability`: `major` and `minor` of `hipGetDeviceProperties`.
#[no_mangle]
pub unsafe extern "C" fn hipDeviceComputeCapability(
    major: *mut c_int,
    minor: *mut c_int,
    dev: c_int,
) -> hipError_t {
    ret((|| {
        let gpu = usize::try_from(dev).map_err(|_| hipErrorInvalidDevice)?;
        let d = properties(gpu)?;
        if major.is_null() || minor.is_null() {
            return Err(hipErrorInvalidValue);
        }
        out(major, d.major)?;
        out(minor, d.minor)
    })())
}

/// `hipGetDeviceProperties`.
#[no_mangle]
pub unsafe extern "C" fn hipGetDeviceProperties(
    prop: *mut hipDeviceProp_t,
    dev: c_int,
) -> hipError_t {
    ret((|| {
        let gpu = usize::try_from(dev).map_err(|_| hipErrorInvalidDevice)?;
        out(prop, properties(gpu)?)
    })())
}

/// `hipDeviceGetAttribute` for the attributes `hipGetDeviceProperties` fills and a few
/// more this library knows. Attributes CLR 5.2 answers that have no value here (texture
/// and image limits, HDP registers, the ASIC revision) are NotSupported; any other value,
/// defined by the header or not, is InvalidValue, as CLR 5.2's `default:`.
#[no_mangle]
pub unsafe extern "C" fn hipDeviceGetAttribute(
    v: *mut c_int,
    attr: c_int,
    dev: c_int,
) -> hipError_t {
    ret((|| {
        let gpu = usize::try_from(dev).map_err(|_| hipErrorInvalidDevice)?;
        let d = properties(gpu)?;
        let x = match attr {
            hipDeviceAttributeCanMapHostMemory => d.canMapHostMemory,
            hipDeviceAttributeClockRate => d.clockRate,
            hipDeviceAttributeConcurrentKernels => d.concurrentKernels,
            hipDeviceAttributeL2CacheSize => d.l2CacheSize,
            hipDeviceAttributeComputeCapabilityMajor => d.major,
            hipDeviceAttributeComputeCapabilityMinor => d.minor,
            hipDeviceAttributeManagedMemory => d.managedMemory,
            hipDeviceAttributeMaxThreadsPerMultiProcessor => d.maxThreadsPerMultiProcessor,
            hipDeviceAttributeMultiprocessorCount => d.multiProcessorCount,
            hipDeviceAttributePciBusId => d.pciBusID,
            hipDeviceAttributePciDeviceId => d.pciDeviceID,
            hipDeviceAttributePciDomainID => d.pciDomainID,
            hipDeviceAttributeMaxSharedMemoryPerBlock => d.sharedMemPerBlock as c_int,
            hipDeviceAttributeTotalGlobalMem => d.totalGlobalMem.min(c_int::MAX as usize) as c_int,
            hipDeviceAttributeWarpSize => d.warpSize,
            hipDeviceAttributeIsLargeBar => d.isLargeBar,
            hipDeviceAttributeMaxThreadsPerBlock => d.maxThreadsPerBlock,
            hipDeviceAttributeMaxBlockDimX => d.maxThreadsDim[0],
            hipDeviceAttributeMaxBlockDimY => d.maxThreadsDim[1],
            hipDeviceAttributeMaxBlockDimZ => d.maxThreadsDim[2],
            hipDeviceAttributeMaxGridDimX => d.maxGridSize[0],
            hipDeviceAttributeMaxGridDimY => d.maxGridSize[1],
            hipDeviceAttributeMaxGridDimZ => d.maxGridSize[2],
            hipDeviceAttributeMaxRegistersPerBlock => d.regsPerBlock,
            hipDeviceAttributeTotalConstantMemory => d.totalConstMem as c_int,
            hipDeviceAttributeMaxPitch => d.memPitch as c_int,
            hipDeviceAttributeEccEnabled => d.ECCEnabled,
            hipDeviceAttributeComputeMode => d.computeMode,
            hipDeviceAttributeIntegrated => d.integrated,
            hipDeviceAttributeIsMultiGpuBoard => d.isMultiGpuBoard,
            hipDeviceAttributeKernelExecTimeout => d.kernelExecTimeoutEnabled,
            hipDeviceAttributeMemoryBusWidth => d.memoryBusWidth,
            hipDeviceAttributeMemoryClockRate => d.memoryClockRate,
            hipDeviceAttributeMaxSharedMemoryPerMultiprocessor => {
                d.maxSharedMemoryPerMultiProcessor as c_int
            }
            hipDeviceAttributeConcurrentManagedAccess => d.concurrentManagedAccess,
            hipDeviceAttributeDirectManagedMemAccessFromHost => d.directManagedMemAccessFromHost,
            hipDeviceAttributePageableMemoryAccess => d.pageableMemoryAccess,
            hipDeviceAttributePageableMemoryAccessUsesHostPageTables => {
                d.pageableMemoryAccessUsesHostPageTables
            }
            // No cooperative launches here (CLR 5.2: 1): 0 rather than a promise.
            hipDeviceAttributeCooperativeLaunch
            | hipDeviceAttributeCooperativeMultiDeviceLaunch
            | hipDeviceAttributeCooperativeMultiDeviceUnmatchedFunc
            | hipDeviceAttributeCooperativeMultiDeviceUnmatchedGridDim
            | hipDeviceAttributeCooperativeMultiDeviceUnmatchedBlockDim
            | hipDeviceAttributeCooperativeMultiDeviceUnmatchedSharedMem => d.cooperativeLaunch,
            hipDeviceAttributePhysicalMultiProcessorCount => d.multiProcessorCount,
            // hipStreamWaitValue32/64 are implemented.
            hipDeviceAttributeCanUseStreamWaitValue => 1,
            // No images; fine-grained VRAM is NotSupported (hipExtMallocWithFlags).
            hipDeviceAttributeImageSupport | hipDeviceAttributeFineGrainSupport => 0,
            // Memory pools are implemented (CLR 5.2 reports 0: its pools were disabled).
            hipDeviceAttributeMemoryPoolsSupported => 1,
            hipDeviceAttributeMaxTexture1DWidth
            | hipDeviceAttributeMaxTexture2DWidth
            | hipDeviceAttributeMaxTexture2DHeight
            | hipDeviceAttributeMaxTexture3DWidth
            | hipDeviceAttributeMaxTexture3DHeight
            | hipDeviceAttributeMaxTexture3DDepth
            | hipDeviceAttributeTextureAlignment
            | hipDeviceAttributeTexturePitchAlignment
            | hipDeviceAttributeHdpMemFlushCntl
            | hipDeviceAttributeHdpRegFlushCntl
            | hipDeviceAttributeAsicRevision => return Err(hipErrorNotSupported),
            _ => return Err(hipErrorInvalidValue),
        };
        out(v, x)
    })())
}

// ---- streams ----------------------------------------------------------------------------

fn new_stream(p: *mut *mut c_void, s: kfdrt::Result<Stream>) -> Result<(), hipError_t> {
    if p.is_null() {
        return Err(hipErrorInvalidValue);
    }
    let h = register(&STREAMS, s.hip()?)?;
    out(p, h)
}

/// `hipStreamCreate`.
#[no_mangle]
pub unsafe extern "C" fn hipStreamCreate(s: *mut *mut c_void) -> hipError_t {
    ret((|| new_stream(s, device()?.create_stream(current_gpu())))())
}

/// `hipStreamCreateWithFlags`.
#[no_mangle]
pub unsafe extern "C" fn hipStreamCreateWithFlags(
    s: *mut *mut c_void,
    flags: c_uint,
) -> hipError_t {
    ret((|| {
        new_stream(
            s,
            device()?.create_stream_with_flags(current_gpu(), arg(StreamFlags::from_bits(flags))?),
        )
    })())
}

/// `hipStreamCreateWithPriority`.
#[no_mangle]
pub unsafe extern "C" fn hipStreamCreateWithPriority(
    s: *mut *mut c_void,
    flags: c_uint,
    priority: c_int,
) -> hipError_t {
    ret((|| {
        new_stream(
            s,
            device()?.create_stream_with_priority(
                current_gpu(),
                arg(StreamFlags::from_bits(flags))?,
                priority,
            ),
        )
    })())
}

/// `hipExtStreamCreateWithCUMask`.
#[no_mangle]
pub unsafe extern "C" fn hipExtStreamCreateWithCUMask(
    s: *mut *mut c_void,
    cu_mask_size: u32,
    cu_mask: *const u32,
) -> hipError_t {
    ret((|| {
        if cu_mask.is_null() || cu_mask_size == 0 {
            return Err(hipErrorInvalidValue);
        }
        // SAFETY: the caller passes `cu_mask_size` words at `cu_mask`.
        let mask = unsafe { std::slice::from_raw_parts(cu_mask, cu_mask_size as usize) };
        new_stream(s, device()?.create_stream_with_cu_mask(current_gpu(), mask))
    })())
}

/// `hipExtStreamGetCUMask`.
#[no_mangle]
pub unsafe extern "C" fn hipExtStreamGetCUMask(
    s: *mut c_void,
    cu_mask_size: u32,
    cu_mask: *mut u32,
) -> hipError_t {
    ret((|| {
        if cu_mask.is_null() || cu_mask_size == 0 {
            return Err(hipErrorInvalidValue);
        }
        let st = stream(s)?;
        // SAFETY: the caller passes room for `cu_mask_size` words at `cu_mask`.
        let mask = unsafe { std::slice::from_raw_parts_mut(cu_mask, cu_mask_size as usize) };
        st.cu_mask(mask).hip()
    })())
}

/// `hipStreamDestroy`: unregisters the handle; kfdrt drains the stream on drop.
#[no_mangle]
pub extern "C" fn hipStreamDestroy(s: *mut c_void) -> hipError_t {
    ret((|| {
        if s.is_null() {
            return Err(hipErrorInvalidHandle);
        }
        let st = remove_stream(s as usize).ok_or(hipErrorInvalidHandle)?;
        drop_hot();
        with_tls(|t| t.streams.borrow_mut().forget(s as usize));
        // Drained here, so that another thread's cached reference, dropped later, has
        // nothing left to wait for.
        // A failed stream's error is not the destroy's (as before: kfdrt drains on drop).
        let _ = st.synchronize();
        drop(st);
        Ok(())
    })())
}

/// `hipStreamQuery`. The thread's `Idle` stream, when idle, is answered from kfdrt's
/// [`Stream::query_is_ok`]; everything else goes through [`Stream::query`].
#[no_mangle]
pub extern "C" fn hipStreamQuery(s: *mut c_void) -> hipError_t {
    let f = fast();
    // SAFETY: the calling thread's own slot; its stream stays alive until this call
    // returns (see `Idle`). HIP_RETURN stores success too.
    unsafe {
        if s as usize == (*f).idle.key && (*f).idle.slot.query_is_ok() {
            (*f).last_error = hipSuccess;
            return hipSuccess;
        }
    }
    query_full(s)
}

/// Whether `s` is the calling thread's previous idle entry and `idle` (one of
/// [`IdleSlot`]'s predicates) holds for it: then that entry becomes the hot one again and
/// the last error success (what the full paths of query and synchronize try first).
#[inline(always)]
fn prev_idle(s: *mut c_void, idle: unsafe fn(&IdleSlot) -> bool) -> bool {
    let f = fast();
    // SAFETY: the calling thread's own slot; the previous entry's stream stays alive until
    // this call returns (see `Idle`), and its slot was set where it is.
    unsafe {
        let i = &mut (*f).idle;
        if s as usize == i.prev_key && idle(&i.prev) {
            i.swap();
            (*f).last_error = hipSuccess;
            return true;
        }
    }
    false
}

/// The full path of `hipStreamQuery` (a non-unwinding ABI, so the entry point's
/// call to it is a tail jump and its hot path needs no stack frame; `"system"`, which is
/// `"C"` here, because build.rs exports every `extern "C"` function).
#[inline(never)]
extern "system" fn query_full(s: *mut c_void) -> hipError_t {
    if prev_idle(s, IdleSlot::query_is_ok) {
        return hipSuccess;
    }
    let e = ret_stream(s, |st| st.query().hip());
    promote_hot(s);
    e
}

/// `hipStreamSynchronize`. The thread's `Idle` stream, with nothing to do, is answered from
/// kfdrt's [`Stream::synchronize_is_noop`]; everything else goes through
/// [`Stream::synchronize`].
#[no_mangle]
pub extern "C" fn hipStreamSynchronize(s: *mut c_void) -> hipError_t {
    let f = fast();
    // SAFETY: the calling thread's own slot; its stream stays alive until this call
    // returns (see `Idle`). HIP_RETURN stores success too.
    unsafe {
        if s as usize == (*f).idle.key && (*f).idle.slot.synchronize_is_noop() {
            (*f).last_error = hipSuccess;
            return hipSuccess;
        }
    }
    synchronize_full(s)
}

/// The full path of `hipStreamSynchronize` (a non-unwinding ABI, so the entry point's
/// call to it is a tail jump and its hot path needs no stack frame; `"system"`, which is
/// `"C"` here, because build.rs exports every `extern "C"` function).
#[inline(never)]
extern "system" fn synchronize_full(s: *mut c_void) -> hipError_t {
    if prev_idle(s, IdleSlot::synchronize_is_noop) {
        return hipSuccess;
    }
    let e = ret_stream(s, |st| st.synchronize().hip());
    promote_hot(s);
    e
}

/// `hipStreamGetFlags`.
#[no_mangle]
pub unsafe extern "C" fn hipStreamGetFlags(s: *mut c_void, flags: *mut c_uint) -> hipError_t {
    ret((|| out(flags, stream(s)?.flags().bits()))())
}

/// `hipStreamGetPriority`.
#[no_mangle]
pub unsafe extern "C" fn hipStreamGetPriority(s: *mut c_void, p: *mut c_int) -> hipError_t {
    ret((|| out(p, stream(s)?.priority()))())
}

/// `hipStreamWaitEvent`.
#[no_mangle]
pub extern "C" fn hipStreamWaitEvent(s: *mut c_void, e: *mut c_void, flags: c_uint) -> hipError_t {
    ret(with_stream(s, |st| {
        with_event(e, |ev| match &**ev {
            HipEvent::Local(ev) => st.wait_event(ev, flags).hip(),
            HipEvent::Ipc(_) if flags != 0 => Err(hipErrorInvalidValue),
            HipEvent::Ipc(ev) => ev.stream_wait(st).hip(),
        })
    }))
}

/// `hipStreamWriteValue32`.
#[no_mangle]
pub extern "C" fn hipStreamWriteValue32(
    s: *mut c_void,
    ptr: *mut c_void,
    value: u32,
    flags: c_uint,
) -> hipError_t {
    // The thread's hot stream first (no `RefCell`, no cache walk): the enqueue is timed.
    // The miss and the error go out of line, so this path keeps its arguments in
    // registers.
    match hot_stream(s) {
        Some((_, st)) => {
            ret_kfdrt(st.write_value32(ptr as u64, value, WriteValueFlags::from_bits_retain(flags)))
        }
        None => write_value32_miss(s, ptr, value, flags),
    }
}

/// [`hipStreamWriteValue32`] on a stream that is not the thread's hot one (a
/// non-unwinding ABI, so the entry point's call is a tail jump).
#[cold]
#[inline(never)]
extern "system" fn write_value32_miss(
    s: *mut c_void,
    ptr: *mut c_void,
    value: u32,
    flags: c_uint,
) -> hipError_t {
    ret_stream_miss(s, move |_, st| {
        st.write_value32(ptr as u64, value, WriteValueFlags::from_bits_retain(flags))
            .hip()
    })
}

/// `hipStreamWriteValue64`.
#[no_mangle]
pub extern "C" fn hipStreamWriteValue64(
    s: *mut c_void,
    ptr: *mut c_void,
    value: u64,
    flags: c_uint,
) -> hipError_t {
    ret_stream(s, move |st| {
        st.write_value64(ptr as u64, value, WriteValueFlags::from_bits_retain(flags))
            .hip()
    })
}

/// `hipStreamWaitValue32`.
#[no_mangle]
pub extern "C" fn hipStreamWaitValue32(
    s: *mut c_void,
    ptr: *mut c_void,
    value: u32,
    flags: c_uint,
    mask: u32,
) -> hipError_t {
    ret((|| {
        stream(s)?
            .wait_value32(ptr as u64, value, arg(WaitCompare::from_raw(flags))?, mask)
            .hip()
    })())
}

/// `hipStreamWaitValue64`.
#[no_mangle]
pub extern "C" fn hipStreamWaitValue64(
    s: *mut c_void,
    ptr: *mut c_void,
    value: u64,
    flags: c_uint,
    mask: u64,
) -> hipError_t {
    ret((|| {
        stream(s)?
            .wait_value64(ptr as u64, value, arg(WaitCompare::from_raw(flags))?, mask)
            .hip()
    })())
}

/// `hipStreamCallback_t`.
pub type hipStreamCallback_t =
    Option<unsafe extern "C" fn(stream: *mut c_void, status: hipError_t, user: *mut c_void)>;

/// A C pointer carried to the callback thread.
struct UserData(*mut c_void);
// SAFETY: HIP hands the user pointer to the callback thread; the caller owns its safety.
unsafe impl Send for UserData {}

/// `hipStreamAddCallback`: the C callback gets the stream handle it was added to.
#[no_mangle]
pub extern "C" fn hipStreamAddCallback(
    s: *mut c_void,
    cb: hipStreamCallback_t,
    user: *mut c_void,
    flags: c_uint,
) -> hipError_t {
    ret((|| {
        let cb = cb.ok_or(hipErrorInvalidValue)?;
        let handle = UserData(s);
        let user = UserData(user);
        with_stream(s, |st| {
            st.add_callback(
                move |r| {
                    let (handle, user) = (handle, user);
                    let status = r.err().map_or(hipSuccess, |e| map_err(&e));
                    // SAFETY: a C function pointer the caller registered, called with its data.
                    unsafe { cb(handle.0, status, user.0) };
                },
                flags,
            )
            .hip()
        })
    })())
}

// ---- per-thread default stream: the `_spt` forms -------------------------------------------
//
// A program built with `HIP_API_PER_THREAD_DEFAULT_STREAM` (or hipcc
// `-fgpu-default-stream=per-thread`) calls these; as CLR's, each is its plain form with a
// null stream meaning the thread's per-thread stream (`hipStreamPerThread`).

/// `hipStreamQuery_spt`.
#[no_mangle]
pub extern "C" fn hipStreamQuery_spt(s: *mut c_void) -> hipError_t {
    hipStreamQuery(spt(s))
}

/// `hipStreamSynchronize_spt`.
#[no_mangle]
pub extern "C" fn hipStreamSynchronize_spt(s: *mut c_void) -> hipError_t {
    hipStreamSynchronize(spt(s))
}

/// `hipStreamGetFlags_spt`.
#[no_mangle]
pub unsafe extern "C" fn hipStreamGetFlags_spt(s: *mut c_void, flags: *mut c_uint) -> hipError_t {
    // SAFETY: same contract.
    unsafe { hipStreamGetFlags(spt(s), flags) }
}

/// `hipStreamGetPriority_spt`.
#[no_mangle]
pub unsafe extern "C" fn hipStreamGetPriority_spt(s: *mut c_void, p: *mut c_int) -> hipError_t {
    // SAFETY: same contract.
    unsafe { hipStreamGetPriority(spt(s), p) }
}

/// `hipStreamWaitEvent_spt`.
#[no_mangle]
pub extern "C" fn hipStreamWaitEvent_spt(
    s: *mut c_void,
    e: *mut c_void,
    flags: c_uint,
) -> hipError_t {
    hipStreamWaitEvent(spt(s), e, flags)
}

/// `hipMemcpy_spt`: `hipMemcpy` ordered on the per-thread stream, waited for.
#[no_mangle]
pub unsafe extern "C" fn hipMemcpy_spt(
    dst: *mut c_void,
    src: *const c_void,
    size: usize,
    kind: hipMemcpyKind,
) -> hipError_t {
    if let Err(e) = check_memcpy_kind(dst, src, size, kind) {
        return ret(Err(e));
    }
    ret_stream(HIP_STREAM_PER_THREAD as *mut c_void, |st| {
        // SAFETY: as hipMemcpy.
        unsafe { st.memcpy_staged(dst as u64, src as u64, size as u64) }.hip()?;
        st.synchronize().hip()
    })
}

/// `hipMemcpyAsync_spt`.
#[no_mangle]
pub unsafe extern "C" fn hipMemcpyAsync_spt(
    dst: *mut c_void,
    src: *const c_void,
    size: usize,
    kind: hipMemcpyKind,
    s: *mut c_void,
) -> hipError_t {
    // SAFETY: same contract.
    unsafe { hipMemcpyAsync(dst, src, size, kind, spt(s)) }
}

/// `hipMemset_spt`: `hipMemset` ordered on the per-thread stream, waited for.
#[no_mangle]
pub extern "C" fn hipMemset_spt(dst: *mut c_void, value: c_int, size: usize) -> hipError_t {
    ret_stream(HIP_STREAM_PER_THREAD as *mut c_void, |st| {
        st.memset(dst as u64, value as u8, size as u64).hip()?;
        st.synchronize().hip()
    })
}

// ---- events -----------------------------------------------------------------------------

/// `hipEventCreateWithFlags`.
#[no_mangle]
pub unsafe extern "C" fn hipEventCreateWithFlags(e: *mut *mut c_void, flags: c_uint) -> hipError_t {
    ret((|| {
        if e.is_null() {
            return Err(hipErrorInvalidValue);
        }
        // hipEventReleaseToDevice / hipEventReleaseToSystem (header 5.2): CLR 5.2 takes
        // either alone and fails both. kfdrt's record releases at system scope, which
        // satisfies both, so the bit only needs checking.
        let release = flags & (hipEventReleaseToDevice | hipEventReleaseToSystem);
        if release == hipEventReleaseToDevice | hipEventReleaseToSystem {
            return Err(hipErrorInvalidValue);
        }
        let f = arg(EventFlags::from_bits(flags & !release))?;
        let ev = if f.contains(EventFlags::INTERPROCESS) {
            // As CUDA: an interprocess event has no timing.
            if !f.contains(EventFlags::DISABLE_TIMING) {
                return Err(hipErrorInvalidValue);
            }
            HipEvent::Ipc(device()?.create_ipc_event(current_gpu()).hip()?)
        } else {
            HipEvent::Local(device()?.create_event(f).hip()?)
        };
        out(e, register(&EVENTS, ev)?)
    })())
}

/// `hipEventCreate`.
#[no_mangle]
pub unsafe extern "C" fn hipEventCreate(e: *mut *mut c_void) -> hipError_t {
    // SAFETY: same contract.
    unsafe { hipEventCreateWithFlags(e, hipEventDefault) }
}

/// `hipEventRecord`.
#[no_mangle]
pub extern "C" fn hipEventRecord(e: *mut c_void, s: *mut c_void) -> hipError_t {
    // The hot path: the thread's hot stream and a cached event (both checked live).
    if let Some((t, st)) = hot_stream(s) {
        if let Some(ev) = handles::hit(&t.events, e as usize) {
            let r = match &**ev {
                HipEvent::Local(ev) => ev.record(st),
                HipEvent::Ipc(ev) => ev.record(st),
            };
            drop(ev);
            return ret_kfdrt(r);
        }
    }
    event_record_full(e, s)
}

/// [`hipEventRecord`] when the stream is not the thread's hot one or the event not
/// cached: the cached lookups, then the stream made hot (a non-unwinding ABI, so the
/// entry point's call is a tail jump).
#[inline(never)]
extern "system" fn event_record_full(e: *mut c_void, s: *mut c_void) -> hipError_t {
    let r = with_tls(|t| {
        handles::with(&t.events, &EVENTS, e as usize, |ev| {
            with_stream_in(t, s, |st| match &**ev {
                HipEvent::Local(ev) => ev.record(st).hip(),
                HipEvent::Ipc(ev) => ev.record(st).hip(),
            })
        })
        .unwrap_or(Err(hipErrorInvalidHandle))
    });
    promote_hot(s);
    ret(r)
}

/// `hipEventSynchronize`.
#[no_mangle]
pub extern "C" fn hipEventSynchronize(e: *mut c_void) -> hipError_t {
    ret(with_event(e, |ev| match &**ev {
        HipEvent::Local(ev) => ev.synchronize().hip(),
        HipEvent::Ipc(ev) => ev.synchronize().hip(),
    }))
}

/// `hipEventQuery`.
#[no_mangle]
pub extern "C" fn hipEventQuery(e: *mut c_void) -> hipError_t {
    ret(with_event(e, |ev| match &**ev {
        HipEvent::Local(ev) => ev.query().hip(),
        HipEvent::Ipc(ev) => ev.query().hip(),
    }))
}

/// `hipEventElapsedTime`.
#[no_mangle]
pub unsafe extern "C" fn hipEventElapsedTime(
    ms: *mut f32,
    start: *mut c_void,
    stop: *mut c_void,
) -> hipError_t {
    ret((|| {
        if ms.is_null() {
            return Err(hipErrorInvalidValue);
        }
        let (a, b) = (local_event(start)?, local_event(stop)?);
        let (HipEvent::Local(a), HipEvent::Local(b)) = (&*a, &*b) else {
            return Err(hipErrorInvalidHandle);
        };
        out(ms, Event::elapsed_ms(a, b).hip()?)
    })())
}

/// `hipEventDestroy`.
#[no_mangle]
pub extern "C" fn hipEventDestroy(e: *mut c_void) -> hipError_t {
    let r = EVENTS.remove(e as usize).map(drop);
    with_tls(|t| t.events.borrow_mut().forget(e as usize));
    ret(r.ok_or(hipErrorInvalidHandle))
}

// ---- memory -----------------------------------------------------------------------------

fn alloc(p: *mut *mut c_void, kind: MemoryKind, size: usize) -> Result<(), hipError_t> {
    if p.is_null() {
        return Err(hipErrorInvalidValue);
    }
    if size == 0 {
        return out(p, std::ptr::null_mut());
    }
    let b = device()?.alloc(kind, current_gpu(), size).hip()?;
    let va = b.va();
    buffers().insert(va, b);
    out(p, va as *mut c_void)
}

fn free(p: *mut c_void, want: &[MemoryKind]) -> Result<(), hipError_t> {
    if p.is_null() {
        return Ok(());
    }
    let known = matches!(buffers().get(&(p as u64)), Some(b) if want.contains(&b.kind()));
    if !known {
        return Err(hipErrorInvalidValue);
    }
    // Outside the buffers' lock: other threads keep allocating while the device drains.
    synchronize_all_streams();
    let mut m = buffers();
    match m.get(&(p as u64)) {
        Some(b) if want.contains(&b.kind()) => {
            m.remove(&(p as u64));
            lock(&IPC_EXPORTS).remove(&(p as u64));
            lock(&HOST_FLAGS).remove(&(p as u64));
            Ok(())
        }
        _ => Err(hipErrorInvalidValue),
    }
}

/// `hipMalloc`: VRAM of the current GPU.
#[no_mangle]
pub unsafe extern "C" fn hipMalloc(p: *mut *mut c_void, size: usize) -> hipError_t {
    ret(alloc(p, MemoryKind::Device, size))
}

/// `hipExtMallocWithFlags`: `hipDeviceMallocDefault` or `hipMallocSignalMemory` (8 bytes
/// only, as CLR 5.2); `hipDeviceMallocFinegrained` is NotSupported (kfdrt has no
/// fine-grained VRAM kind); any other value is InvalidValue (CLR 5.2 `hipExtMallocWithFlags`).
#[no_mangle]
pub unsafe extern "C" fn hipExtMallocWithFlags(
    p: *mut *mut c_void,
    size: usize,
    flags: c_uint,
) -> hipError_t {
    ret(match flags {
        hipDeviceMallocDefault => alloc(p, MemoryKind::Device, size),
        hipMallocSignalMemory if size != 8 => Err(hipErrorInvalidValue),
        hipMallocSignalMemory => alloc(p, MemoryKind::Signal, size),
        hipDeviceMallocFinegrained => Err(hipErrorNotSupported),
        _ => Err(hipErrorInvalidValue),
    })
}

/// `hipFree`: synchronizes first (see `synchronize_all_streams`), then releases device,
/// signal or managed memory; stream-ordered memory is freed on the null stream and waited for.
#[no_mangle]
pub extern "C" fn hipFree(p: *mut c_void) -> hipError_t {
    if let Some(r) = crate::managed::free(p as u64) {
        return ret(r);
    }
    ret(match free(p, &[MemoryKind::Device, MemoryKind::Signal]) {
        // Stream-ordered memory (hipMallocAsync, imported pool pointers): freed on the
        // current GPU's null stream, then waited for (hipFree synchronizes).
        Err(e) => with_stream(std::ptr::null_mut(), |st| {
            st.free_ptr_async(p as u64).map_err(|_| e)?;
            st.synchronize().hip()
        }),
        ok => ok,
    })
}

/// `hipHostMalloc`: pinned host memory (kfdrt `MemoryKind::HostPinned`: coherent GTT
/// memory, mapped on every GPU at the same address as on the CPU). So `Portable` and
/// `Mapped` hold for every allocation and `Coherent` is what it is; `NonCoherent` and
/// `WriteCombined` only relax guarantees (CLR's coarse-grained memory, a CPU write-combining
/// hint CLR does not act on either), and the coherent memory given meets them.
/// `Coherent | NonCoherent` is InvalidValue (CLR 5.2 `hipHostMalloc`); `NumaUser`
/// (allocate by the thread's NUMA policy) is NotSupported: the pages come from KFD's GTT
/// allocation in the kernel, which no process policy steers. Bits the 5.2 header does not
/// define are accepted and kept for `hipHostGetFlags`, as CLR 5.2 does (measured).
#[no_mangle]
pub unsafe extern "C" fn hipHostMalloc(
    p: *mut *mut c_void,
    size: usize,
    flags: c_uint,
) -> hipError_t {
    let both = hipHostMallocCoherent | hipHostMallocNonCoherent;
    ret(if p.is_null() || flags & both == both {
        Err(hipErrorInvalidValue)
    } else if flags & hipHostMallocNumaUser != 0 {
        Err(hipErrorNotSupported)
    } else {
        alloc(p, MemoryKind::HostPinned, size).map(|()| {
            // SAFETY: `alloc` wrote the out-pointer, checked non-null above.
            let va = unsafe { *p } as u64;
            if va != 0 {
                lock(&HOST_FLAGS).insert(va, flags);
            }
        })
    })
}

/// The allocation that holds `a`: kfdrt's `Device::allocation_at`, the one lookup of
/// every entry point here (CLR's `getMemoryObject`). Its `base` is the key of this
/// library's maps (`BUFFERS`, `HOST_FLAGS`, `IPC_EXPORTS`) for the memory they hold.
fn allocation_at(a: u64) -> Result<Option<kfdrt::Allocation>, hipError_t> {
    Ok(device()?.allocation_at(a))
}

/// `hipHostGetDevicePointer`: the GPU address of host memory this library allocated or
/// registered (or of any allocation, as CLR): the same address, since kfdrt maps every
/// buffer at its CPU address (a registration's pages at theirs, so the caller's pointer
/// plus offset). `flags` has no defined value and is ignored, as by CLR 5.2 (measured);
/// unknown memory is InvalidValue.
#[no_mangle]
pub unsafe extern "C" fn hipHostGetDevicePointer(
    dev: *mut *mut c_void,
    host: *mut c_void,
    _flags: c_uint,
) -> hipError_t {
    ret((|| {
        if dev.is_null() {
            return Err(hipErrorInvalidValue);
        }
        allocation_at(host as u64)?.ok_or(hipErrorInvalidValue)?;
        out(dev, host)
    })())
}

/// `hipHostGetFlags`: the flags `hipHostMalloc` or `hipHostRegister` was given for the
/// allocation holding `host`, all of them (CLR 5.2 keeps them shifted left by 16 in a
/// 32-bit word, so it reports NumaUser, Coherent and NonCoherent as 0). Other memory is
/// InvalidValue.
#[no_mangle]
pub unsafe extern "C" fn hipHostGetFlags(f: *mut c_uint, host: *mut c_void) -> hipError_t {
    ret((|| {
        if f.is_null() || host.is_null() {
            return Err(hipErrorInvalidValue);
        }
        let flags = match allocation_at(host as u64)? {
            Some(a)
                if matches!(
                    a.kind,
                    AllocationKind::Buffer(MemoryKind::HostPinned | MemoryKind::Userptr)
                ) =>
            {
                lock(&HOST_FLAGS).get(&a.base).copied()
            }
            _ => None,
        };
        out(f, flags.ok_or(hipErrorInvalidValue)?)
    })())
}

/// `hipHostFree`: synchronizes first (see `synchronize_all_streams`), then releases the
/// pinned host memory.
#[no_mangle]
pub extern "C" fn hipHostFree(p: *mut c_void) -> hipError_t {
    ret(free(p, &[MemoryKind::HostPinned]))
}

/// `hipHostRegister`: KFD USERPTR registration, mapped on every GPU (so `Portable` and
/// `Mapped` hold by construction); `hipHostRegisterIoMemory` is not modelled. Any pointer
/// and size: kfdrt registers the whole pages holding the range, as libhsakmt does, and
/// the registration is known by the caller's pointer (for `hipHostUnregister`) and covers
/// the caller's bytes (`hipPointerGetAttributes`, copies). As CLR 5.2 (measured): a
/// pointer registered already succeeds and changes nothing (one `hipHostUnregister`
/// ends it); a range inside another registration shares its pages' registration. A range
/// enclosing or partly overlapping one is InvalidValue (CLR 5.2 accepts it; kfdrt maps
/// registered memory at its CPU address, and KFD refuses overlapping GPU mappings).
#[no_mangle]
pub unsafe extern "C" fn hipHostRegister(p: *mut c_void, size: usize, flags: c_uint) -> hipError_t {
    ret((|| {
        if flags & !(hipHostRegisterPortable | hipHostRegisterMapped) != 0 {
            return Err(hipErrorNotSupported);
        }
        if p.is_null() || size == 0 {
            return Err(hipErrorInvalidValue);
        }
        let mut m = buffers();
        if m.contains_key(&(p as u64)) {
            return Ok(());
        }
        // SAFETY: the caller registers `size` bytes of its own memory at `p` and keeps it
        // allocated until hipHostUnregister (HIP's contract).
        let b = unsafe { device()?.register_host_memory(p as *mut u8, size) }.hip()?;
        m.insert(p as u64, b);
        lock(&HOST_FLAGS).insert(p as u64, flags);
        Ok(())
    })())
}

/// `hipHostUnregister`.
#[no_mangle]
pub extern "C" fn hipHostUnregister(p: *mut c_void) -> hipError_t {
    ret(free(p, &[MemoryKind::Userptr]).map_err(|_| hipErrorHostMemoryNotRegistered))
}

/// `hipPointerGetAttributes` for the allocation holding `ptr` (kfdrt
/// `Device::allocation_at`), as CLR 5.2 fills it: device memory (`hipMalloc`, signal
/// memory, `hipMallocAsync` pools, IPC-opened buffers, VMM mappings) is
/// `hipMemoryTypeDevice` with no host pointer; pinned, registered and managed memory are
/// `hipMemoryTypeHost` with both pointers; managed memory sets `isManaged`; pinned memory
/// gives its `hipHostMalloc` / `hipHostRegister` flags in `allocationFlags`. Any other
/// address is InvalidValue, with `*attr` zeroed as CLR 5.2 leaves it (programs that
/// ignore the code read `memoryType` 0, not stale values).
#[no_mangle]
pub unsafe extern "C" fn hipPointerGetAttributes(
    attr: *mut hipPointerAttribute_t,
    ptr: *const c_void,
) -> hipError_t {
    let r = (|| {
        let a = ptr as u64;
        let p = ptr as *mut c_void;
        let device_memory = |gpu: usize| hipPointerAttribute_t {
            memoryType: hipMemoryTypeDevice,
            device: gpu as c_int,
            devicePointer: p,
            hostPointer: std::ptr::null_mut(),
            isManaged: 0,
            allocationFlags: 0,
        };
        let Some(at) = allocation_at(a)? else {
            return Err(hipErrorInvalidValue);
        };
        let r = match at.kind {
            AllocationKind::Buffer(MemoryKind::HostPinned | MemoryKind::Userptr) => {
                hipPointerAttribute_t {
                    memoryType: hipMemoryTypeHost,
                    device: at.gpu as c_int,
                    devicePointer: p,
                    hostPointer: p,
                    isManaged: 0,
                    allocationFlags: lock(&HOST_FLAGS).get(&at.base).copied().unwrap_or(0),
                }
            }
            AllocationKind::Managed => hipPointerAttribute_t {
                memoryType: hipMemoryTypeHost,
                device: crate::managed::device_of(a).unwrap_or(0),
                devicePointer: p,
                hostPointer: p,
                isManaged: 1,
                allocationFlags: 0,
            },
            // Device memory, signal memory, pool chunks, IPC imports, VMM mappings.
            _ => device_memory(at.gpu),
        };
        out(attr, r)
    })();
    if r.is_err() && !attr.is_null() {
        // SAFETY: non-null out-pointer per the HIP contract; all-zero is a valid
        // hipPointerAttribute_t (integers and raw pointers).
        unsafe { attr.write(std::mem::zeroed()) };
    }
    ret(r)
}

/// CLR 5.2's one check of a copy's `hipMemcpyKind` (`IsHtoHMemcpyValid`): when neither
/// side is in an allocation of the device (two pageable host ranges, or an address that is
/// no memory at all) the kind must be `hipMemcpyHostToHost` or `hipMemcpyDefault`, else
/// InvalidValue; then the copy is the host's. Every other combination is decided by what
/// the pointers are, whatever the kind says (kfdrt checks each allocation's range), and
/// CLR 5.2 accepts a kind out of range too (measured). A copy of 0 bytes is not checked.
fn check_memcpy_kind(
    dst: *mut c_void,
    src: *const c_void,
    size: usize,
    kind: hipMemcpyKind,
) -> Result<(), hipError_t> {
    if size == 0 || dst.is_null() || src.is_null() {
        return Ok(());
    }
    let host_kind = kind == hipMemcpyHostToHost || kind == hipMemcpyDefault;
    if !host_kind && allocation_at(dst as u64)?.is_none() && allocation_at(src as u64)?.is_none() {
        return Err(hipErrorInvalidValue);
    }
    Ok(())
}

/// `hipMemcpy`: ordered on the current GPU's null stream, then waited for; a pageable
/// host side is staged through pinned memory (kfdrt `Device::memcpy_staged`). The kind is
/// checked as CLR 5.2 does (`check_memcpy_kind`: two non-allocations need HostToHost or
/// Default).
#[no_mangle]
pub unsafe extern "C" fn hipMemcpy(
    dst: *mut c_void,
    src: *const c_void,
    size: usize,
    kind: hipMemcpyKind,
) -> hipError_t {
    ret((|| {
        check_memcpy_kind(dst, src, size, kind)?;
        // SAFETY: HIP's contract: host pointers passed to hipMemcpy are valid for `size`
        // bytes and not used concurrently.
        unsafe { device()?.memcpy_staged(current_gpu(), dst as u64, src as u64, size as u64) }.hip()
    })())
}

/// `hipMemcpyAsync`: asynchronous between GPU-mapped memory; synchronous (staged) when a
/// host side is pageable, as in HIP. The kind is checked as by `hipMemcpy`.
#[no_mangle]
pub unsafe extern "C" fn hipMemcpyAsync(
    dst: *mut c_void,
    src: *const c_void,
    size: usize,
    kind: hipMemcpyKind,
    s: *mut c_void,
) -> hipError_t {
    ret((|| {
        check_memcpy_kind(dst, src, size, kind)?;
        // SAFETY: as hipMemcpy; a pageable side makes the copy synchronous, as in HIP.
        unsafe { stream(s)?.memcpy_staged(dst as u64, src as u64, size as u64) }.hip()
    })())
}

/// `hipMemset` (kfdrt `Stream::memset`: an address in no allocation, or a size past the
/// size allocated, is InvalidValue, as CLR; a size of 0 succeeds).
#[no_mangle]
pub extern "C" fn hipMemset(dst: *mut c_void, value: c_int, size: usize) -> hipError_t {
    ret((|| {
        device()?
            .memset(current_gpu(), dst as u64, value as u8, size as u64)
            .hip()
    })())
}

/// `hipMemsetAsync`.
#[no_mangle]
pub extern "C" fn hipMemsetAsync(
    dst: *mut c_void,
    value: c_int,
    size: usize,
    s: *mut c_void,
) -> hipError_t {
    ret((|| {
        stream(s)?
            .memset(dst as u64, value as u8, size as u64)
            .hip()
    })())
}

/// `hipMemsetD32Async`.
#[no_mangle]
pub extern "C" fn hipMemsetD32Async(
    dst: *mut c_void,
    value: c_int,
    count: usize,
    s: *mut c_void,
) -> hipError_t {
    ret((|| {
        stream(s)?
            .memset_d32(dst as u64, value as u32, count as u64)
            .hip()
    })())
}

/// `hipMemcpyWithStream`: a copy ordered on stream `s`, then a wait for that stream (as
/// CLR documents it: synchronous with respect to the host).
#[no_mangle]
pub unsafe extern "C" fn hipMemcpyWithStream(
    dst: *mut c_void,
    src: *const c_void,
    size: usize,
    kind: hipMemcpyKind,
    s: *mut c_void,
) -> hipError_t {
    // SAFETY: the caller's contract is hipMemcpyAsync's.
    match unsafe { hipMemcpyAsync(dst, src, size, kind, s) } {
        e if e != hipSuccess => e,
        _ => hipStreamSynchronize(s),
    }
}

/// `hipMemcpyHtoD`: `hipMemcpy` with `hipMemcpyHostToDevice`.
#[no_mangle]
pub unsafe extern "C" fn hipMemcpyHtoD(
    dst: *mut c_void,
    src: *mut c_void,
    size: usize,
) -> hipError_t {
    // SAFETY: the caller's contract is hipMemcpy's.
    unsafe { hipMemcpy(dst, src, size, hipMemcpyHostToDevice) }
}

/// `hipMemcpyDtoH`: `hipMemcpy` with `hipMemcpyDeviceToHost`.
#[no_mangle]
pub unsafe extern "C" fn hipMemcpyDtoH(
    dst: *mut c_void,
    src: *mut c_void,
    size: usize,
) -> hipError_t {
    // SAFETY: the caller's contract is hipMemcpy's.
    unsafe { hipMemcpy(dst, src, size, hipMemcpyDeviceToHost) }
}

/// `hipMemcpyDtoD`: `hipMemcpy` with `hipMemcpyDeviceToDevice`.
#[no_mangle]
pub unsafe extern "C" fn hipMemcpyDtoD(
    dst: *mut c_void,
    src: *mut c_void,
    size: usize,
) -> hipError_t {
    // SAFETY: the caller's contract is hipMemcpy's.
    unsafe { hipMemcpy(dst, src, size, hipMemcpyDeviceToDevice) }
}

/// `hipMemcpyHtoDAsync`: `hipMemcpyAsync` with `hipMemcpyHostToDevice`.
#[no_mangle]
pub unsafe extern "C" fn hipMemcpyHtoDAsync(
    dst: *mut c_void,
    src: *mut c_void,
    size: usize,
    s: *mut c_void,
) -> hipError_t {
    // SAFETY: the caller's contract is hipMemcpyAsync's.
    unsafe { hipMemcpyAsync(dst, src, size, hipMemcpyHostToDevice, s) }
}

/// `hipMemcpyDtoHAsync`: `hipMemcpyAsync` with `hipMemcpyDeviceToHost`.
#[no_mangle]
pub unsafe extern "C" fn hipMemcpyDtoHAsync(
    dst: *mut c_void,
    src: *mut c_void,
    size: usize,
    s: *mut c_void,
) -> hipError_t {
    // SAFETY: the caller's contract is hipMemcpyAsync's.
    unsafe { hipMemcpyAsync(dst, src, size, hipMemcpyDeviceToHost, s) }
}

/// `hipMemcpyDtoDAsync`: `hipMemcpyAsync` with `hipMemcpyDeviceToDevice`.
#[no_mangle]
pub unsafe extern "C" fn hipMemcpyDtoDAsync(
    dst: *mut c_void,
    src: *mut c_void,
    size: usize,
    s: *mut c_void,
) -> hipError_t {
    // SAFETY: the caller's contract is hipMemcpyAsync's.
    unsafe { hipMemcpyAsync(dst, src, size, hipMemcpyDeviceToDevice, s) }
}

/// `hipMemsetD8Async`: `count` bytes, as `hipMemsetAsync`.
#[no_mangle]
pub extern "C" fn hipMemsetD8Async(
    dst: *mut c_void,
    value: c_uchar,
    count: usize,
    s: *mut c_void,
) -> hipError_t {
    hipMemsetAsync(dst, c_int::from(value), count, s)
}

/// `hipMemsetD8`: `count` bytes, as `hipMemset`.
#[no_mangle]
pub extern "C" fn hipMemsetD8(dst: *mut c_void, value: c_uchar, count: usize) -> hipError_t {
    hipMemset(dst, c_int::from(value), count)
}

/// `hipMemsetD16Async`: `count` 16-bit elements, as the fills the runtime has: a byte fill
/// when both bytes of `value` are equal, else a 32-bit fill of `value` twice, which needs
/// `dst` 4-byte aligned and `count` even; any other shape (CUDA asks only 2-byte
/// alignment) is NotSupported, not done.
#[no_mangle]
pub extern "C" fn hipMemsetD16Async(
    dst: *mut c_void,
    value: c_ushort,
    count: usize,
    s: *mut c_void,
) -> hipError_t {
    let [lo, hi] = value.to_ne_bytes();
    let Some(len) = count.checked_mul(2) else {
        return ret(Err(hipErrorInvalidValue));
    };
    if lo == hi {
        hipMemsetAsync(dst, c_int::from(lo), len, s)
    } else if (dst as usize % 4 == 0 && count % 2 == 0) || count == 0 {
        // (A count of 0 succeeds whatever `dst`, as the other fills.)
        let pattern = u32::from(value) * 0x1_0001;
        hipMemsetD32Async(dst, pattern as c_int, count / 2, s)
    } else {
        ret(Err(hipErrorNotSupported))
    }
}

/// `hipMemsetD16`: `hipMemsetD16Async` on the null stream, then a wait for it.
#[no_mangle]
pub extern "C" fn hipMemsetD16(dst: *mut c_void, value: c_ushort, count: usize) -> hipError_t {
    match hipMemsetD16Async(dst, value, count, std::ptr::null_mut()) {
        e if e != hipSuccess => e,
        _ => hipStreamSynchronize(std::ptr::null_mut()),
    }
}

/// `hipMemsetD32`: `hipMemsetD32Async` on the null stream, then a wait for it.
#[no_mangle]
pub extern "C" fn hipMemsetD32(dst: *mut c_void, value: c_int, count: usize) -> hipError_t {
    match hipMemsetD32Async(dst, value, count, std::ptr::null_mut()) {
        e if e != hipSuccess => e,
        _ => hipStreamSynchronize(std::ptr::null_mut()),
    }
}

/// `hipMemGetAddressRange`: base and size of the allocation holding `ptr` (kfdrt
/// `Device::allocation_at`, the size as asked for); any other address is
/// InvalidDevicePointer, as CLR 5.2's `getMemoryObject` miss.
#[no_mangle]
pub unsafe extern "C" fn hipMemGetAddressRange(
    base: *mut *mut c_void,
    size: *mut usize,
    ptr: *mut c_void,
) -> hipError_t {
    ret((|| {
        let at = allocation_at(ptr as u64)?.ok_or(hipErrorInvalidDevicePointer)?;
        if base.is_null() || size.is_null() {
            return Err(hipErrorInvalidValue);
        }
        out(base, at.base as *mut c_void)?;
        out(size, at.len as usize)
    })())
}

/// `hipMallocAsync`: from the current pool of the stream's GPU.
#[no_mangle]
pub unsafe extern "C" fn hipMallocAsync(
    p: *mut *mut c_void,
    size: usize,
    s: *mut c_void,
) -> hipError_t {
    if p.is_null() {
        return ret(Err(hipErrorInvalidValue));
    }
    // The thread's hot stream first (a handle check, no cache walk).
    ret_stream_hot(s, move |_, st| {
        let va = st.malloc_async_raw(size).hip()?;
        out(p, va as *mut c_void)
    })
}

/// `hipFreeAsync`.
#[no_mangle]
pub extern "C" fn hipFreeAsync(p: *mut c_void, s: *mut c_void) -> hipError_t {
    ret_stream_hot(s, move |_, st| st.free_ptr_async(p as u64).hip())
}

// ---- versions ---------------------------------------------------------------------------

/// `hipRuntimeGetVersion`: HIP_VERSION of the 5.2 headers this ABI follows.
#[no_mangle]
pub unsafe extern "C" fn hipRuntimeGetVersion(v: *mut c_int) -> hipError_t {
    ret(out(v, 50221153))
}

/// `hipDriverGetVersion`: HIP_VERSION of the 5.2 headers this ABI follows.
#[no_mangle]
pub unsafe extern "C" fn hipDriverGetVersion(v: *mut c_int) -> hipError_t {
    ret(out(v, 50221153))
}

// ---- peers, memory info, reset -----------------------------------------------------------

fn gpu_index(id: c_int) -> Result<usize, hipError_t> {
    let i = usize::try_from(id).map_err(|_| hipErrorInvalidDevice)?;
    if i >= device()?.gpus().len() {
        return Err(hipErrorInvalidDevice);
    }
    Ok(i)
}

/// `hipDeviceCanAccessPeer`: kfdrt `Device::can_access_peer` (0 for the same device).
#[no_mangle]
pub unsafe extern "C" fn hipDeviceCanAccessPeer(
    can: *mut c_int,
    dev: c_int,
    peer: c_int,
) -> hipError_t {
    ret((|| {
        let (d, p) = (gpu_index(dev)?, gpu_index(peer)?);
        let v = device()?.can_access_peer(d, p).hip()?;
        out(can, c_int::from(v))
    })())
}

/// `hipDeviceEnablePeerAccess`: the current GPU gets access to `peer`'s device memory
/// (`flags` must be 0).
#[no_mangle]
pub extern "C" fn hipDeviceEnablePeerAccess(peer: c_int, flags: c_uint) -> hipError_t {
    ret((|| {
        if flags != 0 {
            return Err(hipErrorInvalidValue);
        }
        let p = gpu_index(peer)?;
        device()?.enable_peer_access(current_gpu(), p).hip()
    })())
}

/// `hipDeviceDisablePeerAccess`.
#[no_mangle]
pub extern "C" fn hipDeviceDisablePeerAccess(peer: c_int) -> hipError_t {
    ret((|| {
        let p = gpu_index(peer)?;
        device()?.disable_peer_access(current_gpu(), p).hip()
    })())
}

/// `hipMemGetInfo`: the current GPU's VRAM (topology) and what this process can still
/// allocate of it (KFD `AMDKFD_IOC_AVAILABLE_MEMORY`, as ROCr's
/// `hsa_amd_agent_info HSA_AMD_AGENT_INFO_MEMORY_AVAIL` reports it to CLR).
#[no_mangle]
pub unsafe extern "C" fn hipMemGetInfo(free: *mut usize, total: *mut usize) -> hipError_t {
    ret((|| {
        if free.is_null() || total.is_null() {
            return Err(hipErrorInvalidValue);
        }
        let dev = device()?;
        let gpu = current_gpu();
        let t = dev.gpu(gpu).hip()?.node.vram_size();
        let f = dev.available_memory(gpu).map_err(|_| hipErrorUnknown)?;
        out(total, t as usize)?;
        out(free, f as usize)
    })())
}

/// `hipDeviceReset`: waits for the current GPU's work, then destroys its streams, frees
/// the `hipMalloc`/`hipHostMalloc`/`hipExtMallocWithFlags` memory and registrations made
/// on it and unloads the code objects loaded on it (hipcc-registered kernels load again
/// at their next launch). Events, memory pools, managed memory and VMM objects are
/// device-wide in kfdrt and are kept.
#[no_mangle]
pub extern "C" fn hipDeviceReset() -> hipError_t {
    ret((|| {
        device()?;
        let gpu = current_gpu();
        // A failed stream's error is not the reset's: the reset discards that state.
        let _ = hipDeviceSynchronize();
        STREAMS.retain(|s| {
            let keep = s.gpu_index() != gpu;
            if !keep {
                // Before its removal: see `remove_stream`.
                s.close_idle_predicates();
            }
            keep
        });
        drop_hot();
        with_tls(|t| *t.streams.borrow_mut() = Cache::new());
        let mut m = buffers();
        m.retain(|_, b| b.gpu_index() != gpu);
        lock(&IPC_EXPORTS).retain(|va, _| m.contains_key(va));
        lock(&HOST_FLAGS).retain(|va, _| m.contains_key(va));
        drop(m);
        crate::kernel::reset_gpu(gpu);
        Ok(())
    })())
}

/// The blob of a `hipIpcMemHandle_t`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct hipIpcMemHandle_t {
    /// Opaque bytes.
    pub reserved: [c_char; 64],
}

/// The dmabuf exports of this library's buffers, by buffer address: open until the
/// buffer is freed (`hipFree` drops them with the buffer).
static IPC_EXPORTS: Mutex<BTreeMap<u64, kfdrt::IpcExport>> = Mutex::new(BTreeMap::new());

/// Buffers of other processes opened here, by base address: the mapping, the exporter's
/// identity (the handle without its offset) and how many opens are not yet closed.
type IpcOpen = (kfdrt::IpcMapping, ([u8; 40], usize), usize);
static IPC_OPEN: Mutex<BTreeMap<u64, IpcOpen>> = Mutex::new(BTreeMap::new());

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// `hipIpcGetMemHandle`: a handle of `ptr` (the base of, or an address inside, a
/// `hipMalloc`/`hipHostMalloc`/`hipExtMallocWithFlags` buffer) for another process's
/// `hipIpcOpenMemHandle` (kfdrt `Device::ipc_export`: the buffer's dmabuf, kept open
/// here until the buffer is freed).
#[no_mangle]
pub unsafe extern "C" fn hipIpcGetMemHandle(
    handle: *mut hipIpcMemHandle_t,
    ptr: *mut c_void,
) -> hipError_t {
    ret((|| {
        if handle.is_null() || ptr.is_null() {
            return Err(hipErrorInvalidValue);
        }
        let a = ptr as u64;
        let base = allocation_at(a)?.ok_or(hipErrorInvalidDevicePointer)?.base;
        let m = buffers();
        let b = m.get(&base).ok_or(hipErrorInvalidDevicePointer)?;
        let mut ex = lock(&IPC_EXPORTS);
        let e = match ex.entry(base) {
            std::collections::btree_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::btree_map::Entry::Vacant(v) => {
                v.insert(device()?.ipc_export(b).hip()?)
            }
        };
        let h = e.handle(a).hip()?;
        out(
            handle,
            hipIpcMemHandle_t {
                reserved: h.reserved.map(|b| b as c_char),
            },
        )
    })())
}

/// `hipIpcOpenMemHandle`: maps the buffer of another process's handle on the current
/// GPU and returns the exported address's counterpart here. Opening a buffer again
/// returns the same mapping (counted; each open needs a close). `flags` must be
/// `hipIpcMemLazyEnablePeerAccess` (0). Errors as CLR's: a forged or stale handle is
/// `hipErrorInvalidDevicePointer`, an all-zero one `hipErrorInvalidValue`.
#[no_mangle]
pub unsafe extern "C" fn hipIpcOpenMemHandle(
    ptr: *mut *mut c_void,
    handle: hipIpcMemHandle_t,
    flags: c_uint,
) -> hipError_t {
    ret((|| {
        if ptr.is_null() || flags != hipIpcMemLazyEnablePeerAccess {
            return Err(hipErrorInvalidValue);
        }
        let h = kfdrt::IpcMemHandle {
            reserved: handle.reserved.map(|b| b as u8),
        };
        let mut exporter = [0u8; 40];
        exporter.copy_from_slice(&h.reserved[..40]);
        let id = (exporter, current_gpu());
        let mut open = lock(&IPC_OPEN);
        let p = match open.values_mut().find(|(_, i, _)| *i == id) {
            Some((m, _, n)) if h.offset() < m.len() as u64 => {
                *n += 1;
                m.base() + h.offset()
            }
            _ if h.reserved == [0; 64] => return Err(hipErrorInvalidValue),
            _ => {
                let m = device()?.ipc_open(id.1, &h).map_err(|e| match e.kind() {
                    ErrorKind::InvalidValue => hipErrorInvalidDevicePointer,
                    _ => map_err(&e),
                })?;
                let p = m.ptr();
                open.insert(m.base(), (m, id, 1));
                p
            }
        };
        out(ptr, p as *mut c_void)
    })())
}

/// `hipIpcCloseMemHandle`: `ptr` from `hipIpcOpenMemHandle`; the last close unmaps, after
/// the current GPU's null stream (as CLR); an unknown pointer is `hipErrorInvalidHandle`.
#[no_mangle]
pub extern "C" fn hipIpcCloseMemHandle(ptr: *mut c_void) -> hipError_t {
    ret((|| {
        if ptr.is_null() {
            return Err(hipErrorInvalidValue);
        }
        // Work on the null stream may still use the memory (CLR finishes it too).
        with_stream(std::ptr::null_mut(), |st| st.synchronize().hip())?;
        let base = allocation_at(ptr as u64)?
            .ok_or(hipErrorInvalidHandle)?
            .base;
        let mut open = lock(&IPC_OPEN);
        let e = open.get_mut(&base).ok_or(hipErrorInvalidHandle)?;
        e.2 -= 1;
        if e.2 == 0 {
            open.remove(&base);
        }
        Ok(())
    })())
}

/// `hipIpcEventHandle_t`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct hipIpcEventHandle_t {
    /// Opaque bytes.
    pub reserved: [c_char; 64],
}

/// `hipIpcGetEventHandle`: the handle of an event created with `hipEventInterprocess`
/// (kfdrt `IpcEvent::handle`); another event is `hipErrorInvalidValue`.
#[no_mangle]
pub unsafe extern "C" fn hipIpcGetEventHandle(
    handle: *mut hipIpcEventHandle_t,
    e: *mut c_void,
) -> hipError_t {
    ret((|| {
        if handle.is_null() {
            return Err(hipErrorInvalidValue);
        }
        let h = with_event(e, |ev| match &**ev {
            HipEvent::Ipc(ev) => ev.handle().hip(),
            HipEvent::Local(_) => Err(hipErrorInvalidValue),
        })?;
        out(
            handle,
            hipIpcEventHandle_t {
                reserved: h.reserved.map(|b| b as c_char),
            },
        )
    })())
}

/// `hipIpcOpenEventHandle`: an event of this process that tracks another process's
/// interprocess event (record, query, synchronize, `hipStreamWaitEvent`; destroy with
/// `hipEventDestroy`). A forged or stale handle is `hipErrorInvalidValue`.
#[no_mangle]
pub unsafe extern "C" fn hipIpcOpenEventHandle(
    e: *mut *mut c_void,
    handle: hipIpcEventHandle_t,
) -> hipError_t {
    ret((|| {
        if e.is_null() {
            return Err(hipErrorInvalidValue);
        }
        let h = kfdrt::IpcMemHandle {
            reserved: handle.reserved.map(|b| b as u8),
        };
        let ev = device()?.ipc_open_event(current_gpu(), &h).hip()?;
        out(e, register(&EVENTS, HipEvent::Ipc(ev))?)
    })())
}

// ---- not modelled yet: explicit hipErrorNotSupported -------------------------------------
//
// The `_spt` forms of calls whose plain forms this library does not have (2D/3D copies and
// sets, arrays, cooperative launches): exported so that a per-thread-stream program loads,
// and failing clearly when it calls them.

macro_rules! not_supported {
    ($($name:ident),* $(,)?) => {$(
        #[doc = concat!("`", stringify!($name), "`: not implemented, hipErrorNotSupported.")]
        #[no_mangle]
        pub extern "C" fn $name() -> hipError_t {
            ret(Err(hipErrorNotSupported))
        }
    )*};
}

not_supported!(
    hipLaunchCooperativeKernel_spt,
    hipMemcpy2D_spt,
    hipMemcpy2DToArray_spt,
    hipMemcpy2DFromArray_spt,
    hipMemcpy3D_spt,
    hipMemset2D_spt,
    hipMemset3D_spt,
);
