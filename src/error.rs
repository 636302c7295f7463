//! [`Error`]: what every fallible kfdrt call returns, with a HIP-like [`ErrorKind`] and
//! the underlying cause.

use std::borrow::Cow;
use std::fmt;

/// The HIP error class of a failure (compare `hipError_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// An argument is out of range or inconsistent (`hipErrorInvalidValue`).
    InvalidValue,
    /// A handle (stream, event, pool, ...) is not valid (`hipErrorInvalidHandle`).
    InvalidHandle,
    /// Work is still pending (`hipErrorNotReady`); not a failure for query calls.
    NotReady,
    /// The device or the emulator cannot do this (`hipErrorNotSupported`).
    NotSupported,
    /// Device or host memory is exhausted (`hipErrorOutOfMemory`).
    OutOfMemory,
    /// No usable device (`hipErrorNoDevice`).
    NoDevice,
    /// The selected device spec is malformed or names an unknown device
    /// (`hipErrorInvalidDevice`).
    InvalidDevice,
    /// A queue faulted; the stream's work is lost (`hipErrorLaunchFailure`).
    LaunchFailure,
    /// Peer access between these GPUs is already enabled
    /// (`hipErrorPeerAccessAlreadyEnabled`).
    PeerAccessAlreadyEnabled,
    /// Peer access between these GPUs was not enabled (`hipErrorPeerAccessNotEnabled`).
    PeerAccessNotEnabled,
    /// The KFD driver reported an error that maps to none of the above.
    Driver,
}

/// A kfdrt failure: the kind, the call that failed, and the underlying cause.
///
/// One pointer wide (the payload is boxed): `Result<()>` is a single word, so the
/// enqueue calls that return it on their hot path move no error-sized value around.
pub struct Error(Box<ErrorInner>);

#[derive(Debug)]
struct ErrorInner {
    kind: ErrorKind,
    call: &'static str,
    message: Cow<'static, str>,
    source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let e = &*self.0;
        f.debug_struct("Error")
            .field("kind", &e.kind)
            .field("call", &e.call)
            .field("message", &e.message)
            .field("source", &e.source)
            .finish()
    }
}

impl Error {
    /// A new error of `kind` raised by `call` with a message.
    #[cold]
    pub fn new(kind: ErrorKind, call: &'static str, message: impl Into<Cow<'static, str>>) -> Self {
        Error(Box::new(ErrorInner {
            kind,
            call,
            message: message.into(),
            source: None,
        }))
    }
    /// Attach the underlying cause.
    pub fn with_source(mut self, source: impl std::error::Error + Send + Sync + 'static) -> Self {
        self.0.source = Some(Box::new(source));
        self
    }
    /// The HIP-like class.
    pub fn kind(&self) -> ErrorKind {
        self.0.kind
    }
    /// The kfdrt call that failed.
    pub fn call(&self) -> &'static str {
        self.0.call
    }
    /// Wrap a KFD ioctl failure: errno classes map to kinds as HIP maps them (ENOMEM →
    /// OutOfMemory, EINVAL → InvalidValue, ENODEV → NoDevice, others → Driver).
    pub fn from_kfd(call: &'static str, e: kfd::KfdError) -> Self {
        let kind = match e.errno {
            kfd::Errno::NOMEM | kfd::Errno::NOSPC => ErrorKind::OutOfMemory,
            kfd::Errno::INVAL => ErrorKind::InvalidValue,
            kfd::Errno::NODEV | kfd::Errno::NOENT => ErrorKind::NoDevice,
            kfd::Errno::NOTSUP | kfd::Errno::NOSYS => ErrorKind::NotSupported,
            _ => ErrorKind::Driver,
        };
        Error::new(kind, call, e.to_string()).with_source(e)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let e = &*self.0;
        write!(f, "{}: {:?}: {}", e.call, e.kind, e.message)
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0
            .source
            .as_deref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

/// `Result` with [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

#[cfg(test)]
mod tests {
    use super::*;

    /// The enqueue calls return `Result<()>`: one word, the error payload behind a box.
    #[test]
    fn result_unit_is_one_word() {
        assert_eq!(size_of::<Result<()>>(), size_of::<usize>());
        assert_eq!(size_of::<Result<u64>>(), 2 * size_of::<usize>());
        let e = Error::new(ErrorKind::NotReady, "call", "msg").with_source(std::fmt::Error);
        assert_eq!((e.kind(), e.call()), (ErrorKind::NotReady, "call"));
        assert_eq!(e.to_string(), "call: NotReady: msg");
        assert!(std::error::Error::source(&e).is_some());
    }
}
