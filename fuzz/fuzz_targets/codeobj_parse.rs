//! Parses arbitrary bytes as an AMDGPU code object, offload bundle and target ID.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    codeobj::fuzz_parse(data);
});
