//! D16 loads (`*_load_{u,s}byte_d16[_hi]`, `*_load_short_d16[_hi]`) over FLAT, GLOBAL,
//! SCRATCH, MUBUF and MTBUF (`tbuffer_load_format_d16_x/_xyz`) on the emulated gfx942 and gfx90a: the loaded half is the datum, and
//! the other half of the VGPR is zeroed with SRAM ECC on (the presets: `sramecc+`) and
//! kept with it off (firmware-notes/isa-gfx9.md "D16 loads and SRAMECC"). Kernel:
//! `test-kernels/cl/isa_d16.cl`.

mod shader_common;
use shader_common::*;

/// What slot `k` of lane `i` must hold (see the kernel's slot list).
fn expected(k: usize, s: u16, old: u32, sramecc: bool) -> u32 {
    let b = s as u8;
    // Slot → (form, high half): 0 ubyte, 1 sbyte, 2 short.
    let (form, hi) = match k {
        0..=5 => (k / 2, k % 2 == 1),
        6 | 7 => (2, k == 7),
        8..=13 => ((k - 8) / 2, k % 2 == 1),
        _ => (2, k == 15),
    };
    let half = match form {
        0 => b as u32,
        1 => b as i8 as i16 as u16 as u32,
        _ => s as u32,
    };
    let keep = if sramecc { 0 } else { old };
    if hi {
        (keep & 0xFFFF) | half << 16
    } else {
        (keep & 0xFFFF_0000) | half
    }
}

/// Slots per lane.
const S: usize = 19;

/// Slots 16-18 (MTBUF D16 `_x` of src[i], `_xyz` of src[b..b + 3], b = i & !3) for lane i.
fn expected_typed(i: usize, src: &[u16], old: u32, sramecc: bool) -> [u32; 3] {
    let keep = |k: u32| {
        if sramecc {
            0
        } else {
            old.wrapping_add(k) & 0xFFFF_0000
        }
    };
    let b = i & !3;
    [
        keep(16) | src[i] as u32,
        src[b] as u32 | (src[b + 1] as u32) << 16,
        keep(18) | src[b + 2] as u32,
    ]
}

fn check(dev: &Dev, sramecc: bool) {
    let n = 128usize;
    let seed = 0xC0DE_1234u32;
    // Both signs of every byte and short occur.
    let src: Vec<u16> = rand_u32(n, 7).iter().map(|&x| x as u16).collect();
    let mut q = dev.queue();
    let m = dev.load("cl/isa_d16.cl");
    let (ws, wo) = (dev.upload(&src), dev.alloc(S * n * 4));
    let args = Args::default().ptr(&ws).ptr(&wo).u32(n as u32).u32(seed);
    dev.ensure_scratch(&mut q, 64);
    dev.run_ok(
        &mut q,
        &m,
        "d16_loads",
        [n as u32, 1, 1],
        [64, 1, 1],
        0,
        &args.0,
    );
    let out: Vec<u32> = dev.download(&wo, S * n);
    let t = dev.target;
    for i in 0..n {
        let old = seed ^ (i as u32).wrapping_mul(0x9E37_79B9);
        for k in 0..16 {
            let want = expected(k, src[i], old.wrapping_add(k as u32), sramecc);
            assert_eq!(
                out[S * i + k],
                want,
                "{t} sramecc={sramecc} lane {i} slot {k}: src {:#06x}, old {:#010x}",
                src[i],
                old.wrapping_add(k as u32)
            );
        }
        let typed = expected_typed(i, &src, old, sramecc);
        assert_eq!(
            out[S * i + 16..S * i + S],
            typed,
            "{t} sramecc={sramecc} lane {i} MTBUF D16 _x/_xyz slots 16-18"
        );
    }
}

#[test]
fn d16_loads_zero_the_other_half_with_sramecc() {
    for dev in devices() {
        check(&dev, true);
    }
}

#[test]
fn d16_loads_keep_the_other_half_without_sramecc() {
    assert!(
        test_kernels::toolchain_available(),
        "clang-19 and ld.lld-19 are needed"
    );
    for &(t, v) in TARGETS.iter() {
        check(&Dev::with_config(t, v, 1, false), false);
    }
}
