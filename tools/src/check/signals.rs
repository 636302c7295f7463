//! signals: the `amd_signal_t` interrupt path (CP decrement, event mailbox, KFD event)
//! and the event page rules, on a KFD process of their own.

use std::sync::atomic::Ordering;

use kfd::abi::{self, CreateEventArgs};
use kfd::Errno;
use kfdrt::{Buffer, Device, MemoryKind};

use pm4::aql::AqlPacket;

use super::events::woken_by;
use super::raw::{RawAql, RawSignals};
use super::{ensure, pass, pass_with, require, Check, CheckResult, Ctx, OrFail};

/// The signal checks.
pub fn checks() -> Vec<Check> {
    vec![
        Check {
            name: "signals.mailbox_interrupt_wakes_waiter",
            what: "a completion signal with an event mailbox wakes a WAIT_EVENTS sleeper when the CP decrements it",
            run: mailbox_interrupt,
        },
        Check {
            name: "signals.event_page_slots",
            what: "the first CREATE_EVENT takes the event page; a second page is EINVAL; slots and trigger data are distinct",
            run: event_page_slots,
        },
    ]
}

/// A fresh event page (GTT, GPU-mapped) and the CREATE_EVENT arguments of a signal event
/// that hands it to KFD (`what` names the page in errors).
fn page_event_args(dev: &Device, what: &str) -> Result<(Buffer, CreateEventArgs), String> {
    let page = dev
        .alloc(
            MemoryKind::Signal,
            0,
            abi::KFD_SIGNAL_EVENT_LIMIT as usize * 8,
        )
        .or_fail(what)?;
    let a = CreateEventArgs {
        event_type: abi::KFD_IOC_EVENT_SIGNAL,
        auto_reset: 1,
        event_page_offset: page.handle(),
        ..Default::default()
    };
    Ok((page, a))
}

/// An event page handed to KFD with the first signal event.
fn event_page(dev: &Device) -> Result<(Buffer, CreateEventArgs), String> {
    let (page, mut a) = page_event_args(dev, "event page")?;
    kfd::ioctl::create_event(dev.backend().as_ref(), &mut a).or_fail("CREATE_EVENT with page")?;
    Ok((page, a))
}

fn mailbox_interrupt(ctx: &Ctx) -> CheckResult {
    let dev = require!(ctx.private_device());
    let (page, ev) = event_page(&dev)?;
    let mailbox = page.va() + ev.event_slot_index as u64 * 8;
    let s = RawSignals::new(&dev)?;
    // Declared after the memory its packets name: destroyed first (see Drain).
    let mut q = RawAql::new(&dev, 0, 64)?;
    let dep = s.init(0, 1, None);
    let done = s.init(1, 1, Some((mailbox, ev.event_trigger_data)));
    q.submit(&[AqlPacket::barrier_and([dep, 0, 0, 0, 0], done)])?;
    let dt = woken_by(dev.backend().as_ref(), ev.event_id, "the interrupt", || {
        s.value(0).store(0, Ordering::Release);
        Ok(())
    })?;
    ensure!(
        s.value(1).load(Ordering::Acquire) == 0,
        "completion signal is {} after the wake-up",
        s.value(1).load(Ordering::Acquire)
    );
    let _ = kfd::ioctl::destroy_event(dev.backend().as_ref(), ev.event_id);
    drop(q);
    pass_with(format!("woke after {:.1} ms", dt.as_secs_f64() * 1e3))
}

fn event_page_slots(ctx: &Ctx) -> CheckResult {
    let dev = require!(ctx.private_device());
    let b = dev.backend().as_ref();
    let (_page, first) = event_page(&dev)?;
    let (_page2, mut again) = page_event_args(&dev, "second page")?;
    match kfd::ioctl::create_event(b, &mut again) {
        Ok(()) => return Err("a second event page was accepted".into()),
        Err(e) if e.errno == Errno::INVAL => {}
        Err(e) => return Err(format!("second event page: want EINVAL, got {e}")),
    }
    let mut evs = vec![first];
    for _ in 0..3 {
        let mut a = CreateEventArgs {
            event_type: abi::KFD_IOC_EVENT_SIGNAL,
            auto_reset: 1,
            ..Default::default()
        };
        kfd::ioctl::create_event(b, &mut a).or_fail("CREATE_EVENT")?;
        evs.push(a);
    }
    let mut slots: Vec<u32> = evs.iter().map(|e| e.event_slot_index).collect();
    let mut trig: Vec<u32> = evs.iter().map(|e| e.event_trigger_data).collect();
    slots.sort_unstable();
    slots.dedup();
    trig.sort_unstable();
    trig.dedup();
    ensure!(slots.len() == 4, "event slots not distinct: {slots:?}");
    ensure!(trig.len() == 4, "trigger data not distinct: {trig:?}");
    ensure!(
        slots.iter().all(|&s| s < abi::KFD_SIGNAL_EVENT_LIMIT),
        "slot beyond the page: {slots:?}"
    );
    for e in &evs {
        let _ = kfd::ioctl::destroy_event(b, e.event_id);
    }
    pass()
}
