//! The stream-ordered allocator: allocate and free in stream order, watch the pool reuse
//! memory on the same stream, and read the pool's statistics.
//!
//! Run: `cargo run --example mempool`

use kfdrt::{Device, PoolAttr};

fn main() -> kfdrt::Result<()> {
    let dev = Device::open()?;
    let s = dev.create_stream(0)?;
    let pool = dev.mem_pool(0)?;

    let a = s.malloc_async(1 << 20)?;
    s.memset(a, 0xab, 1 << 20)?;
    s.free_async(a)?;
    // Freed on the same stream: the next allocation may reuse it at once (stream order).
    let b = s.malloc_async(1 << 20)?;
    println!(
        "first allocation {a:#x}, second {b:#x} (reused: {})",
        a == b
    );
    s.free_async(b)?;
    s.synchronize()?;
    for attr in [
        PoolAttr::ReservedMemCurrent,
        PoolAttr::UsedMemCurrent,
        PoolAttr::UsedMemHigh,
    ] {
        println!("{attr:?} = {} bytes", pool.attribute(attr)?);
    }
    Ok(())
}
