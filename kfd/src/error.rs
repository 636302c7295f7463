//! [`KfdError`]: a failed KFD call, with the ioctl, the errno and what was asked.

use rustix::io::Errno;

/// A KFD ioctl (or a call on the KFD files) that failed.
///
/// `Display` names the ioctl, the errno and the arguments that matter, for example
/// `AMDKFD_IOC_ALLOC_MEMORY_OF_GPU failed: ENOMEM (Cannot allocate memory) [gpu_id=0x1a2b size=0x200000 ...]`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{call} failed: {} ({}) [{context}]", errno_name(*.errno), .errno)]
pub struct KfdError {
    /// The ioctl or call, e.g. `AMDKFD_IOC_CREATE_QUEUE` or `open /dev/kfd`.
    pub call: &'static str,
    /// The errno the kernel (or the emulator, for the kernel's reasons) returned.
    pub errno: Errno,
    /// What was asked: `key=value` pairs of the relevant arguments.
    pub context: String,
}

impl KfdError {
    /// A new error for `call` with `errno` and a context string.
    pub fn new(call: &'static str, errno: Errno, context: impl Into<String>) -> Self {
        KfdError {
            call,
            errno,
            context: context.into(),
        }
    }
}

/// The symbolic name of an errno (`"EINVAL"`), or `"E?"` for an unlisted one.
pub fn errno_name(e: Errno) -> &'static str {
    const NAMES: &[(Errno, &str)] = &[
        (Errno::PERM, "EPERM"),
        (Errno::NOENT, "ENOENT"),
        (Errno::SRCH, "ESRCH"),
        (Errno::INTR, "EINTR"),
        (Errno::IO, "EIO"),
        (Errno::NXIO, "ENXIO"),
        (Errno::BADF, "EBADF"),
        (Errno::AGAIN, "EAGAIN"),
        (Errno::NOMEM, "ENOMEM"),
        (Errno::ACCESS, "EACCES"),
        (Errno::FAULT, "EFAULT"),
        (Errno::BUSY, "EBUSY"),
        (Errno::EXIST, "EEXIST"),
        (Errno::NODEV, "ENODEV"),
        (Errno::INVAL, "EINVAL"),
        (Errno::NOSPC, "ENOSPC"),
        (Errno::NOTTY, "ENOTTY"),
        (Errno::RANGE, "ERANGE"),
        (Errno::NOSYS, "ENOSYS"),
        (Errno::NOTSUP, "EOPNOTSUPP"),
        (Errno::TIMEDOUT, "ETIMEDOUT"),
        (Errno::NOTRECOVERABLE, "ENOTRECOVERABLE"),
        (Errno::OVERFLOW, "EOVERFLOW"),
        (Errno::SPIPE, "ESPIPE"),
    ];
    NAMES
        .iter()
        .find(|(n, _)| *n == e)
        .map(|(_, s)| *s)
        .unwrap_or("E?")
}
