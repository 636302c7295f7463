#!/usr/bin/env python3
"""Turn isa/gen/sweep.json (opcode probe of llvm-mc-19) into isa/src/ops.rs: one row per
instruction, opcode numbers per target, operand widths and flags.
    python3 isa/gen/gen_table.py > isa/src/ops.rs
"""
import json, re, sys

recs = json.load(open(sys.argv[1] if len(sys.argv) > 1 else "isa/gen/sweep.json"))
CLS = {"sop1": "Sop1", "sop2": "Sop2", "sopk": "Sopk", "sopc": "Sopc", "sopp": "Sopp", "smem": "Smem",
       "vop1": "Vop1", "vop2": "Vop2", "vopc": "Vopc", "vop3": "Vop3", "vop3p": "Vop3p", "ds": "Ds",
       "flat": "Flat", "global": "Global", "scratch": "Scratch", "mubuf": "Mubuf", "mtbuf": "Mtbuf"}
SLOTS = ["d0", "d1", "s0", "s1", "s2"]

def norm(n):
    n = re.sub(r"_1k$", "", n)
    n = re.sub(r"_\d+b_", "_", n)
    return n.replace("_", "")

def info(r):
    w = {s: 0 for s in SLOTS}
    f = {s: "-" for s in SLOTS}
    for slot, file, width, tok in r["fields"]:
        if slot in w:
            if slot == "d1" and width != 2:
                continue
            w[slot] = max(w[slot], width)
            f[slot] = file
    return w, f

rows = []          # dicts
index = {}         # (cls, name) -> row
vop3_promoted = [] # (target, base, code, rec)
for tgt in ("gfx90a", "gfx940"):
    ti = 0 if tgt == "gfx90a" else 1
    for r in recs:
        if r["target"] != tgt:
            continue
        enc, mn = r["enc"], r["mn"]
        if enc == "vop3" and r["op"] >= 0x380:
            continue  # that is the VOP3P encoding space
        if enc == "vop3" and mn.endswith("_e64"):
            vop3_promoted.append((ti, mn[:-4], r["op"], r))
            continue
        name = mn[:-4] if mn.endswith("_e32") else mn
        cls = CLS[enc]
        if enc == "vop3p" and (name.startswith("v_mfma") or name.startswith("v_smfmac")):
            cls = "Mai"
        row = index.get((cls, name))
        if row is None and ti == 1:
            for cand in rows:
                if cand["cls"] == cls and cand["code"][1] is None and cand["name"][0] \
                        and norm(cand["name"][0]) == norm(name) and cand["w"] == info(r)[0]:
                    row = cand
                    break
        if row is None:
            w, f = info(r)
            row = {"cls": cls, "name": [None, None], "code": [None, None], "vop3": [None, None],
                   "w": w, "f": f, "asm": r["asm"], "e32": mn.endswith("_e32")}
            rows.append(row)
        row["name"][ti] = name
        row["code"][ti] = r["op"]
        index[(cls, name)] = row

for ti, base, code, r in vop3_promoted:
    for cls in ("Vop1", "Vop2", "Vopc"):
        row = index.get((cls, base))
        if row is not None and row["name"][ti] == base:
            row["vop3"][ti] = code
            if row["w"]["d1"] == 0:
                w, f = info(r)
                if w["d1"]:
                    row["w"]["d1"] = w["d1"]
            break
    else:
        # VOP3-only encoding of a would-be VOP1/2 op (e.g. v_cndmask with sgpr carry in VOP3b)
        row = index.get(("Vop3", base))
        if row is None:
            w, f = info(r)
            row = {"cls": "Vop3", "name": [None, None], "code": [None, None], "vop3": [None, None],
                   "w": w, "f": f, "asm": r["asm"]}
            rows.append(row)
            index[("Vop3", base)] = row
        row["name"][ti] = base
        row["code"][ti] = code

def flags(row):
    n = row["name"][0] or row["name"][1]
    cls = row["cls"]
    fl = []
    if cls in ("Sopp", "Sop1") and re.match(r"s_(c?branch|setpc|swappc|cbranch|call)", n):
        fl.append("BRANCH")
    if cls in ("Smem", "Ds", "Flat", "Global", "Scratch", "Mubuf", "Mtbuf"):
        if re.search(r"atomic|_add_|_sub_|_inc_|_dec_|_min_|_max_|_and_|_or_|_xor_|_cmpst|_wrxchg|_rsub|_mskor|_swap|_cmpswap|_fmin|_fmax|_condxchg|_append|_consume", n) and not re.search(r"read|write|load|store", n):
            fl.append("ATOMIC")
        elif re.search(r"load|read|gws|_permute|_bpermute|_swizzle", n):
            fl.append("LOAD")
        elif re.search(r"store|write", n):
            fl.append("STORE")
        if "_rtn" in n:
            fl.append("RETURNS")
    if row["f"]["d0"] == "a" and cls != "Mai":
        fl.append("ACC_DST")
    if row["f"]["s0"] == "a" and cls != "Mai":
        fl.append("ACC_SRC0")
    if n == "s_setreg_imm32_b32" or re.search(r"_(madmk|madak|fmamk|fmaak)_", n):
        fl.append("LITERAL")
    if row["f"]["d0"] == "s" and cls in ("Vop1", "Vop2", "Vop3"):
        fl.append("SCALAR_DST")
    if row.get("e32"):
        fl.append("E32")
    if row["w"]["d1"]:
        fl.append("SDST")
    if n in ("v_cndmask_b32", "v_addc_co_u32", "v_subb_co_u32", "v_subbrev_co_u32"):
        fl.append("CARRY_IN")
    return " | ".join(fl) if fl else "0"

seen = set()
out = []
for row in rows:
    n0, n1 = row["name"]
    base = n0 or n1
    var = base.upper()
    if var in seen:
        var = var + "_" + row["cls"].upper()
    seen.add(var)
    row["var"] = var

def h(x):
    return "NONE" if x is None else "0x%x" % x

print("// @generated by isa/gen/gen_table.py from isa/gen/sweep.json; regenerate, do not edit.")
print("// Each row: Opcode = class, [gfx90a, gfx940] opcode, [gfx90a, gfx940] VOP3 opcode of a")
print("// VOP1/VOP2/VOPC op, operand widths in dwords [vdst, sdst, src0, src1, src2], flags,")
print("// gfx90a mnemonic, gfx940/941/942 mnemonic (\"\" where the target lacks it).")
print("isa_ops! {")
for row in rows:
    w = ", ".join(str(row["w"][s]) for s in SLOTS)
    n0, n1 = row["name"]
    print('    %s = %s, [%s, %s], [%s, %s], [%s], %s, "%s", "%s";' % (
        row["var"], row["cls"], h(row["code"][0]), h(row["code"][1]), h(row["vop3"][0]),
        h(row["vop3"][1]), w, flags(row), n0 or "", n1 or ""))
print("}")
print("opcount: %d" % len(rows), file=sys.stderr)
