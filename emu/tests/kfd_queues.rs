//! Queues: CREATE/DESTROY/UPDATE_QUEUE, SET_CU_MASK, GET_QUEUE_WAVE_STATE with the
//! kernel's argument checks and the >= 6.12 queue-buffer checks, doorbells, and an
//! end-to-end SDMA queue executing real packets.

mod kfd_common;

use kfd::abi::{self, CreateQueueArgs, EventData, HsaMemoryExceptionData, UpdateQueueArgs};
use kfd::{ioctl, Errno};
use kfd_common::{
    alloc, bufs, create_with_doorbell, errno, gpu_map, gtt, open, sdma_args, submit_sdma, vram,
    wait_until, Bufs, Dev, RING,
};
use kfd_emu::engine::QueueStatus;
use pm4::sdma::{self, SdmaPacket};

const MIB: u64 = 1 << 20;
fn aql_args(dev: &Dev, gpu: usize, b: &Bufs) -> CreateQueueArgs {
    CreateQueueArgs {
        ring_base_address: b.ring,
        write_pointer_address: b.ptrs + 0x38,
        read_pointer_address: b.ptrs + 0x80,
        ring_size: RING as u32,
        gpu_id: dev.gpus[gpu],
        queue_type: abi::KFD_IOC_QUEUE_TYPE_COMPUTE_AQL,
        queue_percentage: 100,
        queue_priority: 7,
        eop_buffer_address: b.eop,
        eop_buffer_size: u64::from(b.sizes.eop_buffer_size),
        ctx_save_restore_address: b.cwsr,
        ctx_save_restore_size: b.sizes.cwsr_size,
        ctl_stack_size: b.sizes.ctl_stack_size,
        ..Default::default()
    }
}

/// A MEMORY event: KFD sets it, with the faulting page, on a GPU VM fault.
fn memory_event(dev: &Dev) -> u32 {
    let mut a = abi::CreateEventArgs {
        event_type: abi::KFD_IOC_EVENT_MEMORY,
        ..Default::default()
    };
    ioctl::create_event(dev.b(), &mut a).unwrap();
    a.event_id
}

/// Waits for MEMORY event `mem_ev` (`what`: the access that should fault), checks that
/// queue `queue_id` stopped on the fault and destroys it; returns the exception data.
fn expect_fault(dev: &Dev, mem_ev: u32, queue_id: u32, what: &str) -> HsaMemoryExceptionData {
    let d = dev.b();
    let mut events = [EventData {
        event_id: mem_ev,
        ..Default::default()
    }];
    let r = ioctl::wait_events(d, &mut events, false, 20_000).unwrap();
    assert_eq!(r, abi::KFD_IOC_WAIT_RESULT_COMPLETE, "{what} faulted");
    assert!(matches!(
        dev.emu.queue_status(queue_id),
        Some(QueueStatus::Faulted(_))
    ));
    ioctl::destroy_queue(d, queue_id).unwrap();
    let m = events[0].memory_exception();
    assert_eq!(m.gpu_id, dev.gpus[0]);
    assert_eq!(m.failure.not_present, 1);
    m
}

/// Whether the SDMA queue's read pointer reaches `wptr` (within 20 s).
fn sdma_caught_up(b: &Bufs, wptr: u64) -> bool {
    // SAFETY: the pointer page is mapped.
    wait_until(|| unsafe { b.ptrs_ptr.add(8).cast::<u64>().read_volatile() } == wptr)
}

#[test]
fn create_aql_queue_with_kernel_sizes() {
    for spec in [
        "emu:mi300x",
        "emu:mi210",
        "emu:rx7900xtx",
        "emu:rx9070xt",
        "emu:mi250x",
    ] {
        let dev = open(spec);
        let b = bufs(&dev, 0);
        let mut a = aql_args(&dev, 0, &b);
        ioctl::create_queue(dev.b(), &mut a).unwrap();
        assert_eq!(a.queue_id, 0, "{spec}");
        let expect_off = abi::KFD_MMAP_TYPE_DOORBELL | abi::kfd_mmap_gpu_id(dev.gpus[0]);
        assert_eq!(a.doorbell_offset & !0x1fff, expect_off, "{spec}");
        assert_eq!(a.doorbell_offset & 7, 0, "64-bit doorbells");
        let mut a2 = a;
        // The same buffers again: a second queue, another doorbell.
        ioctl::create_queue(dev.b(), &mut a2).unwrap();
        assert_eq!(a2.queue_id, 1);
        assert_ne!(a2.doorbell_offset, a.doorbell_offset);
        ioctl::destroy_queue(dev.b(), a.queue_id).unwrap();
        ioctl::destroy_queue(dev.b(), a2.queue_id).unwrap();
        assert_eq!(
            errno(ioctl::destroy_queue(dev.b(), a2.queue_id)),
            Errno::INVAL,
            "{spec}"
        );
    }
}

/// KFD 1.22 `metadata_ring_size`: 0 or a power of two (else EINVAL), and an AQL queue's
/// ring BO must then cover ring + metadata ring (kfd_queue.c `kfd_queue_acquire_buffers`).
#[test]
fn metadata_ring_size_rules() {
    let dev = open("emu:mi300x");
    let b = bufs(&dev, 0);
    let mut a = aql_args(&dev, 0, &b);
    a.metadata_ring_size = 3000;
    assert_eq!(errno(ioctl::create_queue(dev.b(), &mut a)), Errno::INVAL);
    // The ring BO is exactly RING bytes: a metadata ring does not fit after it.
    let mut a = aql_args(&dev, 0, &b);
    a.metadata_ring_size = (RING / 2) as u32;
    assert_eq!(errno(ioctl::create_queue(dev.b(), &mut a)), Errno::INVAL);
    // Half the ring plus a metadata ring of half the ring fill the BO exactly.
    let mut a = aql_args(&dev, 0, &b);
    a.ring_size = (RING / 2) as u32;
    a.metadata_ring_size = (RING / 2) as u32;
    ioctl::create_queue(dev.b(), &mut a).unwrap();
    ioctl::destroy_queue(dev.b(), a.queue_id).unwrap();
}

#[test]
fn queue_buffer_checks() {
    let dev = open("emu:mi300x");
    let d = dev.b();
    let b = bufs(&dev, 0);
    let good = aql_args(&dev, 0, &b);
    let check = |f: &dyn Fn(&mut CreateQueueArgs), what: &str| {
        let mut a = good;
        f(&mut a);
        assert_eq!(
            errno(ioctl::create_queue(d, &mut a)),
            Errno::INVAL,
            "{what}"
        );
    };
    check(
        &|a| a.ring_size = (RING / 2) as u32,
        "ring smaller than its BO",
    );
    check(
        &|a| a.ring_size = (RING * 2) as u32,
        "ring larger than its BO",
    );
    check(
        &|a| a.ring_base_address += 4096,
        "ring not at the start of its BO",
    );
    check(&|a| a.write_pointer_address = b.next, "wptr not GPU-mapped");
    check(
        &|a| a.read_pointer_address = b.ring,
        "rptr in a multi-page BO",
    );
    check(&|a| a.eop_buffer_size = 8192, "EOP size");
    check(&|a| a.eop_buffer_address = b.ring, "EOP in the ring BO");
    check(&|a| a.ctl_stack_size += 4096, "control stack size");
    check(&|a| a.ctl_stack_size = 0, "control stack size 0");
    check(
        &|a| a.ctx_save_restore_size -= 4096,
        "CWSR smaller than the node's",
    );
    check(
        &|a| a.ctx_save_restore_size += 4096 * 16,
        "CWSR larger than its BO",
    );
    check(&|a| a.ctx_save_restore_address = 0, "no CWSR area");
    // No EOP buffer at all is allowed.
    let mut a = good;
    a.eop_buffer_address = 0;
    a.eop_buffer_size = 0;
    ioctl::create_queue(d, &mut a).unwrap();
    // A larger CWSR area with a BO of the matching size is fine.
    let bigger = good.ctx_save_restore_size + 4096 * 16;
    let len = b.sizes.cwsr_bo_size(bigger);
    let flags = abi::KFD_IOC_ALLOC_MEM_FLAGS_VRAM | abi::KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE;
    let c = alloc(&dev, 0, b.next, len, flags).unwrap();
    gpu_map(&dev, c.handle, &[0]).unwrap();
    let mut a = good;
    a.ctx_save_restore_size = bigger;
    a.ctx_save_restore_address = b.next;
    ioctl::create_queue(d, &mut a).unwrap();
    // While a queue uses a BO, it cannot be unmapped.
    // The ring BO was the first allocation on GPU 0: idr id 0.
    let ring_handle = u64::from(dev.gpus[0]) << 32;
    let mut n = 0;
    assert_eq!(
        errno(ioctl::unmap_memory_from_gpu(
            d,
            ring_handle,
            &dev.gpus,
            &mut n
        )),
        Errno::BUSY
    );
}

#[test]
fn cwsr_area_in_an_svm_range() {
    let dev = open("emu:rx9070xt");
    let d = dev.b();
    let b = bufs(&dev, 0);
    let len = b.sizes.default_cwsr_bo_size();
    let mut host = vec![0u8; (len + 4096) as usize];
    let addr = (host.as_mut_ptr() as u64).div_ceil(4096) * 4096;
    let mut a = aql_args(&dev, 0, &b);
    a.ctx_save_restore_address = addr;
    // Not registered yet.
    assert_eq!(errno(ioctl::create_queue(d, &mut a)), Errno::INVAL);
    let mut attrs = [abi::SvmAttribute {
        type_: abi::KFD_IOCTL_SVM_ATTR_ACCESS,
        value: dev.gpus[0],
    }];
    ioctl::svm(d, abi::KFD_IOCTL_SVM_OP_SET_ATTR, addr, len, &mut attrs).unwrap();
    // Mapped but without GPU_ALWAYS_MAPPED.
    assert_eq!(errno(ioctl::create_queue(d, &mut a)), Errno::INVAL);
    let mut attrs = [abi::SvmAttribute {
        type_: abi::KFD_IOCTL_SVM_ATTR_SET_FLAGS,
        value: abi::KFD_IOCTL_SVM_FLAG_GPU_ALWAYS_MAPPED,
    }];
    ioctl::svm(d, abi::KFD_IOCTL_SVM_OP_SET_ATTR, addr, len, &mut attrs).unwrap();
    ioctl::create_queue(d, &mut a).unwrap();
    ioctl::destroy_queue(d, a.queue_id).unwrap();
    drop(host);
}

#[test]
fn create_queue_argument_errors() {
    let dev = open("emu:rx7900xtx");
    let d = dev.b();
    let b = bufs(&dev, 0);
    let good = aql_args(&dev, 0, &b);
    let e = |f: &dyn Fn(&mut CreateQueueArgs)| {
        let mut a = good;
        f(&mut a);
        errno(ioctl::create_queue(d, &mut a))
    };
    assert_eq!(e(&|a| a.queue_percentage = 101), Errno::INVAL);
    assert_eq!(e(&|a| a.queue_priority = 16), Errno::INVAL);
    assert_eq!(e(&|a| a.ring_size = 3000), Errno::INVAL);
    assert_eq!(
        e(&|a| a.queue_type = 5),
        Errno::from_raw_os_error(kfd_emu::ENOTSUPP)
    );
    assert_eq!(e(&|a| a.gpu_id = 0x9999), Errno::INVAL);
    assert_eq!(e(&|a| a.read_pointer_address = 1 << 47), Errno::FAULT);
    assert_eq!(e(&|a| a.write_pointer_address = u64::MAX - 2), Errno::FAULT);
    assert_eq!(e(&|a| a.ring_base_address = 0x7fff_ffff_fffc), Errno::FAULT);
    assert_eq!(e(&|a| a.eop_buffer_address = 1 << 50), Errno::FAULT);
    assert_eq!(e(&|a| a.ctx_save_restore_address = 1 << 50), Errno::FAULT);
    // Bits 8..15 of the percentage carry the PM4 target XCC and are not a percentage.
    let mut a = good;
    a.queue_percentage = 100 | (3 << 8);
    ioctl::create_queue(d, &mut a).unwrap();
    // SDMA_BY_ENG_ID past the last engine.
    let mut s = sdma_args(&dev, 0, &b);
    s.queue_type = abi::KFD_IOC_QUEUE_TYPE_SDMA_BY_ENG_ID;
    s.sdma_engine_id = 2;
    assert_eq!(errno(ioctl::create_queue(d, &mut s)), Errno::INVAL);
    s.sdma_engine_id = 1;
    ioctl::create_queue(d, &mut s).unwrap();
    // No XGMI SDMA engines on this board.
    let mut x = sdma_args(&dev, 0, &b);
    x.queue_type = abi::KFD_IOC_QUEUE_TYPE_SDMA_XGMI;
    assert_eq!(errno(ioctl::create_queue(d, &mut x)), Errno::NOMEM);
}

#[test]
fn small_rings_are_clamped_to_the_minimum() {
    let dev = open("emu:mi210");
    let b = bufs(&dev, 0);
    let mut a = sdma_args(&dev, 0, &b);
    a.ring_size = 0;
    // A 1 KiB ring only needs to sit in the first page of a mapping.
    ioctl::create_queue(dev.b(), &mut a).unwrap();
    assert_eq!(
        a.ring_size,
        abi::KFD_MIN_QUEUE_RING_SIZE,
        "clamped and copied back"
    );
    let mut a = sdma_args(&dev, 0, &b);
    a.ring_size = 512;
    ioctl::create_queue(dev.b(), &mut a).unwrap();
    assert_eq!(a.ring_size, 1024);
}

#[test]
fn sdma_queue_slots_run_out() {
    // RX 7900 XTX: 2 SDMA engines x 6 queues.
    let dev = open("emu:rx7900xtx");
    let b = bufs(&dev, 0);
    for i in 0..12 {
        let mut a = sdma_args(&dev, 0, &b);
        ioctl::create_queue(dev.b(), &mut a).unwrap_or_else(|e| panic!("queue {i}: {e}"));
    }
    let mut a = sdma_args(&dev, 0, &b);
    assert_eq!(errno(ioctl::create_queue(dev.b(), &mut a)), Errno::NOMEM);
    ioctl::destroy_queue(dev.b(), 3).unwrap();
    ioctl::create_queue(dev.b(), &mut a).unwrap();
    assert_eq!(a.queue_id, 3, "lowest free queue id");
}

#[test]
fn update_queue_rules() {
    let dev = open("emu:mi210");
    let d = dev.b();
    let b = bufs(&dev, 0);
    let mut a = aql_args(&dev, 0, &b);
    ioctl::create_queue(d, &mut a).unwrap();
    let good = UpdateQueueArgs {
        ring_base_address: b.ring,
        queue_id: a.queue_id,
        ring_size: RING as u32,
        queue_percentage: 50,
        queue_priority: 3,
    };
    ioctl::update_queue(d, &mut good.clone()).unwrap();
    let e = |f: &dyn Fn(&mut UpdateQueueArgs)| {
        let mut u = good;
        f(&mut u);
        errno(ioctl::update_queue(d, &mut u))
    };
    assert_eq!(e(&|u| u.queue_percentage = 101), Errno::INVAL);
    assert_eq!(e(&|u| u.queue_priority = 16), Errno::INVAL);
    assert_eq!(e(&|u| u.ring_size = 100_000), Errno::INVAL);
    assert_eq!(e(&|u| u.ring_base_address = 1 << 48), Errno::FAULT);
    assert_eq!(e(&|u| u.queue_id = 77), Errno::FAULT, "unknown queue");
    assert_eq!(
        e(&|u| u.ring_base_address = b.next),
        Errno::FAULT,
        "ring not mapped"
    );
    assert_eq!(
        e(&|u| u.ring_size = (RING / 2) as u32),
        Errno::FAULT,
        "ring size != BO"
    );
}

#[test]
fn cu_mask_and_wave_state() {
    let dev = open("emu:mi300x");
    let d = dev.b();
    let b = bufs(&dev, 0);
    let mut a = aql_args(&dev, 0, &b);
    ioctl::create_queue(d, &mut a).unwrap();
    let q = a.queue_id;
    ioctl::set_cu_mask(d, q, &[0xffff_ffff; 10]).unwrap();
    // Longer than 1024 bits: the tail is dropped.
    ioctl::set_cu_mask(d, q, &[0x5555_5555; 40]).unwrap();
    assert_eq!(
        errno(ioctl::set_cu_mask(d, q, &[])),
        Errno::INVAL,
        "empty mask"
    );
    assert_eq!(
        errno(ioctl::set_cu_mask(d, 99, &[1])),
        Errno::FAULT,
        "unknown queue"
    );
    let mut raw = abi::SetCuMaskArgs {
        queue_id: q,
        num_cu_mask: 33,
        cu_mask_ptr: 0,
    };
    let r = d.ioctl(kfd::Ioctl::SetCuMask {
        args: &mut raw,
        mask: &[1, 2],
    });
    assert_eq!(r.unwrap_err(), Errno::INVAL, "not a multiple of 32");
    raw.num_cu_mask = 96;
    let r = d.ioctl(kfd::Ioctl::SetCuMask {
        args: &mut raw,
        mask: &[1, 2],
    });
    assert_eq!(r.unwrap_err(), Errno::FAULT, "mask shorter than claimed");

    // Wave state: only inactive compute queues.
    assert_eq!(
        errno(ioctl::get_queue_wave_state(d, q, b.cwsr)),
        Errno::INVAL,
        "active"
    );
    assert_eq!(
        errno(ioctl::get_queue_wave_state(d, 1234, b.cwsr)),
        Errno::FAULT
    );
    let mut u = UpdateQueueArgs {
        ring_base_address: b.ring,
        queue_id: q,
        ring_size: RING as u32,
        queue_percentage: 0,
        queue_priority: 7,
    };
    ioctl::update_queue(d, &mut u).unwrap();
    let w = ioctl::get_queue_wave_state(d, q, b.cwsr).unwrap();
    assert_eq!((w.ctl_stack_used_size, w.save_area_used_size), (0, 0));
    let mut s = sdma_args(&dev, 0, &b);
    ioctl::create_queue(d, &mut s).unwrap();
    assert_eq!(
        errno(ioctl::get_queue_wave_state(d, s.queue_id, 0)),
        Errno::INVAL,
        "SDMA"
    );
}

#[test]
fn queues_block_xnack_and_runtime_enable() {
    let dev = open("emu:mi210");
    let d = dev.b();
    let b = bufs(&dev, 0);
    let mut a = sdma_args(&dev, 0, &b);
    ioctl::create_queue(d, &mut a).unwrap();
    assert_eq!(errno(ioctl::set_xnack_mode(d, 1)), Errno::BUSY);
    assert_eq!(
        ioctl::set_xnack_mode(d, -1).unwrap(),
        0,
        "queries still work"
    );
    assert_eq!(
        errno(ioctl::runtime_enable(
            d,
            0,
            abi::KFD_RUNTIME_ENABLE_MODE_ENABLE_MASK
        )),
        Errno::EXIST
    );
    ioctl::destroy_queue(d, a.queue_id).unwrap();
    ioctl::set_xnack_mode(d, 1).unwrap();
    ioctl::runtime_enable(d, 0, abi::KFD_RUNTIME_ENABLE_MODE_ENABLE_MASK).unwrap();
}

#[test]
fn sdma_queue_end_to_end() {
    let dev = open("emu:mi210");
    let d = dev.b();
    let b = bufs(&dev, 0);
    // Data buffers, and a user event page (GTT, GPU-mapped) for the interrupt.
    let data_va = b.next;
    let (_, data) = vram(&dev, 0, data_va, 2 * MIB);
    let page_va = data_va + 2 * MIB;
    let (page_handle, _) = gtt(&dev, 0, page_va, 32768);
    let mut ev = abi::CreateEventArgs {
        event_type: abi::KFD_IOC_EVENT_SIGNAL,
        auto_reset: 1,
        event_page_offset: page_handle,
        ..Default::default()
    };
    ioctl::create_event(d, &mut ev).unwrap();
    let mem_ev = memory_event(&dev);
    let mut q = sdma_args(&dev, 0, &b);
    let db = create_with_doorbell(&dev, &mut q);

    let pkts = [
        SdmaPacket::ConstFill(sdma::ConstFill {
            dst: data_va,
            data: 0xabcd_0123,
            bytes: 4096,
            fill_size: 2,
        }),
        SdmaPacket::CopyLinear(sdma::CopyLinear {
            src: data_va,
            dst: data_va + 8192,
            bytes: 4096,
            tmz: false,
            parameter: 0,
        }),
        SdmaPacket::Fence(sdma::Fence::new(data_va + 65536, 7)),
        // The mailbox write, then the interrupt with the event id.
        SdmaPacket::Fence(sdma::Fence::new(
            page_va + u64::from(ev.event_id) * 8,
            ev.event_id,
        )),
        SdmaPacket::Trap(sdma::Trap {
            int_context: ev.event_id,
        }),
    ];
    let mut events = [EventData::for_signal(ev.event_id, 0)];
    let wptr = submit_sdma(&dev, &b, db, &q, 0, &pkts);
    let r = ioctl::wait_events(d, &mut events, false, 20_000).unwrap();
    assert_eq!(
        r,
        abi::KFD_IOC_WAIT_RESULT_COMPLETE,
        "the TRAP woke the waiter"
    );
    // SAFETY: the data BO is mapped.
    unsafe {
        assert_eq!(data.add(65536).cast::<u32>().read_volatile(), 7);
        for i in 0..1024 {
            assert_eq!(
                data.add(8192 + i * 4).cast::<u32>().read_volatile(),
                0xabcd_0123
            );
        }
    }
    assert!(sdma_caught_up(&b, wptr), "rptr caught up");
    assert_eq!(dev.emu.queue_status(q.queue_id), Some(QueueStatus::Active));

    // A copy from an unmapped address faults the queue and raises the memory event.
    let bad = 0x7000_0000_0000u64;
    let pkts = [SdmaPacket::CopyLinear(sdma::CopyLinear {
        src: bad + 0x123,
        dst: data_va,
        bytes: 64,
        tmz: false,
        parameter: 0,
    })];
    submit_sdma(&dev, &b, db, &q, wptr, &pkts);
    let m = expect_fault(&dev, mem_ev, q.queue_id, "the copy from an unmapped page");
    assert_eq!(m.va, bad, "the faulting page");
}

#[test]
fn aql_queue_end_to_end_signal_wakes_wait_events() {
    use pm4::aql::{AqlPacket, Barrier, PacketControl};
    let dev = open("emu:mi300x");
    let d = dev.b();
    let b = bufs(&dev, 0);
    invalidate_ring(&b);
    let sig_va = b.next;
    let (_, sig) = gtt(&dev, 0, sig_va, 4096);
    let page_va = sig_va + 2 * MIB;
    let (page_handle, page) = gtt(&dev, 0, page_va, 32768);
    let mut ev = abi::CreateEventArgs {
        event_type: abi::KFD_IOC_EVENT_SIGNAL,
        auto_reset: 1,
        event_page_offset: page_handle,
        ..Default::default()
    };
    ioctl::create_event(d, &mut ev).unwrap();
    // amd_signal_t: kind, value 1, event_mailbox_ptr = the event's slot, event_id.
    // SAFETY: the signal BO is mapped.
    unsafe {
        let s = sig.cast::<u64>();
        s.write_volatile(1);
        s.add(1).write_volatile(1);
        s.add(2)
            .write_volatile(page_va + u64::from(ev.event_id) * 8);
        s.add(3).write_volatile(u64::from(ev.event_id));
    }
    let mut q = aql_args(&dev, 0, &b);
    let db = create_with_doorbell(&dev, &mut q);
    let pkt = AqlPacket::BarrierAnd(Barrier {
        control: PacketControl::SYSTEM_BARRIER,
        dep_signals: [0; 5],
        completion_signal: sig_va,
    });
    let words = pkt.encode();
    // Body first, then write_dispatch_id, then the header (release), then the doorbell.
    // SAFETY: slot 0 of the ring, the pointer page and the doorbell slice are mapped.
    unsafe {
        for (i, w) in words.iter().enumerate().skip(1) {
            b.ring_ptr.add(i * 4).cast::<u32>().write_volatile(*w);
        }
        b.ptrs_ptr.add(0x38).cast::<u64>().write_volatile(1);
        std::sync::atomic::fence(std::sync::atomic::Ordering::Release);
        b.ring_ptr.cast::<u32>().write_volatile(words[0]);
        db.add((q.doorbell_offset & 0x1fff) as usize / 8)
            .write_volatile(0);
    }
    d.doorbell_written(q.queue_id);
    let mut events = [EventData::for_signal(ev.event_id, 0)];
    let r = ioctl::wait_events(d, &mut events, false, 20_000).unwrap();
    assert_eq!(
        r,
        abi::KFD_IOC_WAIT_RESULT_COMPLETE,
        "the completion signal's mailbox raised the event"
    );
    // SAFETY: mapped BOs.
    unsafe {
        assert_eq!(
            sig.cast::<u64>().add(1).read_volatile(),
            0,
            "signal decremented"
        );
        // The read index moves right after the completion signal (the packet is
        // released once it completed): poll for it.
        let rptr = b.ptrs_ptr.add(0x80).cast::<u64>();
        let t = std::time::Instant::now();
        while rptr.read_volatile() != 1 && t.elapsed() < std::time::Duration::from_secs(20) {
            std::thread::yield_now();
        }
        assert_eq!(rptr.read_volatile(), 1, "read_dispatch_id advanced");
        let slot = page.cast::<u64>().add(ev.event_id as usize).read_volatile();
        assert_eq!(
            slot,
            kfd_emu::UNSIGNALED_EVENT_SLOT,
            "KFD acknowledged the slot"
        );
    }
    assert_eq!(dev.emu.queue_status(q.queue_id), Some(QueueStatus::Active));
    ioctl::destroy_queue(d, q.queue_id).unwrap();
    assert_eq!(dev.emu.queue_status(q.queue_id), None);
    // A doorbell of the destroyed queue, or of an id no queue can have: nothing to wake.
    d.doorbell_written(q.queue_id);
    d.doorbell_written(u32::MAX);
    assert_eq!(dev.emu.queue_status(q.queue_id), None);
}

#[test]
fn unmapping_a_bo_an_engine_used_faults_its_next_access() {
    // The engines cache translations: an unmap must drop them, so the next write to
    // the old address is a VM fault, not a write into the freed BO.
    let dev = open("emu:mi300x");
    let d = dev.b();
    let b = bufs(&dev, 0);
    let data_va = b.next;
    let (data_handle, data) = gtt(&dev, 0, data_va, 4096);
    let mem_ev = memory_event(&dev);
    let mut q = sdma_args(&dev, 0, &b);
    let db = create_with_doorbell(&dev, &mut q);
    let fill = |v: u32| {
        [SdmaPacket::ConstFill(sdma::ConstFill {
            dst: data_va + 64,
            data: v,
            bytes: 64,
            fill_size: 2,
        })]
    };
    let wptr = submit_sdma(&dev, &b, db, &q, 0, &fill(0x1111_2222));
    assert!(sdma_caught_up(&b, wptr), "the first fill ran");
    // SAFETY: the BO is still CPU-mapped.
    assert_eq!(
        unsafe { data.add(64).cast::<u32>().read_volatile() },
        0x1111_2222
    );
    let mut n = 0;
    ioctl::unmap_memory_from_gpu(d, data_handle, &dev.gpus[..1], &mut n).unwrap();
    submit_sdma(&dev, &b, db, &q, wptr, &fill(0x3333_4444));
    let m = expect_fault(&dev, mem_ev, q.queue_id, "the second fill");
    assert_eq!(m.va, data_va, "the faulting page");
    // SAFETY: still CPU-mapped.
    assert_eq!(
        unsafe { data.add(64).cast::<u32>().read_volatile() },
        0x1111_2222,
        "nothing was written through a stale translation"
    );
}

/// Writes AQL packet `pkt` into slot `index` of the ring of queue `q` (body, then
/// `write_dispatch_id`, then the header with release), and rings the doorbell.
fn submit_aql(
    dev: &Dev,
    b: &Bufs,
    db: *mut u64,
    q: &CreateQueueArgs,
    index: u64,
    pkt: &pm4::aql::AqlPacket,
) {
    let words = pkt.encode();
    let slot = ((index * 64) % RING) as usize;
    // SAFETY: the slot lies in the ring BO; the pointer page and the doorbell slice are
    // mapped.
    unsafe {
        let at = b.ring_ptr.add(slot).cast::<u32>();
        for (i, w) in words.iter().enumerate().skip(1) {
            at.add(i).write_volatile(*w);
        }
        b.ptrs_ptr.add(0x38).cast::<u64>().write_volatile(index + 1);
        std::sync::atomic::fence(std::sync::atomic::Ordering::Release);
        at.write_volatile(words[0]);
        db.add((q.doorbell_offset & 0x1fff) as usize / 8)
            .write_volatile(index);
    }
    dev.b().doorbell_written(q.queue_id);
}

/// An AQL queue on GPU 0 with every ring slot INVALID: (buffers, arguments, doorbell).
fn aql_queue(dev: &Dev) -> (Bufs, CreateQueueArgs, *mut u64) {
    let b = bufs(dev, 0);
    invalidate_ring(&b);
    let mut q = aql_args(dev, 0, &b);
    let db = create_with_doorbell(dev, &mut q);
    (b, q, db)
}

/// Marks every ring slot INVALID (header type 1), as AQL slots start.
fn invalidate_ring(b: &Bufs) {
    for slot in 0..(RING / 64) {
        // SAFETY: within the ring BO.
        unsafe {
            b.ring_ptr
                .add((slot * 64) as usize)
                .cast::<u16>()
                .write_volatile(1)
        };
    }
}

/// An `amd_signal_t` value at `sig` (CPU address of the signal).
fn signal_value_at(sig: *mut u8) -> i64 {
    // SAFETY: the caller's signal BO is CPU-mapped.
    unsafe { sig.add(8).cast::<i64>().read_volatile() }
}

fn barrier_completing(sig: u64) -> pm4::aql::AqlPacket {
    use pm4::aql::{AqlPacket, Barrier, PacketControl};
    AqlPacket::BarrierAnd(Barrier {
        control: PacketControl::SYSTEM_BARRIER,
        dep_signals: [0; 5],
        completion_signal: sig,
    })
}

#[test]
fn aql_completion_signal_follows_unmap_and_remap() {
    // The CP keeps the window of the signals a queue completes between packets: a BO
    // mapped at the same address after an unmap must be the one the next packet
    // completes, and after an unmap with nothing mapped the next completion is a VM
    // fault, never a write through the stale translation.
    let dev = open("emu:mi300x");
    let d = dev.b();
    let (b, q, db) = aql_queue(&dev);
    let rptr = || {
        // SAFETY: the pointer page is mapped.
        unsafe { b.ptrs_ptr.add(0x80).cast::<u64>().read_volatile() }
    };
    let sig_va = b.next;
    let (h1, s1) = gtt(&dev, 0, sig_va, 4096);
    // SAFETY: the signal BO is mapped.
    unsafe { s1.add(8).cast::<i64>().write_volatile(1) };
    submit_aql(&dev, &b, db, &q, 0, &barrier_completing(sig_va));
    assert!(wait_until(|| rptr() == 1), "the first barrier retired");
    assert_eq!(signal_value_at(s1), 0);
    // Remap: another BO at the same address.
    let mut n = 0;
    ioctl::unmap_memory_from_gpu(d, h1, &dev.gpus[..1], &mut n).unwrap();
    ioctl::free_memory_of_gpu(d, h1).unwrap();
    let (h2, s2) = gtt(&dev, 0, sig_va, 4096);
    // SAFETY: the new signal BO is mapped.
    unsafe { s2.add(8).cast::<i64>().write_volatile(5) };
    submit_aql(&dev, &b, db, &q, 1, &barrier_completing(sig_va));
    assert!(wait_until(|| rptr() == 2), "the second barrier retired");
    assert_eq!(signal_value_at(s2), 4, "the new BO's signal was completed");
    // Unmap with nothing in its place: the next completion faults.
    let mem_ev = memory_event(&dev);
    // (`n_success` is in/out: a call resumes after the devices it counts.)
    n = 0;
    ioctl::unmap_memory_from_gpu(d, h2, &dev.gpus[..1], &mut n).unwrap();
    submit_aql(&dev, &b, db, &q, 2, &barrier_completing(sig_va));
    let m = expect_fault(
        &dev,
        mem_ev,
        q.queue_id,
        "the completion of an unmapped signal",
    );
    assert_eq!(m.va, sig_va, "the faulting page");
    assert_eq!(
        signal_value_at(s2),
        4,
        "nothing was written through a stale translation"
    );
    assert_eq!(rptr(), 2, "the faulting packet was not retired");
}

#[test]
fn aql_blocked_barrier_faults_when_its_signal_is_unmapped() {
    // A barrier-value re-polls its signal through a kept window while it blocks: an
    // unmap of the signal's BO must fault the queue at the next poll.
    use pm4::aql::{AqlPacket, BarrierValue, PacketControl, SignalCondition};
    let dev = open("emu:mi300x");
    let d = dev.b();
    let (b, q, db) = aql_queue(&dev);
    let dep_va = b.next;
    let (h, dep) = gtt(&dev, 0, dep_va, 4096);
    // SAFETY: the signal BO is mapped.
    unsafe { dep.add(8).cast::<i64>().write_volatile(1) };
    let pkt = AqlPacket::BarrierValue(BarrierValue {
        control: PacketControl::SYSTEM_BARRIER,
        signal: dep_va,
        value: 0,
        mask: -1,
        cond: SignalCondition::Eq,
        completion_signal: 0,
    });
    submit_aql(&dev, &b, db, &q, 0, &pkt);
    std::thread::sleep(std::time::Duration::from_millis(20));
    assert_eq!(
        dev.emu.queue_status(q.queue_id),
        Some(QueueStatus::Active),
        "the barrier blocks"
    );
    let mem_ev = memory_event(&dev);
    let mut n = 0;
    ioctl::unmap_memory_from_gpu(d, h, &dev.gpus[..1], &mut n).unwrap();
    let m = expect_fault(&dev, mem_ev, q.queue_id, "the poll of an unmapped signal");
    assert_eq!(m.va, dep_va, "the faulting page");
}

/// The device and inode of the file mapped at `addr` (from /proc/self/maps).
fn file_at(addr: u64) -> (String, String) {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    for line in maps.lines() {
        let f: Vec<&str> = line.split_ascii_whitespace().collect();
        let (lo, hi) = f[0].split_once('-').unwrap();
        let (lo, hi) = (
            u64::from_str_radix(lo, 16).unwrap(),
            u64::from_str_radix(hi, 16).unwrap(),
        );
        if (lo..hi).contains(&addr) {
            return (f[3].to_owned(), f[4].to_owned());
        }
    }
    panic!("{addr:#x} is not mapped");
}

/// A BO an engine wrote is recycled when it is freed after its unmap: the engine's cached
/// translation of it does not keep its memfd alive, so the next BO with its GPU, VA, size
/// and flags gets the same memfd (the same file behind the CPU mapping at the VA).
#[test]
fn a_bo_an_engine_used_is_recycled_at_free() {
    let dev = open("emu:mi210");
    let d = dev.b();
    let b = bufs(&dev, 0);
    let va = b.next;
    let (h, p) = gtt(&dev, 0, va, 2 * MIB);
    let mut q = sdma_args(&dev, 0, &b);
    let db = create_with_doorbell(&dev, &mut q);
    let pkts = [SdmaPacket::Fence(sdma::Fence::new(va, 7))];
    let wptr = submit_sdma(&dev, &b, db, &q, 0, &pkts);
    assert!(sdma_caught_up(&b, wptr), "rptr caught up");
    // SAFETY: the BO is mapped.
    assert_eq!(unsafe { p.cast::<u32>().read_volatile() }, 7);
    let file = file_at(va);
    let mut n = 0;
    ioctl::unmap_memory_from_gpu(d, h, &[dev.gpus[0]], &mut n).unwrap();
    // SAFETY: the range is the test's own reservation, mapped by the BO until now.
    unsafe {
        rustix::mm::mmap_anonymous(
            va as *mut core::ffi::c_void,
            (2 * MIB) as usize,
            rustix::mm::ProtFlags::empty(),
            rustix::mm::MapFlags::PRIVATE
                | rustix::mm::MapFlags::NORESERVE
                | rustix::mm::MapFlags::FIXED,
        )
        .unwrap();
    }
    // No packet runs on the queue in between: only the free can make the engine let go.
    ioctl::free_memory_of_gpu(d, h).unwrap();
    let (h2, p2) = gtt(&dev, 0, va, 2 * MIB);
    assert_eq!(file_at(va), file, "the freed BO's memfd was not recycled");
    // SAFETY: mapped; recycled pages read as zeros.
    assert_eq!(unsafe { p2.cast::<u32>().read_volatile() }, 0);
    ioctl::destroy_queue(d, q.queue_id).unwrap();
    let _ = h2;
}
