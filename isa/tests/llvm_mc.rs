//! Every opcode of the table, in every encoding it has, with random fields (fixed seed), is
//! decoded and printed by amdgpu-isa and by `llvm-mc-19 -disassemble`; wherever LLVM accepts
//! the words, the texts must agree. Skips (with a message) when llvm-mc-19 is not installed.

mod common;

use amdgpu_isa::{decode, Class, Opcode, Target};

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 16) as u32
    }
    fn bits(&mut self, n: u32) -> u32 {
        self.next() & ((1u32 << n) - 1)
    }
    /// A source operand code biased to interesting values.
    fn src9(&mut self) -> u32 {
        match self.bits(3) {
            0 => self.bits(7),       // sgpr / specials
            1 => 128 + self.bits(6), // inline int
            2 => 240 + self.bits(3), // inline float
            3 => 248,                // 1/(2pi)
            4 => 255,                // literal
            _ => 256 + self.bits(8), // vgpr
        }
    }
    fn vreg(&mut self) -> u32 {
        self.bits(6) * 2
    }
}

fn sdwa(rng: &mut Rng) -> u32 {
    let sel = |r: &mut Rng| r.bits(3) % 7;
    rng.bits(1) << 31
        | rng.bits(3) << 27
        | sel(rng) << 24
        | rng.bits(1) << 23
        | rng.bits(3) << 19
        | sel(rng) << 16
        | rng.bits(2) << 14
        | rng.bits(1) << 13
        | (rng.bits(2) % 3) << 11
        | sel(rng) << 8
        | rng.vreg()
}

/// Encodings to try for one opcode on one target.
fn samples(op: Opcode, col: usize, rng: &mut Rng) -> Vec<Vec<u32>> {
    let i = op.info();
    let code = u32::from(i.code[col]);
    let mut out = Vec::new();
    let lit = rng.next();
    for _ in 0..6 {
        let w = match i.class {
            Class::Sop2 => vec![
                0x8000_0000
                    | code << 23
                    | rng.bits(7) << 16
                    | (rng.src9() % 256) << 8
                    | (rng.src9() % 256),
            ],
            Class::Sopk => vec![0xB000_0000 | code << 23 | rng.bits(7) << 16 | rng.bits(16)],
            Class::Sop1 => vec![0xBE80_0000 | rng.bits(7) << 16 | code << 8 | (rng.src9() % 256)],
            Class::Sopc => {
                vec![0xBF00_0000 | code << 16 | (rng.src9() % 256) << 8 | (rng.src9() % 256)]
            }
            Class::Sopp => vec![0xBF80_0000 | code << 16 | rng.bits(16)],
            Class::Smem => vec![
                0xC000_0000
                    | code << 18
                    | rng.bits(1) << 17
                    | rng.bits(1) << 16
                    | rng.bits(1) << 14
                    | rng.bits(5) << 7
                    | rng.bits(4) << 1,
                rng.bits(7) << 25 | rng.bits(12),
            ],
            Class::Vop1 => vec![0x7E00_0000 | rng.vreg() << 17 | code << 9 | rng.src9()],
            Class::Vop2 => vec![code << 25 | rng.vreg() << 17 | rng.vreg() << 9 | rng.src9()],
            Class::Vopc => vec![0x7C00_0000 | code << 17 | rng.vreg() << 9 | rng.src9()],
            Class::Vop3 => vec![
                0xD000_0000
                    | code << 16
                    | rng.bits(1) << 15
                    | (rng.bits(4) * rng.bits(1)) << 11
                    | rng.bits(3) << 8
                    | rng.vreg(),
                rng.bits(3) << 29
                    | rng.bits(2) << 27
                    | (rng.src9() % 255) << 18
                    | (rng.src9() % 255) << 9
                    | (rng.src9() % 255),
            ],
            Class::Vop3p => vec![
                0xD380_0000
                    | code << 16
                    | rng.bits(1) << 15
                    | rng.bits(4) << 11
                    | rng.bits(3) << 8
                    | rng.vreg(),
                rng.bits(3) << 29
                    | rng.bits(2) << 27
                    | (rng.src9() % 255) << 18
                    | (rng.src9() % 255) << 9
                    | (rng.src9() % 255),
            ],
            Class::Mai => vec![
                0xD380_0000
                    | code << 16
                    | rng.bits(1) << 15
                    | (rng.bits(2) * rng.bits(1)) << 8
                    | rng.bits(2) << 5,
                (rng.bits(2) * rng.bits(1)) << 29
                    | rng.bits(2) << 27
                    | (256 + rng.bits(2) * 32) << 18
                    | (256 + rng.vreg()) << 9
                    | (256 + rng.vreg()),
            ],
            Class::Ds => vec![
                0xD800_0000 | rng.bits(1) << 25 | code << 17 | rng.bits(16),
                rng.vreg() << 24 | rng.vreg() << 16 | rng.vreg() << 8 | rng.vreg(),
            ],
            Class::Flat | Class::Global | Class::Scratch => {
                let seg = match i.class {
                    Class::Flat => 0,
                    Class::Scratch => 1,
                    _ => 2,
                };
                let saddr = if rng.bits(1) == 0 {
                    0x7F
                } else {
                    rng.bits(5) * 2
                };
                vec![
                    0xDC00_0000
                        | rng.bits(1) << 25
                        | code << 18
                        | rng.bits(2) << 16
                        | seg << 14
                        | rng.bits(1) << (13 * (seg & 1))
                        | rng.bits(12),
                    rng.vreg() << 24
                        | rng.bits(1) << 23
                        | saddr << 16
                        | rng.vreg() << 8
                        | rng.vreg(),
                ]
            }
            Class::Mubuf => vec![
                0xE000_0000 | code << 18 | rng.bits(3) << 15 | rng.bits(3) << 12 | rng.bits(12),
                (rng.src9() % 255) << 24
                    | rng.bits(1) << 23
                    | rng.bits(5) << 16
                    | rng.vreg() << 8
                    | rng.vreg(),
            ],
            Class::Mtbuf => vec![
                0xE800_0000 | rng.bits(7) << 19 | code << 15 | rng.bits(3) << 12 | rng.bits(12),
                (rng.src9() % 255) << 24 | rng.bits(5) << 16 | rng.vreg() << 8 | rng.vreg(),
            ],
        };
        out.push([w, vec![lit]].concat());
    }
    // VOP3 form of VOP1/VOP2/VOPC
    let e = i.vop3[col];
    if e != 0xFFFF {
        for _ in 0..4 {
            out.push(vec![
                0xD000_0000
                    | u32::from(e) << 16
                    | rng.bits(1) << 15
                    | rng.bits(3) << 8
                    | rng.vreg(),
                rng.bits(3) << 29
                    | rng.bits(2) << 27
                    | (rng.src9() % 255) << 18
                    | (rng.src9() % 255) << 9
                    | (rng.src9() % 255),
                lit,
            ]);
        }
    }
    // DPP and SDWA forms
    if matches!(i.class, Class::Vop1 | Class::Vop2 | Class::Vopc) {
        let base = match i.class {
            Class::Vop1 => 0x7E00_0000 | rng.vreg() << 17 | code << 9,
            Class::Vop2 => code << 25 | rng.vreg() << 17 | rng.vreg() << 9,
            _ => 0x7C00_0000 | code << 17 | rng.vreg() << 9,
        };
        for _ in 0..3 {
            let ctrl = match rng.bits(2) {
                0 => rng.bits(8),
                1 => 0x100 | rng.bits(6),
                2 => 0x140 | rng.bits(2),
                _ => 0x150 | rng.bits(4),
            };
            out.push(vec![
                base | 0xFA,
                rng.bits(8) << 24 | rng.bits(5) << 19 | ctrl << 8 | rng.vreg(),
                lit,
            ]);
            out.push(vec![base | 0xF9, sdwa(rng), lit]);
        }
    }
    out
}

#[test]
fn agrees_with_llvm_mc_on_random_encodings() {
    if !common::llvm_mc_available() {
        eprintln!("SKIP: llvm-mc-19 is not installed");
        return;
    }
    let mut report = String::new();
    let mut total_cmp = 0;
    let mut total_bad = 0;
    for (target, mcpu, col) in [(Target::Gfx90a, "gfx90a", 0), (Target::Gfx942, "gfx942", 1)] {
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        let mut lines = Vec::new();
        for &op in Opcode::all() {
            if op.exists_on(target) {
                lines.extend(samples(op, col, &mut rng));
            }
        }
        let llvm = common::llvm_mc(mcpu, &lines);
        let (mut cmp, mut bad, mut only_ours) = (0, 0, 0);
        for (ws, theirs) in lines.iter().zip(&llvm) {
            let ours = decode(ws, target);
            // LLVM prints forms it considers invalid with a comment: not comparable
            let theirs = match theirs {
                Some((t, _)) if t.contains("/*Invalid") => &None,
                t => t,
            };
            match (theirs, ours) {
                (Some((text, n)), Ok(inst)) => {
                    cmp += 1;
                    let mine = inst.to_string();
                    if common::norm(text) != common::norm(&mine) {
                        bad += 1;
                        if bad <= 400 {
                            report.push_str(&format!(
                                "{mcpu} {ws:08x?}\n  llvm: {text} ({n} bytes)\n  ours: {mine} ({} bytes)\n",
                                4 * inst.len
                            ));
                        }
                    }
                }
                (Some((text, _)), Err(e)) => {
                    bad += 1;
                    report.push_str(&format!(
                        "{mcpu} {ws:08x?}\n  llvm: {text}\n  ours: error {e}\n"
                    ));
                }
                (None, Ok(_)) => only_ours += 1,
                (None, Err(_)) => {}
            }
        }
        eprintln!("{mcpu}: {} encodings, {cmp} compared, {bad} mismatches, {only_ours} accepted only by us", lines.len());
        total_cmp += cmp;
        total_bad += bad;
    }
    assert!(total_cmp > 5000, "too few encodings compared: {total_cmp}");
    assert!(
        total_bad == 0,
        "{total_bad} mismatches with llvm-mc-19:\n{report}"
    );
}
