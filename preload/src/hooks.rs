//! The exported glibc entry points. Each one decides whether its fd or path is emulated
//! and otherwise calls the next definition (`dlsym(RTLD_NEXT)`) unchanged.

use core::ffi::{c_char, c_int, c_uint, c_ulong, c_void};
use core::ptr::NonNull;
use std::ffi::CStr;
use std::os::fd::{AsRawFd, BorrowedFd, IntoRawFd};
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicUsize, Ordering};

use kfd::{Backend, MmapFile, Prot};
use libc::{mode_t, off_t, size_t, ssize_t, FILE};
use rustix::io::Errno;

use crate::paths::{classify, Target};
use crate::state::{self, State};
use crate::uaccess::copy_to_user;
use crate::vfd::{self, Vfd};

/// The next definition of a libc function, resolved once.
macro_rules! real {
    ($name:literal, $ty:ty) => {{
        static P: AtomicUsize = AtomicUsize::new(0);
        let mut p = P.load(Ordering::Relaxed);
        if p == 0 {
            // SAFETY: dlsym with a NUL-terminated name; RTLD_NEXT finds glibc's symbol.
            p = unsafe { libc::dlsym(libc::RTLD_NEXT, concat!($name, "\0").as_ptr().cast()) }
                as usize;
            P.store(p, Ordering::Relaxed);
        }
        if p == 0 {
            None
        } else {
            // SAFETY: the symbol is glibc's function of this exact C signature.
            Some(unsafe { core::mem::transmute::<usize, $ty>(p) })
        }
    }};
}

fn set_errno(e: Errno) {
    // SAFETY: __errno_location returns this thread's errno slot.
    unsafe { *libc::__errno_location() = e.raw_os_error() };
}

fn fail<T: From<i8>>(e: Errno) -> T {
    set_errno(e);
    T::from(-1)
}

/// Run emulator code without letting a panic unwind into C (which would abort): a panic
/// becomes `EIO` and a message.
fn guarded<T>(what: &str, f: impl FnOnce() -> Result<T, Errno>) -> Result<T, Errno> {
    match std::panic::catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(_) => {
            eprintln!("kfdrt-preload: internal error (panic) in {what}; returning EIO");
            Err(Errno::IO)
        }
    }
}

/// # Safety
/// `path` must be NULL or a NUL-terminated string.
unsafe fn cstr<'a>(path: *const c_char) -> Option<&'a CStr> {
    if path.is_null() {
        None
    } else {
        // SAFETY: the caller passes a C string, as the libc function requires.
        Some(unsafe { CStr::from_ptr(path) })
    }
}

fn target_of(path: *const c_char) -> Result<Target, Errno> {
    // SAFETY: libc path arguments are C strings (or NULL, which glibc rejects as EFAULT).
    match unsafe { cstr(path) } {
        Some(p) => classify(p),
        None => Ok(Target::Pass),
    }
}

/// The device this fd belongs to, if it is a live virtual fd of this process's device.
fn device_of(fd: c_int) -> Option<Result<(&'static State, Vfd), Errno>> {
    let (what, gen) = vfd::get(fd)?;
    // kfd_chardev.c: only the process that opened /dev/kfd may use the fd (EBADF).
    Some(match state::current() {
        Some(st) if st.gen == gen => Ok((st, what)),
        _ => Err(Errno::BADF),
    })
}

/// A read-only file with `data` as content: a memfd positioned at 0.
fn open_synth(data: &[u8], flags: c_int) -> Result<c_int, Errno> {
    if flags & libc::O_ACCMODE != libc::O_RDONLY {
        return Err(Errno::ACCESS);
    }
    let fl = if flags & libc::O_CLOEXEC != 0 {
        rustix::fs::MemfdFlags::CLOEXEC
    } else {
        rustix::fs::MemfdFlags::empty()
    };
    let fd = rustix::fs::memfd_create("kfdrt-emu-file", fl)?;
    let mut off = 0;
    while off < data.len() {
        off += rustix::io::write(&fd, &data[off..])?;
    }
    rustix::fs::seek(&fd, rustix::fs::SeekFrom::Start(0))?;
    Ok(fd.into_raw_fd())
}

fn open_device(target: &Target, flags: c_int) -> Result<c_int, Errno> {
    match target {
        Target::File(data) => return open_synth(data, flags),
        // Only opendir() reads emulated directories.
        Target::Dir(_) => return Err(Errno::ISDIR),
        _ => {}
    }
    let st = state::get()?;
    let cloexec = flags & libc::O_CLOEXEC != 0;
    let (fd, what) = match *target {
        Target::Kfd => {
            let fl = if cloexec {
                rustix::fs::MemfdFlags::CLOEXEC
            } else {
                rustix::fs::MemfdFlags::empty()
            };
            (rustix::fs::memfd_create("kfdrt-emu-kfd", fl)?, Vfd::Kfd)
        }
        Target::Render(minor) => {
            let idx = st.minor_idx(minor).ok_or(Errno::NOENT)?;
            let fd = guarded("open render node", || st.emu.open_render_node(minor))?;
            if !cloexec {
                rustix::io::fcntl_setfd(&fd, rustix::io::FdFlags::empty())?;
            }
            (fd, Vfd::Render(idx))
        }
        _ => return Err(Errno::NOENT),
    };
    if fd.as_raw_fd() as usize >= vfd::MAX_FD {
        return Err(Errno::MFILE);
    }
    let raw = fd.into_raw_fd();
    vfd::set(raw, Some((what, st.gen)));
    crate::trace(format_args!("open {what:?} -> fd {raw}"));
    Ok(raw)
}

fn ret_fd(r: Result<c_int, Errno>) -> c_int {
    r.unwrap_or_else(fail)
}

// ----- open ------------------------------------------------------------------------

macro_rules! open_hook {
    ($name:ident, $sym:literal) => {
        /// Interposed `open` family member: device and topology paths are emulated.
        #[no_mangle]
        pub unsafe extern "C" fn $name(path: *const c_char, flags: c_int, mode: c_uint) -> c_int {
            match target_of(path) {
                Err(e) => fail(e),
                Ok(Target::Pass) => match real!(
                    $sym,
                    unsafe extern "C" fn(*const c_char, c_int, c_uint) -> c_int
                ) {
                    // SAFETY: forwarding the caller's arguments unchanged.
                    Some(f) => unsafe { f(path, flags, mode) },
                    None => fail(Errno::NOSYS),
                },
                Ok(t) => ret_fd(open_device(&t, flags)),
            }
        }
    };
}
open_hook!(open, "open");
open_hook!(open64, "open64");

macro_rules! open2_hook {
    ($name:ident, $sym:literal) => {
        /// Interposed fortified `open` (`_FORTIFY_SOURCE`).
        #[no_mangle]
        pub unsafe extern "C" fn $name(path: *const c_char, flags: c_int) -> c_int {
            match target_of(path) {
                Err(e) => fail(e),
                Ok(Target::Pass) => {
                    match real!($sym, unsafe extern "C" fn(*const c_char, c_int) -> c_int) {
                        // SAFETY: forwarding unchanged.
                        Some(f) => unsafe { f(path, flags) },
                        None => fail(Errno::NOSYS),
                    }
                }
                Ok(t) => ret_fd(open_device(&t, flags)),
            }
        }
    };
}
open2_hook!(__open_2, "__open_2");
open2_hook!(__open64_2, "__open64_2");

fn is_abs(path: *const c_char) -> bool {
    // SAFETY: a non-NULL libc path points at least at its NUL.
    !path.is_null() && unsafe { *path } == b'/' as c_char
}

macro_rules! openat_hook {
    ($name:ident, $sym:literal) => {
        /// Interposed `openat`: absolute device and topology paths are emulated.
        #[no_mangle]
        pub unsafe extern "C" fn $name(
            dirfd: c_int,
            path: *const c_char,
            flags: c_int,
            mode: c_uint,
        ) -> c_int {
            let t = if is_abs(path) {
                target_of(path)
            } else {
                Ok(Target::Pass)
            };
            let Some(f) = real!(
                $sym,
                unsafe extern "C" fn(c_int, *const c_char, c_int, c_uint) -> c_int
            ) else {
                return fail(Errno::NOSYS);
            };
            match t {
                Err(e) => fail(e),
                // SAFETY: forwarding unchanged.
                Ok(Target::Pass) => unsafe { f(dirfd, path, flags, mode) },
                Ok(t) => ret_fd(open_device(&t, flags)),
            }
        }
    };
}
openat_hook!(openat, "openat");
openat_hook!(openat64, "openat64");

fn fopen_common(
    path: *const c_char,
    mode: *const c_char,
    real: Option<unsafe extern "C" fn(*const c_char, *const c_char) -> *mut FILE>,
) -> *mut FILE {
    let Some(f) = real else {
        set_errno(Errno::NOSYS);
        return core::ptr::null_mut();
    };
    match target_of(path) {
        Err(e) => {
            set_errno(e);
            core::ptr::null_mut()
        }
        // SAFETY: forwarding unchanged.
        Ok(Target::Pass) => unsafe { f(path, mode) },
        Ok(t) => match open_device(
            &t,
            if matches!(t, Target::File(_)) {
                libc::O_RDONLY
            } else {
                libc::O_RDWR
            } | libc::O_CLOEXEC,
        ) {
            // SAFETY: fdopen on the fd we just opened, with the caller's mode string.
            Ok(fd) => unsafe { libc::fdopen(fd, mode) },
            Err(e) => {
                set_errno(e);
                core::ptr::null_mut()
            }
        },
    }
}

/// Interposed `fopen`.
#[no_mangle]
pub unsafe extern "C" fn fopen(path: *const c_char, mode: *const c_char) -> *mut FILE {
    fopen_common(
        path,
        mode,
        real!(
            "fopen",
            unsafe extern "C" fn(*const c_char, *const c_char) -> *mut FILE
        ),
    )
}

/// Interposed `fopen64`.
#[no_mangle]
pub unsafe extern "C" fn fopen64(path: *const c_char, mode: *const c_char) -> *mut FILE {
    fopen_common(
        path,
        mode,
        real!(
            "fopen64",
            unsafe extern "C" fn(*const c_char, *const c_char) -> *mut FILE
        ),
    )
}

/// An emulated directory stream: what `opendir` returns for a directory served from
/// memory. Only this module's `readdir`/`readdir64`/`closedir`/`rewinddir`/`dirfd`/
/// `telldir`/`seekdir` see it (they recognise it by address).
struct FakeDir {
    /// `.`, `..`, then the entries, with `d_type`.
    entries: Vec<(String, u8)>,
    next: usize,
    ent: libc::dirent64,
}

static FAKE_DIRS: std::sync::Mutex<Vec<usize>> = std::sync::Mutex::new(Vec::new());

fn fake_dir(dirp: *mut libc::DIR) -> Option<&'static mut FakeDir> {
    let dirs = FAKE_DIRS.lock().unwrap_or_else(|e| e.into_inner());
    if dirs.contains(&(dirp as usize)) {
        // SAFETY: the address is a live Box<FakeDir> we leaked in opendir and not yet
        // freed (closedir removes it from the list first); a DIR stream is used by one
        // thread at a time, as POSIX requires of callers.
        Some(unsafe { &mut *(dirp as *mut FakeDir) })
    } else {
        None
    }
}

/// Interposed `opendir`: directories served from memory get an emulated stream.
#[no_mangle]
pub unsafe extern "C" fn opendir(path: *const c_char) -> *mut libc::DIR {
    let Some(f) = real!(
        "opendir",
        unsafe extern "C" fn(*const c_char) -> *mut libc::DIR
    ) else {
        set_errno(Errno::NOSYS);
        return core::ptr::null_mut();
    };
    match target_of(path) {
        // SAFETY: forwarding unchanged.
        Ok(Target::Pass) => unsafe { f(path) },
        Ok(Target::Dir(names)) => {
            let mut entries = vec![
                (".".to_owned(), libc::DT_DIR),
                ("..".to_owned(), libc::DT_DIR),
            ];
            entries.extend(
                names
                    .into_iter()
                    .map(|(n, d)| (n, if d { libc::DT_DIR } else { libc::DT_REG })),
            );
            let d = Box::new(FakeDir {
                entries,
                next: 0,
                // SAFETY: dirent64 is plain data; all-zero is valid.
                ent: unsafe { core::mem::zeroed() },
            });
            let p = Box::into_raw(d) as usize;
            FAKE_DIRS.lock().unwrap_or_else(|e| e.into_inner()).push(p);
            p as *mut libc::DIR
        }
        Ok(_) => {
            set_errno(Errno::NOTDIR);
            core::ptr::null_mut()
        }
        Err(e) => {
            set_errno(e);
            core::ptr::null_mut()
        }
    }
}

fn fake_readdir(d: &mut FakeDir) -> *mut libc::dirent64 {
    let Some((name, ty)) = d.entries.get(d.next) else {
        return core::ptr::null_mut();
    };
    d.next += 1;
    let n = name.len().min(d.ent.d_name.len() - 1);
    for (dst, src) in d.ent.d_name.iter_mut().zip(name.as_bytes()[..n].iter()) {
        *dst = *src as c_char;
    }
    d.ent.d_name[n] = 0;
    d.ent.d_ino = 1000 + d.next as u64;
    d.ent.d_off = d.next as i64;
    d.ent.d_reclen = size_of::<libc::dirent64>() as u16;
    d.ent.d_type = *ty;
    &mut d.ent
}

macro_rules! readdir_hook {
    ($name:ident, $sym:literal, $ent:ty) => {
        /// Interposed `readdir`: emulated streams list their entries.
        #[no_mangle]
        pub unsafe extern "C" fn $name(dirp: *mut libc::DIR) -> *mut $ent {
            if let Some(d) = fake_dir(dirp) {
                // struct dirent and struct dirent64 have the same layout on 64-bit Linux.
                return fake_readdir(d).cast();
            }
            match real!($sym, unsafe extern "C" fn(*mut libc::DIR) -> *mut $ent) {
                // SAFETY: forwarding unchanged.
                Some(f) => unsafe { f(dirp) },
                None => core::ptr::null_mut(),
            }
        }
    };
}
readdir_hook!(readdir, "readdir", libc::dirent);
readdir_hook!(readdir64, "readdir64", libc::dirent64);

/// Interposed `closedir`.
#[no_mangle]
pub unsafe extern "C" fn closedir(dirp: *mut libc::DIR) -> c_int {
    let mine = {
        let mut dirs = FAKE_DIRS.lock().unwrap_or_else(|e| e.into_inner());
        match dirs.iter().position(|&p| p == dirp as usize) {
            Some(i) => {
                dirs.swap_remove(i);
                true
            }
            None => false,
        }
    };
    if mine {
        // SAFETY: the pointer came from Box::into_raw in opendir and was just removed
        // from the list, so it is freed exactly once.
        drop(unsafe { Box::from_raw(dirp as *mut FakeDir) });
        return 0;
    }
    match real!("closedir", unsafe extern "C" fn(*mut libc::DIR) -> c_int) {
        // SAFETY: forwarding unchanged.
        Some(f) => unsafe { f(dirp) },
        None => fail(Errno::NOSYS),
    }
}

/// Interposed `rewinddir`.
#[no_mangle]
pub unsafe extern "C" fn rewinddir(dirp: *mut libc::DIR) {
    if let Some(d) = fake_dir(dirp) {
        d.next = 0;
        return;
    }
    if let Some(f) = real!("rewinddir", unsafe extern "C" fn(*mut libc::DIR)) {
        // SAFETY: forwarding unchanged.
        unsafe { f(dirp) }
    }
}

/// Interposed `telldir`.
#[no_mangle]
pub unsafe extern "C" fn telldir(dirp: *mut libc::DIR) -> libc::c_long {
    if let Some(d) = fake_dir(dirp) {
        return d.next as libc::c_long;
    }
    match real!(
        "telldir",
        unsafe extern "C" fn(*mut libc::DIR) -> libc::c_long
    ) {
        // SAFETY: forwarding unchanged.
        Some(f) => unsafe { f(dirp) },
        None => fail(Errno::NOSYS),
    }
}

/// Interposed `seekdir`.
#[no_mangle]
pub unsafe extern "C" fn seekdir(dirp: *mut libc::DIR, loc: libc::c_long) {
    if let Some(d) = fake_dir(dirp) {
        d.next = usize::try_from(loc).unwrap_or(0);
        return;
    }
    if let Some(f) = real!(
        "seekdir",
        unsafe extern "C" fn(*mut libc::DIR, libc::c_long)
    ) {
        // SAFETY: forwarding unchanged.
        unsafe { f(dirp, loc) }
    }
}

/// Interposed `dirfd`: an emulated stream has no fd (`ENOTSUP`, which POSIX allows).
#[no_mangle]
pub unsafe extern "C" fn dirfd(dirp: *mut libc::DIR) -> c_int {
    if fake_dir(dirp).is_some() {
        return fail(Errno::NOTSUP);
    }
    match real!("dirfd", unsafe extern "C" fn(*mut libc::DIR) -> c_int) {
        // SAFETY: forwarding unchanged.
        Some(f) => unsafe { f(dirp) },
        None => fail(Errno::NOSYS),
    }
}

// ----- stat ------------------------------------------------------------------------

/// `/dev/kfd`'s major is dynamic on real systems; the emulated one reports 511.
const KFD_MAJOR: u32 = 511;
/// `DRM_MAJOR`.
const DRM_MAJOR: u32 = 226;

/// The `stat` of an emulated path; `None` for paths that are not ours.
fn emulated_stat(t: &Target) -> Result<Option<libc::stat>, Errno> {
    Ok(Some(match t {
        Target::Kfd => {
            state::get()?;
            char_stat(libc::makedev(KFD_MAJOR, 0))
        }
        Target::Render(minor) => {
            state::get()?.minor_idx(*minor).ok_or(Errno::NOENT)?;
            char_stat(libc::makedev(DRM_MAJOR, *minor))
        }
        // sysfs attributes report 4096 bytes whatever their content; read-only here.
        Target::File(_) => node_stat(libc::S_IFREG | 0o444, 4096),
        Target::Dir(_) => node_stat(libc::S_IFDIR | 0o555, 0),
        Target::Pass => return Ok(None),
    }))
}

fn node_stat(mode: libc::mode_t, size: i64) -> libc::stat {
    // SAFETY: `stat` is plain data; all-zero is a valid value.
    let mut s: libc::stat = unsafe { core::mem::zeroed() };
    s.st_mode = mode;
    s.st_size = size;
    s.st_nlink = 1;
    s.st_blksize = 4096;
    s.st_dev = libc::makedev(0, 21);
    s
}

fn vfd_rdev(st: &State, what: Vfd) -> libc::dev_t {
    match what {
        Vfd::Kfd => libc::makedev(KFD_MAJOR, 0),
        Vfd::Render(i) => libc::makedev(DRM_MAJOR, st.gpus.get(i).map_or(128, |g| g.render_minor)),
    }
}

/// A character device's `stat` (devtmpfs, mode 0666 as the ROCm udev rules set).
fn char_stat(rdev: libc::dev_t) -> libc::stat {
    // SAFETY: `stat` is plain data; all-zero is a valid value.
    let mut s: libc::stat = unsafe { core::mem::zeroed() };
    s.st_mode = libc::S_IFCHR | 0o666;
    s.st_rdev = rdev;
    s.st_dev = libc::makedev(0, 5);
    s.st_ino = rdev;
    s.st_nlink = 1;
    s.st_blksize = 4096;
    s
}

/// Copy a `stat` to the caller's buffer (`EFAULT` for a bad one).
fn write_stat(buf: *mut libc::stat, s: libc::stat) -> c_int {
    // SAFETY: viewing the stat struct as bytes to copy it out.
    let bytes = unsafe {
        core::slice::from_raw_parts(
            (&s as *const libc::stat).cast::<u8>(),
            size_of::<libc::stat>(),
        )
    };
    match copy_to_user(buf as u64, bytes) {
        Ok(()) => 0,
        Err(e) => fail(e),
    }
}

use core::mem::size_of;

type StatFn = unsafe extern "C" fn(*const c_char, *mut libc::stat) -> c_int;

fn stat_common(path: *const c_char, buf: *mut libc::stat, f: Option<StatFn>) -> c_int {
    let Some(f) = f else {
        return fail(Errno::NOSYS);
    };
    let t = match target_of(path) {
        Ok(t) => t,
        Err(e) => return fail(e),
    };
    match emulated_stat(&t) {
        Err(e) => fail(e),
        Ok(Some(st)) => write_stat(buf, st),
        // SAFETY: forwarding unchanged.
        Ok(None) => unsafe { f(path, buf) },
    }
}

macro_rules! stat_hook {
    ($name:ident, $sym:literal) => {
        /// Interposed `stat` family member.
        #[no_mangle]
        pub unsafe extern "C" fn $name(path: *const c_char, buf: *mut libc::stat) -> c_int {
            stat_common(path, buf, real!($sym, StatFn))
        }
    };
}
stat_hook!(stat, "stat");
stat_hook!(stat64, "stat64");
stat_hook!(lstat, "lstat");
stat_hook!(lstat64, "lstat64");

type XstatFn = unsafe extern "C" fn(c_int, *const c_char, *mut libc::stat) -> c_int;

macro_rules! xstat_hook {
    ($name:ident, $sym:literal) => {
        /// Interposed pre-2.33 `__xstat` family member.
        #[no_mangle]
        pub unsafe extern "C" fn $name(
            ver: c_int,
            path: *const c_char,
            buf: *mut libc::stat,
        ) -> c_int {
            let Some(f) = real!($sym, XstatFn) else {
                return fail(Errno::NOSYS);
            };
            let t = match target_of(path) {
                Ok(t) => t,
                Err(e) => return fail(e),
            };
            match emulated_stat(&t) {
                Err(e) => fail(e),
                Ok(Some(st)) => write_stat(buf, st),
                // SAFETY: forwarding unchanged.
                Ok(None) => unsafe { f(ver, path, buf) },
            }
        }
    };
}
xstat_hook!(__xstat, "__xstat");
xstat_hook!(__xstat64, "__xstat64");
xstat_hook!(__lxstat, "__lxstat");
xstat_hook!(__lxstat64, "__lxstat64");

fn fstat_vfd(fd: c_int, buf: *mut libc::stat) -> Option<c_int> {
    let (what, _) = vfd::get(fd)?;
    let st = state::current()?;
    Some(write_stat(buf, char_stat(vfd_rdev(st, what))))
}

macro_rules! fstat_hook {
    ($name:ident, $sym:literal) => {
        /// Interposed `fstat`: emulated device fds are character devices.
        #[no_mangle]
        pub unsafe extern "C" fn $name(fd: c_int, buf: *mut libc::stat) -> c_int {
            if let Some(r) = fstat_vfd(fd, buf) {
                return r;
            }
            match real!($sym, unsafe extern "C" fn(c_int, *mut libc::stat) -> c_int) {
                // SAFETY: forwarding unchanged.
                Some(f) => unsafe { f(fd, buf) },
                None => fail(Errno::NOSYS),
            }
        }
    };
}
fstat_hook!(fstat, "fstat");
fstat_hook!(fstat64, "fstat64");

macro_rules! fxstat_hook {
    ($name:ident, $sym:literal) => {
        /// Interposed pre-2.33 `__fxstat`.
        #[no_mangle]
        pub unsafe extern "C" fn $name(ver: c_int, fd: c_int, buf: *mut libc::stat) -> c_int {
            if let Some(r) = fstat_vfd(fd, buf) {
                return r;
            }
            match real!(
                $sym,
                unsafe extern "C" fn(c_int, c_int, *mut libc::stat) -> c_int
            ) {
                // SAFETY: forwarding unchanged.
                Some(f) => unsafe { f(ver, fd, buf) },
                None => fail(Errno::NOSYS),
            }
        }
    };
}
fxstat_hook!(__fxstat, "__fxstat");
fxstat_hook!(__fxstat64, "__fxstat64");

macro_rules! fstatat_hook {
    ($name:ident, $sym:literal) => {
        /// Interposed `fstatat`: `AT_EMPTY_PATH` on a device fd, or an absolute device or
        /// topology path, is emulated.
        #[no_mangle]
        pub unsafe extern "C" fn $name(
            dirfd: c_int,
            path: *const c_char,
            buf: *mut libc::stat,
            flags: c_int,
        ) -> c_int {
            let Some(f) = real!(
                $sym,
                unsafe extern "C" fn(c_int, *const c_char, *mut libc::stat, c_int) -> c_int
            ) else {
                return fail(Errno::NOSYS);
            };
            // SAFETY: `path` is a C string per fstatat's contract.
            let empty = !path.is_null() && unsafe { *path } == 0;
            if empty && flags & libc::AT_EMPTY_PATH != 0 {
                if let Some(r) = fstat_vfd(dirfd, buf) {
                    return r;
                }
            }
            if !is_abs(path) {
                // SAFETY: forwarding unchanged.
                return unsafe { f(dirfd, path, buf, flags) };
            }
            let t = match target_of(path) {
                Ok(t) => t,
                Err(e) => return fail(e),
            };
            match emulated_stat(&t) {
                Err(e) => fail(e),
                Ok(Some(st)) => write_stat(buf, st),
                // SAFETY: forwarding unchanged.
                Ok(None) => unsafe { f(dirfd, path, buf, flags) },
            }
        }
    };
}
fstatat_hook!(fstatat, "fstatat");
fstatat_hook!(fstatat64, "fstatat64");

/// Interposed `access`: the emulated devices are readable and writable; served sysfs
/// files are read-only.
#[no_mangle]
pub unsafe extern "C" fn access(path: *const c_char, mode: c_int) -> c_int {
    let Some(f) = real!(
        "access",
        unsafe extern "C" fn(*const c_char, c_int) -> c_int
    ) else {
        return fail(Errno::NOSYS);
    };
    let t = match target_of(path) {
        Ok(t) => t,
        Err(e) => return fail(e),
    };
    match t {
        // SAFETY: forwarding unchanged.
        Target::Pass => unsafe { f(path, mode) },
        Target::Kfd | Target::Render(_) => match emulated_stat(&t) {
            Err(e) => fail(e),
            Ok(_) if mode & libc::X_OK != 0 => fail(Errno::ACCESS),
            Ok(_) => 0,
        },
        // Served sysfs files are read-only; directories are searchable.
        Target::File(_) if mode & (libc::W_OK | libc::X_OK) != 0 => fail(Errno::ACCESS),
        Target::Dir(_) if mode & libc::W_OK != 0 => fail(Errno::ACCESS),
        Target::File(_) | Target::Dir(_) => 0,
    }
}

/// Interposed `readlink`: emulated paths are not symlinks (`EINVAL`).
#[no_mangle]
pub unsafe extern "C" fn readlink(path: *const c_char, buf: *mut c_char, size: size_t) -> ssize_t {
    let Some(f) = real!(
        "readlink",
        unsafe extern "C" fn(*const c_char, *mut c_char, size_t) -> ssize_t
    ) else {
        return fail(Errno::NOSYS);
    };
    match target_of(path) {
        // Nothing emulated is a symlink.
        Ok(Target::Kfd | Target::Render(_) | Target::File(_) | Target::Dir(_)) => {
            fail(Errno::INVAL)
        }
        // SAFETY: forwarding unchanged.
        Ok(Target::Pass) => unsafe { f(path, buf, size) },
        Err(e) => fail(e),
    }
}

// ----- fds -------------------------------------------------------------------------

/// Interposed `close`: forgets a virtual fd, then closes the placeholder.
#[no_mangle]
pub unsafe extern "C" fn close(fd: c_int) -> c_int {
    if vfd::get(fd).is_some() {
        crate::trace(format_args!("close fd {fd}"));
        vfd::set(fd, None);
    }
    match real!("close", unsafe extern "C" fn(c_int) -> c_int) {
        // SAFETY: forwarding unchanged.
        Some(f) => unsafe { f(fd) },
        None => fail(Errno::NOSYS),
    }
}

/// Interposed `dup`: the copy of a virtual fd stands for the same device.
#[no_mangle]
pub unsafe extern "C" fn dup(fd: c_int) -> c_int {
    let Some(f) = real!("dup", unsafe extern "C" fn(c_int) -> c_int) else {
        return fail(Errno::NOSYS);
    };
    // SAFETY: forwarding unchanged.
    let r = unsafe { f(fd) };
    if r >= 0 {
        vfd::dup(fd, r);
    }
    r
}

/// Interposed `dup2`.
#[no_mangle]
pub unsafe extern "C" fn dup2(fd: c_int, new: c_int) -> c_int {
    let Some(f) = real!("dup2", unsafe extern "C" fn(c_int, c_int) -> c_int) else {
        return fail(Errno::NOSYS);
    };
    // SAFETY: forwarding unchanged.
    let r = unsafe { f(fd, new) };
    if r >= 0 && fd != new {
        vfd::dup(fd, new);
    }
    r
}

/// Interposed `dup3`.
#[no_mangle]
pub unsafe extern "C" fn dup3(fd: c_int, new: c_int, flags: c_int) -> c_int {
    let Some(f) = real!("dup3", unsafe extern "C" fn(c_int, c_int, c_int) -> c_int) else {
        return fail(Errno::NOSYS);
    };
    // SAFETY: forwarding unchanged.
    let r = unsafe { f(fd, new, flags) };
    if r >= 0 {
        vfd::dup(fd, new);
    }
    r
}

macro_rules! fcntl_hook {
    ($name:ident, $sym:literal) => {
        /// Interposed `fcntl`: `F_DUPFD`/`F_DUPFD_CLOEXEC` of a virtual fd (libdrm_amdgpu
        /// duplicates the render node this way) keeps it virtual.
        #[no_mangle]
        pub unsafe extern "C" fn $name(fd: c_int, cmd: c_int, arg: c_ulong) -> c_int {
            let Some(f) = real!($sym, unsafe extern "C" fn(c_int, c_int, c_ulong) -> c_int) else {
                return fail(Errno::NOSYS);
            };
            // SAFETY: forwarding unchanged.
            let r = unsafe { f(fd, cmd, arg) };
            if r >= 0 && (cmd == libc::F_DUPFD || cmd == libc::F_DUPFD_CLOEXEC) {
                vfd::dup(fd, r);
            }
            r
        }
    };
}
fcntl_hook!(fcntl, "fcntl");
fcntl_hook!(fcntl64, "fcntl64");

/// Interposed `ioctl`: KFD ioctls on `/dev/kfd` fds and DRM ioctls on render-node fds are
/// answered by the emulator.
#[no_mangle]
pub unsafe extern "C" fn ioctl(fd: c_int, req: c_ulong, arg: *mut c_void) -> c_int {
    match device_of(fd) {
        None => match real!(
            "ioctl",
            unsafe extern "C" fn(c_int, c_ulong, *mut c_void) -> c_int
        ) {
            // SAFETY: forwarding unchanged.
            Some(f) => unsafe { f(fd, req, arg) },
            None => fail(Errno::NOSYS),
        },
        Some(Err(e)) => fail(e),
        Some(Ok((st, what))) => {
            let r = guarded("ioctl", || match what {
                Vfd::Kfd => crate::kfd_ioctl::ioctl(st, req as u32, arg as u64),
                Vfd::Render(i) => crate::drm::ioctl(st, i, req as u32, arg as u64),
            });
            crate::trace(format_args!("ioctl {what:?} req {req:#x} -> {r:?}"));
            match r {
                Ok(()) => 0,
                Err(e) => fail(e),
            }
        }
    }
}

fn mmap_device(
    (st, what): (&State, Vfd),
    fd: c_int,
    addr: *mut c_void,
    len: size_t,
    prot: c_int,
    flags: c_int,
    off: off_t,
) -> Result<*mut c_void, Errno> {
    let fixed = if flags & libc::MAP_FIXED != 0 {
        Some(NonNull::new(addr).ok_or(Errno::INVAL)?)
    } else {
        None
    };
    let mut p = Prot::empty();
    if prot & libc::PROT_READ != 0 {
        p |= Prot::READ;
    }
    if prot & libc::PROT_WRITE != 0 {
        p |= Prot::WRITE;
    }
    // SAFETY: the fd is open for the duration of the call (the program passed it).
    let borrowed = unsafe { BorrowedFd::borrow_raw(fd) };
    let file = match what {
        Vfd::Kfd => MmapFile::Kfd,
        Vfd::Render(_) => MmapFile::Render(borrowed),
    };
    guarded("mmap", || {
        // SAFETY: with MAP_FIXED the program owns the range it names (mmap's contract).
        unsafe { st.emu.mmap(file, off as u64, len, fixed, p) }
    })
    .map(|a| a.as_ptr())
}

macro_rules! mmap_hook {
    ($name:ident, $sym:literal) => {
        /// Interposed `mmap`: mappings of `/dev/kfd` (doorbells, events, MMIO) and of
        /// render nodes (buffer objects) are made by the emulator.
        #[no_mangle]
        pub unsafe extern "C" fn $name(
            addr: *mut c_void,
            len: size_t,
            prot: c_int,
            flags: c_int,
            fd: c_int,
            off: off_t,
        ) -> *mut c_void {
            match device_of(fd) {
                None => match real!(
                    $sym,
                    unsafe extern "C" fn(
                        *mut c_void,
                        size_t,
                        c_int,
                        c_int,
                        c_int,
                        off_t,
                    ) -> *mut c_void
                ) {
                    // SAFETY: forwarding unchanged.
                    Some(f) => unsafe { f(addr, len, prot, flags, fd, off) },
                    None => {
                        set_errno(Errno::NOSYS);
                        libc::MAP_FAILED
                    }
                },
                // kfd_mmap in a process without a KFD context.
                Some(Err(_)) => {
                    set_errno(Errno::INVAL);
                    libc::MAP_FAILED
                }
                Some(Ok((st, what))) => {
                    let r = mmap_device((st, what), fd, addr, len, prot, flags, off);
                    crate::trace(format_args!(
                        "mmap {what:?} off {off:#x} len {len:#x} -> {r:?}"
                    ));
                    r.unwrap_or_else(|e| {
                        set_errno(e);
                        libc::MAP_FAILED
                    })
                }
            }
        }
    };
}
mmap_hook!(mmap, "mmap");
mmap_hook!(mmap64, "mmap64");

#[allow(dead_code)]
fn _mode_is_used(_: mode_t) {}
