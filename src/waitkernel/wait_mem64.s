// kfdrt_wait_mem64: a software WAIT_REG_MEM64 for gfx9 (gfx90a, gfx942), whose CP has no
// WAIT_REG_MEM64 packet and whose AQL BARRIER_VALUE compares signed values. One work-item
// polls the 64-bit value at `addr` until `(value & mask) FUNCTION reference` holds, with
// FUNCTION in the CP's WAIT_REG_MEM encoding (0 always, 1 <, 2 <=, 3 ==, 4 !=, 5 >=,
// 6 >), compared unsigned as the CP does. An unknown function ends the wait at once.
// Assembled per target with `llvm-mc-19 --defsym GFX942=0|1` and linked with ld.lld-19 (see
// src/waitkernel/mod.rs); the bytes are committed in
// src/waitkernel/code.rs and a test reassembles this file and compares.
//
// Kernel arguments (32 bytes): addr u64 @0, reference u64 @8, mask u64 @16,
// function u32 @24. The only user SGPRs are the kernarg segment pointer, in s[0:1].

.if GFX942
.amdgcn_target "amdgcn-amd-amdhsa--gfx942"
.else
.amdgcn_target "amdgcn-amd-amdhsa--gfx90a"
.endif
.amdhsa_code_object_version 5

.text
.globl kfdrt_wait_mem64
.p2align 8
.type kfdrt_wait_mem64,@function
kfdrt_wait_mem64:
    s_load_dwordx4 s[4:7], s[0:1], 0x0       // addr, reference
    s_load_dwordx2 s[8:9], s[0:1], 0x10      // mask
    s_load_dword s10, s[0:1], 0x18           // function
    s_waitcnt lgkmcnt(0)
    v_mov_b32 v0, s4
    v_mov_b32 v1, s5
    v_mov_b32 v4, s6
    v_mov_b32 v5, s7
    s_cmp_eq_u32 s10, 0
    s_cbranch_scc1 .Ldone
.Lpoll:
    // System-scope coherent load: the value is written by the host or another agent.
.if GFX942
    global_load_dwordx2 v[2:3], v[0:1], off sc0 sc1
.else
    global_load_dwordx2 v[2:3], v[0:1], off glc
.endif
    s_waitcnt vmcnt(0)
    v_and_b32 v2, s8, v2
    v_and_b32 v3, s9, v3
    s_cmp_eq_u32 s10, 1
    s_cbranch_scc1 .Llt
    s_cmp_eq_u32 s10, 2
    s_cbranch_scc1 .Lle
    s_cmp_eq_u32 s10, 3
    s_cbranch_scc1 .Leq
    s_cmp_eq_u32 s10, 4
    s_cbranch_scc1 .Lne
    s_cmp_eq_u32 s10, 5
    s_cbranch_scc1 .Lge
    s_cmp_eq_u32 s10, 6
    s_cbranch_scc1 .Lgt
    s_branch .Ldone
.Llt:
    v_cmp_lt_u64 vcc, v[2:3], v[4:5]
    s_branch .Ltest
.Lle:
    v_cmp_le_u64 vcc, v[2:3], v[4:5]
    s_branch .Ltest
.Leq:
    v_cmp_eq_u64 vcc, v[2:3], v[4:5]
    s_branch .Ltest
.Lne:
    v_cmp_ne_u64 vcc, v[2:3], v[4:5]
    s_branch .Ltest
.Lge:
    v_cmp_ge_u64 vcc, v[2:3], v[4:5]
    s_branch .Ltest
.Lgt:
    v_cmp_gt_u64 vcc, v[2:3], v[4:5]
.Ltest:
    s_cbranch_vccnz .Ldone
    s_sleep 2                                // ~128 clocks between polls
    s_branch .Lpoll
.Ldone:
    s_endpgm
.Lend:
.size kfdrt_wait_mem64, .Lend-kfdrt_wait_mem64

.rodata
.p2align 6
.amdhsa_kernel kfdrt_wait_mem64
    .amdhsa_user_sgpr_kernarg_segment_ptr 1
    .amdhsa_kernarg_size 32
    .amdhsa_next_free_vgpr 6
    .amdhsa_next_free_sgpr 11
    .amdhsa_accum_offset 8
.end_amdhsa_kernel

.amdgpu_metadata
---
amdhsa.version: [ 1, 2 ]
amdhsa.kernels:
  - .name: kfdrt_wait_mem64
    .symbol: kfdrt_wait_mem64.kd
    .kernarg_segment_size: 32
    .kernarg_segment_align: 8
    .group_segment_fixed_size: 0
    .private_segment_fixed_size: 0
    .wavefront_size: 64
    .sgpr_count: 17
    .vgpr_count: 6
    .agpr_count: 0
    .max_flat_workgroup_size: 64
    .reqd_workgroup_size: [ 1, 1, 1 ]
    .args:
      - { .name: addr, .offset: 0, .size: 8, .value_kind: global_buffer, .address_space: global }
      - { .name: reference, .offset: 8, .size: 8, .value_kind: by_value }
      - { .name: mask, .offset: 16, .size: 8, .value_kind: by_value }
      - { .name: function, .offset: 24, .size: 4, .value_kind: by_value }
...
.end_amdgpu_metadata
