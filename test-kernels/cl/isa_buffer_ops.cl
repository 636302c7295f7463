// MUBUF buffer atomics (with and without return) and MTBUF / buffer_*_format typed loads
// and stores; inline asm because clang-19 has no builtins for them. Each asm statement
// builds its buffer resource (V#) in s[20:23] from VGPR operands (v_readfirstlane), so
// it also builds at -O0, where kernel arguments live in VGPRs. `glc` is `sc0` on gfx940+.
#include "isa_prelude.h"
#if defined(__gfx942__)
#define GLC "sc0"
#else
#define GLC "glc"
#endif
// V# word 3: DST_SEL_X..W [11:0], NUM_FORMAT [14:12], DATA_FORMAT [18:15].
#define W3(sx, sy, sz, sw, nfmt, dfmt)                                                 \
  ((sx) | (sy) << 3 | (sz) << 6 | (sw) << 9 | (nfmt) << 12 | (dfmt) << 15)
#define RAW_W3 0x00027000
#define SRSRC                                                                          \
  "v_readfirstlane_b32 s20, %[lo]\n v_readfirstlane_b32 s21, %[hi]\n"                  \
  " v_readfirstlane_b32 s22, %[nr]\n v_readfirstlane_b32 s23, %[w3]\n s_nop 4\n "
#define RIN(p, bytes, word3)                                                            \
  [lo] "v"((uint)(ulong)(p)), [hi] "v"((uint)((ulong)(p) >> 32) & 0xFFFF),             \
      [nr] "v"((uint)(bytes)), [w3] "v"((uint)(word3))
#define CLOB "s20", "s21", "s22", "s23", "memory"
#define ATOMIC_RTN(insn, v, off, p, bytes)                                             \
  __asm__ volatile(SRSRC insn " %[d], %[o], s[20:23], 0 offen " GLC "\n s_waitcnt vmcnt(0)" \
                   : [d] "+v"(v) : [o] "v"(off), RIN(p, bytes, RAW_W3) : CLOB)
#define ATOMIC(insn, v, off, p, bytes)                                                 \
  __asm__ volatile(SRSRC insn " %[d], %[o], s[20:23], 0 offen\n s_waitcnt vmcnt(0)"    \
                   :: [d] "v"(v), [o] "v"(off), RIN(p, bytes, RAW_W3) : CLOB)
#define TLOAD(insn, fmt, v, off, p, bytes)                                             \
  __asm__ volatile(SRSRC insn " %[d], %[o], s[20:23], 0 format:[" fmt "] offen\n"      \
                   " s_waitcnt vmcnt(0)"                                               \
                   : [d] "=v"(v) : [o] "v"(off), RIN(p, bytes, RAW_W3) : CLOB)

// cells (u32 view of the buffer, `n_bytes` in range):
//  [0..8)   u32 add counters (lane i adds i + 1 to cell i % 8, returns the old value)
//  [8..12)  u32 umax (no return), [12] i32 smin (returns), [13] u32 cmpswap 0 -> i + 1
//  [16..18) u64 add of (1 << 32 | 1) (returns), [18..20) u64 cmpswap 0 -> i + 1 (returns)
//  [20] u32 and of ~(1 << (i % 32)) (no return)
// Lanes also add 1 at n_bytes + 4 * (i % 4) (out of range: dropped).
__kernel void buf_atomics(__global uint *buf, __global uint *out, uint n_bytes) {
  uint i = GID();
  uint v = i + 1, off = (i % 8) * 4;
  ATOMIC_RTN("buffer_atomic_add", v, off, buf, n_bytes);
  out[6 * i] = v;
  uint m = i * 2654435761u;
  off = 32 + (i % 4) * 4;
  ATOMIC("buffer_atomic_umax", m, off, buf, n_bytes);
  int s = (int)(i * 40503u) - 1000000;
  off = 48;
  ATOMIC_RTN("buffer_atomic_smin", s, off, buf, n_bytes);
  out[6 * i + 1] = (uint)s;
  uint2 c = (uint2)(i + 1, 0);
  off = 52;
  ATOMIC_RTN("buffer_atomic_cmpswap", c, off, buf, n_bytes);
  out[6 * i + 2] = c.x;
  ulong w = (1ul << 32) | 1ul;
  off = 64;
  ATOMIC_RTN("buffer_atomic_add_x2", w, off, buf, n_bytes);
  out[6 * i + 3] = (uint)w;
  out[6 * i + 4] = (uint)(w >> 32);
  ulong2 c2 = (ulong2)((ulong)i + 1, 0);
  off = 72;
  ATOMIC_RTN("buffer_atomic_cmpswap_x2", c2, off, buf, n_bytes);
  out[6 * i + 5] = (uint)c2.x;
  uint a = ~(1u << (i % 32));
  off = 80;
  ATOMIC("buffer_atomic_and", a, off, buf, n_bytes);
  uint one = 1;
  off = n_bytes + 4 * (i % 4);
  ATOMIC("buffer_atomic_add", one, off, buf, n_bytes);
}

// Element i of each typed view of `src` (n_elems elements in range); results to out.
__kernel void tbuf_loads(__global uint *src, __global uint *out, uint n_elems) {
  uint i = GID();
  int4 b4;
  float2 h2;
  float u16;
  uint3 w3;
  float2 s8;
  TLOAD("tbuffer_load_format_xyzw", "BUF_DATA_FORMAT_8_8_8_8,BUF_NUM_FORMAT_SINT", b4, i * 4,
        src, n_elems * 4);
  TLOAD("tbuffer_load_format_xy", "BUF_DATA_FORMAT_16_16,BUF_NUM_FORMAT_FLOAT", h2, i * 4,
        src, n_elems * 4);
  TLOAD("tbuffer_load_format_x", "BUF_DATA_FORMAT_16,BUF_NUM_FORMAT_USCALED", u16, i * 2,
        src, n_elems * 2);
  TLOAD("tbuffer_load_format_xyz", "BUF_DATA_FORMAT_32_32_32,BUF_NUM_FORMAT_UINT", w3, i * 12,
        src, n_elems * 12);
  TLOAD("tbuffer_load_format_xy", "BUF_DATA_FORMAT_8_8_8_8,BUF_NUM_FORMAT_SSCALED", s8, i * 4,
        src, n_elems * 4);
  __global uint *o = out + 14 * i;
  o[0] = b4.x; o[1] = b4.y; o[2] = b4.z; o[3] = b4.w;
  o[4] = as_uint(h2.x); o[5] = as_uint(h2.y);
  o[6] = as_uint(u16);
  o[7] = w3.x; o[8] = w3.y; o[9] = w3.z;
  o[10] = as_uint(s8.x); o[11] = as_uint(s8.y);
}

// dst element i (two f32) = src[2i + 1], src[2i] through a typed 32_32 FLOAT store of
// n_elems elements (stores past the end dropped).
__kernel void tbuf_store(__global const float *src, __global float *dst, uint n_elems) {
  uint i = GID();
  float2 v = (float2)(src[2 * i + 1], src[2 * i]);
  uint off = i * 8;
  __asm__ volatile(SRSRC "tbuffer_store_format_xy %[d], %[o], s[20:23], 0 "
                   "format:[BUF_DATA_FORMAT_32_32,BUF_NUM_FORMAT_FLOAT] offen\n"
                   " s_waitcnt vmcnt(0)"
                   :: [d] "v"(v), [o] "v"(off), RIN(dst, n_elems * 8, RAW_W3) : CLOB);
}

// buffer_load_format_xyzw / buffer_store_format_xy: formats and DST_SEL from V# word 3.
// The load views src as 8_8_8_8 SINT with DST_SEL (G, R, 0, A); the store writes 32_32
// UINT elements (identity DST_SEL).
__kernel void buf_format(__global uint *src, __global uint *dst, uint n_elems) {
  uint i = GID();
  int4 v;
  uint off = i * 4;
  __asm__ volatile(SRSRC "buffer_load_format_xyzw %[d], %[o], s[20:23], 0 offen\n"
                   " s_waitcnt vmcnt(0)"
                   : [d] "=v"(v) : [o] "v"(off), RIN(src, n_elems * 4, W3(5, 4, 0, 7, 5, 10))
                   : CLOB);
  uint2 w = (uint2)(as_uint(v.x) + 7, as_uint(v.w) ^ i);
  uint woff = i * 8;
  __asm__ volatile(SRSRC "buffer_store_format_xy %[d], %[o], s[20:23], 0 offen\n"
                   " s_waitcnt vmcnt(0)"
                   :: [d] "v"(w), [o] "v"(woff), RIN(dst, n_elems * 8, W3(4, 5, 6, 7, 4, 11))
                   : CLOB);
  dst[2 * 1024 + 4 * i] = v.x;
  dst[2 * 1024 + 4 * i + 1] = v.y;
  dst[2 * 1024 + 4 * i + 2] = v.z;
  dst[2 * 1024 + 4 * i + 3] = v.w;
}

// UNORM conversion is not modelled: faults naming the instruction.
__kernel void tbuf_unorm(__global uint *src, __global float *out) {
  uint i = GID();
  float x;
  TLOAD("tbuffer_load_format_x", "BUF_DATA_FORMAT_8,BUF_NUM_FORMAT_UNORM", x, i, src, 256);
  out[i] = x;
}

// Packed and D16 typed forms of element i (n_elems elements in range); results to out:
// [0..3) 10_11_11 FLOAT (f32), [3..7) 2_10_10_10 SINT, [7..11) 2_10_10_10 USCALED (f32),
// [11] 8_8 SINT as D16 xy (two 16-bit halves), [12..14) 16_16_16_16 FLOAT as D16 xyzw.
// dst element i (16_16 UINT) = the two halves of src word i swapped, by a D16 xy store.
__kernel void tbuf_packed_d16(__global uint *src, __global uint *out, __global uint *dst,
                              uint n_elems) {
  uint i = GID();
  float3 f;
  int4 s;
  float4 u;
  uint h;
  uint2 q;
  TLOAD("tbuffer_load_format_xyz", "BUF_DATA_FORMAT_10_11_11,BUF_NUM_FORMAT_FLOAT", f, i * 4,
        src, n_elems * 4);
  TLOAD("tbuffer_load_format_xyzw", "BUF_DATA_FORMAT_2_10_10_10,BUF_NUM_FORMAT_SINT", s, i * 4,
        src, n_elems * 4);
  TLOAD("tbuffer_load_format_xyzw", "BUF_DATA_FORMAT_2_10_10_10,BUF_NUM_FORMAT_USCALED", u,
        i * 4, src, n_elems * 4);
  TLOAD("tbuffer_load_format_d16_xy", "BUF_DATA_FORMAT_8_8,BUF_NUM_FORMAT_SINT", h, i * 2, src,
        n_elems * 2);
  TLOAD("tbuffer_load_format_d16_xyzw", "BUF_DATA_FORMAT_16_16_16_16,BUF_NUM_FORMAT_FLOAT", q,
        i * 8, src, n_elems * 8);
  __global uint *o = out + 14 * i;
  o[0] = as_uint(f.x); o[1] = as_uint(f.y); o[2] = as_uint(f.z);
  o[3] = s.x; o[4] = s.y; o[5] = s.z; o[6] = s.w;
  o[7] = as_uint(u.x); o[8] = as_uint(u.y); o[9] = as_uint(u.z); o[10] = as_uint(u.w);
  o[11] = h;
  o[12] = q.x; o[13] = q.y;
  uint w = src[i];
  uint sw = w >> 16 | w << 16;
  uint off = i * 4;
  __asm__ volatile(SRSRC "tbuffer_store_format_d16_xy %[d], %[o], s[20:23], 0 "
                   "format:[BUF_DATA_FORMAT_16_16,BUF_NUM_FORMAT_UINT] offen\n"
                   " s_waitcnt vmcnt(0)"
                   :: [d] "v"(sw), [o] "v"(off), RIN(dst, n_elems * 4, RAW_W3) : CLOB);
}
