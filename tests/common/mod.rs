//! Helpers shared by the runtime integration tests.
#![allow(dead_code)]

use std::time::{Duration, Instant};

use std::sync::atomic::Ordering;

use kfdrt::{Buffer, Device, DeviceSpec, MemoryKind, Stream, StreamFlags, WaitCompare};

/// Open the device for a test: the emulated device `spec` (`emu:PRESET...`), or the real
/// GPU when `KFDRT_DEVICE=hw` (the same tests then run on hardware through the same
/// `Backend` seam; tests that need more GPUs than the machine has fail to find them).
///
/// `KFDRT_DEVICE=emu:PRESET` (a plain preset name) runs the test on that preset instead of
/// the one it names, keeping the GPU count and options (`emu:mi300x*2` becomes
/// `emu:PRESET*2`), so every test runs on every preset.
pub fn emu(spec: &str) -> Device {
    let spec = match std::env::var("KFDRT_DEVICE") {
        Ok(v) if v == "hw" => "hw".to_string(),
        Ok(v) if preset_override(&v).is_some() => {
            let p = preset_override(&v).unwrap_or_default();
            let body = spec.strip_prefix("emu:").unwrap_or(spec);
            let parts: Vec<String> = body
                .split(',')
                .map(|g| {
                    let cut = g.find(['*', '[']).unwrap_or(g.len());
                    format!("{p}{}", &g[cut..])
                })
                .collect();
            format!("emu:{}", parts.join(","))
        }
        _ => spec.to_string(),
    };
    Device::open_spec(&DeviceSpec::parse(&spec).unwrap())
        .unwrap_or_else(|e| panic!("open {spec}: {e}"))
}

/// Like [`emu`], for a test whose expectations are those of the preset it names (e.g. a
/// CU count): a `KFDRT_DEVICE=emu:PRESET` override does not apply.
pub fn emu_exact(spec: &str) -> Device {
    let spec = match std::env::var("KFDRT_DEVICE") {
        Ok(v) if v == "hw" => "hw".to_string(),
        _ => spec.to_string(),
    };
    Device::open_spec(&DeviceSpec::parse(&spec).unwrap())
        .unwrap_or_else(|e| panic!("open {spec}: {e}"))
}

/// The preset of `KFDRT_DEVICE=emu:PRESET` when it names one plain preset.
fn preset_override(v: &str) -> Option<&str> {
    let p = v.strip_prefix("emu:")?;
    (!p.is_empty() && p.chars().all(|c| c.is_ascii_alphanumeric())).then_some(p)
}

/// `len` pseudo-random bytes (xorshift32), a different sequence per `seed`.
pub fn pattern(len: usize, seed: u32) -> Vec<u8> {
    let mut x = seed.wrapping_mul(2_654_435_761) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        })
        .collect()
}

/// A signal-memory buffer for stream memory ops.
/// A target whose CP access from GPU 0 faults: VRAM of GPU 1 (the device needs two GPUs),
/// which GPU 0 has no peer access to. An allocation, so the runtime passes the access on
/// (an address in no allocation is refused before the GPU sees it).
pub fn vram_gpu0_cannot_reach(dev: &Device) -> Buffer {
    dev.alloc(MemoryKind::Device, 1, 4096)
        .expect("alloc on GPU 1")
}

pub fn signal_mem(dev: &Device, bytes: usize) -> Buffer {
    dev.alloc(MemoryKind::Signal, 0, bytes)
        .expect("alloc signal memory")
}

/// A non-blocking stream on GPU `gpu` (`hipStreamCreateWithFlags(hipStreamNonBlocking)`).
pub fn non_blocking(dev: &Device, gpu: usize) -> Stream {
    dev.create_stream_with_flags(gpu, StreamFlags::NON_BLOCKING)
        .expect("create a non-blocking stream")
}

/// A word of signal memory that holds streams back until the test opens it.
pub struct Gate(Buffer);

impl Gate {
    /// A closed gate (the word is 0).
    pub fn new(dev: &Device) -> Gate {
        Gate(signal_mem(dev, 4096))
    }

    /// Hold `s`'s later work until the gate opens (a waitValue32 for the word >= 1).
    pub fn hold(&self, s: &Stream) {
        s.wait_value32(self.0.va(), 1, WaitCompare::Gte, u32::MAX)
            .expect("enqueue the gate's wait");
    }

    /// Open the gate: held streams run on.
    pub fn open(&self) {
        self.0
            .atomic_u32(0)
            .expect("gate word")
            .store(1, Ordering::Release);
    }
}

/// Poll `f` until true; panic with `what` after 20 s (a hang becomes a failure).
pub fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let t = Instant::now();
    while !f() {
        if t.elapsed() > Duration::from_secs(20) {
            panic!("timed out waiting for {what}");
        }
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// Give the device time to do what it must not do (the assertion after this checks it
/// did not happen); the outcome never depends on this duration.
pub fn settle() {
    std::thread::sleep(Duration::from_millis(30));
}
