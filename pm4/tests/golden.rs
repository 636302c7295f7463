//! Golden tests: every packet kind encoded and compared word for word with
//! values derived by hand from public sources. Each test names the file (path
//! in its public repository) the expected words come from. The expected words
//! are literals; the comments show the macro composition they were computed from.

use pm4::aql::{
    self, AqlPacket, Barrier, BarrierValue, FenceScope, KernelDispatch, PacketControl,
    SignalCondition, VendorPm4Ib,
};
use pm4::pkt3::*;
use pm4::sdma::{self, SdmaPacket};
use pm4::{GfxFamily, SdmaVersion};

fn enc(p: &Pm4Packet<'_>, fam: GfxFamily) -> Vec<u32> {
    let mut buf = [0u32; 64];
    let n = p.encode(fam, &mut buf).expect("encode");
    assert_eq!(n, p.dwords(fam));
    // The decoder must give back the same packet from the same words.
    let (d, used) = decode_pm4(&buf[..n], fam).expect("decode");
    assert_eq!(used, n);
    assert_eq!(&d, p);
    buf[..n].to_vec()
}

fn enc_sdma(p: &SdmaPacket<'_>, v: SdmaVersion) -> Vec<u32> {
    let mut buf = [0u32; 64];
    let n = p.encode(v, &mut buf).expect("encode");
    let (d, used) = sdma::decode_sdma(&buf[..n], v).expect("decode");
    assert_eq!(used, n);
    assert_eq!(&d, p);
    buf[..n].to_vec()
}

// ----------------------------------------------------------------------- PM4

/// torvalds/linux drivers/gpu/drm/amd/amdgpu/soc15d.h: PACKET3(PACKET3_NOP, 0x3FFF)
/// is the ring's one-dword NOP (gfx_v9_0.c `.nop`); Mesa src/amd/common/sid.h
/// PKT3_NOP_PAD is the same "header-only version".
#[test]
fn nop_header_only_and_padding() {
    for fam in GfxFamily::ALL {
        assert_eq!(
            enc(&Pm4Packet::Nop(Nop { dwords: 1 }), fam),
            vec![0xFFFF_1000]
        );
        // PACKET3(PACKET3_NOP, 2) followed by two ignored dwords.
        assert_eq!(
            enc(&Pm4Packet::Nop(Nop { dwords: 4 }), fam),
            vec![0xC002_1000, 0, 0, 0]
        );
    }
}

/// torvalds/linux drivers/gpu/drm/amd/amdgpu/soc15d.h (WRITE_DATA_DST_SEL(5) |
/// WR_CONFIRM, as gfx_v9_0_ring_emit_fence_kiq composes it) and
/// drivers/gpu/drm/amd/amdgpu/nvd.h (same macros for gfx10+).
#[test]
fn write_data_memory() {
    let data = [0x1122_3344u32];
    let p = Pm4Packet::WriteData(WriteData::memory(0x0000_7F12_3456_7008, &data));
    for fam in GfxFamily::ALL {
        // PACKET3(0x37, 3); DST_SEL(5)<<8 | WR_CONFIRM(1<<20); addr lo; addr hi; data
        assert_eq!(
            enc(&p, fam),
            vec![
                0xC003_3700,
                0x0010_0500,
                0x3456_7008,
                0x0000_7F12,
                0x1122_3344
            ]
        );
    }
    // Register write with WR_ONE_ADDR (bit 16) and cache policy bypass (soc15d.h
    // PACKET3_WRITE_DATA__CACHE_POLICY__BYPASS = 3 << 25).
    let two = [1u32, 2];
    let p = Pm4Packet::WriteData(WriteData {
        dst_sel: WriteDataDst::Register,
        addr_incr: false,
        wr_confirm: false,
        cache_policy: CachePolicy::Bypass,
        engine_sel: 0,
        addr: 0x2C40,
        data: &two,
    });
    assert_eq!(
        enc(&p, GfxFamily::Gfx9),
        vec![0xC004_3700, 0x0601_0000, 0x2C40, 0, 1, 2]
    );
}

/// torvalds/linux drivers/gpu/drm/amd/amdgpu/soc15d.h WAIT_REG_MEM_* macros as
/// used by gfx_v9_0_wait_reg_mem(ring, 0, 1, 0, lo, hi, seq, 0xffffffff, 4)
/// (memory space, equal, poll interval 4).
#[test]
fn wait_reg_mem_equal_memory() {
    let p = Pm4Packet::WaitRegMem(WaitRegMem::memory(
        CompareFn::Equal,
        0x0000_7F00_0000_1000,
        42,
        0xFFFF_FFFF,
        4,
    ));
    for fam in GfxFamily::ALL {
        // PACKET3(0x3C, 5); FUNCTION(3) | MEM_SPACE(1)<<4 = 0x13
        assert_eq!(
            enc(&p, fam),
            vec![
                0xC005_3C00,
                0x0000_0013,
                0x0000_1000,
                0x0000_7F00,
                42,
                0xFFFF_FFFF,
                4
            ]
        );
    }
}

/// torvalds/linux drivers/gpu/drm/amd/amdgpu/soc15d.h: all seven
/// PACKET3_WAIT_REG_MEM__FUNCTION__* values, register space, PFP engine
/// (WAIT_REG_MEM_ENGINE(1) = 1 << 8) and the write-wait-write operation
/// (WAIT_REG_MEM_OPERATION(1) = 1 << 6).
#[test]
fn wait_reg_mem_functions_and_register_forms() {
    let expected_fn = [0u32, 1, 2, 3, 4, 5, 6];
    for (f, &bits) in CompareFn::ALL.iter().zip(expected_fn.iter()) {
        let mut w = WaitRegMem::memory(*f, 0x1000, 7, 0xFF, 10);
        w.engine = 1;
        let words = enc(&Pm4Packet::WaitRegMem(w), GfxFamily::Gfx11);
        assert_eq!(words[1], bits | 0x10 | 0x100);
    }
    let w = WaitRegMem {
        function: CompareFn::Equal,
        mem_space: MemSpace::Register,
        operation: WaitOperation::WrWaitWrReg,
        engine: 0,
        cache_policy: CachePolicy::Lru,
        addr: (0x1235u64 << 32) | 0x1234,
        reference: 1,
        mask: 1,
        poll_interval: 0x20,
        optimize_ace_offload: false,
    };
    // OPERATION(1)<<6 | FUNCTION(3), REG_WRITE_ADDR1, REG_WRITE_ADDR2
    assert_eq!(
        enc(&Pm4Packet::WaitRegMem(w), GfxFamily::Gfx9),
        vec![0xC005_3C00, 0x43, 0x1234, 0x1235, 1, 1, 0x20]
    );
}

/// torvalds/linux drivers/gpu/drm/amd/amdgpu/nvd.h PACKET3_WAIT_REG_MEM64 = 0x93;
/// dword layout of the ME WAIT_REG_MEM64 packet (control, poll addr lo [31:3],
/// hi, reference lo/hi, mask lo/hi, poll interval) as in AMD's PM4 ME headers
/// (`PM4_ME_WAIT_REG_MEM64`).
#[test]
fn wait_reg_mem64_geq() {
    let p = Pm4Packet::WaitRegMem64(WaitRegMem64 {
        function: CompareFn::GreaterEqual,
        mem_space: MemSpace::Memory,
        operation: WaitOperation::WaitRegMem,
        engine: 0,
        cache_policy: CachePolicy::Lru,
        addr: 0x0000_7F00_0000_2008,
        reference: 0x1_0000_0002,
        mask: u64::MAX,
        poll_interval: 4,
    });
    assert_eq!(
        enc(&p, GfxFamily::Gfx10),
        vec![
            0xC007_9300,
            0x15,
            0x0000_2008,
            0x7F00,
            2,
            1,
            0xFFFF_FFFF,
            0xFFFF_FFFF,
            4
        ]
    );
}

/// torvalds/linux drivers/gpu/drm/amd/amdkfd/kfd_packet_manager_v9.c
/// pm_release_mem_v9: CACHE_FLUSH_AND_INV_TS_EVENT (0x14), end_of_pipe (5),
/// tcl1_action_ena + tc_action_ena (soc15d.h EOP_TCL1_ACTION_EN 1<<16,
/// EOP_TC_ACTION_EN 1<<17), data_sel 32-bit low (1<<29), int_sel
/// send_interrupt_after_write_confirm (2<<24).
#[test]
fn release_mem_gfx9_kfd_fence() {
    let p = Pm4Packet::ReleaseMem(ReleaseMem {
        event_type: event::CACHE_FLUSH_AND_INV_TS_EVENT,
        event_index: event::INDEX_END_OF_PIPE,
        cache_actions: release_cache::GFX9_TCL1_ACTION_ENA | release_cache::GFX9_TC_ACTION_ENA,
        cache_policy: CachePolicy::Lru,
        execute: false,
        dst_sel: 0,
        int_sel: IntSel::SendInterruptAfterWriteConfirm,
        data_sel: DataSel::Value32,
        addr: 0x0000_7FFF_F000_0040,
        data: 0x55,
        int_ctxid: 0,
    });
    assert_eq!(
        enc(&p, GfxFamily::Gfx9),
        vec![
            0xC006_4900,
            0x0003_0514,
            0x2200_0000,
            0xF000_0040,
            0x7FFF,
            0x55,
            0,
            0
        ]
    );
    // The gfx9 cache bits are not valid GCR bits on gfx10 and vice versa.
    let bad = ReleaseMem {
        cache_actions: release_cache::GCR_GL2_WB | release_cache::GCR_SEQ,
        ..match p {
            Pm4Packet::ReleaseMem(r) => r,
            _ => unreachable!(),
        }
    };
    let mut buf = [0u32; 8];
    assert!(bad.encode(GfxFamily::Gfx9, &mut buf).is_err());
}

/// ROCm/ROCR-Runtime libhsakmt/tests/kfdtest/src/PM4Packet.cpp
/// PM4ReleaseMemoryPacket::InitPacketNV: gcr_cntl (1<<10)|(1<<9)|(1<<8)|(1<<3)|(1<<2)
/// in the GCR field at bit 12 (= nvd.h PACKET3_RELEASE_MEM_GCR_SEQ | GL2_WB |
/// GL2_INV | GL1_INV | GLV_INV), 64-bit data, int_sel 2, int_ctxid = data.
#[test]
fn release_mem_gfx10_gcr() {
    let p = Pm4Packet::ReleaseMem(ReleaseMem {
        event_type: 0x14,
        event_index: 5,
        cache_actions: release_cache::GCR_GLV_INV
            | release_cache::GCR_GL1_INV
            | release_cache::GCR_GL2_INV
            | release_cache::GCR_GL2_WB
            | (1 << 22),
        cache_policy: CachePolicy::Lru,
        execute: false,
        dst_sel: 0,
        int_sel: IntSel::SendInterruptAfterWriteConfirm,
        data_sel: DataSel::Value64,
        addr: 0x1_0000_0008,
        data: 0x0000_0002_0000_0003,
        int_ctxid: 3,
    });
    for fam in [GfxFamily::Gfx10, GfxFamily::Gfx11, GfxFamily::Gfx12] {
        assert_eq!(
            enc(&p, fam),
            vec![0xC006_4900, 0x0070_C514, 0x4200_0000, 8, 1, 3, 2, 3]
        );
    }
    // GPU clock timestamp form: DATA_SEL(3) (soc15d.h "send 64bit GPU counter value").
    let mut t = match p {
        Pm4Packet::ReleaseMem(r) => r,
        _ => unreachable!(),
    };
    t.data_sel = DataSel::GpuClock;
    t.int_sel = IntSel::None;
    t.data = 0;
    t.int_ctxid = 0;
    assert_eq!(
        enc(&Pm4Packet::ReleaseMem(t), GfxFamily::Gfx11)[2],
        0x6000_0000
    );
}

/// torvalds/linux drivers/gpu/drm/amd/amdgpu/soc15d.h ACQUIRE_MEM gfx9 form
/// (7 dwords: COHER_CNTL, SIZE, SIZE_HI, BASE, BASE_HI, POLL_INTERVAL) with the
/// coher_cntl kfdtest uses (libhsakmt/tests/kfdtest/src/PM4Packet.cpp
/// InitPacketAI: 0x28c00000 = TC_ACTION_ENA(23) | TCL1_ACTION_ENA(22) |
/// SH_KCACHE_ACTION_ENA(27) | SH_ICACHE_ACTION_ENA(29)), poll interval 4.
#[test]
fn acquire_mem_gfx9() {
    let cntl = coher::TC_ACTION_ENA
        | coher::TCL1_ACTION_ENA
        | coher::SH_KCACHE_ACTION_ENA
        | coher::SH_ICACHE_ACTION_ENA;
    let p = Pm4Packet::AcquireMem(AcquireMem::full_range(GfxFamily::Gfx9, cntl, 0, 4));
    assert_eq!(
        enc(&p, GfxFamily::Gfx9),
        vec![0xC005_5800, 0x28C0_0000, 0xFFFF_FFFF, 0, 0, 0, 4]
    );
    let mut buf = [0u32; 8];
    let with_gcr = AcquireMem {
        gcr_cntl: 1,
        ..AcquireMem::full_range(GfxFamily::Gfx9, 0, 0, 4)
    };
    assert!(with_gcr.encode(GfxFamily::Gfx9, &mut buf).is_err());
}

/// ROCm/ROCR-Runtime libhsakmt/tests/kfdtest/src/PM4Packet.cpp InitPacketNV:
/// 8-dword gfx10+ form, gcr_cntl = (1<<14|1<<9|1<<8|1<<7|1) (GL2_INV, GL1_INV,
/// GLV_INV, GLK_INV, GLI_INV=all; bit positions as Mesa src/amd/common S_586_*),
/// size 0xFFFFFFFF, poll interval 4; header PACKET3(PACKET3_ACQUIRE_MEM, 6) as
/// in Mesa si_emit_cache_flush.
#[test]
fn acquire_mem_gfx10_plus() {
    let g = gcr::GL2_INV | gcr::GL1_INV | gcr::GLV_INV | gcr::GLK_INV | gcr::GLI_INV_ALL;
    assert_eq!(g, 0x4381);
    for fam in [GfxFamily::Gfx10, GfxFamily::Gfx11, GfxFamily::Gfx12] {
        let p = Pm4Packet::AcquireMem(AcquireMem::full_range(fam, 0, g, 4));
        assert_eq!(
            enc(&p, fam),
            vec![0xC006_5800, 0, 0xFFFF_FFFF, 0, 0, 0, 4, 0x4381]
        );
    }
}

/// ROCm/ROCR-Runtime runtime/hsa-runtime/core/runtime/amd_aql_queue.cpp
/// ExecutePM4 ib_jump_cmd: PM4_HDR(IT_INDIRECT_BUFFER, 4) = count 2,
/// IB_BASE_LO, IB_BASE_HI, IB_SIZE | IB_VALID(1) (bit 23); same as soc15d.h
/// INDIRECT_BUFFER_VALID and gfx_v9_0_ring_emit_ib_compute's control with vmid 0.
#[test]
fn indirect_buffer() {
    let p = Pm4Packet::IndirectBuffer(IndirectBuffer::new(0x0000_7F55_AA00_0100, 0x40));
    for fam in GfxFamily::ALL {
        assert_eq!(
            enc(&p, fam),
            vec![0xC002_3F00, 0xAA00_0100, 0x7F55, 0x0080_0040]
        );
    }
    // VMID 3 in bits 27:24 (soc15d.h PACKET3_INDIRECT_BUFFER__VMID), cache policy
    // stream in bits 29:28.
    let mut ib = IndirectBuffer::new(0x1000, 8);
    ib.vmid = 3;
    ib.cache_policy = CachePolicy::Stream;
    assert_eq!(
        enc(&Pm4Packet::IndirectBuffer(ib), GfxFamily::Gfx9)[3],
        0x1380_0008
    );
}

/// Mesa src/amd/common/sid.h EVENT_TYPE/EVENT_INDEX and ROCm/ROCR-Runtime
/// libhsakmt/tests/kfdtest/src/PM4Packet.cpp PM4PartialFlushPacket
/// (CS_PARTIAL_FLUSH = 7, event_index 4, two dwords).
#[test]
fn event_write() {
    let p = Pm4Packet::EventWrite(EventWrite {
        event_type: event::CS_PARTIAL_FLUSH,
        event_index: 4,
        addr: None,
    });
    for fam in GfxFamily::ALL {
        assert_eq!(enc(&p, fam), vec![0xC000_4600, 0x0000_0407]);
    }
    // Sampling form with an address (soc15d.h PACKET3_EVENT_WRITE__ADDRESS_LO [31:3]).
    let p = Pm4Packet::EventWrite(EventWrite {
        event_type: 0x1F,
        event_index: 2,
        addr: Some(0x1_0000_0010),
    });
    assert_eq!(
        enc(&p, GfxFamily::Gfx9),
        vec![0xC002_4600, 0x0000_021F, 0x10, 1]
    );
}

/// torvalds/linux drivers/gpu/drm/amd/amdgpu/soc15d.h PACKET3_COPY_DATA__* :
/// register -> memory with write confirm (SRC_SEL 0, DST_SEL 5 << 8,
/// WR_CONFIRM 1 << 20), as gfx_v9_0_ring_emit_rreg emits it; and the GPU clock
/// source (SRC_SEL 9) with COUNT_SEL 64 bits (1 << 16).
#[test]
fn copy_data() {
    let p = CopyData {
        src_sel: copy_sel::REGISTER,
        dst_sel: copy_sel::IMMEDIATE_OR_DST_MEMORY,
        src_cache_policy: CachePolicy::Lru,
        count_sel_64: false,
        wr_confirm: true,
        dst_cache_policy: CachePolicy::Lru,
        pq_exe_status: false,
        engine_sel: 0,
        src: 0x2004,
        dst: 0x0000_7F00_0000_0100,
    };
    assert_eq!(
        enc(&Pm4Packet::CopyData(p), GfxFamily::Gfx9),
        vec![0xC004_4000, 0x0010_0500, 0x2004, 0, 0x100, 0x7F00]
    );
    let t = CopyData {
        src_sel: copy_sel::GPU_CLOCK_COUNT,
        count_sel_64: true,
        src: 0,
        ..p
    };
    assert_eq!(
        enc(&Pm4Packet::CopyData(t), GfxFamily::Gfx11)[1],
        0x0011_0509
    );
}

/// torvalds/linux drivers/gpu/drm/amd/amdgpu/nvd.h PACKET3_DMA_DATA_* (CP_SYNC
/// 1<<31, SRC_SEL(3) = L2, DST_SEL(3) = L2; BYTE_COUNT [25:0]) and Mesa
/// src/amd/common/sid.h for the fill form (SRC_SEL 2 = DATA).
#[test]
fn dma_data_copy_and_fill() {
    let p = Pm4Packet::DmaData(DmaData::copy(0x1_0000_1000, 0x2_0000_2000, 4096));
    for fam in GfxFamily::ALL {
        assert_eq!(
            enc(&p, fam),
            vec![0xC005_5000, 0xE030_0000, 0x1000, 1, 0x2000, 2, 0x1000]
        );
    }
    let f = Pm4Packet::DmaData(DmaData::fill(0x2_0000_2000, 0xDEAD_BEEF, 256));
    // CP_SYNC | SRC_SEL(2)<<29 | DST_SEL(3)<<20
    assert_eq!(
        enc(&f, GfxFamily::Gfx10),
        vec![0xC005_5000, 0xC030_0000, 0xDEAD_BEEF, 0, 0x2000, 2, 0x100]
    );
}

/// torvalds/linux drivers/gpu/drm/amd/amdgpu/soc15d.h PACKET3_ATOMIC_MEM__*
/// (COMMAND [11:8], LOOP_UNTIL_COMPARE_SATISFIED = 1, LOOP_INTERVAL [12:0]) with
/// Mesa src/amd/common/sid.h TC_OP_ATOMIC_CMPSWAP_32 = 72 in ATOMIC [6:0].
#[test]
fn atomic_mem() {
    let p = Pm4Packet::AtomicMem(AtomicMem {
        atomic: 72,
        command: 1,
        cache_policy: CachePolicy::Lru,
        engine_sel: 0,
        addr: 0x7F00_0000_0040,
        src_data: 5,
        cmp_data: 4,
        loop_interval: 128,
    });
    assert_eq!(
        enc(&p, GfxFamily::Gfx9),
        vec![0xC007_1E00, 0x148, 0x40, 0x7F00, 5, 0, 4, 0, 128]
    );
}

/// Mesa src/amd/common/sid.h: PKT3(PKT3_SET_SH_REG, 1, 0) with the offset
/// (reg - SI_SH_REG_OFFSET) >> 2, e.g. R_00B860_COMPUTE_TMPRING_SIZE -> 0x218;
/// nvd.h PACKET3_SET_SH_REG_START = 0x2c00 (dwords).
#[test]
fn set_sh_reg() {
    let v = [0x0000_1000u32];
    let p = Pm4Packet::SetShReg(SetShReg {
        reg_offset: 0x218,
        values: &v,
    });
    assert_eq!(enc(&p, GfxFamily::Gfx11), vec![0xC001_7600, 0x218, 0x1000]);
    let v3 = [1u32, 2, 3];
    let p = Pm4Packet::SetShReg(SetShReg {
        reg_offset: 0x204,
        values: &v3,
    });
    assert_eq!(enc(&p, GfxFamily::Gfx9), vec![0xC003_7600, 0x204, 1, 2, 3]);
}

/// torvalds/linux drivers/gpu/drm/amd/amdgpu/soc15d.h PACKET3_DISPATCH_DIRECT
/// (0x15, count 3) with the dim_x/y/z/dispatch_initiator body of
/// ROCm/ROCR-Runtime libhsakmt/tests/kfdtest/src/PM4Packet.cpp PM4DispatchDirectPacket.
#[test]
fn dispatch_direct() {
    let p = Pm4Packet::DispatchDirect(DispatchDirect {
        dim_x: 4,
        dim_y: 2,
        dim_z: 1,
        dispatch_initiator: 1,
    });
    assert_eq!(enc(&p, GfxFamily::Gfx9), vec![0xC003_1500, 4, 2, 1, 1]);
}

/// torvalds/linux drivers/gpu/drm/amd/amdgpu/soc15d.h PACKET3_PRED_EXEC (0x23) with
/// PACKET3_PRED_EXEC__EXEC_COUNT(x) = (x & 0x3FFF) << 0 and
/// PACKET3_PRED_EXEC__VIRTUALXCCID_SELECT(x) = (x & 0xFF) << 24; tinygrad
/// tinygrad/runtime/ops_amd.py `pred_exec` emits PACKET3(PRED_EXEC, 0), xcc_mask << 24 | count.
/// PACKET3(0x23, 0) = 0xC000_2300; XCC 0 only, 7 dwords -> 0x0100_0007.
#[test]
fn pred_exec() {
    let p = Pm4Packet::PredExec(PredExec {
        exec_count: 7,
        xcc_mask: 1,
    });
    assert_eq!(enc(&p, GfxFamily::Gfx9), vec![0xC000_2300, 0x0100_0007]);
    let p = Pm4Packet::PredExec(PredExec {
        exec_count: 0x3FFF,
        xcc_mask: 0xFF,
    });
    assert_eq!(enc(&p, GfxFamily::Gfx12), vec![0xC000_2300, 0xFF00_3FFF]);
}

// ----------------------------------------------------------------------- AQL

const SYS: PacketControl = PacketControl::SYSTEM_BARRIER;

/// ROCm/ROCR-Runtime runtime/hsa-runtime/inc/hsa.h: HSA_PACKET_TYPE_BARRIER_AND = 3,
/// HSA_PACKET_HEADER_BARRIER = 8, SCACQUIRE_FENCE_SCOPE = 9, SCRELEASE = 11,
/// HSA_FENCE_SCOPE_SYSTEM = 2 -> header 0x1503; dep_signal[5] at bytes 8..48,
/// completion_signal at byte 56.
#[test]
fn aql_barrier_and_or() {
    let b = Barrier {
        control: SYS,
        dep_signals: [0x1000, 0, 0, 0, 0x5000],
        completion_signal: 0x7F00_0000_0040,
    };
    let w = AqlPacket::BarrierAnd(b).encode();
    assert_eq!(
        w,
        [0x1503, 0, 0x1000, 0, 0, 0, 0, 0, 0, 0, 0x5000, 0, 0, 0, 0x40, 0x7F00]
    );
    // HSA_PACKET_TYPE_BARRIER_OR = 5, agent-scope acquire, no release, no barrier.
    let o = Barrier {
        control: PacketControl {
            barrier: false,
            acquire: FenceScope::Agent,
            release: FenceScope::None,
        },
        ..b
    };
    assert_eq!(AqlPacket::BarrierOr(o).encode()[0], 0x0205);
    for p in [AqlPacket::BarrierAnd(b), AqlPacket::BarrierOr(o)] {
        assert_eq!(AqlPacket::decode(&p.encode()).unwrap(), p);
    }
}

/// ROCm/ROCR-Runtime runtime/hsa-runtime/inc/hsa.h hsa_kernel_dispatch_packet_t:
/// header | setup (dimensions in bits 1:0) << 16, workgroup_size_x/y/z (u16),
/// grid_size_x/y/z, private/group segment sizes, kernel_object (byte 32),
/// kernarg_address (byte 40), completion_signal (byte 56).
#[test]
fn aql_kernel_dispatch() {
    let k = KernelDispatch {
        control: SYS,
        dimensions: 3,
        workgroup_size: [64, 2, 1],
        grid_size: [1024, 4, 1],
        private_segment_size: 16,
        group_segment_size: 256,
        kernel_object: 0x7F11_2233_4400,
        kernarg_address: 0x7F55_6677_8800,
        completion_signal: 0x7F00_0000_0080,
    };
    let w = AqlPacket::KernelDispatch(k).encode();
    assert_eq!(
        w,
        [
            0x0003_1502,
            0x0002_0040,
            1,
            1024,
            4,
            1,
            16,
            256,
            0x2233_4400,
            0x7F11,
            0x6677_8800,
            0x7F55,
            0,
            0,
            0x80,
            0x7F00
        ]
    );
    assert_eq!(AqlPacket::decode(&w).unwrap(), AqlPacket::KernelDispatch(k));
}

/// ROCm/ROCR-Runtime runtime/hsa-runtime/core/runtime/amd_aql_queue.cpp
/// ExecutePM4: vendor header with AMD_AQL_FORMAT_PM4_IB (1) in byte 2,
/// ib_jump_cmd[4] (INDIRECT_BUFFER), dw_cnt_remain = 0xA, reserved[8] zero,
/// completion signal at byte 56.
#[test]
fn aql_vendor_pm4_ib() {
    let p = VendorPm4Ib {
        control: SYS,
        ib: IndirectBuffer::new(0x7F12_3456_7000, 0x20),
        completion_signal: 0,
    };
    let w = AqlPacket::VendorPm4Ib(p).encode();
    assert_eq!(
        w,
        [
            0x0001_1500,
            0xC002_3F00,
            0x3456_7000,
            0x7F12,
            0x0080_0020,
            0xA,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0
        ]
    );
    assert_eq!(AqlPacket::decode(&w).unwrap(), AqlPacket::VendorPm4Ib(p));
    let mut bad = w;
    bad[5] = 9;
    assert!(AqlPacket::decode(&bad).is_err());
}

/// ROCm/ROCR-Runtime runtime/hsa-runtime/inc/hsa_ext_amd.h
/// hsa_amd_barrier_value_packet_t: AmdFormat HSA_AMD_PACKET_TYPE_BARRIER_VALUE (2)
/// at byte 2, signal at 8, value at 16, mask at 24, cond at 32
/// (HSA_SIGNAL_CONDITION_GTE = 3), completion_signal at 56.
#[test]
fn aql_barrier_value() {
    let p = BarrierValue {
        control: SYS,
        signal: 0x7F00_0000_1000,
        value: 5,
        mask: -1,
        cond: SignalCondition::Gte,
        completion_signal: 0x7F00_0000_2000,
    };
    let w = AqlPacket::BarrierValue(p).encode();
    assert_eq!(
        w,
        [
            0x0002_1500,
            0,
            0x1000,
            0x7F00,
            5,
            0,
            0xFFFF_FFFF,
            0xFFFF_FFFF,
            3,
            0,
            0,
            0,
            0,
            0,
            0x2000,
            0x7F00
        ]
    );
    assert_eq!(AqlPacket::decode(&w).unwrap(), AqlPacket::BarrierValue(p));
}

/// ROCm/ROCR-Runtime runtime/hsa-runtime/inc/hsa.h HSA_PACKET_TYPE_INVALID = 1:
/// ring slots start INVALID and the header is the last dword published.
#[test]
fn aql_ring_init_invalid_and_write_order() {
    use std::sync::atomic::{AtomicU32, Ordering};
    let ring: Vec<AtomicU32> = (0..64).map(|_| AtomicU32::new(0xFFFF_FFFF)).collect();
    aql::init_invalid(&ring);
    for s in 0..4 {
        assert_eq!(ring[s * 16].load(Ordering::Relaxed), 1);
        assert_eq!(ring[s * 16 + 5].load(Ordering::Relaxed), 0);
    }
    let w = aql::AqlRingWriter::new(&ring).unwrap();
    assert_eq!(w.slot_count(), 4);
    let b = Barrier {
        control: SYS,
        dep_signals: [0; 5],
        completion_signal: 0x40,
    };
    // Index 6 lands in slot 2; the doorbell value is the index itself.
    assert_eq!(w.write(6, &AqlPacket::BarrierAnd(b)), 6);
    assert_eq!(ring[32].load(Ordering::Relaxed), 0x1503);
    assert_eq!(ring[46].load(Ordering::Relaxed), 0x40);
    assert_eq!(w.read(6).unwrap(), AqlPacket::BarrierAnd(b));
    assert_eq!(w.read(5).unwrap(), AqlPacket::Invalid);
}

// ---------------------------------------------------------------------- SDMA

/// torvalds/linux drivers/gpu/drm/amd/amdgpu/sdma_v4_0.c sdma_v4_0_emit_copy_buffer:
/// SDMA_PKT_HEADER_OP(SDMA_OP_COPY) | SUB_OP(SDMA_SUBOP_COPY_LINEAR), byte_count - 1,
/// parameter 0, src lo/hi, dst lo/hi; count mask 0x003FFFFF in
/// vega10_sdma_pkt_open.h, 0x3FFFFFFF in navi10_sdma_pkt_open.h.
#[test]
fn sdma_copy_linear() {
    let c = sdma::CopyLinear {
        src: 0x1_0000_1000,
        dst: 0x2_0000_2000,
        bytes: 0x1000,
        tmz: false,
        parameter: 0,
    };
    for v in SdmaVersion::ALL {
        assert_eq!(
            enc_sdma(&SdmaPacket::CopyLinear(c), v),
            vec![1, 0xFFF, 0, 0x1000, 1, 0x2000, 2]
        );
    }
    // 4 MiB fits SDMA 4.x's 22-bit count exactly; one byte more does not.
    let big = sdma::CopyLinear {
        bytes: 1 << 22,
        ..c
    };
    assert_eq!(
        enc_sdma(&SdmaPacket::CopyLinear(big), SdmaVersion::V4)[1],
        0x003F_FFFF
    );
    let too_big = sdma::CopyLinear {
        bytes: (1 << 22) + 1,
        ..c
    };
    let mut buf = [0u32; 7];
    assert!(SdmaPacket::CopyLinear(too_big)
        .encode(SdmaVersion::V4, &mut buf)
        .is_err());
    assert_eq!(
        enc_sdma(&SdmaPacket::CopyLinear(too_big), SdmaVersion::V5)[1],
        0x0040_0000
    );
    // TMZ: SDMA_PKT_COPY_LINEAR_HEADER_TMZ (bit 18).
    let t = sdma::CopyLinear { tmz: true, ..c };
    assert_eq!(
        enc_sdma(&SdmaPacket::CopyLinear(t), SdmaVersion::V6)[0],
        0x0004_0001
    );
}

/// ROCm/ROCR-Runtime libhsakmt/tests/kfdtest/src/SDMAPacket.cpp
/// SDMAFillDataPacket: op SDMA_OP_CONST_FILL (11), fillsize 2 (DW fill, header
/// bits 31:30), dst lo/hi, data, count = size - 1 (AI+).
#[test]
fn sdma_const_fill() {
    let f = sdma::ConstFill {
        dst: 0x7F00_0000_0100,
        data: 0xCAFE_F00D,
        bytes: 256,
        fill_size: 2,
    };
    for v in SdmaVersion::ALL {
        assert_eq!(
            enc_sdma(&SdmaPacket::ConstFill(f), v),
            vec![0x8000_000B, 0x100, 0x7F00, 0xCAFE_F00D, 0xFF]
        );
    }
}

/// torvalds/linux drivers/gpu/drm/amd/amdgpu/sdma_v4_0.c sdma_v4_0_ring_emit_fence
/// (SDMA_PKT_HEADER_OP(SDMA_OP_FENCE), addr lo/hi, seq) and
/// ROCm/ROCR-Runtime libhsakmt/tests/kfdtest/src/SDMAPacket.cpp InitPacketNV:
/// (1 << 22) snoop | (1 << 20) system | (3 << 16) mtype UC | SDMA_OP_FENCE.
#[test]
fn sdma_fence() {
    let f = sdma::Fence::new(0x7F00_0000_0008, 7);
    assert_eq!(
        enc_sdma(&SdmaPacket::Fence(f), SdmaVersion::V4),
        vec![5, 8, 0x7F00, 7]
    );
    let nv = sdma::Fence {
        mtype: 3,
        sys: true,
        snp: true,
        ..f
    };
    assert_eq!(
        enc_sdma(&SdmaPacket::Fence(nv), SdmaVersion::V5),
        vec![0x0053_0005, 8, 0x7F00, 7]
    );
}

/// torvalds/linux drivers/gpu/drm/amd/amdgpu/sdma_v4_0.c sdma_v4_0_wait_reg_mem:
/// SDMA_OP_POLL_REGMEM | HDP_FLUSH(0) | MEM_POLL(1) (bit 31) | FUNC(3) (bits 30:28),
/// addr lo/hi, ref, mask, INTERVAL(10) | RETRY_COUNT(0xfff) << 16.
#[test]
fn sdma_poll_regmem() {
    let p = sdma::PollRegmem {
        func: CompareFn::Equal,
        mem_poll: true,
        hdp_flush: false,
        addr: 0x7F00_0000_0040,
        reference: 1,
        mask: 0xFFFF_FFFF,
        interval: 10,
        retry_count: 0xFFF,
    };
    for v in SdmaVersion::ALL {
        assert_eq!(
            enc_sdma(&SdmaPacket::PollRegmem(p), v),
            vec![0xB000_0008, 0x40, 0x7F00, 1, 0xFFFF_FFFF, 0x0FFF_000A]
        );
    }
}

/// ROCm/ROCR-Runtime libhsakmt/tests/kfdtest/src/SDMAPacket.cpp SDMATrapPacket
/// (op SDMA_OP_TRAP = 6, int_context = event id) and SDMATimePacket (op
/// SDMA_OP_TIMESTAMP = 13, sub_op 2 = get global timestamp, dst lo/hi).
#[test]
fn sdma_trap_and_timestamp() {
    assert_eq!(
        enc_sdma(
            &SdmaPacket::Trap(sdma::Trap { int_context: 0x42 }),
            SdmaVersion::V6
        ),
        vec![6, 0x42]
    );
    let t = sdma::Timestamp {
        kind: sdma::TimestampKind::GetGlobal,
        value: 0x7F00_0000_0020,
    };
    assert_eq!(
        enc_sdma(&SdmaPacket::Timestamp(t), SdmaVersion::V4),
        vec![0x0000_020D, 0x20, 0x7F00]
    );
}

/// ROCm/ROCR-Runtime libhsakmt/tests/kfdtest/src/SDMAPacket.cpp
/// SDMAWriteDataPacket: op SDMA_OP_WRITE (2), sub_op WRITE_LINEAR (0), dst
/// lo/hi, count = ndw - 1, data; sdma_v4_0.c sdma_v4_0_ring_test_ring writes the
/// same with SDMA_PKT_WRITE_UNTILED_DW_3_COUNT(0) and 0xDEADBEEF.
#[test]
fn sdma_write_linear() {
    let one = [0xDEAD_BEEFu32];
    assert_eq!(
        enc_sdma(
            &SdmaPacket::Write(sdma::Write {
                dst: 0x7F00_0000_0100,
                data: &one
            }),
            SdmaVersion::V4
        ),
        vec![2, 0x100, 0x7F00, 0, 0xDEAD_BEEF]
    );
    let three = [1u32, 2, 3];
    assert_eq!(
        enc_sdma(
            &SdmaPacket::Write(sdma::Write {
                dst: 0x100,
                data: &three
            }),
            SdmaVersion::V7
        ),
        vec![2, 0x100, 0, 2, 1, 2, 3]
    );
}

/// ROCm/ROCR-Runtime libhsakmt/tests/kfdtest/src/SDMAPacket.cpp SDMANopPacket
/// (op 0, count = dwords - 1 in header bits 29:16, as the kernel's
/// sdma_v4_0_ring_insert_nop SDMA_PKT_NOP_HEADER_COUNT(count - 1)).
#[test]
fn sdma_nop() {
    assert_eq!(
        enc_sdma(&SdmaPacket::Nop(sdma::Nop { count: 0 }), SdmaVersion::V4),
        vec![0]
    );
    assert_eq!(
        enc_sdma(&SdmaPacket::Nop(sdma::Nop { count: 3 }), SdmaVersion::V5),
        vec![0x0003_0000, 0, 0, 0]
    );
}

/// torvalds/linux drivers/gpu/drm/amd/amdgpu/sdma_v4_0.c sdma_v4_0_ring_emit_ib:
/// SDMA_PKT_HEADER_OP(SDMA_OP_INDIRECT) | SDMA_PKT_INDIRECT_HEADER_VMID(vmid)
/// (bits 19:16), base lo (32-byte aligned), hi, length_dw, csa lo/hi.
#[test]
fn sdma_indirect() {
    let i = sdma::Indirect {
        vmid: 3,
        ib_addr: 0x1_0000_0040,
        ib_dwords: 16,
        csa_addr: 0,
    };
    assert_eq!(
        enc_sdma(&SdmaPacket::Indirect(i), SdmaVersion::V4),
        vec![0x0003_0004, 0x40, 1, 16, 0, 0]
    );
}

/// Mesa src/amd/common/sid.h SDMA_V2_0_COPY_MAX_BYTES (0x3fff00) and
/// SDMA_V5_2_COPY_MAX_BYTES (0x3fffff00): split sizes per version.
#[test]
fn sdma_copy_split() {
    let total = 10u64 << 20;
    let v4: Vec<_> = sdma::copy_linear_split(0x1000, 0x8000_0000, total, SdmaVersion::V4).collect();
    assert_eq!(v4.len(), 3);
    assert_eq!(v4[0].bytes, 0x003F_FF00);
    assert_eq!(v4[1].src, 0x1000 + 0x003F_FF00);
    assert_eq!(v4.iter().map(|c| c.bytes as u64).sum::<u64>(), total);
    let v5: Vec<_> = sdma::copy_linear_split(0, 0, 3 << 30, SdmaVersion::V5).collect();
    assert_eq!(v5.len(), 4);
    assert_eq!(v5[0].bytes, 0x3FFF_FF00);
    for c in v4.iter().chain(v5.iter()) {
        let mut buf = [0u32; 7];
        let v = if c.bytes > (1 << 22) {
            SdmaVersion::V5
        } else {
            SdmaVersion::V4
        };
        SdmaPacket::CopyLinear(*c).encode(v, &mut buf).unwrap();
    }
}

#[test]
fn sdma_ring_never_straddles() {
    use std::sync::atomic::{AtomicU32, Ordering};
    let ring: Vec<AtomicU32> = (0..16).map(|_| AtomicU32::new(0xEEEE_EEEE)).collect();
    let w = sdma::SdmaRingWriter::new(&ring, SdmaVersion::V6).unwrap();
    let c = sdma::CopyLinear {
        src: 0x1000,
        dst: 0x2000,
        bytes: 64,
        tmz: false,
        parameter: 0,
    };
    // wptr at dword 12: 7 dwords would cross the end at 16, so dwords 12..16 get
    // NOPs and the copy starts at 0; new wptr = 16*4 + 7*4.
    let wp = w.write(48, &SdmaPacket::CopyLinear(c)).unwrap();
    assert_eq!(wp, 64 + 28);
    for w in &ring[12..16] {
        assert_eq!(w.load(Ordering::Relaxed), 0);
    }
    assert_eq!(ring[0].load(Ordering::Relaxed), 1);
    assert_eq!(ring[5].load(Ordering::Relaxed), 0x2000);
    assert_eq!(ring[6].load(Ordering::Relaxed), 0);
    let words: Vec<u32> = ring.iter().map(|a| a.load(Ordering::Relaxed)).collect();
    let (p, n) = sdma::decode_sdma(&words, SdmaVersion::V6).unwrap();
    assert_eq!((p, n), (SdmaPacket::CopyLinear(c), 7));
    // A packet that fits exactly up to the end is not moved.
    let wp2 = w
        .write(wp, &SdmaPacket::Trap(sdma::Trap { int_context: 9 }))
        .unwrap();
    assert_eq!(wp2, wp + 8);
}

#[test]
fn pm4_ring_wraps_and_pads() {
    use std::sync::atomic::{AtomicU32, Ordering};
    let ring: Vec<AtomicU32> = (0..16).map(|_| AtomicU32::new(0)).collect();
    let w = Pm4RingWriter::new(&ring, GfxFamily::Gfx9).unwrap();
    let wrm = Pm4Packet::WaitRegMem(WaitRegMem::memory(
        CompareFn::GreaterEqual,
        0x1000,
        1,
        !0,
        4,
    ));
    let wp = w.write(12, &wrm).unwrap();
    assert_eq!(wp, 19);
    assert_eq!(ring[12].load(Ordering::Relaxed), 0xC005_3C00);
    assert_eq!(ring[2].load(Ordering::Relaxed), 4);
    let wp = w.pad_to(wp, 8).unwrap();
    assert_eq!(wp, 24);
    assert_eq!(ring[3].load(Ordering::Relaxed), 0xC003_1000);
}
