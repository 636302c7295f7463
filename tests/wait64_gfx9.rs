//! Exact 64-bit stream waits on gfx9 (MI250X gfx90a, MI300X gfx942) when the mask has
//! bit 63 and the value is not a power of two: the case no single gfx9 CP packet does
//! exactly (no WAIT_REG_MEM64; BARRIER_VALUE compares signed), which kfdrt waits with its
//! wait kernel (`kfdrt::raw::waitkernel`). Each case: the write after the wait has not happened
//! while the condition is false — including memory values for which a signed compare
//! would pass — and happens once the host makes it true.

mod common;

use std::sync::atomic::{AtomicU64, Ordering};

use common::{emu, settle, signal_mem, wait_until};
use kfdrt::{Device, ErrorKind, Stream};
use kfdrt::{WaitCompare, WriteValueFlags};

const PRESETS: [&str; 2] = ["emu:mi250x", "emu:mi300x"];
const SIGN: u64 = 1 << 63;

/// The stream's write to `out` stays behind its wait while the cell holds each of `falses`,
/// and lands after the cell holds `truth`.
fn check_order(
    s: &Stream,
    cell: &AtomicU64,
    out: &AtomicU64,
    falses: &[u64],
    truth: u64,
    what: &str,
) {
    for &f in falses {
        cell.store(f, Ordering::Release);
        settle();
        assert_eq!(
            out.load(Ordering::Acquire),
            0,
            "{what}: the write ran while memory held {f:#x}"
        );
        assert_eq!(
            s.query().unwrap_err().kind(),
            ErrorKind::NotReady,
            "{what}: stream idle while memory held {f:#x}"
        );
    }
    cell.store(truth, Ordering::Release);
    wait_until(what, || out.load(Ordering::Acquire) == 1);
    s.synchronize().unwrap();
}

struct Case {
    flags: WaitCompare,
    value: u64,
    mask: u64,
    falses: &'static [u64],
    truth: u64,
}

const CASES: [Case; 6] = [
    // GEQ over bit 63: a signed compare would pass 0x7fff.. (positive) and 2^63 - 1.
    Case {
        flags: WaitCompare::Gte,
        value: SIGN + 5,
        mask: u64::MAX,
        falses: &[0, 0x7fff_ffff_ffff_ffff, SIGN + 4],
        truth: SIGN + 6,
    },
    // GEQ of a small value: a signed compare would fail u64::MAX (-1) forever.
    Case {
        flags: WaitCompare::Gte,
        value: 3,
        mask: u64::MAX,
        falses: &[2],
        truth: u64::MAX,
    },
    // GEQ with a mask that keeps bit 63 and the low byte.
    Case {
        flags: WaitCompare::Gte,
        value: SIGN | 0x81,
        mask: SIGN | 0xff,
        falses: &[0x7fff_ffff_ffff_ffff, SIGN | 0x80 | 0xff00],
        truth: SIGN | 0x81 | 0x1234_0000,
    },
    Case {
        flags: WaitCompare::Eq,
        value: SIGN | 0x1234_5677,
        mask: u64::MAX,
        falses: &[0x1234_5677, SIGN | 0x1234_5676],
        truth: SIGN | 0x1234_5677,
    },
    Case {
        flags: WaitCompare::And,
        value: SIGN | 6,
        mask: u64::MAX,
        falses: &[1, 0x7fff_ffff_ffff_fff9],
        truth: SIGN,
    },
    // NOR (full mask): some bit clear in both memory and value.
    Case {
        flags: WaitCompare::Nor,
        value: 0x7fff_ffff_ffff_fffe,
        mask: u64::MAX,
        falses: &[SIGN | 1, u64::MAX],
        truth: 1,
    },
];

fn run_cases(dev: &Device) {
    let mem = signal_mem(dev, 4096);
    let cell = mem.atomic_u64(0).unwrap();
    for (i, c) in CASES.iter().enumerate() {
        let out = mem.atomic_u64(64 + 8 * i).unwrap();
        let s = dev.create_stream(0).unwrap();
        cell.store(c.falses[0], Ordering::Release);
        s.wait_value64(mem.va(), c.value, c.flags, c.mask).unwrap();
        s.write_value32(mem.va() + 64 + 8 * i as u64, 1, WriteValueFlags::DEFAULT)
            .unwrap();
        let what = format!(
            "{} case {i} (flags {:?} value {:#x} mask {:#x})",
            dev.gpu(0).unwrap().gfx_name(),
            c.flags,
            c.value,
            c.mask
        );
        check_order(&s, cell, out, c.falses, c.truth, &what);
        assert_eq!(out.load(Ordering::Acquire), 1);
    }
}

#[test]
fn wait_value64_over_bit_63_is_exact_on_mi250x() {
    run_cases(&emu(PRESETS[0]));
}

#[test]
fn wait_value64_over_bit_63_is_exact_on_mi300x() {
    run_cases(&emu(PRESETS[1]));
}

/// The wait kernel itself, launched through the Module API, for every WAIT_REG_MEM
/// function (unsigned, over bit 63); later stream work is held until it ends.
#[test]
fn wait_kernel_every_function_is_unsigned() {
    // (function, reference, false memory values, true memory value); mask keeps bit 63
    // and the low 16 bits.
    let mask = SIGN | 0xffff;
    let cases: [(u32, u64, &[u64], u64); 6] = [
        (1, SIGN | 5, &[SIGN | 5, u64::MAX], 0x7fff_ffff_ffff_0004), // <
        (2, SIGN | 5, &[SIGN | 6], 5),                               // <=
        (3, SIGN | 5, &[5, SIGN | 4], SIGN | 5 | 0x10_0000),         // ==
        (4, SIGN | 5, &[SIGN | 5, SIGN | 5 | 0xff_0000], 5),         // !=
        (5, SIGN | 5, &[0x7fff_ffff_ffff_ffff, SIGN | 4], SIGN | 5), // >=
        (6, 3, &[3, 0x7fff_ffff_ffff_0000], SIGN),                   // >
    ];
    for preset in PRESETS {
        let dev = emu(preset);
        let gfx = dev.gpu(0).unwrap().gfx_name();
        let Some(co) = kfdrt::raw::waitkernel::code_object(&gfx) else {
            // A KFDRT_DEVICE override to a non-gfx9 preset: no wait kernel there.
            return;
        };
        let m = dev.load_module(0, co).unwrap();
        let k = m.kernel(kfdrt::raw::waitkernel::KERNEL_NAME).unwrap();
        let mem = signal_mem(&dev, 4096);
        let cell = mem.atomic_u64(0).unwrap();
        for (i, &(f, reference, falses, truth)) in cases.iter().enumerate() {
            let out = mem.atomic_u64(64 + 8 * i).unwrap();
            cell.store(falses[0], Ordering::Release);
            let s = dev.create_stream(0).unwrap();
            let mut a = k.args();
            a.ptr(mem.va())
                .unwrap()
                .arg(&reference)
                .unwrap()
                .arg(&mask)
                .unwrap()
                .arg(&f)
                .unwrap();
            s.launch(&k, 1, 1, 0, &a).unwrap();
            s.write_value32(mem.va() + 64 + 8 * i as u64, 1, WriteValueFlags::DEFAULT)
                .unwrap();
            check_order(
                &s,
                cell,
                out,
                falses,
                truth,
                &format!("{gfx} function {f} reference {reference:#x}"),
            );
        }
    }
}

/// Another stream's `writeValue64` (GPU work on another queue, not a host store) releases
/// the wait kernel: the polling kernel must not hold up the GPU's other queues.
#[test]
fn another_streams_write_releases_the_wait_kernel() {
    for spec in PRESETS {
        let dev = emu(spec);
        let mem = signal_mem(&dev, 4096);
        let cell = mem.atomic_u64(0).unwrap();
        let out = mem.atomic_u64(64).unwrap();
        let gate = mem.atomic_u64(128).unwrap();
        cell.store(5, Ordering::Release);
        let waiter = dev.create_stream(0).unwrap();
        waiter
            .wait_value64(mem.va(), SIGN | 5, WaitCompare::Gte, u64::MAX)
            .unwrap();
        waiter
            .write_value32(mem.va() + 64, 1, WriteValueFlags::DEFAULT)
            .unwrap();
        // The releasing stream is itself held by the host, so the order is fixed.
        let writer = dev.create_stream(0).unwrap();
        writer
            .wait_value64(mem.va() + 128, 1, WaitCompare::Eq, u64::MAX)
            .unwrap();
        writer
            .write_value64(mem.va(), SIGN | 7, WriteValueFlags::DEFAULT)
            .unwrap();
        settle();
        assert_eq!(
            out.load(Ordering::Acquire),
            0,
            "{spec}: ran before the write"
        );
        gate.store(1, Ordering::Release);
        wait_until(spec, || out.load(Ordering::Acquire) == 1);
        assert_eq!(cell.load(Ordering::Acquire), SIGN | 7);
        writer.synchronize().unwrap();
        waiter.synchronize().unwrap();
    }
}
