//! libFuzzer target `pm4_decode` (see `kfdrt_fuzz` and `fuzz/run.sh`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    kfdrt_fuzz::pm4_decode(data);
});
