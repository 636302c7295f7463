//! libFuzzer target `kfd_ioctl` (see `kfdrt_fuzz` and `fuzz/run.sh`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = kfdrt_fuzz::ioctl::run(data);
});
