//! Process-wide ioctls: version, ACQUIRE_VM, apertures, clocks, policies, scratch, trap
//! handler, XNACK, RUNTIME_ENABLE, AVAILABLE_MEMORY, DBG_TRAP.

mod kfd_common;

use std::os::fd::AsRawFd;

use kfd::abi::{self, SetMemoryPolicyArgs};
use kfd::{ioctl, Backend, Errno};
use kfd_common::{errno, open};
use kfd_emu::EmuBackend;

#[test]
fn get_version_reports_1_22() {
    let emu = EmuBackend::from_spec("emu").unwrap();
    let v = ioctl::get_version(&emu).unwrap();
    assert_eq!((v.major_version, v.minor_version), (1, 22));
}

/// KFD 1.19 CREATE_PROCESS (kfd_chardev.c `kfd_ioctl_create_process`): a primary process
/// becomes a fresh secondary once; a second call is EINVAL ("Each FD owns only one
/// kfd_process"). The emulator refuses (EOPNOTSUPP, not modelled) once the fd owns
/// resources, since it cannot keep two processes behind one backend.
#[test]
fn create_process_once_per_fd() {
    let emu = EmuBackend::from_spec("emu:mi300x").unwrap();
    ioctl::create_process(&emu).unwrap();
    assert_eq!(errno(ioctl::create_process(&emu)), Errno::INVAL);
    // The secondary process works like any other.
    let b: &dyn Backend = &emu;
    let r = b.open_render_node(128).unwrap();
    ioctl::acquire_vm(b, emu.gpu_ids()[0], r.as_raw_fd()).unwrap();

    let dev = open("emu:mi300x");
    assert_eq!(errno(ioctl::create_process(dev.b())), Errno::OPNOTSUPP);
}

/// AMDKFD_IOC_DBG_TRAP as kfd_chardev.c `kfd_ioctl_set_debug_trap` answers a process
/// nobody debugs: a pid without a KFD process is ESRCH; on the caller's own process every
/// op but ENABLE (unknown ops included) is EINVAL ("not debug enabled"); ENABLE is ENODEV
/// (kfd_dbg_trap_enable on a device without debug support; the emulator has no
/// debugger); a secondary KFD process is EOPNOTSUPP. Nothing is written back.
#[test]
fn dbg_trap_answers_as_for_an_undebugged_process() {
    let emu = EmuBackend::from_spec("emu:mi300x").unwrap();
    let me = std::process::id();
    let mut none: [u8; 0] = [];

    let mut a = abi::DbgTrapArgs::new(
        me,
        abi::DbgTrapQueryDebugEventArgs {
            exception_mask: 0x55,
            gpu_id: 7,
            queue_id: 9,
        },
    );
    let before = a;
    assert_eq!(
        errno(ioctl::dbg_trap(&emu, &mut a, &mut none)),
        Errno::INVAL
    );
    assert_eq!(a, before);

    for op in (abi::KFD_IOC_DBG_TRAP_DISABLE..=abi::KFD_IOC_DBG_TRAP_GET_DEVICE_SNAPSHOT)
        .chain([15, 0xffff_ffff])
    {
        let mut a = abi::DbgTrapArgs {
            pid: me,
            op,
            ..Default::default()
        };
        let r = ioctl::dbg_trap(&emu, &mut a, &mut none);
        assert_eq!(
            errno(r),
            Errno::INVAL,
            "op {op} ({})",
            abi::dbg_trap_op_name(op)
        );
    }

    let mut rinfo = [0u8; std::mem::size_of::<abi::RuntimeInfo>()];
    let mut en = abi::DbgTrapArgs::new(
        me,
        abi::DbgTrapEnableArgs {
            exception_mask: !0,
            rinfo_ptr: 0,
            rinfo_size: rinfo.len() as u32,
            dbg_fd: 0,
        },
    );
    let e = ioctl::dbg_trap(&emu, &mut en, &mut rinfo).unwrap_err();
    assert_eq!(e.errno, Errno::NODEV);
    assert!(e.to_string().contains("KFD_IOC_DBG_TRAP_ENABLE"), "{e}");

    // Pids with no KFD process on this device: ESRCH before any op check.
    for pid in [0, u32::MAX, me.wrapping_add(1)] {
        for op in [
            abi::KFD_IOC_DBG_TRAP_ENABLE,
            abi::KFD_IOC_DBG_TRAP_DISABLE,
            99,
        ] {
            let mut a = abi::DbgTrapArgs {
                pid,
                op,
                ..Default::default()
            };
            assert_eq!(errno(ioctl::dbg_trap(&emu, &mut a, &mut none)), Errno::SRCH);
        }
    }

    // Only the primary KFD process may be debugged.
    let sec = EmuBackend::from_spec("emu").unwrap();
    ioctl::create_process(&sec).unwrap();
    let mut d = abi::DbgTrapArgs::disable(me);
    assert_eq!(
        errno(ioctl::dbg_trap(&sec, &mut d, &mut none)),
        Errno::OPNOTSUPP
    );
}

#[test]
fn acquire_vm_rules() {
    let emu = EmuBackend::from_spec("emu:mi210*2").unwrap();
    let b: &dyn Backend = &emu;
    let ids = emu.gpu_ids();
    let r0 = b.open_render_node(128).unwrap();
    let r0b = b.open_render_node(128).unwrap();
    let r1 = b.open_render_node(129).unwrap();
    // A closed or negative fd: fget() fails, EINVAL.
    assert_eq!(errno(ioctl::acquire_vm(b, ids[0], -1)), Errno::INVAL);
    assert_eq!(errno(ioctl::acquire_vm(b, ids[0], 987_654)), Errno::INVAL);
    // Not a render node.
    let f = std::fs::File::open("/proc/self/stat").unwrap();
    assert_eq!(
        errno(ioctl::acquire_vm(b, ids[0], f.as_raw_fd())),
        Errno::INVAL
    );
    // Unknown GPU.
    assert_eq!(errno(ioctl::acquire_vm(b, 0, r0.as_raw_fd())), Errno::INVAL);
    assert_eq!(
        errno(ioctl::acquire_vm(b, 0x1_0000, r0.as_raw_fd())),
        Errno::INVAL
    );
    // Another GPU's render node.
    assert_eq!(
        errno(ioctl::acquire_vm(b, ids[0], r1.as_raw_fd())),
        Errno::INVAL
    );
    ioctl::acquire_vm(b, ids[0], r0.as_raw_fd()).unwrap();
    // Again with the same file: fine; with another file: EBUSY.
    ioctl::acquire_vm(b, ids[0], r0.as_raw_fd()).unwrap();
    assert_eq!(
        errno(ioctl::acquire_vm(b, ids[0], r0b.as_raw_fd())),
        Errno::BUSY
    );
    ioctl::acquire_vm(b, ids[1], r1.as_raw_fd()).unwrap();
}

#[test]
fn ioctls_needing_a_vm_fail_before_acquire_vm() {
    let emu = EmuBackend::from_spec("emu:mi210").unwrap();
    let b: &dyn Backend = &emu;
    let g = emu.gpu_ids()[0];
    let mut a = abi::AllocMemoryOfGpuArgs {
        va_addr: 0x2000_0000,
        size: 4096,
        gpu_id: g,
        flags: abi::KFD_IOC_ALLOC_MEM_FLAGS_GTT,
        ..Default::default()
    };
    // kfd_bind_process_to_device fails with ENODEV; some ioctls turn it into ESRCH.
    assert_eq!(errno(ioctl::alloc_memory_of_gpu(b, &mut a)), Errno::NODEV);
    assert_eq!(
        errno(ioctl::set_scratch_backing_va(b, g, 0x1000)),
        Errno::NODEV
    );
    assert_eq!(
        errno(ioctl::set_trap_handler(b, g, 0x1000, 0x2000)),
        Errno::SRCH
    );
    let mut p = SetMemoryPolicyArgs {
        gpu_id: g,
        ..Default::default()
    };
    assert_eq!(errno(ioctl::set_memory_policy(b, &mut p)), Errno::SRCH);
    let mut q = abi::CreateQueueArgs {
        gpu_id: g,
        ring_size: 4096,
        ..Default::default()
    };
    assert_eq!(errno(ioctl::create_queue(b, &mut q)), Errno::SRCH);
    // Ioctls that need no VM work.
    assert!(ioctl::available_memory(b, g).unwrap() > 0);
    assert_eq!(ioctl::get_process_apertures_new(b).unwrap().len(), 1);
}

#[test]
fn process_apertures() {
    let dev = open("emu:mi300x*2,rx9070xt");
    let b = dev.b();
    let ap = ioctl::get_process_apertures_new(b).unwrap();
    assert_eq!(ap.len(), 3);
    for (a, g) in ap.iter().zip(&dev.gpus) {
        assert_eq!(a.gpu_id, *g);
        assert_eq!(a.gpuvm_base, 1 << 21);
        assert_eq!(a.gpuvm_limit, (1 << 47) - 1);
        assert_eq!(a.lds_base, 1 << 48);
        assert_eq!(a.lds_limit, (1 << 48) | 0xffff_ffff);
        assert_eq!(a.scratch_base, 2 << 48);
        assert_eq!(a.scratch_limit, (2 << 48) | 0xffff_ffff);
    }
    // The count query, then a short array: only that many are filled.
    let mut args = abi::GetProcessAperturesNewArgs::default();
    b.ioctl(kfd::Ioctl::GetProcessAperturesNew {
        args: &mut args,
        apertures: &mut [],
    })
    .unwrap();
    assert_eq!(args.num_of_nodes, 3);
    let mut two = vec![abi::ProcessDeviceApertures::default(); 2];
    args.num_of_nodes = 2;
    b.ioctl(kfd::Ioctl::GetProcessAperturesNew {
        args: &mut args,
        apertures: &mut two,
    })
    .unwrap();
    assert_eq!(args.num_of_nodes, 2);
    assert_eq!(two[1].gpu_id, dev.gpus[1]);
    // A claimed array larger than the buffer passed faults.
    args.num_of_nodes = 3;
    assert_eq!(
        b.ioctl(kfd::Ioctl::GetProcessAperturesNew {
            args: &mut args,
            apertures: &mut two
        })
        .unwrap_err(),
        Errno::FAULT
    );
    let old = ioctl::get_process_apertures(b).unwrap();
    assert_eq!(old.num_of_nodes, 3);
    assert_eq!(old.process_apertures[2].gpu_id, dev.gpus[2]);
}

#[test]
fn old_apertures_cap_at_seven() {
    let emu = EmuBackend::from_spec("emu:rx9070xt*9").unwrap();
    assert_eq!(ioctl::get_process_apertures(&emu).unwrap().num_of_nodes, 7);
    assert_eq!(ioctl::get_process_apertures_new(&emu).unwrap().len(), 9);
}

#[test]
fn clock_counters() {
    let dev = open("emu:mi300x");
    let b = dev.b();
    let c1 = ioctl::get_clock_counters(b, dev.gpus[0]).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(2));
    let c2 = ioctl::get_clock_counters(b, dev.gpus[0]).unwrap();
    assert_eq!(c1.system_clock_freq, 1_000_000_000);
    assert!(c2.gpu_clock_counter > c1.gpu_clock_counter);
    assert!(c2.cpu_clock_counter > c1.cpu_clock_counter);
    assert!(c2.system_clock_counter >= c1.system_clock_counter + 2_000_000);
    // Unknown GPU: no error, GPU counter 0.
    let c = ioctl::get_clock_counters(b, 0x1234_5678).unwrap();
    assert_eq!(c.gpu_clock_counter, 0);
    assert!(c.cpu_clock_counter > 0);
}

#[test]
fn memory_policy_scratch_trap_handler() {
    let dev = open("emu:mi210");
    let b = dev.b();
    let g = dev.gpus[0];
    let mut p = SetMemoryPolicyArgs {
        gpu_id: g,
        default_policy: abi::KFD_IOC_CACHE_POLICY_COHERENT,
        alternate_policy: abi::KFD_IOC_CACHE_POLICY_NONCOHERENT,
        ..Default::default()
    };
    ioctl::set_memory_policy(b, &mut p).unwrap();
    p.default_policy = 2;
    assert_eq!(errno(ioctl::set_memory_policy(b, &mut p)), Errno::INVAL);
    p.default_policy = 0;
    p.alternate_policy = 7;
    assert_eq!(errno(ioctl::set_memory_policy(b, &mut p)), Errno::INVAL);
    p.alternate_policy = 0;
    p.gpu_id = 1;
    assert_eq!(errno(ioctl::set_memory_policy(b, &mut p)), Errno::INVAL);
    ioctl::set_scratch_backing_va(b, g, 0x7000_0000).unwrap();
    assert_eq!(errno(ioctl::set_scratch_backing_va(b, 1, 0)), Errno::INVAL);
    ioctl::set_trap_handler(b, g, 0x1000, 0x2000).unwrap();
    assert_eq!(errno(ioctl::set_trap_handler(b, 1, 0, 0)), Errno::INVAL);
}

#[test]
fn xnack_mode() {
    let dev = open("emu:mi300x");
    let b = dev.b();
    assert_eq!(
        ioctl::set_xnack_mode(b, -1).unwrap(),
        0,
        "XNACK is off by default"
    );
    ioctl::set_xnack_mode(b, 1).unwrap();
    assert_eq!(ioctl::set_xnack_mode(b, -5).unwrap(), 1);
    ioctl::set_xnack_mode(b, 1).unwrap();
    ioctl::set_xnack_mode(b, 0).unwrap();
    assert_eq!(ioctl::set_xnack_mode(b, -1).unwrap(), 0);

    // RDNA cannot enable XNACK; a mixed process neither.
    let rdna = open("emu:rx7900xtx");
    assert_eq!(errno(ioctl::set_xnack_mode(rdna.b(), 1)), Errno::PERM);
    ioctl::set_xnack_mode(rdna.b(), 0).unwrap();
    let mixed = open("emu:mi300x,rx9070xt");
    assert_eq!(errno(ioctl::set_xnack_mode(mixed.b(), 1)), Errno::PERM);
}

#[test]
fn runtime_enable() {
    let dev = open("emu:mi210");
    let b = dev.b();
    let en = abi::KFD_RUNTIME_ENABLE_MODE_ENABLE_MASK | abi::KFD_RUNTIME_ENABLE_MODE_TTMP_SAVE_MASK;
    ioctl::runtime_enable(b, 0x1234, en).unwrap();
    assert_eq!(errno(ioctl::runtime_enable(b, 0x1234, en)), Errno::BUSY);
    ioctl::runtime_enable(b, 0, 0).unwrap();
    ioctl::runtime_enable(b, 0, 0).unwrap();
    ioctl::runtime_enable(b, 0x1234, en).unwrap();
}

#[test]
fn available_memory_tracks_vram() {
    let dev = open("emu:mi210[vram=64M]");
    let b = dev.b();
    let g = dev.gpus[0];
    assert_eq!(ioctl::available_memory(b, g).unwrap(), 64 << 20);
    assert_eq!(errno(ioctl::available_memory(b, 0xdead)), Errno::INVAL);
    let a = kfd_common::alloc(
        &dev,
        0,
        0x4000_0000,
        4096,
        abi::KFD_IOC_ALLOC_MEM_FLAGS_VRAM,
    )
    .unwrap();
    // Charged in 2 MiB granules.
    assert_eq!(ioctl::available_memory(b, g).unwrap(), 62 << 20);
    ioctl::free_memory_of_gpu(b, a.handle).unwrap();
    assert_eq!(ioctl::available_memory(b, g).unwrap(), 64 << 20);
}
