//! `kfd-emu`: the emulated AMD GPU behind [`kfd::Backend`].
#![deny(missing_docs)]

pub mod engine;
pub mod gpumem;
