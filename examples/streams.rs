//! Streams, stream memory ops, events and callbacks on the default device (the emulator
//! when there is no /dev/kfd; choose with KFDRT_DEVICE, e.g. `emu:mi250x*2` or `hw`).
//!
//! Run: `cargo run --example streams`

use std::process::ExitCode;
use std::sync::atomic::Ordering;

use kfdrt::{Device, Event, EventFlags, MemoryKind, WaitCompare, WriteValueFlags};

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // The error's message (what failed and why), not a debug dump of the struct.
            eprintln!("streams example: {e}");
            if e.kind() == kfdrt::ErrorKind::NoDevice {
                eprintln!("(no GPU here? KFDRT_DEVICE=emu runs on the emulated device)");
            }
            ExitCode::FAILURE
        }
    }
}

fn run() -> kfdrt::Result<()> {
    let dev = Device::open()?;
    let gpu = &dev.gpus()[0];
    println!(
        "device: {} GPU(s); GPU 0 is {} with {} CUs",
        dev.gpus().len(),
        gpu.gfx_name(),
        gpu.cu_count()
    );

    // Signal memory: what hipStreamWaitValue/WriteValue operate on.
    let flags = dev.alloc(MemoryKind::Signal, 0, 4096)?;
    let producer = dev.create_stream(0)?;
    let consumer = dev.create_stream(0)?;

    // The consumer waits (in the command processor) until the producer writes 1.
    consumer.wait_value32(flags.va(), 1, WaitCompare::Gte, u32::MAX)?;
    consumer.write_value32(flags.va() + 4, 42, WriteValueFlags::DEFAULT)?;
    let (start, stop) = (
        dev.create_event(EventFlags::DEFAULT)?,
        dev.create_event(EventFlags::DEFAULT)?,
    );
    start.record(&consumer)?;
    consumer.add_callback(
        |status| println!("callback: consumer's work so far is done ({status:?})"),
        0,
    )?;
    stop.record(&consumer)?;

    std::thread::sleep(std::time::Duration::from_millis(5));
    println!(
        "before the producer runs: flags[1] = {}",
        flags.atomic_u32(4)?.load(Ordering::Acquire)
    );
    producer.write_value32(flags.va(), 1, WriteValueFlags::DEFAULT)?;
    consumer.synchronize()?;
    println!(
        "after: flags[1] = {}",
        flags.atomic_u32(4)?.load(Ordering::Acquire)
    );
    println!(
        "start→stop on the GPU clock: {:.3} ms",
        Event::elapsed_ms(&start, &stop)?
    );

    // A stream-ordered copy from pinned host memory into VRAM and back.
    let host = dev.alloc(MemoryKind::HostPinned, 0, 1 << 20)?;
    let vram = dev.alloc(MemoryKind::Device, 0, 1 << 20)?;
    host.write(0, b"hello from the host")?;
    producer.memcpy(vram.va(), host.va(), 1 << 20)?;
    producer.memset(host.va(), 0, 19)?;
    producer.memcpy(host.va(), vram.va(), 19)?;
    producer.synchronize()?;
    let mut back = [0u8; 19];
    host.read(0, &mut back)?;
    println!(
        "round trip through VRAM: {:?}",
        std::str::from_utf8(&back).unwrap_or("?")
    );
    if &back != b"hello from the host" {
        return Err(kfdrt::Error::new(
            kfdrt::ErrorKind::InvalidValue,
            "streams example",
            format!("read back {back:?}"),
        ));
    }
    Ok(())
}
