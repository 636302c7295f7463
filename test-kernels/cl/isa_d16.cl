// D16 loads into a VGPR that already holds a value: FLAT, GLOBAL, SCRATCH and MUBUF
// `*_load_{u,s}byte_d16[_hi]` / `*_load_short_d16[_hi]` and MTBUF `_format_d16_x/_xyz`
// (inline asm: clang emits the first kind only where the unused half is known to be kept,
// i.e. without SRAM ECC). The tests compare the other half with what the device's SRAM ECC
// setting says (firmware-notes/isa-gfx9.md "D16 loads and SRAMECC").
#include "isa_prelude.h"
#define SRSRC                                                                          \
  "v_readfirstlane_b32 s20, %[lo]\n v_readfirstlane_b32 s21, %[hi]\n"                  \
  " v_readfirstlane_b32 s22, %[nr]\n v_readfirstlane_b32 s23, %[w3]\n s_nop 4\n "
#define RIN(p, bytes)                                                                   \
  [lo] "v"((uint)(ulong)(p)), [hi] "v"((uint)((ulong)(p) >> 32) & 0xFFFF),             \
      [nr] "v"((uint)(bytes)), [w3] "v"(0x00027000u)
#define GLOAD(insn, k)                                                                 \
  do {                                                                                 \
    uint v = old + (k);                                                                \
    __asm__ volatile(insn " %0, %1, off\n s_waitcnt vmcnt(0)" : "+v"(v) : "v"(p));     \
    out[S * i + (k)] = v;                                                             \
  } while (0)
#define FLOAD(insn, k)                                                                 \
  do {                                                                                 \
    uint v = old + (k);                                                                \
    __asm__ volatile(insn " %0, %1\n s_waitcnt vmcnt(0) lgkmcnt(0)" : "+v"(v) : "v"(p)); \
    out[S * i + (k)] = v;                                                             \
  } while (0)
#define BLOAD(insn, k)                                                                 \
  do {                                                                                 \
    uint v = old + (k);                                                                \
    __asm__ volatile(SRSRC insn " %[d], %[o], s[20:23], 0 offen\n s_waitcnt vmcnt(0)"  \
                     : [d] "+v"(v) : [o] "v"(2 * i), RIN(src, 2 * n)                    \
                     : "s20", "s21", "s22", "s23", "memory");                          \
    out[S * i + (k)] = v;                                                             \
  } while (0)

#define TLOAD(insn, fmt, k, off)                                                        \
  do {                                                                                 \
    uint v = old + (k);                                                                \
    __asm__ volatile(SRSRC insn " %[d], %[o], s[20:23], 0 format:[" fmt "] offen\n"    \
                     " s_waitcnt vmcnt(0)"                                             \
                     : [d] "+v"(v) : [o] "v"(off), RIN(src, 2 * n)                      \
                     : "s20", "s21", "s22", "s23", "memory");                          \
    out[S * i + (k)] = v;                                                              \
  } while (0)
#define S 19

// Lane i reads the 16-bit src[i] (its low byte for the byte forms) into a VGPR holding
// old + k, k the slot of out[16 * i + k]: global 0-5 (ubyte, ubyte_hi, sbyte, sbyte_hi,
// short, short_hi), flat 6-7 (short, short_hi), buffer 8-13 (as global), scratch 14-15
// (short, short_hi; the scratch copy of src[i]; gfx942 only, see below), MTBUF 16
// (`tbuffer_load_format_d16_x` of src[i], 16-bit UINT), 17-18 (`_d16_xyz` of
// src[b..b + 3], b = i & ~3, format 16_16_16_16 UINT: slot 18's high half is unused).
__kernel void d16_loads(__global const ushort *src, __global uint *out, uint n, uint seed) {
  uint i = GID();
  uint old = seed ^ (i * 0x9E3779B9u);
  __global const ushort *p = src + i;
  GLOAD("global_load_ubyte_d16", 0);
  GLOAD("global_load_ubyte_d16_hi", 1);
  GLOAD("global_load_sbyte_d16", 2);
  GLOAD("global_load_sbyte_d16_hi", 3);
  GLOAD("global_load_short_d16", 4);
  GLOAD("global_load_short_d16_hi", 5);
  FLOAD("flat_load_short_d16", 6);
  FLOAD("flat_load_short_d16_hi", 7);
  BLOAD("buffer_load_ubyte_d16", 8);
  BLOAD("buffer_load_ubyte_d16_hi", 9);
  BLOAD("buffer_load_sbyte_d16", 10);
  BLOAD("buffer_load_sbyte_d16_hi", 11);
  BLOAD("buffer_load_short_d16", 12);
  BLOAD("buffer_load_short_d16_hi", 13);
  TLOAD("tbuffer_load_format_d16_x", "BUF_DATA_FORMAT_16,BUF_NUM_FORMAT_UINT", 16, 2 * i);
  {
    uint2 v = (uint2)(old + 17, old + 18);
    __asm__ volatile(SRSRC "tbuffer_load_format_d16_xyz %[d], %[o], s[20:23], 0 "
                     "format:[BUF_DATA_FORMAT_16_16_16_16,BUF_NUM_FORMAT_UINT] offen\n"
                     " s_waitcnt vmcnt(0)"
                     : [d] "+v"(v) : [o] "v"(2 * (i & ~3u)), RIN(src, 2 * n)
                     : "s20", "s21", "s22", "s23", "memory");
    out[S * i + 17] = v.x;
    out[S * i + 18] = v.y;
  }
#if defined(__gfx942__)
  volatile __private ushort priv[4];
  priv[i & 3] = src[i];
  __private ushort *pp = (__private ushort *)&priv[i & 3];
  for (uint k = 14; k < 16; k++) {
    uint v = old + k;
    if (k == 14)
      __asm__ volatile("scratch_load_short_d16 %0, %1, off\n s_waitcnt vmcnt(0)"
                       : "+v"(v) : "v"(pp) : "memory");
    else
      __asm__ volatile("scratch_load_short_d16_hi %0, %1, off\n s_waitcnt vmcnt(0)"
                       : "+v"(v) : "v"(pp) : "memory");
    out[S * i + k] = v;
  }
#else
  // gfx90a kernels reach private memory through MUBUF (FLAT_SCRATCH is not set up):
  // the same forms through GLOBAL stand in for the scratch slots.
  GLOAD("global_load_short_d16", 14);
  GLOAD("global_load_short_d16_hi", 15);
#endif
}
