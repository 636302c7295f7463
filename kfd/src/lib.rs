//! `kfd`: the Linux KFD interface for kfdrt.
//!
//! - [`abi`]: `#[repr(C)]` ioctl argument structs, request codes and constants of
//!   `linux/kfd_ioctl.h` (up to KFD 1.22).
//! - [`ioctl`]: one thin function per ioctl returning `Result<_, KfdError>`.
//! - [`topology`]: the sysfs topology tree parser.
//! - [`Backend`]: the seam between the runtime and a device (hardware or emulated).
//! - [`HwBackend`]: the real device, `/dev/kfd` plus the DRM render nodes.
#![deny(missing_docs)]

pub mod abi;
pub mod backend;
pub mod cwsr;
pub mod error;
pub mod hw;
pub mod ioctl;
pub mod topology;

pub use backend::{Backend, BackendKind, Ioctl, MmapFile, Prot};
pub use error::KfdError;
pub use hw::HwBackend;
pub use rustix::io::Errno;
