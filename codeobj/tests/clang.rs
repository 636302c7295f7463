//! Code objects built by clang-19 from the repository's kernel sources, for gfx90a and
//! gfx942: kernels, descriptors, metadata, relocations, globals, targets, bundles, and
//! corrupt input.

use codeobj::{bundle, CodeObject, CodeObjectVersion, Error, Feature, TargetId, ValueKind};

const TARGETS: [&str; 2] = ["gfx90a", "gfx942"];

fn build(src: &str, t: &str) -> Vec<u8> {
    test_kernels::build(src, t).unwrap_or_else(|e| panic!("building {src} for {t}: {e}"))
}

#[test]
fn vadd_kernel_descriptor_and_metadata() {
    for t in TARGETS {
        let co = CodeObject::parse(&build("cl/vadd.cl", t)).unwrap();
        assert_eq!(co.version, CodeObjectVersion::V5, "clang-19 defaults to v5");
        assert_eq!(co.target.processor, t);
        assert_eq!(co.kernels.len(), 1);
        let k = co.kernel("vadd").unwrap();
        assert_eq!(k.meta.symbol, "vadd.kd");
        assert_eq!(k.kd_offset % 64, 0);
        assert_eq!(k.descriptor.kernarg_size, k.meta.kernarg_segment_size);
        assert_eq!(k.meta.kernarg_segment_size, 288);
        assert_eq!(k.meta.kernarg_segment_align, 8);
        assert_eq!(k.meta.wavefront_size, 64);
        assert_eq!(k.meta.max_flat_workgroup_size, 256);
        assert!(k.meta.sgpr_count > 0 && k.meta.vgpr_count > 0);
        assert!(!k.meta.uses_dynamic_stack);
        // The entry is the `vadd` function symbol.
        let f = co.symbols.iter().find(|s| s.name == "vadd").unwrap();
        assert_eq!(k.entry_offset(), f.address);
        assert!(k
            .descriptor
            .has(pm4::kd::code_props::ENABLE_SGPR_KERNARG_SEGMENT_PTR));
        let a = &k.meta.args;
        assert_eq!(a[0].value_kind, ValueKind::GlobalBuffer);
        assert_eq!((a[0].offset, a[0].size, a[0].align), (0, 8, 8));
        assert_eq!(a[3].value_kind, ValueKind::ByValue);
        assert_eq!((a[3].offset, a[3].size, a[3].align), (24, 4, 4));
        let kinds: Vec<ValueKind> = a.iter().skip(4).map(|a| a.value_kind.clone()).collect();
        assert_eq!(kinds[0], ValueKind::HiddenBlockCount(0));
        assert_eq!(kinds[3], ValueKind::HiddenGroupSize(0));
        assert_eq!(kinds[6], ValueKind::HiddenRemainder(0));
        assert!(kinds.contains(&ValueKind::HiddenGridDims));
        assert!(a.iter().skip(4).all(|a| a.value_kind.is_hidden()));
    }
}

#[test]
fn lds_scratch_and_hip_metadata() {
    for t in TARGETS {
        let r = CodeObject::parse(&build("cl/reduce.cl", t)).unwrap();
        let k = r.kernel("reduce").unwrap();
        assert_eq!(k.meta.group_segment_fixed_size, 1024);
        assert_eq!(k.descriptor.group_segment_fixed_size, 1024);
        assert_eq!(k.meta.reqd_workgroup_size, Some([256, 1, 1]));
        let p = CodeObject::parse(&build("cl/private_array.cl", t)).unwrap();
        let k = p.kernel("private_array").unwrap();
        assert!(k.meta.private_segment_fixed_size >= 1024, "{:?}", k.meta);
        assert!(k.descriptor.private_segment_enabled());
        let d = CodeObject::parse(&build("hip/dynlds.hip", t)).unwrap();
        let k = d.kernel("dynlds").unwrap();
        assert!(k
            .meta
            .args
            .iter()
            .any(|a| a.value_kind == ValueKind::HiddenDynamicLdsSize));
    }
}

#[test]
fn relocations_and_globals() {
    for t in TARGETS {
        let co = CodeObject::parse(&build("cl/globals.cl", t)).unwrap();
        let counter = co.global("counter").expect("counter by name").clone();
        assert_eq!(counter.size, 4);
        let ptr = co.global("counter_ptr").unwrap().clone();
        assert!(co.global("bump.kd").is_none());
        let r = co
            .relocations
            .iter()
            .find(|r| r.offset == ptr.address)
            .expect("a relocation fills counter_ptr");
        assert_eq!(r.r_type, codeobj::reloc::RELATIVE64);
        for base in [0u64, 0x7f12_3400_0000] {
            let img = co.load_image(base).unwrap();
            assert_eq!(img.len() as u64, co.image_size());
            let at = ptr.address as usize;
            let v = u64::from_le_bytes(img[at..at + 8].try_into().unwrap());
            assert_eq!(v, base + counter.address, "base {base:#x}");
            let c = counter.address as usize;
            assert_eq!(u32::from_le_bytes(img[c..c + 4].try_into().unwrap()), 41);
        }
        assert!(matches!(co.load_image(0x123), Err(Error::Relocation(_))));
    }
}

#[test]
fn target_check_names_both() {
    let co = build("cl/vadd.cl", "gfx90a");
    let dev942 = TargetId::new("gfx942", Feature::On, Feature::Off);
    let e = CodeObject::parse_for(&co, &dev942).unwrap_err();
    let s = e.to_string();
    assert!(matches!(e, Error::TargetMismatch { .. }));
    assert!(
        s.contains("amdgcn-amd-amdhsa--gfx90a") && s.contains("gfx942:sramecc+:xnack-"),
        "{s}"
    );
    let dev90a = TargetId::new("gfx90a", Feature::On, Feature::Off);
    assert!(CodeObject::parse_for(&co, &dev90a).is_ok());
    // A pinned feature that disagrees with the device.
    let xn = test_kernels::build("cl/vadd.cl", "gfx942:xnack+").unwrap();
    let e = CodeObject::parse_for(&xn, &dev942).unwrap_err().to_string();
    assert!(e.contains("gfx942:xnack+"), "{e}");
}

#[test]
fn offload_bundle_picks_the_device_entry() {
    let a = build("cl/vadd.cl", "gfx90a");
    let b = build("cl/saxpy.cl", "gfx942");
    let fat = bundle::build(&[
        ("host-x86_64-unknown-linux-gnu", b""),
        ("hipv4-amdgcn-amd-amdhsa--gfx90a", &a),
        ("hipv4-amdgcn-amd-amdhsa--gfx942", &b),
    ]);
    let d942 = TargetId::new("gfx942", Feature::On, Feature::Off);
    let co = CodeObject::parse_for(&fat, &d942).unwrap();
    assert!(co.kernel("saxpy").is_ok());
    let d90a = TargetId::new("gfx90a", Feature::On, Feature::Off);
    let co = CodeObject::parse_for(&fat, &d90a).unwrap();
    assert!(co.kernel("vadd").is_ok());
    let d1100 = TargetId::new("gfx1100", Feature::Off, Feature::Off);
    let e = CodeObject::parse_for(&fat, &d1100).unwrap_err().to_string();
    assert!(
        e.contains("gfx1100") && e.contains("hipv4-amdgcn-amd-amdhsa--gfx942"),
        "{e}"
    );
    assert!(matches!(
        CodeObject::parse(&fat),
        Err(Error::Unsupported(_))
    ));
}

#[test]
fn code_object_v4_and_v6() {
    for (flag, v) in [
        ("-mcode-object-version=4", CodeObjectVersion::V4),
        ("-mcode-object-version=6", CodeObjectVersion::V6),
    ] {
        let elf = test_kernels::build_with("cl/vadd.cl", "gfx942", &["-Xclang", flag])
            .or_else(|_| test_kernels::build_with("cl/vadd.cl", "gfx942", &[flag]))
            .unwrap();
        let co = CodeObject::parse(&elf).unwrap();
        assert_eq!(co.version, v, "{flag}");
        let k = co.kernel("vadd").unwrap();
        let kinds: Vec<_> = k.meta.args.iter().map(|a| a.value_kind.clone()).collect();
        if v == CodeObjectVersion::V4 {
            // v4 has no block counts: the workgroup size comes from the dispatch packet.
            assert!(
                !kinds.contains(&ValueKind::HiddenBlockCount(0)),
                "{kinds:?}"
            );
            assert!(k
                .descriptor
                .has(pm4::kd::code_props::ENABLE_SGPR_DISPATCH_PTR));
        } else {
            assert!(kinds.contains(&ValueKind::HiddenBlockCount(0)), "{kinds:?}");
        }
    }
}

#[test]
fn unaligned_input_parses() {
    let elf = build("cl/vadd.cl", "gfx942");
    let mut shifted = vec![0u8; elf.len() + 1];
    shifted[1..].copy_from_slice(&elf);
    let co = CodeObject::parse(&shifted[1..]).unwrap();
    assert_eq!(co.kernel("vadd").unwrap().meta.kernarg_segment_size, 288);
}

#[test]
fn missing_kernel_lists_the_kernels() {
    let co = CodeObject::parse(&build("cl/vadd.cl", "gfx942")).unwrap();
    let e = co.kernel("vsub").unwrap_err().to_string();
    assert!(e.contains("vsub") && e.contains("vadd"), "{e}");
}

#[test]
fn truncated_and_corrupt_elfs_are_errors() {
    let elf = build("cl/vadd.cl", "gfx942");
    // Every truncation is an error (the section headers are at the end), never a panic.
    for n in (0..elf.len()).step_by(7) {
        assert!(CodeObject::parse(&elf[..n]).is_err(), "prefix {n}");
    }
    // Byte flips: either an error or a parse, never a panic.
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    for _ in 0..3000 {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let mut m = elf.clone();
        let i = (seed as usize) % m.len();
        m[i] ^= (seed >> 32) as u8 | 1;
        codeobj::fuzz_parse(&m);
    }
    // Specific corruptions with specific errors.
    let mut m = elf.clone();
    m[18] = 62; // EM_X86_64
    assert!(matches!(CodeObject::parse(&m), Err(Error::Elf(s)) if s.contains("EM_AMDGPU")));
    let mut m = elf.clone();
    m[8] = 1; // v3
    assert!(matches!(CodeObject::parse(&m), Err(Error::Unsupported(s)) if s.contains("v3")));
    assert!(matches!(
        CodeObject::parse(b"not an elf"),
        Err(Error::Elf(_))
    ));
    // A metadata note whose msgpack is cut: find "amdhsa.kernels" and damage it.
    let at = elf
        .windows(14)
        .position(|w| w == b"amdhsa.kernels")
        .unwrap();
    let mut m = elf.clone();
    m[at - 1] = 0xc1; // a reserved msgpack marker instead of the key's header
    assert!(matches!(CodeObject::parse(&m), Err(Error::Metadata(_))));
}
