//! `kfdrt-preload`: an `LD_PRELOAD` library that serves `/dev/kfd`, its DRM render nodes
//! and the KFD sysfs topology from an in-process emulated device (`kfd-emu`), so that
//! unmodified programs (rocminfo, ROCr with libhsakmt, CLR) run on it.
//!
//! - Device files: opening `/dev/kfd` or `/dev/dri/renderD<minor>` returns a real
//!   placeholder fd (a memfd); `ioctl`, `mmap`, `fstat`, `dup`, `fcntl(F_DUPFD*)` and
//!   `close` on it are answered by the emulator (modules `kfd_ioctl`, `drm`). `stat` and
//!   `access` of the paths report character devices as udev would create them.
//! - Sysfs: `/sys/devices/virtual/kfd/kfd/topology/...` (and the `/sys/class/kfd/kfd`
//!   alias) is served from the emulator's in-memory topology tree, and
//!   `/sys/dev/char/226:N`, `/sys/class/drm/{renderD*,card*}` from the preload's own DRM
//!   tree: `open`/`fopen` give a memfd with the file's content, `opendir`/`readdir`/
//!   `closedir` an emulated directory stream, `stat`/`access` sysfs-like answers. Nothing
//!   is written to disk.
//! - Doorbells written by the program are found by polling (module `doorbell`).
//! - Everything else passes through to the next definition (`dlsym(RTLD_NEXT)`).
//!
//! The device is chosen by `$KFDRT_EMU_DEVICE` (a `kfd-emu` device string; default `emu`)
//! and created on first use, one per process: a `fork`ed child that opens `/dev/kfd`
//! gets its own fresh device, and fds inherited from the parent fail with `EBADF` as on
//! KFD. `exec`'d children inherit `LD_PRELOAD` and so get their own device too; memory is
//! never shared between processes' devices. `$KFDRT_PRELOAD_TRACE=1` logs every
//! intercepted device/sysfs access and every request that is not modelled to stderr.
//!
//! The hooks are `extern "C"` functions exported under glibc's names; they are only
//! meant to be loaded with `LD_PRELOAD` (see `kfdrt emu-run`).

#![allow(clippy::missing_safety_doc)]

mod doorbell;
mod drm;
mod hooks;
mod ipc;
mod kfd_ioctl;
mod paths;
mod state;
mod uaccess;
mod vfd;

use std::sync::atomic::{AtomicU8, Ordering};

/// Log to stderr when `$KFDRT_PRELOAD_TRACE` is set.
pub(crate) fn trace(args: core::fmt::Arguments<'_>) {
    static ON: AtomicU8 = AtomicU8::new(2);
    let mut on = ON.load(Ordering::Relaxed);
    if on == 2 {
        on = u8::from(std::env::var_os("KFDRT_PRELOAD_TRACE").is_some_and(|v| v != "0"));
        ON.store(on, Ordering::Relaxed);
    }
    if on == 1 {
        eprintln!("kfdrt-preload[{}]: {args}", std::process::id());
    }
}
