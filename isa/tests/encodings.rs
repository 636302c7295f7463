//! Hand-picked encodings of every class with the text LLVM 19 prints for them (taken from
//! `llvm-mc-19 -disassemble`, run without llvm installed), the decoded fields an interpreter
//! relies on, and robustness: no input panics.

use amdgpu_isa::{decode, sreg, Encoding, Mods, Opcode, Operand, Target};

fn words(bytes: &[u8]) -> Vec<u32> {
    bytes
        .chunks(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// (bytes, gfx90a text, gfx942 text)
const CASES: &[(&[u8], &str, &str)] = &[
    (&[0x01, 0x02, 0x04, 0x02], "v_add_f32_e32 v2, s1, v1", ""),
    (&[0x80, 0x02, 0x00, 0x7e], "v_mov_b32_e32 v0, 0", ""),
    (
        &[0xff, 0x02, 0x02, 0x7e, 0x00, 0x00, 0x80, 0x3f],
        "v_mov_b32_e32 v1, 1.0",
        "",
    ),
    (&[0x00, 0x03, 0x80, 0x7d], "v_cmp_f_i32_e32 vcc, v0, v1", ""),
    (
        &[0x02, 0x00, 0x08, 0xd1, 0x01, 0x05, 0x02, 0x00],
        "v_mul_u32_u24_e64 v2, v1, v2",
        "",
    ),
    (
        &[0x02, 0x6a, 0x19, 0xd1, 0x01, 0x05, 0x02, 0x00],
        "v_add_co_u32_e64 v2, vcc, v1, v2",
        "",
    ),
    (
        &[0x00, 0x00, 0xff, 0xd1, 0x01, 0x05, 0x0e, 0x04],
        "v_add3_u32 v0, v1, v2, v3",
        "",
    ),
    (
        &[0x04, 0x40, 0x8e, 0xd3, 0x00, 0x05, 0x0a, 0x18],
        "v_pk_fma_f16 v4, v0, v2, s2",
        "",
    ),
    (
        &[0x00, 0x80, 0xcc, 0xd3, 0x00, 0x05, 0x02, 0x04],
        "v_mfma_f32_32x32x8f16 a[0:15], v[0:1], v[2:3], a[0:15]",
        "v_mfma_f32_32x32x8_f16 a[0:15], v[0:1], v[2:3], a[0:15]",
    ),
    (
        &[0x00, 0x00, 0xd8, 0xd3, 0x00, 0x01, 0x00, 0x18],
        "v_accvgpr_read_b32 v0, a0",
        "",
    ),
    (
        &[0xfa, 0x02, 0x00, 0x7e, 0x01, 0x1b, 0x00, 0xff],
        "v_mov_b32_dpp v0, v1 quad_perm:[3,2,1,0] row_mask:0xf bank_mask:0xf",
        "",
    ),
    (
        &[0xfa, 0x02, 0x02, 0x02, 0x01, 0x11, 0x09, 0xff],
        "v_add_f32_dpp v1, v1, v1 row_shr:1 row_mask:0xf bank_mask:0xf bound_ctrl:1",
        "",
    ),
    (
        &[0xf9, 0x02, 0x00, 0x7e, 0x01, 0x06, 0x05, 0x00],
        "v_mov_b32_sdwa v0, v1 dst_sel:DWORD dst_unused:UNUSED_PAD src0_sel:WORD_1",
        "",
    ),
    (&[0x00, 0x01, 0x03, 0x80], "s_add_u32 s3, s0, s1", ""),
    (&[0x02, 0x01, 0x80, 0xbe], "s_mov_b64 s[0:1], s[2:3]", ""),
    (&[0x01, 0x00, 0x0c, 0xbf], "s_bitcmp0_b32 s1, s0", ""),
    (&[0x05, 0x00, 0x85, 0xbf], "s_cbranch_scc1 5", ""),
    (&[0x7f, 0xc0, 0x8c, 0xbf], "s_waitcnt lgkmcnt(0)", ""),
    (
        &[0x80, 0x00, 0x02, 0xc0, 0x2c, 0x00, 0x00, 0x00],
        "s_load_dword s2, s[0:1], 0x2c",
        "",
    ),
    (
        &[0x10, 0x00, 0x1a, 0xd8, 0x00, 0x01, 0x00, 0x00],
        "ds_write_b32 v0, v1 offset:16",
        "",
    ),
    (
        &[0x01, 0x02, 0x6e, 0xd8, 0x02, 0x00, 0x00, 0x03],
        "ds_read2_b32 v[3:4], v2 offset0:1 offset1:2",
        "",
    ),
    (
        &[0x00, 0x80, 0x50, 0xdc, 0x00, 0x00, 0x7f, 0x03],
        "global_load_dword v3, v[0:1], off",
        "",
    ),
    (
        &[0x10, 0x80, 0x70, 0xdc, 0x00, 0x01, 0x00, 0x00],
        "global_store_dword v0, v1, s[0:1] offset:16",
        "",
    ),
    (
        &[0x04, 0x40, 0x50, 0xdc, 0x00, 0x00, 0x7f, 0x03],
        "scratch_load_dword v3, v0, off offset:4",
        // gfx94x: vaddr is used only with the sve bit
        "scratch_load_dword v3, off, off offset:4",
    ),
    (
        &[0x04, 0x10, 0x30, 0xe0, 0x00, 0x01, 0x00, 0x80],
        "buffer_store_format_d16_x v1, v0, s[0:3], 0 offen offset:4",
        "",
    ),
    (&[0x00, 0x00, 0x80, 0xbf], "s_nop 0", ""),
    (&[0x1e, 0x1c, 0x80, 0xbe], "s_getpc_b64 s[0:1]", ""),
];

#[test]
fn llvm_mc_texts_of_every_class() {
    for (bytes, t90a, t942) in CASES {
        let w = words(bytes);
        for (target, want) in [
            (Target::Gfx90a, *t90a),
            (Target::Gfx942, if t942.is_empty() { *t90a } else { *t942 }),
        ] {
            let inst = decode(&w, target).unwrap_or_else(|e| panic!("{bytes:02x?}: {e}"));
            assert_eq!(inst.to_string(), want, "{target:?} {bytes:02x?}");
            assert_eq!(usize::from(inst.len), w.len(), "{target:?} {want}: length");
        }
    }
}

#[test]
fn fields_an_interpreter_uses() {
    // VOP2 with a literal: v_mov_b32 v1, 1.0 encoded as literal 0x3f800000
    let i = decode(
        &words(&[0xff, 0x02, 0x02, 0x7e, 0x00, 0x00, 0x80, 0x3f]),
        Target::Gfx942,
    )
    .unwrap();
    assert_eq!((i.op, i.enc, i.len), (Opcode::V_MOV_B32, Encoding::Vop1, 2));
    assert_eq!(i.src[0], Operand::Literal(0x3f80_0000));
    assert_eq!(i.dst[0], Operand::Vgpr { idx: 1, n: 1 });

    // VOP3B: v_add_co_u32_e64 v2, vcc, v1, v2 writes a scalar carry-out
    let i = decode(
        &words(&[0x02, 0x6a, 0x19, 0xd1, 0x01, 0x05, 0x02, 0x00]),
        Target::Gfx90a,
    )
    .unwrap();
    assert_eq!((i.op, i.enc), (Opcode::V_ADD_CO_U32, Encoding::Vop3b));
    assert_eq!(
        i.dst[1],
        Operand::Sreg {
            idx: sreg::VCC_LO,
            n: 2
        }
    );

    // MFMA: acc_cd puts C and D in AGPRs; A and B are VGPR pairs; same opcode on both targets
    let w = words(&[0x00, 0x80, 0xcc, 0xd3, 0x00, 0x05, 0x02, 0x04]);
    for t in [Target::Gfx90a, Target::Gfx942] {
        let i = decode(&w, t).unwrap();
        assert_eq!(
            (i.op, i.enc),
            (Opcode::V_MFMA_F32_32X32X8F16, Encoding::Mai)
        );
        assert_eq!(i.dst[0], Operand::Agpr { idx: 0, n: 16 });
        assert_eq!(i.src[0], Operand::Vgpr { idx: 0, n: 2 });
        assert_eq!(i.src[2], Operand::Agpr { idx: 0, n: 16 });
        assert!(matches!(
            i.mods,
            Mods::Mai {
                acc_cd: true,
                cbsz: 0,
                abid: 0,
                blgp: 0
            }
        ));
    }

    // DPP: the modifier dword is in mods, src0 is the VGPR of that dword
    let i = decode(
        &words(&[0xfa, 0x02, 0x02, 0x02, 0x01, 0x11, 0x09, 0xff]),
        Target::Gfx942,
    )
    .unwrap();
    assert_eq!((i.op, i.enc), (Opcode::V_ADD_F32, Encoding::Dpp));
    assert_eq!(
        i.mods,
        Mods::Dpp {
            ctrl: 0x111,
            row_mask: 0xf,
            bank_mask: 0xf,
            bound_ctrl: true,
            abs: 0,
            neg: 0
        }
    );

    // GLOBAL with saddr: 32-bit VGPR offset plus SGPR base
    let i = decode(
        &words(&[0x10, 0x80, 0x70, 0xdc, 0x00, 0x01, 0x00, 0x00]),
        Target::Gfx90a,
    )
    .unwrap();
    assert_eq!(
        (i.op, i.enc),
        (Opcode::GLOBAL_STORE_DWORD, Encoding::Global)
    );
    assert_eq!(i.src[0], Operand::Vgpr { idx: 0, n: 1 });
    assert_eq!(i.src[1], Operand::Vgpr { idx: 1, n: 1 });
    assert_eq!(i.src[2], Operand::Sreg { idx: 0, n: 2 });
    assert!(matches!(i.mods, Mods::Flat { offset: 16, .. }));

    // SOPP branch: simm16 in dwords
    let i = decode(&words(&[0x05, 0x00, 0x85, 0xbf]), Target::Gfx90a).unwrap();
    assert_eq!((i.op, i.mods), (Opcode::S_CBRANCH_SCC1, Mods::Simm16(5)));
    assert_eq!(i.branch_target(0x100), Some(0x100 + 4 + 5 * 4));
    assert!(i.info().flags & amdgpu_isa::flags::BRANCH != 0);

    // s_call_b64 s[30:31], 4: SOPK, PC-relative like SOPP branches
    let i = decode(&[0xBA9E_0004], Target::Gfx90a).unwrap();
    assert_eq!(
        (i.op, i.dst[0]),
        (Opcode::S_CALL_B64, Operand::Sreg { idx: 30, n: 2 })
    );
    assert_eq!(i.branch_target(0x1000), Some(0x1000 + 4 + 16));
    assert_eq!(
        decode(&[0xBE80_1D1E], Target::Gfx90a)
            .unwrap()
            .branch_target(0),
        None
    );

    // SCC traffic from the table
    use amdgpu_isa::flags::{READS_SCC, WRITES_SCC};
    let f = |op: Opcode| op.info().flags;
    assert!(f(Opcode::S_ADD_U32) & WRITES_SCC != 0);
    assert!(f(Opcode::S_ADDC_U32) & (WRITES_SCC | READS_SCC) == WRITES_SCC | READS_SCC);
    assert!(f(Opcode::S_MUL_I32) & WRITES_SCC == 0);
    assert!(
        f(Opcode::S_CSELECT_B64) & READS_SCC != 0 && f(Opcode::S_CSELECT_B64) & WRITES_SCC == 0
    );
    assert!(f(Opcode::S_AND_SAVEEXEC_B64) & WRITES_SCC != 0);
    assert!(f(Opcode::S_CMP_LG_U64) & WRITES_SCC != 0);

    // s_memtime: SMEM with only a destination pair
    let i = decode(&[0xc090_0080, 0], Target::Gfx942).unwrap();
    assert_eq!(
        (i.op, i.dst[0], i.src[0]),
        (
            Opcode::S_MEMTIME,
            Operand::Sreg { idx: 2, n: 2 },
            Operand::None
        )
    );
    assert_eq!(i.to_string(), "s_memtime s[2:3]");
}

#[test]
fn names_differ_per_target_where_llvm_renamed() {
    assert_eq!(
        Opcode::V_MFMA_F32_32X32X8F16.name(Target::Gfx90a),
        "v_mfma_f32_32x32x8f16"
    );
    assert_eq!(
        Opcode::V_MFMA_F32_32X32X8F16.name(Target::Gfx942),
        "v_mfma_f32_32x32x8_f16"
    );
    // bf16 "_1k" MFMA: other opcode numbers on gfx94x, one variant
    let i = Opcode::V_MFMA_F32_16X16X16BF16_1K.info();
    assert_eq!(i.code, [0x67, 0x61]);
    assert!(!Opcode::V_MFMA_F32_32X32X4BF16.exists_on(Target::Gfx942));
    assert!(!Opcode::V_MFMA_F32_16X16X32_FP8_FP8.exists_on(Target::Gfx90a));
    assert!(Opcode::all().len() > 1000 && Opcode::all().len() == Opcode::COUNT);
}

#[test]
fn no_input_panics_and_errors_name_the_problem() {
    // xorshift over every encoding prefix, every truncation, all targets
    let mut x: u64 = 0x1234_5678_9abc_def1;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x >> 11) as u32
    };
    let targets = [
        Target::Gfx90a,
        Target::Gfx940,
        Target::Gfx941,
        Target::Gfx942,
    ];
    let mut ok = 0;
    for k in 0..200_000u32 {
        let w = [(k << 26) ^ next(), next(), next()];
        for (n, t) in (0..=3).zip(targets.iter().cycle()) {
            match decode(&w[..n], *t) {
                Ok(i) => {
                    assert!(usize::from(i.len) <= n && i.len >= 1);
                    let _ = i.to_string();
                    ok += 1;
                }
                Err(e) => assert!(!e.to_string().is_empty()),
            }
        }
    }
    assert!(ok > 100_000, "{ok}");
    assert!(matches!(
        decode(&[], Target::Gfx942),
        Err(amdgpu_isa::DecodeError::Truncated { need: 1, have: 0 })
    ));
}

#[test]
fn inst_is_small_plain_data() {
    // Copy, no heap: the interpreter caches a Vec<Inst> per kernel
    fn is_copy<T: Copy>() {}
    is_copy::<amdgpu_isa::Inst>();
    assert!(
        std::mem::size_of::<amdgpu_isa::Inst>() <= 80,
        "{}",
        std::mem::size_of::<amdgpu_isa::Inst>()
    );
}
