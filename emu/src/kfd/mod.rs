//! The emulated KFD: what `drivers/gpu/drm/amd/amdkfd/kfd_*.c` does for a process, one
//! file per kernel source (process and per-GPU data, memory objects and host backing,
//! queues, events, SVM ranges, the sysfs topology).

pub(crate) mod events;
pub(crate) mod hostmem;
pub(crate) mod memory;
pub(crate) mod process;
pub(crate) mod queues;
pub(crate) mod svm;
pub(crate) mod topology;
