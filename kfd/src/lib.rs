//! kfd crate
