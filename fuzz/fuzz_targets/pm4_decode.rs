//! Runs every pm4 decoder and the disassembler on arbitrary bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    pm4::fuzz_decode_all(data);
});
