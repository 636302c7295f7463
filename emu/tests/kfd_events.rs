//! Events: CREATE/DESTROY/SET/RESET/WAIT_EVENTS, the event page, event age, auto-reset,
//! wait_for_all, timeouts, and memory / hardware-exception events raised by engines.

mod kfd_common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kfd::abi::{self, CreateEventArgs, EventData};
use kfd::{ioctl, Backend, Errno, MmapFile, Prot};
use kfd_common::{alloc, errno, open, Reservation};
use kfd_emu::{KFD_FIRST_NONSIGNAL_EVENT_ID, UNSIGNALED_EVENT_SLOT};

fn create(b: &dyn Backend, ty: u32, auto_reset: bool) -> CreateEventArgs {
    let mut a = CreateEventArgs {
        event_type: ty,
        auto_reset: auto_reset as u32,
        ..Default::default()
    };
    ioctl::create_event(b, &mut a).unwrap();
    a
}

fn wait1(b: &dyn Backend, id: u32, timeout: u32) -> u32 {
    let mut ev = [EventData::for_signal(id, 0)];
    ioctl::wait_events(b, &mut ev, false, timeout).unwrap()
}

#[test]
fn signal_event_ids_page_and_slots() {
    let dev = open("emu:mi300x");
    let b = dev.b();
    let e1 = create(b, abi::KFD_IOC_EVENT_SIGNAL, false);
    let e2 = create(b, abi::KFD_IOC_EVENT_SIGNAL, true);
    assert_eq!(e1.event_id, 1, "id 0 is reserved");
    assert_eq!(e2.event_id, 2);
    assert_eq!(e1.event_trigger_data, 1);
    assert_eq!(e1.event_slot_index, 1);
    assert_eq!(e1.event_page_offset, abi::KFD_MMAP_TYPE_EVENTS);
    assert_eq!(e2.event_page_offset, abi::KFD_MMAP_TYPE_EVENTS);
    let hw = create(b, abi::KFD_IOC_EVENT_HW_EXCEPTION, false);
    assert_eq!(hw.event_id, KFD_FIRST_NONSIGNAL_EVENT_ID);
    assert_eq!(hw.event_page_offset, 0);
    let mem = create(b, abi::KFD_IOC_EVENT_MEMORY, false);
    assert_eq!(mem.event_id, KFD_FIRST_NONSIGNAL_EVENT_ID + 1);
    // The event page: 4096 slots of 8 bytes, unsignaled = all ones.
    // SAFETY: a fresh mapping, unmapped below.
    let page = unsafe {
        b.mmap(
            MmapFile::Kfd,
            abi::KFD_MMAP_TYPE_EVENTS,
            32768,
            None,
            Prot::READ | Prot::WRITE,
        )
    }
    .unwrap();
    let slots = page.as_ptr().cast::<u64>();
    // SAFETY: 4096 slots are mapped.
    unsafe {
        assert_eq!(slots.add(1).read_volatile(), UNSIGNALED_EVENT_SLOT);
        assert_eq!(slots.add(4095).read_volatile(), UNSIGNALED_EVENT_SLOT);
    }
    // Too large a mapping.
    // SAFETY: nothing is mapped.
    let e = unsafe {
        b.mmap(
            MmapFile::Kfd,
            abi::KFD_MMAP_TYPE_EVENTS,
            65536,
            None,
            Prot::READ,
        )
    };
    assert_eq!(e.unwrap_err(), Errno::INVAL);
    // SAFETY: ours.
    unsafe { b.munmap(page, 32768).unwrap() };
    ioctl::destroy_event(b, e1.event_id).unwrap();
    assert_eq!(errno(ioctl::destroy_event(b, e1.event_id)), Errno::INVAL);
    let e3 = create(b, abi::KFD_IOC_EVENT_SIGNAL, false);
    assert_eq!(e3.event_id, 1, "lowest free slot");
}

#[test]
fn slot_limit_before_and_after_mapping_the_page() {
    let dev = open("emu:mi210");
    let b = dev.b();
    // Until the page is mapped, 256 slots (255 usable ids).
    for i in 1..256 {
        assert_eq!(create(b, abi::KFD_IOC_EVENT_SIGNAL, false).event_id, i);
    }
    let mut a = CreateEventArgs {
        event_type: abi::KFD_IOC_EVENT_SIGNAL,
        ..Default::default()
    };
    assert_eq!(errno(ioctl::create_event(b, &mut a)), Errno::NOSPC);
    // SAFETY: fresh mapping.
    let page = unsafe {
        b.mmap(
            MmapFile::Kfd,
            abi::KFD_MMAP_TYPE_EVENTS,
            32768,
            None,
            Prot::READ,
        )
    }
    .unwrap();
    assert_eq!(create(b, abi::KFD_IOC_EVENT_SIGNAL, false).event_id, 256);
    // SAFETY: ours.
    unsafe { b.munmap(page, 32768).unwrap() };
}

#[test]
fn set_reset_and_poll() {
    let dev = open("emu:mi210");
    let b = dev.b();
    let e = create(b, abi::KFD_IOC_EVENT_SIGNAL, false).event_id;
    assert_eq!(wait1(b, e, 0), abi::KFD_IOC_WAIT_RESULT_TIMEOUT);
    ioctl::set_event(b, e).unwrap();
    assert_eq!(wait1(b, e, 0), abi::KFD_IOC_WAIT_RESULT_COMPLETE);
    assert_eq!(
        wait1(b, e, 0),
        abi::KFD_IOC_WAIT_RESULT_COMPLETE,
        "manual reset stays signaled"
    );
    ioctl::reset_event(b, e).unwrap();
    assert_eq!(wait1(b, e, 0), abi::KFD_IOC_WAIT_RESULT_TIMEOUT);
    // Unknown ids; events the CPU may not signal.
    assert_eq!(errno(ioctl::set_event(b, 999)), Errno::INVAL);
    assert_eq!(errno(ioctl::reset_event(b, 999)), Errno::INVAL);
    let hw = create(b, abi::KFD_IOC_EVENT_HW_EXCEPTION, false).event_id;
    assert_eq!(errno(ioctl::set_event(b, hw)), Errno::INVAL);
    assert_eq!(errno(ioctl::reset_event(b, hw)), Errno::INVAL);
    let mut ev = [EventData::for_signal(12345, 0)];
    assert_eq!(
        errno(ioctl::wait_events(b, &mut ev, false, 0)),
        Errno::INVAL
    );
}

#[test]
fn auto_reset_is_consumed_by_one_wait() {
    let dev = open("emu:mi210");
    let b = dev.b();
    let e = create(b, abi::KFD_IOC_EVENT_SIGNAL, true).event_id;
    ioctl::set_event(b, e).unwrap();
    assert_eq!(wait1(b, e, 0), abi::KFD_IOC_WAIT_RESULT_COMPLETE);
    assert_eq!(
        wait1(b, e, 0),
        abi::KFD_IOC_WAIT_RESULT_TIMEOUT,
        "auto-reset consumed"
    );
}

#[test]
fn set_wakes_a_sleeping_waiter() {
    let dev = Arc::new(open("emu:mi210"));
    let e = create(dev.b(), abi::KFD_IOC_EVENT_SIGNAL, true).event_id;
    let d2 = dev.clone();
    let waiter = std::thread::spawn(move || {
        let t = Instant::now();
        let r = wait1(d2.b(), e, abi::KFD_EVENT_TIMEOUT_INFINITE);
        (r, t.elapsed())
    });
    std::thread::sleep(Duration::from_millis(50));
    ioctl::set_event(dev.b(), e).unwrap();
    let (r, waited) = waiter.join().unwrap();
    assert_eq!(r, abi::KFD_IOC_WAIT_RESULT_COMPLETE);
    assert!(waited >= Duration::from_millis(40), "{waited:?}");
    // With a waiter present the auto-reset event was handed to it, not left signaled.
    assert_eq!(wait1(dev.b(), e, 0), abi::KFD_IOC_WAIT_RESULT_TIMEOUT);
}

#[test]
fn timeout_expires() {
    let dev = open("emu:mi210");
    let b = dev.b();
    let e = create(b, abi::KFD_IOC_EVENT_SIGNAL, false).event_id;
    let t = Instant::now();
    assert_eq!(wait1(b, e, 30), abi::KFD_IOC_WAIT_RESULT_TIMEOUT);
    assert!(t.elapsed() >= Duration::from_millis(30));
}

#[test]
fn wait_for_all_and_any() {
    let dev = Arc::new(open("emu:mi210"));
    let b = dev.b();
    let e1 = create(b, abi::KFD_IOC_EVENT_SIGNAL, false).event_id;
    let e2 = create(b, abi::KFD_IOC_EVENT_SIGNAL, false).event_id;
    ioctl::set_event(b, e1).unwrap();
    let mut evs = [EventData::for_signal(e1, 0), EventData::for_signal(e2, 0)];
    assert_eq!(
        ioctl::wait_events(b, &mut evs, false, 0).unwrap(),
        abi::KFD_IOC_WAIT_RESULT_COMPLETE
    );
    assert_eq!(
        ioctl::wait_events(b, &mut evs, true, 0).unwrap(),
        abi::KFD_IOC_WAIT_RESULT_TIMEOUT
    );
    let d2 = dev.clone();
    let waiter = std::thread::spawn(move || {
        let mut evs = [EventData::for_signal(e1, 0), EventData::for_signal(e2, 0)];
        ioctl::wait_events(d2.b(), &mut evs, true, 10_000).unwrap()
    });
    std::thread::sleep(Duration::from_millis(20));
    ioctl::set_event(b, e2).unwrap();
    assert_eq!(waiter.join().unwrap(), abi::KFD_IOC_WAIT_RESULT_COMPLETE);
    // No events at all: complete at once.
    assert_eq!(
        ioctl::wait_events(b, &mut [], true, 0).unwrap(),
        abi::KFD_IOC_WAIT_RESULT_COMPLETE
    );
}

#[test]
fn event_age_prevents_lost_wakeups() {
    let dev = open("emu:mi210");
    let b = dev.b();
    let e = create(b, abi::KFD_IOC_EVENT_SIGNAL, true).event_id;
    // A new event has age 1. Waiting with age 1 sleeps (times out here).
    let mut ev = [EventData::for_signal(e, 1)];
    assert_eq!(
        ioctl::wait_events(b, &mut ev, false, 0).unwrap(),
        abi::KFD_IOC_WAIT_RESULT_TIMEOUT
    );
    // The event fires (age 2) and is consumed by someone else...
    ioctl::set_event(b, e).unwrap();
    assert_eq!(wait1(b, e, 0), abi::KFD_IOC_WAIT_RESULT_COMPLETE);
    // ...a waiter that last saw age 1 still completes at once and learns age 2.
    let mut ev = [EventData::for_signal(e, 1)];
    assert_eq!(
        ioctl::wait_events(b, &mut ev, false, 0).unwrap(),
        abi::KFD_IOC_WAIT_RESULT_COMPLETE
    );
    assert_eq!(ev[0].signal().last_event_age, 2);
    // With the current age it sleeps again.
    assert_eq!(
        ioctl::wait_events(b, &mut ev, false, 0).unwrap(),
        abi::KFD_IOC_WAIT_RESULT_TIMEOUT
    );
    ioctl::set_event(b, e).unwrap();
    assert_eq!(
        ioctl::wait_events(b, &mut ev, false, 0).unwrap(),
        abi::KFD_IOC_WAIT_RESULT_COMPLETE
    );
    assert_eq!(ev[0].signal().last_event_age, 3);
    // Age 0 means "no age": the payload is left alone.
    ioctl::set_event(b, e).unwrap();
    let mut ev0 = [EventData::for_signal(e, 0)];
    assert_eq!(
        ioctl::wait_events(b, &mut ev0, false, 0).unwrap(),
        abi::KFD_IOC_WAIT_RESULT_COMPLETE
    );
    assert_eq!(ev0[0].signal().last_event_age, 0);
}

#[test]
fn many_waiters_many_setters_no_lost_wakeup() {
    let dev = Arc::new(open("emu:mi210"));
    let e = create(dev.b(), abi::KFD_IOC_EVENT_SIGNAL, true).event_id;
    let counter = Arc::new(AtomicU64::new(0));
    let rounds = 200;
    // A consumer that tracks ages never misses a set, even racing with the setter.
    let d2 = dev.clone();
    let c2 = counter.clone();
    let consumer = std::thread::spawn(move || {
        let mut age = 1;
        let mut seen = 0;
        while seen < rounds {
            let mut ev = [EventData::for_signal(e, age)];
            let r = ioctl::wait_events(d2.b(), &mut ev, false, 10_000).unwrap();
            assert_eq!(r, abi::KFD_IOC_WAIT_RESULT_COMPLETE);
            let new_age = ev[0].signal().last_event_age;
            seen += new_age - age;
            age = new_age;
        }
        c2.store(seen, Ordering::SeqCst);
    });
    for _ in 0..rounds {
        ioctl::set_event(dev.b(), e).unwrap();
        if rand_yield() {
            std::thread::yield_now();
        }
    }
    consumer.join().unwrap();
    assert_eq!(counter.load(Ordering::SeqCst), rounds);
}

fn rand_yield() -> bool {
    static X: AtomicU64 = AtomicU64::new(0x9e37_79b9);
    let v = X.fetch_add(0x9e37_79b9_7f4a_7c15, Ordering::Relaxed);
    v & 0x100 != 0
}

#[test]
fn destroying_an_awaited_event_fails_the_wait() {
    let dev = Arc::new(open("emu:mi210"));
    let e = create(dev.b(), abi::KFD_IOC_EVENT_SIGNAL, false).event_id;
    let d2 = dev.clone();
    let waiter = std::thread::spawn(move || {
        let mut ev = [EventData::for_signal(e, 0)];
        let r = ioctl::wait_events(d2.b(), &mut ev, false, 10_000);
        r.map_err(|x| x.errno)
    });
    std::thread::sleep(Duration::from_millis(30));
    ioctl::destroy_event(dev.b(), e).unwrap();
    assert_eq!(waiter.join().unwrap(), Err(Errno::IO));
}

#[test]
fn user_event_page_bo() {
    let dev = open("emu:mi300x");
    let b = dev.b();
    let r = Reservation::new(1 << 21, 1 << 21);
    let a = alloc(
        &dev,
        0,
        r.base,
        32768,
        abi::KFD_IOC_ALLOC_MEM_FLAGS_GTT | abi::KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE,
    )
    .unwrap();
    let p = kfd_common::cpu_map(&dev, 0, &a).unwrap();
    // A VRAM BO or an unknown handle is refused.
    let v = alloc(
        &dev,
        0,
        r.base + 65536,
        32768,
        abi::KFD_IOC_ALLOC_MEM_FLAGS_VRAM,
    )
    .unwrap();
    let mut c = CreateEventArgs {
        event_type: abi::KFD_IOC_EVENT_SIGNAL,
        event_page_offset: v.handle,
        ..Default::default()
    };
    assert_eq!(errno(ioctl::create_event(b, &mut c)), Errno::INVAL);
    c.event_page_offset = a.handle + 100;
    assert_eq!(errno(ioctl::create_event(b, &mut c)), Errno::INVAL);
    c.event_page_offset = a.handle;
    ioctl::create_event(b, &mut c).unwrap();
    assert_eq!(c.event_id, 1);
    // The page was set to all ones.
    // SAFETY: the BO is mapped.
    unsafe {
        assert_eq!(
            p.cast::<u64>().add(1).read_volatile(),
            UNSIGNALED_EVENT_SLOT
        )
    };
    // Only once.
    let mut c2 = CreateEventArgs {
        event_type: abi::KFD_IOC_EVENT_SIGNAL,
        event_page_offset: a.handle,
        ..Default::default()
    };
    assert_eq!(errno(ioctl::create_event(b, &mut c2)), Errno::INVAL);
    // The signal BO may not be freed.
    assert_eq!(errno(ioctl::free_memory_of_gpu(b, a.handle)), Errno::PERM);
}
