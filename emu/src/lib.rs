//! kfd-emu: emulated AMD GPU (placeholder until issue 4 lands).
