//! Managed memory on KFD SVM: write on the host, advise and prefetch to the GPU, let the
//! GPU write, prefetch back, and read the range attributes that record all this.
//!
//! Run: `cargo run --example managed` (KFDRT_DEVICE picks the device; the emulator when
//! there is no /dev/kfd).

use std::process::ExitCode;

use kfdrt::{AttachFlags, Device, Location, MemRangeAttribute, MemoryAdvise, WriteValueFlags};

const SIZE: usize = 4 << 20;

/// An `i32` range attribute as text: a GPU index, the CPU, or "mixed / none".
fn location(dev: &Device, ptr: u64, attr: MemRangeAttribute) -> kfdrt::Result<String> {
    let mut v = [0u8; 4];
    dev.mem_range_get_attribute(&mut v, attr, ptr, SIZE)?;
    Ok(match Location::from_device_id(i32::from_le_bytes(v)) {
        Some(Location::Host) => "the CPU (-1)".into(),
        None => "none or mixed (-2)".into(),
        Some(Location::Gpu(gpu)) => format!("GPU {gpu}"),
    })
}

fn run() -> kfdrt::Result<()> {
    let dev = Device::open()?;
    let s = dev.create_stream(0)?;
    let m = dev.malloc_managed(SIZE, AttachFlags::GLOBAL)?;
    m.write(0, &vec![7u8; SIZE])?;
    println!(
        "hipMallocManaged(4 MiB) at {:#x}; the host wrote 7 into every byte",
        m.ptr()
    );

    dev.mem_advise(
        m.ptr(),
        SIZE,
        MemoryAdvise::SetPreferredLocation,
        Location::Gpu(0),
    )?;
    dev.mem_prefetch_async(m.ptr(), SIZE, Location::Gpu(0), &s)?;
    s.write_value32(m.ptr() + 64, 0xfeed, WriteValueFlags::DEFAULT)?;
    s.synchronize()?;
    println!(
        "advised GPU 0 as preferred location, prefetched to GPU 0, the GPU wrote 0xfeed at +64"
    );
    println!(
        "  range attributes now: preferred location = {}, last prefetch location = {}",
        location(&dev, m.ptr(), MemRangeAttribute::PreferredLocation)?,
        location(&dev, m.ptr(), MemRangeAttribute::LastPrefetchLocation)?
    );

    dev.mem_prefetch_async(m.ptr(), SIZE, Location::Host, &s)?;
    s.synchronize()?;
    let last = location(&dev, m.ptr(), MemRangeAttribute::LastPrefetchLocation)?;
    println!("prefetched back to the host: last prefetch location = {last}");

    let mut b = [0u8; 68];
    m.read(0, &mut b)?;
    let (first, written) = (b[0], u32::from_le_bytes([b[64], b[65], b[66], b[67]]));
    println!(
        "read on the host: byte 0 = {first} (the host's write survived two migrations), \
         word at +64 = {written:#x} (the GPU's write)"
    );
    if (first, written) != (7, 0xfeed) {
        return Err(kfdrt::Error::new(
            kfdrt::ErrorKind::InvalidValue,
            "managed example",
            format!("read back {first} and {written:#x}, expected 7 and 0xfeed"),
        ));
    }
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("managed example: {e}");
            if e.kind() == kfdrt::ErrorKind::NoDevice {
                eprintln!("(no GPU here? KFDRT_DEVICE=emu runs on the emulated device)");
            }
            ExitCode::FAILURE
        }
    }
}
