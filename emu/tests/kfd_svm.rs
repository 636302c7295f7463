//! SVM: SET_ATTR/GET_ATTR validation, range split and merge, GET_ATTR intersection rules,
//! PREFETCH_LOC with VRAM capacity accounting, GPU access through the emulator's windows.

mod kfd_common;

use kfd::abi::{self, SvmAttribute};
use kfd::{ioctl, Errno, KfdError};
use kfd_common::{alloc, errno, gpu_map, open, Dev};

const P: u64 = 4096;
const MIB: u64 = 1 << 20;

/// Anonymous read-write memory, 2 MiB aligned.
struct Host {
    raw: *mut core::ffi::c_void,
    raw_len: usize,
    base: u64,
}

impl Host {
    fn new(len: u64) -> Host {
        let raw_len = (len + 2 * MIB) as usize;
        // SAFETY: a fresh private anonymous mapping.
        let raw = unsafe {
            rustix::mm::mmap_anonymous(
                core::ptr::null_mut(),
                raw_len,
                rustix::mm::ProtFlags::READ | rustix::mm::ProtFlags::WRITE,
                rustix::mm::MapFlags::PRIVATE,
            )
        }
        .unwrap();
        let base = (raw as u64).div_ceil(2 * MIB) * 2 * MIB;
        Host { raw, raw_len, base }
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        // SAFETY: ours.
        unsafe { rustix::mm::munmap(self.raw, self.raw_len).unwrap() };
    }
}

fn attr(type_: u32, value: u32) -> SvmAttribute {
    SvmAttribute { type_, value }
}

fn set(dev: &Dev, start: u64, size: u64, attrs: &[SvmAttribute]) -> Result<(), KfdError> {
    let mut a = attrs.to_vec();
    ioctl::svm(dev.b(), abi::KFD_IOCTL_SVM_OP_SET_ATTR, start, size, &mut a)
}

fn get(
    dev: &Dev,
    start: u64,
    size: u64,
    attrs: &[SvmAttribute],
) -> Result<Vec<SvmAttribute>, KfdError> {
    let mut a = attrs.to_vec();
    ioctl::svm(dev.b(), abi::KFD_IOCTL_SVM_OP_GET_ATTR, start, size, &mut a)?;
    Ok(a)
}

fn get1(dev: &Dev, start: u64, size: u64, type_: u32) -> u32 {
    get(dev, start, size, &[attr(type_, 0)]).unwrap()[0].value
}

#[test]
fn argument_errors() {
    let dev = open("emu:mi300x");
    let h = Host::new(4 * MIB);
    let g = dev.gpus[0];
    let ok = [attr(abi::KFD_IOCTL_SVM_ATTR_ACCESS, g)];
    assert_eq!(
        errno(set(&dev, h.base + 12, P, &ok)),
        Errno::INVAL,
        "unaligned start"
    );
    assert_eq!(
        errno(set(&dev, h.base, P + 1, &ok)),
        Errno::INVAL,
        "unaligned size"
    );
    assert_eq!(errno(set(&dev, h.base, 0, &ok)), Errno::INVAL, "size 0");
    assert_eq!(errno(set(&dev, 0, P, &ok)), Errno::INVAL, "address 0");
    let mut a = ok.to_vec();
    assert_eq!(
        errno(ioctl::svm(dev.b(), 7, h.base, P, &mut a)),
        Errno::INVAL,
        "unknown op"
    );
    assert_eq!(
        errno(set(&dev, h.base, P, &[attr(99, 0)])),
        Errno::INVAL,
        "unknown attribute"
    );
    assert_eq!(
        errno(set(
            &dev,
            h.base,
            P,
            &[attr(abi::KFD_IOCTL_SVM_ATTR_ACCESS, 0x4242)]
        )),
        Errno::INVAL
    );
    assert_eq!(
        errno(set(
            &dev,
            h.base,
            P,
            &[attr(abi::KFD_IOCTL_SVM_ATTR_NO_ACCESS, 0)]
        )),
        Errno::INVAL
    );
    assert_eq!(
        errno(set(
            &dev,
            h.base,
            P,
            &[attr(
                abi::KFD_IOCTL_SVM_ATTR_PREFETCH_LOC,
                abi::KFD_IOCTL_SVM_LOCATION_UNDEFINED
            )]
        )),
        Errno::INVAL,
        "PREFETCH_LOC must be a GPU or system memory"
    );
    set(
        &dev,
        h.base,
        P,
        &[attr(
            abi::KFD_IOCTL_SVM_ATTR_PREFERRED_LOC,
            abi::KFD_IOCTL_SVM_LOCATION_UNDEFINED,
        )],
    )
    .unwrap();
    // Unmapped CPU memory: EFAULT, for SET and GET.
    let hole = 0x6000_0000_0000;
    assert_eq!(errno(set(&dev, hole, P, &ok)), Errno::FAULT);
    assert_eq!(errno(get(&dev, hole, P, &ok)), Errno::FAULT);
    // GET_ATTR does not take ACCESS_IN_PLACE / NO_ACCESS, nor unknown GPUs.
    assert_eq!(
        errno(get(
            &dev,
            h.base,
            P,
            &[attr(abi::KFD_IOCTL_SVM_ATTR_NO_ACCESS, g)]
        )),
        Errno::INVAL
    );
    assert_eq!(
        errno(get(
            &dev,
            h.base,
            P,
            &[attr(abi::KFD_IOCTL_SVM_ATTR_ACCESS_IN_PLACE, g)]
        )),
        Errno::INVAL
    );
    assert_eq!(
        errno(get(
            &dev,
            h.base,
            P,
            &[attr(abi::KFD_IOCTL_SVM_ATTR_ACCESS, 0x4242)]
        )),
        Errno::INVAL
    );
}

#[test]
fn svm_and_bos_exclude_each_other() {
    let dev = open("emu:mi210");
    let h = Host::new(8 * MIB);
    let g = dev.gpus[0];
    set(
        &dev,
        h.base,
        2 * MIB,
        &[attr(abi::KFD_IOCTL_SVM_ATTR_ACCESS, g)],
    )
    .unwrap();
    // A BO over an SVM range: EADDRINUSE.
    assert_eq!(
        errno(alloc(
            &dev,
            0,
            h.base + MIB,
            P,
            abi::KFD_IOC_ALLOC_MEM_FLAGS_GTT
        )),
        Errno::ADDRINUSE
    );
    let mut u = abi::AllocMemoryOfGpuArgs {
        va_addr: h.base + 4 * MIB,
        size: P,
        mmap_offset: h.base,
        gpu_id: g,
        flags: abi::KFD_IOC_ALLOC_MEM_FLAGS_USERPTR,
        ..Default::default()
    };
    assert_eq!(
        errno(ioctl::alloc_memory_of_gpu(dev.b(), &mut u)),
        Errno::ADDRINUSE,
        "userptr over SVM"
    );
    // An SVM range over a GPU-mapped BO: EADDRINUSE.
    let bo = alloc(
        &dev,
        0,
        h.base + 4 * MIB,
        2 * MIB,
        abi::KFD_IOC_ALLOC_MEM_FLAGS_GTT,
    )
    .unwrap();
    gpu_map(&dev, bo.handle, &[0]).unwrap();
    assert_eq!(
        errno(set(
            &dev,
            h.base + 4 * MIB,
            P,
            &[attr(abi::KFD_IOCTL_SVM_ATTR_ACCESS, g)]
        )),
        Errno::ADDRINUSE
    );
    assert_eq!(
        errno(get(
            &dev,
            h.base + 5 * MIB,
            P,
            &[attr(abi::KFD_IOCTL_SVM_ATTR_GRANULARITY, 0)]
        )),
        Errno::ADDRINUSE
    );
}

#[test]
fn defaults_without_ranges() {
    let dev = open("emu:mi300x");
    let h = Host::new(2 * MIB);
    let g = dev.gpus[0];
    let v = get(
        &dev,
        h.base,
        MIB,
        &[
            attr(abi::KFD_IOCTL_SVM_ATTR_PREFERRED_LOC, 0),
            attr(abi::KFD_IOCTL_SVM_ATTR_PREFETCH_LOC, 0),
            attr(abi::KFD_IOCTL_SVM_ATTR_ACCESS, g),
            attr(abi::KFD_IOCTL_SVM_ATTR_SET_FLAGS, 0),
            attr(abi::KFD_IOCTL_SVM_ATTR_CLR_FLAGS, 0),
            attr(abi::KFD_IOCTL_SVM_ATTR_GRANULARITY, 0),
        ],
    )
    .unwrap();
    assert_eq!(v[0].value, abi::KFD_IOCTL_SVM_LOCATION_UNDEFINED);
    assert_eq!(v[1].value, abi::KFD_IOCTL_SVM_LOCATION_UNDEFINED);
    assert_eq!(
        v[2].type_,
        abi::KFD_IOCTL_SVM_ATTR_NO_ACCESS,
        "XNACK off: no access by default"
    );
    assert_eq!(v[3].value, kfd_emu::SVM_DEFAULT_FLAGS);
    assert_eq!(v[4].value, !kfd_emu::SVM_DEFAULT_FLAGS);
    assert_eq!(v[5].value, 9);
    // With XNACK on, every GPU may access unregistered memory, and new ranges too.
    ioctl::set_xnack_mode(dev.b(), 1).unwrap();
    assert_eq!(
        get(
            &dev,
            h.base,
            MIB,
            &[attr(abi::KFD_IOCTL_SVM_ATTR_ACCESS, g)]
        )
        .unwrap()[0]
            .type_,
        abi::KFD_IOCTL_SVM_ATTR_ACCESS
    );
    set(
        &dev,
        h.base,
        MIB,
        &[attr(abi::KFD_IOCTL_SVM_ATTR_GRANULARITY, 4)],
    )
    .unwrap();
    assert_eq!(
        get(
            &dev,
            h.base,
            MIB,
            &[attr(abi::KFD_IOCTL_SVM_ATTR_ACCESS, g)]
        )
        .unwrap()[0]
            .type_,
        abi::KFD_IOCTL_SVM_ATTR_ACCESS
    );
    assert!(dev.emu.gpu_memory().resolve(g, h.base, 8).is_ok());
}

#[test]
fn split_merge_and_intersection() {
    let dev = open("emu:mi210*2");
    let (g0, g1) = (dev.gpus[0], dev.gpus[1]);
    let h = Host::new(4 * MIB);
    let base = h.base;
    set(
        &dev,
        base,
        16 * P,
        &[
            attr(abi::KFD_IOCTL_SVM_ATTR_ACCESS, g0),
            attr(abi::KFD_IOCTL_SVM_ATTR_PREFERRED_LOC, g0),
            attr(
                abi::KFD_IOCTL_SVM_ATTR_SET_FLAGS,
                abi::KFD_IOCTL_SVM_FLAG_GPU_EXEC,
            ),
        ],
    )
    .unwrap();
    assert_eq!(dev.emu.svm_range_count(), 1);
    // Change the middle: three ranges.
    set(
        &dev,
        base + 4 * P,
        4 * P,
        &[
            attr(
                abi::KFD_IOCTL_SVM_ATTR_PREFERRED_LOC,
                abi::KFD_IOCTL_SVM_LOCATION_SYSMEM,
            ),
            attr(abi::KFD_IOCTL_SVM_ATTR_ACCESS_IN_PLACE, g1),
            attr(
                abi::KFD_IOCTL_SVM_ATTR_CLR_FLAGS,
                abi::KFD_IOCTL_SVM_FLAG_COHERENT,
            ),
            attr(abi::KFD_IOCTL_SVM_ATTR_GRANULARITY, 100),
        ],
    )
    .unwrap();
    assert_eq!(dev.emu.svm_range_count(), 3);
    // Each part on its own.
    assert_eq!(
        get1(&dev, base, 4 * P, abi::KFD_IOCTL_SVM_ATTR_PREFERRED_LOC),
        g0
    );
    assert_eq!(
        get1(
            &dev,
            base + 4 * P,
            4 * P,
            abi::KFD_IOCTL_SVM_ATTR_PREFERRED_LOC
        ),
        0
    );
    assert_eq!(
        get1(&dev, base + 4 * P, P, abi::KFD_IOCTL_SVM_ATTR_GRANULARITY),
        0x3f,
        "clamped to 0x3F"
    );
    // Over all: mixed locations are undefined, flags ANDed / NORed, granularity min.
    let all = get(
        &dev,
        base,
        16 * P,
        &[
            attr(abi::KFD_IOCTL_SVM_ATTR_PREFERRED_LOC, 0),
            attr(abi::KFD_IOCTL_SVM_ATTR_SET_FLAGS, 0),
            attr(abi::KFD_IOCTL_SVM_ATTR_CLR_FLAGS, 0),
            attr(abi::KFD_IOCTL_SVM_ATTR_GRANULARITY, 0),
            attr(abi::KFD_IOCTL_SVM_ATTR_ACCESS, g0),
            attr(abi::KFD_IOCTL_SVM_ATTR_ACCESS, g1),
        ],
    )
    .unwrap();
    assert_eq!(all[0].value, abi::KFD_IOCTL_SVM_LOCATION_UNDEFINED);
    let f = abi::KFD_IOCTL_SVM_FLAG_HOST_ACCESS | abi::KFD_IOCTL_SVM_FLAG_GPU_EXEC;
    assert_eq!(all[1].value, f, "flags set everywhere");
    assert_eq!(
        all[2].value,
        !(f | abi::KFD_IOCTL_SVM_FLAG_COHERENT),
        "flags clear everywhere"
    );
    assert_eq!(all[3].value, 9, "minimum granularity");
    assert_eq!(
        all[4].type_,
        abi::KFD_IOCTL_SVM_ATTR_ACCESS,
        "GPU 0 everywhere"
    );
    assert_eq!(
        all[5].type_,
        abi::KFD_IOCTL_SVM_ATTR_NO_ACCESS,
        "GPU 1 only in the middle"
    );
    assert_eq!(
        get(
            &dev,
            base + 5 * P,
            P,
            &[attr(abi::KFD_IOCTL_SVM_ATTR_ACCESS, g1)]
        )
        .unwrap()[0]
            .type_,
        abi::KFD_IOCTL_SVM_ATTR_ACCESS_IN_PLACE
    );
    // Make the middle like the rest again: merged back into one range.
    set(
        &dev,
        base + 4 * P,
        4 * P,
        &[
            attr(abi::KFD_IOCTL_SVM_ATTR_PREFERRED_LOC, g0),
            attr(abi::KFD_IOCTL_SVM_ATTR_NO_ACCESS, g1),
            attr(
                abi::KFD_IOCTL_SVM_ATTR_SET_FLAGS,
                abi::KFD_IOCTL_SVM_FLAG_COHERENT,
            ),
            attr(abi::KFD_IOCTL_SVM_ATTR_GRANULARITY, 9),
        ],
    )
    .unwrap();
    assert_eq!(dev.emu.svm_range_count(), 1);
    assert_eq!(
        get1(&dev, base, 16 * P, abi::KFD_IOCTL_SVM_ATTR_PREFERRED_LOC),
        g0
    );
    // A range straddling registered and unregistered pages: only registered ones count.
    assert_eq!(
        get1(
            &dev,
            base + 12 * P,
            8 * P,
            abi::KFD_IOCTL_SVM_ATTR_PREFERRED_LOC
        ),
        g0
    );
    // Extending over a gap creates a new range with default attributes.
    set(
        &dev,
        base + 20 * P,
        2 * P,
        &[attr(abi::KFD_IOCTL_SVM_ATTR_GRANULARITY, 3)],
    )
    .unwrap();
    assert_eq!(dev.emu.svm_range_count(), 2);
    assert_eq!(
        get1(
            &dev,
            base + 20 * P,
            2 * P,
            abi::KFD_IOCTL_SVM_ATTR_PREFERRED_LOC
        ),
        abi::KFD_IOCTL_SVM_LOCATION_UNDEFINED
    );
}

#[test]
fn gpu_access_through_windows() {
    let dev = open("emu:mi300x");
    let g = dev.gpus[0];
    let h = Host::new(2 * MIB);
    let mem = dev.emu.gpu_memory();
    // SAFETY: the host buffer is mapped read-write.
    unsafe { (h.base as *mut u64).add(3).write_volatile(0x77) };
    set(
        &dev,
        h.base,
        8 * P,
        &[attr(abi::KFD_IOCTL_SVM_ATTR_ACCESS, g)],
    )
    .unwrap();
    let w = mem.resolve(g, h.base + 24, 8).unwrap();
    assert_eq!(w.load_u64(h.base + 24).unwrap(), 0x77);
    w.store_u64(h.base + 32, 0x88).unwrap();
    // SAFETY: as above.
    assert_eq!(
        unsafe { (h.base as *const u64).add(4).read_volatile() },
        0x88
    );
    // Read-only for the GPU.
    set(
        &dev,
        h.base,
        8 * P,
        &[attr(
            abi::KFD_IOCTL_SVM_ATTR_SET_FLAGS,
            abi::KFD_IOCTL_SVM_FLAG_GPU_RO,
        )],
    )
    .unwrap();
    let w = mem.resolve(g, h.base, 8).unwrap();
    assert!(w.store_u64(h.base, 1).is_err());
    // Access revoked.
    set(
        &dev,
        h.base,
        8 * P,
        &[attr(abi::KFD_IOCTL_SVM_ATTR_NO_ACCESS, g)],
    )
    .unwrap();
    assert!(mem.resolve(g, h.base, 8).is_err());
    assert!(
        mem.resolve(g, h.base + 8 * P, 8).is_err(),
        "outside the range"
    );
}

#[test]
fn prefetch_migrates_with_capacity_accounting() {
    let dev = open("emu:mi210[vram=4M]");
    let d = dev.b();
    let g = dev.gpus[0];
    let h = Host::new(8 * MIB);
    for i in 0..(6 * MIB / 8) {
        // SAFETY: mapped read-write.
        unsafe {
            (h.base as *mut u64)
                .add(i as usize)
                .write_volatile(i ^ 0x5a5a)
        };
    }
    let access = attr(abi::KFD_IOCTL_SVM_ATTR_ACCESS, g);
    assert_eq!(ioctl::available_memory(d, g).unwrap(), 4 * MIB);
    set(
        &dev,
        h.base,
        2 * MIB,
        &[access, attr(abi::KFD_IOCTL_SVM_ATTR_PREFETCH_LOC, g)],
    )
    .unwrap();
    assert_eq!(dev.emu.svm_location(h.base), Some(g));
    assert_eq!(ioctl::available_memory(d, g).unwrap(), 2 * MIB);
    assert_eq!(
        get1(&dev, h.base, 2 * MIB, abi::KFD_IOCTL_SVM_ATTR_PREFETCH_LOC),
        g
    );
    // 4 MiB more do not fit: the range stays in system memory, and that is no error.
    set(
        &dev,
        h.base + 2 * MIB,
        4 * MIB,
        &[access, attr(abi::KFD_IOCTL_SVM_ATTR_PREFETCH_LOC, g)],
    )
    .unwrap();
    assert_eq!(dev.emu.svm_location(h.base + 2 * MIB), Some(0));
    assert_eq!(ioctl::available_memory(d, g).unwrap(), 2 * MIB);
    // Neither does a VRAM BO bigger than what is left.
    assert_eq!(
        errno(alloc(
            &dev,
            0,
            0x7000_0000,
            4 * MIB,
            abi::KFD_IOC_ALLOC_MEM_FLAGS_VRAM
        )),
        Errno::NOMEM
    );
    // Half the VRAM-resident range goes back to system memory.
    set(
        &dev,
        h.base,
        MIB,
        &[attr(abi::KFD_IOCTL_SVM_ATTR_PREFETCH_LOC, 0)],
    )
    .unwrap();
    assert_eq!(dev.emu.svm_location(h.base), Some(0));
    assert_eq!(dev.emu.svm_location(h.base + MIB), Some(g));
    // 1 MiB still resident; availability is reported in 2 MiB granules.
    assert_eq!(ioctl::available_memory(d, g).unwrap(), 2 * MIB);
    alloc(
        &dev,
        0,
        0x7000_0000,
        3 * MIB,
        abi::KFD_IOC_ALLOC_MEM_FLAGS_VRAM,
    )
    .map(|a| a.handle)
    .map(|h| ioctl::free_memory_of_gpu(d, h).unwrap())
    .unwrap();
    // Every byte survived, seen by the GPU and the CPU.
    let mem = dev.emu.gpu_memory();
    for i in (0..(6 * MIB / 8)).step_by(511) {
        let va = h.base + i * 8;
        assert_eq!(
            mem.resolve(g, va, 8).unwrap().load_u64(va).unwrap(),
            i ^ 0x5a5a
        );
        // SAFETY: mapped.
        assert_eq!(unsafe { (va as *const u64).read_volatile() }, i ^ 0x5a5a);
    }
    set(
        &dev,
        h.base,
        6 * MIB,
        &[attr(abi::KFD_IOCTL_SVM_ATTR_PREFETCH_LOC, 0)],
    )
    .unwrap();
    assert_eq!(ioctl::available_memory(d, g).unwrap(), 4 * MIB);
}

#[test]
fn prefetch_with_other_gpus_using_the_range_stays_in_system_memory() {
    let dev = open("emu:mi210*2");
    let (g0, g1) = (dev.gpus[0], dev.gpus[1]);
    let h = Host::new(2 * MIB);
    set(
        &dev,
        h.base,
        MIB,
        &[
            attr(abi::KFD_IOCTL_SVM_ATTR_ACCESS, g0),
            attr(abi::KFD_IOCTL_SVM_ATTR_ACCESS, g1),
            attr(abi::KFD_IOCTL_SVM_ATTR_PREFETCH_LOC, g0),
        ],
    )
    .unwrap();
    assert_eq!(
        dev.emu.svm_location(h.base),
        Some(0),
        "no XGMI hive: system memory"
    );
    set(
        &dev,
        h.base,
        MIB,
        &[
            attr(abi::KFD_IOCTL_SVM_ATTR_NO_ACCESS, g1),
            attr(abi::KFD_IOCTL_SVM_ATTR_PREFETCH_LOC, g0),
        ],
    )
    .unwrap();
    assert_eq!(dev.emu.svm_location(h.base), Some(g0));
    // Prefetch to the other GPU moves it.
    set(
        &dev,
        h.base,
        MIB,
        &[
            attr(abi::KFD_IOCTL_SVM_ATTR_ACCESS, g1),
            attr(abi::KFD_IOCTL_SVM_ATTR_NO_ACCESS, g0),
            attr(abi::KFD_IOCTL_SVM_ATTR_PREFETCH_LOC, g1),
        ],
    )
    .unwrap();
    assert_eq!(dev.emu.svm_location(h.base), Some(g1));
    assert_eq!(ioctl::available_memory(dev.b(), g0).unwrap(), 64 << 30);
}
