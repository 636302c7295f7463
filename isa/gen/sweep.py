#!/usr/bin/env python3
"""Probe llvm-mc-19's AMDGPU disassembler over every opcode value of every gfx9 encoding,
for gfx90a and gfx940/941/942, and write the raw findings as JSON (one record per
(encoding, opcode, target)): mnemonic and which operand fields it prints, with widths.

The Rust table in isa/src/table.rs is generated from this by gen_table.py. Run:
    python3 isa/gen/sweep.py > isa/gen/sweep.json
"""
import json, re, subprocess, sys

TARGETS = ["gfx90a", "gfx940", "gfx941", "gfx942"]

def words_sop2(op):  return [0x80000000 | op << 23 | 10 << 16 | 30 << 8 | 20]
def words_sopk(op):  return [0xB0000000 | op << 23 | 10 << 16 | 0x1234]
def words_sop1(op):  return [0xBE800000 | 10 << 16 | op << 8 | 20]
def words_sopc(op):  return [0xBF000000 | op << 16 | 30 << 8 | 20]
def words_sopp(op):  return [0xBF800000 | op << 16 | 3]
def words_smem(op):  return [0xC0000000 | op << 18 | 1 << 17 | 16 << 6 | 10, 0x10]
def words_vop2(op):  return [op << 25 | 16 << 17 | 48 << 9 | 288]
def words_vop1(op):  return [0x7E000000 | 16 << 17 | op << 9 | 288]
def words_vopc(op):  return [0x7C000000 | op << 17 | 48 << 9 | 288]
def words_vop3(op):  return [0xD0000000 | op << 16 | 16, 320 << 18 | 304 << 9 | 288]
def words_vop3p(op): return [0xD3800000 | op << 16 | 16, 320 << 18 | 304 << 9 | 288]
def words_ds(op):    return [0xD8000000 | op << 17, 16 << 24 | 48 << 16 | 32 << 8 | 8]
def words_flat(seg):
    return lambda op: [0xDC000000 | op << 18 | seg << 14, 16 << 24 | 0x7F << 16 | 32 << 8 | 8]
def words_mubuf(op): return [0xE0000000 | op << 18, 30 << 24 | 5 << 16 | 16 << 8 | 8]
def words_mtbuf(op): return [0xE8000000 | op << 15 | 1 << 19, 30 << 24 | 5 << 16 | 16 << 8 | 8]

# encoding -> (generator, opcode range, {(file, base): slot})
SOPS = {("s", 10): "d0", ("s", 20): "s0", ("s", 30): "s1"}
VOPS = {("v", 16): "d0", ("s", 16): "d0", ("a", 16): "d0", ("v", 32): "s0", ("a", 32): "s0",
        ("v", 48): "s1", ("a", 48): "s1", ("v", 64): "s2", ("a", 64): "s2", ("s", 0): "d1"}
ENCS = {
    "sop2": (words_sop2, range(0x60), SOPS),
    "sopk": (words_sopk, range(0x1D), SOPS),
    "sop1": (words_sop1, range(256), SOPS),
    "sopc": (words_sopc, range(128), SOPS),
    "sopp": (words_sopp, range(128), SOPS),
    "smem": (words_smem, range(256), {("s", 16): "d0", ("s", 20): "s0", ("ttmp", 0): "s0"}),
    "vop2": (words_vop2, range(0x3E), VOPS),
    "vop1": (words_vop1, range(256), VOPS),
    "vopc": (words_vopc, range(256), VOPS),
    "vop3": (words_vop3, range(1024), VOPS),
    "vop3p": (words_vop3p, range(128), VOPS),
    "ds": (words_ds, range(256), {("v", 16): "d0", ("a", 16): "d0", ("v", 8): "s0",
                                   ("v", 32): "s1", ("a", 32): "s1", ("v", 48): "s2", ("a", 48): "s2"}),
    "flat": (words_flat(0), range(128), {("v", 16): "d0", ("v", 8): "s0", ("v", 32): "s1"}),
    "scratch": (words_flat(1), range(128), {("v", 16): "d0", ("v", 8): "s0", ("v", 32): "s1"}),
    "global": (words_flat(2), range(128), {("v", 16): "d0", ("v", 8): "s0", ("v", 32): "s1"}),
    "mubuf": (words_mubuf, range(128), {("v", 16): "d0", ("v", 8): "s0", ("s", 20): "s1", ("s", 30): "s2"}),
    "mtbuf": (words_mtbuf, range(16), {("v", 16): "d0", ("v", 8): "s0", ("s", 20): "s1", ("s", 30): "s2"}),
}

# fields zeroed, in order, when an opcode does not decode with every field set (the
# disassembler rejects non-zero fields an opcode does not use)
V3 = [[~0, ~0], [~0, ~(0x1FF << 18)], [~0, ~(0x3FFFF << 9)], [~0, 0]]
MASKS = {
    "vop3": V3, "vop3p": V3,
    "ds": [[~0, ~0], [~0, ~(0xFF << 16)], [~0, ~(0xFFFF << 8)], [~0, ~(0xFF << 24)],
           [~0, ~(0xFF << 24 | 0xFF << 16)], [~0, ~(0xFF << 24 | 0xFFFF << 8)], [~0, 0]],
    "flat": [[~0, m & ~(0x7F << 16)] for m in (~0, ~(0xFF << 8), ~(0xFF << 24), ~(0xFF << 24 | 0xFF << 8))],
    "global": [[~0, ~0], [~0, ~(0xFF << 8)], [~0, ~(0xFF << 24)], [~0, ~(0xFF << 24 | 0xFF << 8)]],
    "mubuf": [[~0, ~0], [~0, ~(0xFF)]],
    "mtbuf": [[~0, ~0], [~0, ~(0xFF)]],
    "smem": [[~0, ~0], [~0 ^ (0x7F << 6), ~0], [~0 ^ 0x3F, ~0], [~0 ^ (0x7F << 6) ^ 0x3F, ~0]],
    "sop1": [None, [~0 ^ (0x7F << 16)], [~0 ^ 0xFF]],
    "sopk": [None, [~0 ^ (0x7F << 16)]],
    "sopp": [None, [~0 ^ 0xFFFF]],
}
MASKS["scratch"] = MASKS["global"]
MASKS["vop2"] = [None, "PAD"]
MASKS["sopk"] = MASKS["sopk"] + ["PAD"]

REG = re.compile(r"^(-|\|)*(s|v|a|ttmp)(?:\[(\d+):(\d+)\]|(\d+))\|?$")

def parse_operands(text):
    """'v_add_f32_e32 v16, v32, v48 clamp' -> (mnemonic, [tokens], [modifiers])"""
    parts = text.split(None, 1)
    mn = parts[0]
    if len(parts) == 1:
        return mn, [], []
    ops, mods = [], []
    toks = parts[1].split()
    i = 0
    while i < len(toks):
        t = toks[i]
        i += 1
        if t.endswith(","):
            ops.append(t[:-1])
        else:
            ops.append(t)
            break
    mods = toks[i:]
    return mn, ops, mods

def run(target, lines):
    """Decode each line (a list of dwords); returns {line_index: asm} for lines that decode
    as exactly one instruction of exactly that length."""
    src = "\n".join(",".join("0x%02x" % b for w in ws for b in w.to_bytes(4, "little")) for ws in lines)
    p = subprocess.run(["llvm-mc-19", "-disassemble", "-triple=amdgcn-amd-amdhsa", "-mcpu=" + target,
                        "-show-encoding"], input=src + "\n", capture_output=True, text=True)
    bad = set()
    for m in re.finditer(r"<stdin>:(\d+):(\d+): warning: invalid instruction encoding", p.stderr):
        bad.add((int(m.group(1)) - 1, (int(m.group(2)) - 1) // 5))
    insts = []
    for line in p.stdout.splitlines():
        if "; encoding:" not in line:
            continue
        asm, enc = line.split("; encoding:")
        insts.append((asm.strip(), len(enc.strip().strip("[]").split(","))))
    starts = {}
    off = 0
    for li, ws in enumerate(lines):
        starts[off] = li
        off += 4 * len(ws)
    total = off
    # column -> byte offset within the line; turn into stream offsets
    lstart = {li: o for o, li in starts.items()}
    badpos = {lstart[li] + b * 4 // 4 for li, b in bad}
    out = {}
    k = 0
    pos = 0
    while pos < total:
        if pos in badpos:
            pos += 4
            continue
        if k >= len(insts):
            raise SystemExit("out of sync at byte %d" % pos)
        asm, ln = insts[k]
        k += 1
        li = starts.get(pos)
        if li is not None and ln >= 4 * len(lines[li]):
            out[li] = asm
        pos += ln
    if k != len(insts):
        raise SystemExit("out of sync: %d of %d" % (k, len(insts)))
    return out

def main():
    recs = []
    for enc, (gen, rng, slots) in ENCS.items():
        for tgt in TARGETS:
          if tgt in ("gfx941", "gfx942"):
              continue  # checked identical to gfx940 opcode-for-opcode (LLVM 19)
          found = {}
          for mask in MASKS.get(enc, [None]):
            todo = [op for op in rng if op not in found]
            words = [gen(op) for op in todo]
            if mask == "PAD":
                # ops taking a literal dword after the instruction (v_madak_f32, ...)
                words = [ws + [0xBF800000] for ws in words]
            elif mask is not None:
                words = [[w & m for w, m in zip(ws, mask)] for ws in words]
            res = run(tgt, words)
            for i, asm in res.items():
                found[todo[i]] = asm
          for op, asm in sorted(found.items()):
            if True:
                asm = re.sub(r"/\*.*?\*/", "", asm)
                mn, ops, mods = parse_operands(asm)
                fields = []
                for t in ops:
                    m = REG.match(t)
                    if m:
                        f = m.group(2)
                        if m.group(5) is not None:
                            base, w = int(m.group(5)), 1
                        else:
                            base, w = int(m.group(3)), int(m.group(4)) - int(m.group(3)) + 1
                        slot = slots.get((f, base))
                        fields.append([slot or "?", f, w, t])
                    else:
                        fields.append(["lit", "", 0, t])
                recs.append({"enc": enc, "op": op, "target": tgt, "asm": asm, "mn": mn, "fields": fields})
    json.dump(recs, sys.stdout, indent=0)

main()
