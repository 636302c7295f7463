//! A board without resizable BAR (`emu:...[smallbar]`: the CPU sees 256 MiB of VRAM, KFD
//! reports the VRAM heap FB_PRIVATE and refuses CPU-visible VRAM): code objects load
//! through a GTT staging buffer and a GPU copy, and their kernels run.

use kfdrt::{Device, DeviceSpec, MemoryKind};

fn open(spec: &str) -> Device {
    Device::open_spec(&DeviceSpec::parse(spec).unwrap()).unwrap_or_else(|e| panic!("{spec}: {e}"))
}

fn read_u32(b: &kfdrt::Buffer, n: usize) -> Vec<u32> {
    let mut bytes = vec![0u8; n * 4];
    b.read(0, &mut bytes).unwrap();
    bytes
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

#[test]
fn small_bar_code_objects_load_through_staging_and_run() {
    for (spec, target) in [
        ("emu:mi210[smallbar]", "gfx90a"),
        ("emu:mi300x[bar=256M]", "gfx942"),
    ] {
        let dev = open(spec);
        let gpu = dev.gpu(0).unwrap();
        assert!(
            gpu.node
                .mem_banks
                .iter()
                .all(|b| b.heap_type == kfd::topology::HEAP_TYPE_FB_PRIVATE),
            "{spec}: VRAM heap is FB_PRIVATE"
        );
        // VRAM is not CPU-visible: the CPU cannot write it.
        let vram = dev.alloc(MemoryKind::Device, 0, 4096).unwrap();
        assert!(!vram.is_cpu_visible());
        assert!(vram.write(0, &[1, 2, 3, 4]).is_err());

        // Initialised globals and a relocated pointer reach VRAM through the staged copy.
        let elf = test_kernels::build("cl/globals.cl", target).unwrap();
        let m = dev.load_module(0, &elf).unwrap();
        assert!(m.staged(), "{spec}: the image was staged through GTT");
        assert_eq!(m.memory_kind(), MemoryKind::Device);
        let k = m.kernel("bump").unwrap();
        let out = dev.alloc(MemoryKind::HostPinned, 0, 4096).unwrap();
        let mut args = k.args();
        args.buffer(&out).unwrap();
        let s = dev.create_stream(0).unwrap();
        s.launch(&k, 1, 64, 0, &args).unwrap();
        s.synchronize().unwrap();
        let got = read_u32(&out, 3);
        let (counter, _) = m.global("counter").unwrap();
        assert_eq!(got[0], 42, "{spec}: counter = 41 + 1");
        assert_eq!(u64::from(got[1]) | u64::from(got[2]) << 32, counter);

        // A kernel with arguments over host memory.
        let elf = test_kernels::build("cl/vadd.cl", target).unwrap();
        let m = dev.load_module(0, &elf).unwrap();
        assert!(m.staged());
        let k = m.kernel("vadd").unwrap();
        let n = 1000usize;
        let a: Vec<f32> = (0..n).map(|i| i as f32 * 0.5).collect();
        let b: Vec<f32> = (0..n).map(|i| 3.0 - i as f32).collect();
        let (ba, bb, bc) = (
            dev.alloc(MemoryKind::HostPinned, 0, n * 4).unwrap(),
            dev.alloc(MemoryKind::HostPinned, 0, n * 4).unwrap(),
            dev.alloc(MemoryKind::HostPinned, 0, n * 4).unwrap(),
        );
        let bytes = |v: &[f32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
        ba.write(0, &bytes(&a)).unwrap();
        bb.write(0, &bytes(&b)).unwrap();
        let mut args = k.args();
        args.buffer(&ba)
            .unwrap()
            .buffer(&bb)
            .unwrap()
            .buffer(&bc)
            .unwrap();
        args.arg(&(n as u32)).unwrap();
        s.launch(&k, (n as u32).div_ceil(256), 256, 0, &args)
            .unwrap();
        s.synchronize().unwrap();
        let c = read_u32(&bc, n);
        for i in 0..n {
            assert_eq!(c[i], (a[i] + b[i]).to_bits(), "{spec}: c[{i}]");
        }
    }
}

#[test]
fn large_bar_code_objects_are_written_through_the_bar() {
    let dev = open("emu:mi210");
    let elf = test_kernels::build("cl/vadd.cl", "gfx90a").unwrap();
    let m = dev.load_module(0, &elf).unwrap();
    assert!(!m.staged());
    assert!(dev
        .alloc(MemoryKind::Device, 0, 4096)
        .unwrap()
        .is_cpu_visible());
}
