//! The README's first program: two streams synchronising in the GPU through
//! waitValue/writeValue, the result read back on the host.
//!
//! Run: `cargo run --example first`

use kfdrt::{Device, MemoryKind, WaitCompare, WriteValueFlags};

fn main() -> std::process::ExitCode {
    if let Err(e) = run() {
        eprintln!("error: {e}");
        return std::process::ExitCode::FAILURE;
    }
    std::process::ExitCode::SUCCESS
}

fn run() -> kfdrt::Result<()> {
    let dev = Device::open()?; // KFDRT_DEVICE, else /dev/kfd, else the emulator
    let gpu = &dev.gpus()[0];
    println!("GPU 0: {} with {} CUs", gpu.gfx_name(), gpu.cu_count());
    let flags = dev.alloc(MemoryKind::Signal, 0, 4096)?; // hipMallocSignalMemory
    let (a, b) = (dev.create_stream(0)?, dev.create_stream(0)?);
    b.wait_value32(flags.va(), 1, WaitCompare::Gte, u32::MAX)?; // b waits in the GPU ...
    b.write_value32(flags.va() + 4, 42, WriteValueFlags::DEFAULT)?;
    a.write_value32(flags.va(), 1, WriteValueFlags::DEFAULT)?; // ... until a releases it
    b.synchronize()?;
    let mut v = [0u8; 4];
    flags.read(4, &mut v)?;
    println!("b wrote {}", u32::from_le_bytes(v));
    Ok(())
}
