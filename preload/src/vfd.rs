//! The virtual file descriptors: real placeholder fds (memfds) that stand for `/dev/kfd`
//! and the render nodes, so fd numbers are real and `close`/`dup` behave.

use std::sync::atomic::{AtomicU32, Ordering};

/// fds at or above this number are never virtual (opening one fails with `EMFILE`).
pub(crate) const MAX_FD: usize = 4096;

/// Per fd: 0 = not ours, else `generation << 8 | kind` (kind 1 = kfd, 2 + i = render node
/// of GPU index i). The generation names the emulated device instance, so an fd inherited
/// across `fork` is refused by the child's own device, as KFD refuses it (EBADF).
static TABLE: [AtomicU32; MAX_FD] = [const { AtomicU32::new(0) }; MAX_FD];

/// What a virtual fd stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Vfd {
    /// `/dev/kfd`.
    Kfd,
    /// `/dev/dri/renderD*` of the GPU with this index.
    Render(usize),
}

/// The entry of `fd`: what it stands for and the device generation that opened it.
pub(crate) fn get(fd: i32) -> Option<(Vfd, u32)> {
    let v = TABLE
        .get(usize::try_from(fd).ok()?)?
        .load(Ordering::Acquire);
    let gen = v >> 8;
    match v & 0xff {
        0 => None,
        1 => Some((Vfd::Kfd, gen)),
        k => Some((Vfd::Render(k as usize - 2), gen)),
    }
}

/// Record (or with `None`, forget) what `fd` stands for.
pub(crate) fn set(fd: i32, what: Option<(Vfd, u32)>) {
    let Some(slot) = usize::try_from(fd).ok().and_then(|i| TABLE.get(i)) else {
        return;
    };
    let v = match what {
        None => 0,
        Some((Vfd::Kfd, gen)) => gen << 8 | 1,
        Some((Vfd::Render(i), gen)) => gen << 8 | (i as u32 + 2),
    };
    slot.store(v, Ordering::Release);
}

/// `fd` was duplicated into `new`: the copy stands for the same file.
pub(crate) fn dup(fd: i32, new: i32) {
    set(new, get(fd));
}
