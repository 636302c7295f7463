//! `kfd-emu`: the emulated AMD GPU behind [`kfd::Backend`](::kfd::Backend).
//!
//! [`EmuBackend`] is a device, not a mock: it implements every KFD ioctl of
//! [`kfd::Ioctl`](::kfd::Ioctl) with the kernel's argument checks and errno values, keeps GPU VA == CPU
//! VA, backs buffer objects with sealed memfds (so the CPU and the emulated engines see the
//! same bytes, and dmabufs work across processes), and runs command-processor and SDMA
//! engines ([`engine`]) that execute real packets from ring memory.
//!
//! ```no_run
//! use kfd::Backend;
//! let dev = kfd_emu::EmuBackend::from_spec("emu:mi300x*2,rx7900xtx").unwrap();
//! assert_eq!(dev.topology().gpu_nodes().count(), 3);
//! ```
//!
//! - Device strings: [`spec`] (`emu[:PRESET[*N][,PRESET...]]`, options in brackets).
//! - Boards: [`presets::Preset`] (`mi300x`, `mi250x`, `mi210`, `rx7900xtx`, `rx9070xt`).
//! - CWSR sizes as the kernel computes them: [`cwsr_sizes`].
//!
//! The kernel behaviour each part models is written down, with sources, in
//! `firmware-notes/kfd-{process,memory,events,queues,svm}.md`.
#![deny(missing_docs)]

pub mod engine;
pub mod gpumem;

mod backend;
mod kfd;
pub mod presets;
mod shader;
pub mod spec;
pub mod trace;

pub use crate::kfd::events::{KFD_FIRST_NONSIGNAL_EVENT_ID, UNSIGNALED_EVENT_SLOT};
pub use crate::kfd::queues::{ENOTSUPP, MAX_QUEUES_PER_DEVICE, MAX_QUEUES_PER_PROCESS};
pub use crate::kfd::svm::{
    DEFAULT_FLAGS as SVM_DEFAULT_FLAGS, DEFAULT_GRANULARITY as SVM_DEFAULT_GRANULARITY,
};
pub use backend::{EmuBackend, EmuError};
pub use presets::{cwsr_sizes, CwsrSizes, Preset};
/// Per-thread profiles of shader dispatches (`kfdrt bench`'s scaling figures).
pub mod shader_profile {
    pub use crate::shader::{set_profiling, take_profiles, DispatchProfile, ThreadProfile};
}
pub use spec::{GpuSpec, SpecError};
