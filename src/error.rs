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
/// Two words (the payload is boxed, or a static for the errors of polling calls such as
/// a query's NotReady, which allocate nothing): `Result<()>` and `Result<u64>` are
/// returned in registers, so the enqueue calls move no error-sized value around.
pub struct Error(Repr);

enum Repr {
    Boxed(Box<ErrorInner>),
    Static(&'static ErrorInner),
}

/// An error without a source, built at compile time: [`Error::from_static`] makes it an
/// [`Error`] without allocating.
pub(crate) struct StaticError(ErrorInner);

impl StaticError {
    /// A static error of `kind` raised by `call`.
    pub(crate) const fn new(kind: ErrorKind, call: &'static str, message: &'static str) -> Self {
        StaticError(ErrorInner {
            kind,
            call,
            message: Cow::Borrowed(message),
            source: None,
        })
    }
}

#[derive(Debug)]
struct ErrorInner {
    kind: ErrorKind,
    call: &'static str,
    message: Cow<'static, str>,
    source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let e = self.inner();
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
        Error(Repr::Boxed(Box::new(ErrorInner {
            kind,
            call,
            message: message.into(),
            source: None,
        })))
    }
    /// The error `e` (no allocation).
    #[inline]
    pub(crate) const fn from_static(e: &'static StaticError) -> Self {
        Error(Repr::Static(&e.0))
    }
    fn inner(&self) -> &ErrorInner {
        match &self.0 {
            Repr::Boxed(b) => b,
            Repr::Static(s) => s,
        }
    }
    /// Attach the underlying cause.
    pub fn with_source(self, source: impl std::error::Error + Send + Sync + 'static) -> Self {
        let mut b = match self.0 {
            Repr::Boxed(b) => b,
            Repr::Static(s) => Box::new(ErrorInner {
                kind: s.kind,
                call: s.call,
                message: s.message.clone(),
                source: None,
            }),
        };
        b.source = Some(Box::new(source));
        Error(Repr::Boxed(b))
    }
    /// The HIP-like class.
    pub fn kind(&self) -> ErrorKind {
        self.inner().kind
    }
    /// The kfdrt call that failed.
    pub fn call(&self) -> &'static str {
        self.inner().call
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
        let e = self.inner();
        write!(f, "{}: {:?}: {}", e.call, e.kind, e.message)
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.inner()
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

    /// The enqueue calls return `Result<()>` / `Result<u64>`: two words (returned in
    /// registers), the error payload behind a pointer.
    #[test]
    fn results_are_two_words() {
        assert_eq!(size_of::<Error>(), 2 * size_of::<usize>());
        assert_eq!(size_of::<Result<()>>(), 2 * size_of::<usize>());
        assert_eq!(size_of::<Result<u64>>(), 2 * size_of::<usize>());
        let e = Error::new(ErrorKind::NotReady, "call", "msg").with_source(std::fmt::Error);
        assert_eq!((e.kind(), e.call()), (ErrorKind::NotReady, "call"));
        assert_eq!(e.to_string(), "call: NotReady: msg");
        assert!(std::error::Error::source(&e).is_some());
    }

    /// A static error reads like a boxed one and takes a source like one.
    #[test]
    fn static_errors() {
        static E: StaticError = StaticError::new(ErrorKind::NotReady, "q", "pending");
        let e = Error::from_static(&E);
        assert_eq!((e.kind(), e.call()), (ErrorKind::NotReady, "q"));
        assert_eq!(e.to_string(), "q: NotReady: pending");
        assert!(std::error::Error::source(&e).is_none());
        let e = e.with_source(std::fmt::Error);
        assert_eq!(e.to_string(), "q: NotReady: pending");
        assert!(std::error::Error::source(&e).is_some());
    }
}
