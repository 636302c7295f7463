//! Runs arbitrary bytes as the rings of an AQL, a PM4 and an SDMA queue on the emulated
//! GPU's engines (bounded time per input); the engines must never panic or hang.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    kfd_emu::engine::fuzz_ring(data);
});
