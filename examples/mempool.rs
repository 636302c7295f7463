//! The stream-ordered allocator: allocate and free in stream order, watch the pool reuse
//! memory on the same stream, and read the pool's statistics.
//!
//! Run: `cargo run --example mempool` (KFDRT_DEVICE picks the device; the emulator when
//! there is no /dev/kfd).

use std::process::ExitCode;

use kfdrt::{Device, PoolAttr};

const MIB: usize = 1 << 20;

fn run() -> kfdrt::Result<()> {
    let dev = Device::open()?;
    let s = dev.create_stream(0)?;
    // The GPU's current pool (hipDeviceGetMemPool): where malloc_async takes memory from.
    let pool = dev.mem_pool(0)?;

    // hipMallocAsync returns an owned allocation (like cudarc's CudaSlice): free it on any
    // stream with free_async, or drop it to free it on the stream that allocated it.
    let a = s.malloc_async(MIB)?;
    s.memset(a.va(), 0xab, MIB as u64)?;
    let a_va = a.va();
    a.free_async(&s)?;
    // Freed on the same stream: the next allocation may reuse it at once, because the
    // stream runs the free before anything enqueued after it.
    let b = s.malloc_async(MIB)?;
    let (a, b_va) = (a_va, b.va());
    println!("hipMallocAsync(1 MiB) on stream s:  {a:#x}");
    println!("hipFreeAsync, then hipMallocAsync:   {b_va:#x}");
    println!(
        "  -> {}",
        if a == b_va {
            "the same address: the pool reused the freed block in stream order"
        } else {
            "a different address: the pool did not reuse the freed block"
        }
    );
    let used_live = pool.attribute(PoolAttr::UsedMemCurrent)?;
    drop(b); // hipFreeAsync on s
    s.synchronize()?;

    let mib = |v: u64| format!("{:>5.1} MiB", v as f64 / MIB as f64);
    println!("\nthe pool's statistics (hipMemPoolGetAttribute):");
    println!(
        "  UsedMemCurrent     {}  while the second block was live: bytes allocated from the pool",
        mib(used_live)
    );
    println!(
        "  UsedMemCurrent     {}  after freeAsync + synchronize: nothing is allocated",
        mib(pool.attribute(PoolAttr::UsedMemCurrent)?)
    );
    println!(
        "  UsedMemHigh        {}  the most ever allocated at once",
        mib(pool.attribute(PoolAttr::UsedMemHigh)?)
    );
    println!(
        "  ReservedMemCurrent {}  GPU memory the pool still holds; synchronize returns what \
         exceeds ReleaseThreshold ({} bytes)",
        mib(pool.attribute(PoolAttr::ReservedMemCurrent)?),
        pool.attribute(PoolAttr::ReleaseThreshold)?
    );
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mempool example: {e}");
            if e.kind() == kfdrt::ErrorKind::NoDevice {
                eprintln!("(no GPU here? KFDRT_DEVICE=emu runs on the emulated device)");
            }
            ExitCode::FAILURE
        }
    }
}
