//! A board without resizable BAR (`[smallbar]`, `[bar=SIZE]`): the topology reports the
//! VRAM heap FB_PRIVATE and ALLOC_MEMORY_OF_GPU refuses CPU-visible (PUBLIC) VRAM with
//! EINVAL, as `kfd_ioctl_alloc_memory_of_gpu` does when `kfd_dev_is_large_bar` is false.

mod kfd_common;

use kfd::abi;
use kfd::topology::{HEAP_TYPE_FB_PRIVATE, HEAP_TYPE_FB_PUBLIC};
use kfd::Errno;
use kfd_common::{alloc, errno, open};

const VRAM: u32 = abi::KFD_IOC_ALLOC_MEM_FLAGS_VRAM | abi::KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE;
const PUBLIC: u32 = abi::KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC;

fn heap_types(spec: &str) -> Vec<u32> {
    let b = kfd_emu::EmuBackend::from_spec(spec).unwrap();
    kfd::Backend::topology(&b)
        .nodes
        .iter()
        .filter(|n| n.gpu_id != 0)
        .flat_map(|n| n.mem_banks.iter().map(|m| m.heap_type))
        .collect()
}

#[test]
fn small_bar_vram_is_fb_private_and_public_vram_is_refused() {
    assert_eq!(heap_types("emu:mi210[smallbar]"), [HEAP_TYPE_FB_PRIVATE]);
    assert_eq!(heap_types("emu:mi300x[bar=256M]"), [HEAP_TYPE_FB_PRIVATE]);
    assert_eq!(heap_types("emu:mi210"), [HEAP_TYPE_FB_PUBLIC]);
    // A BAR as large as the VRAM is large BAR.
    assert_eq!(
        heap_types("emu:mi210[vram=64M,bar=64M]"),
        [HEAP_TYPE_FB_PUBLIC]
    );

    let dev = open("emu:mi210[smallbar]");
    assert_eq!(
        errno(alloc(&dev, 0, 0x4000_0000, 1 << 20, VRAM | PUBLIC)),
        Errno::INVAL,
        "PUBLIC VRAM on a small-BAR GPU"
    );
    alloc(&dev, 0, 0x4000_0000, 1 << 20, VRAM).expect("invisible VRAM is allowed");

    let dev = open("emu:mi210");
    alloc(&dev, 0, 0x4000_0000, 1 << 20, VRAM | PUBLIC).expect("large BAR: PUBLIC VRAM");
}

#[test]
fn bar_option_errors() {
    for bad in [
        "emu:mi210[bar=0]",
        "emu:mi210[bar=12345]",
        "emu:mi210[bar=x]",
    ] {
        let e = match kfd_emu::EmuBackend::from_spec(bad) {
            Ok(_) => panic!("{bad} accepted"),
            Err(e) => e.to_string(),
        };
        assert!(e.contains("bar="), "{bad}: {e}");
    }
}
