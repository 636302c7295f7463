//! Managed memory on KFD SVM: write on the host, prefetch to the GPU, let the GPU write,
//! prefetch back, and read the range attributes.
//!
//! Run: `cargo run --example managed`

use kfdrt::managed::{CPU_DEVICE_ID, MEM_ATTACH_GLOBAL};
use kfdrt::Device;

fn main() -> kfdrt::Result<()> {
    let dev = Device::open()?;
    let s = dev.create_stream(0)?;
    let m = dev.malloc_managed(4 << 20, MEM_ATTACH_GLOBAL)?;
    m.write(0, &vec![7u8; 4 << 20])?;
    dev.mem_prefetch_async(m.ptr(), 4 << 20, 0, &s)?;
    s.write_value32(m.ptr() + 64, 0xfeed, 0)?;
    dev.mem_prefetch_async(m.ptr(), 4 << 20, CPU_DEVICE_ID, &s)?;
    s.synchronize()?;
    let mut b = [0u8; 68];
    m.read(0, &mut b)?;
    let (first, written) = (b[0], u32::from_le_bytes([b[64], b[65], b[66], b[67]]));
    println!("byte 0 = {first} (host write survived two migrations), word at +64 = {written:#x} (GPU write)");
    assert_eq!((first, written), (7, 0xfeed));
    Ok(())
}
