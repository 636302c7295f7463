//! libFuzzer target `engine_sdma` (see `kfdrt_fuzz` and `fuzz/run.sh`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = kfdrt_fuzz::gen::run_sdma(data);
});
