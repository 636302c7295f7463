//! The common-form constructors of RELEASE_MEM, COPY_DATA and ATOMIC_MEM: each one
//! encodes, on every family, exactly the words of the field-by-field literal it
//! stands for (the literal its call sites wrote before it existed). The literals list
//! their fields in name order, written apart from the constructors they check.

use pm4::pkt3::*;
use pm4::GfxFamily;

fn words(p: Pm4Packet<'_>, fam: GfxFamily) -> Vec<u32> {
    let mut buf = [0u32; 16];
    let n = p.encode(fam, &mut buf).expect("encode");
    buf[..n].to_vec()
}

fn same_words(built: Pm4Packet<'_>, literal: Pm4Packet<'_>) {
    assert_eq!(built, literal);
    for fam in GfxFamily::ALL {
        assert_eq!(words(built, fam), words(literal, fam), "{fam:?}");
    }
}

/// The end-of-pipe RELEASE_MEM as written out field by field.
fn eop_literal(data_sel: DataSel, addr: u64, data: u64) -> ReleaseMem {
    ReleaseMem {
        addr,
        cache_actions: 0,
        cache_policy: CachePolicy::Lru,
        data,
        data_sel,
        dst_sel: 0,
        event_index: event::INDEX_END_OF_PIPE,
        event_type: event::CACHE_FLUSH_AND_INV_TS_EVENT,
        execute: false,
        int_ctxid: 0,
        int_sel: IntSel::None,
    }
}

#[test]
fn release_mem_end_of_pipe() {
    for (sel, addr, data) in [
        (DataSel::GpuClock, 0x7F00_0000_1000, 0),
        (DataSel::Value64, 0x2008, 0x1_0000_0005),
        (DataSel::None, 0, 0),
    ] {
        same_words(
            Pm4Packet::ReleaseMem(ReleaseMem::end_of_pipe(sel, addr, data)),
            Pm4Packet::ReleaseMem(eop_literal(sel, addr, data)),
        );
    }
    // gfx9: EVENT_TYPE 0x14 | EVENT_INDEX 5 << 8; DATA_SEL 3 (GPU clock) << 29.
    let w = words(
        Pm4Packet::ReleaseMem(ReleaseMem::end_of_pipe(DataSel::GpuClock, 0x1000, 0)),
        GfxFamily::Gfx9,
    );
    assert_eq!(&w[..3], &[0xC006_4900, 0x0000_0514, 0x6000_0000]);
}

#[test]
fn release_mem_end_of_pipe_write32() {
    same_words(
        Pm4Packet::ReleaseMem(ReleaseMem::end_of_pipe_write32(0x7F00_0000_0200, 77)),
        Pm4Packet::ReleaseMem(eop_literal(DataSel::Value32, 0x7F00_0000_0200, 77)),
    );
}

#[test]
fn release_mem_with_interrupt() {
    let literal = ReleaseMem {
        int_sel: IntSel::SendInterruptAfterWriteConfirm,
        int_ctxid: 3,
        ..eop_literal(DataSel::Value32, 0x2200, 77)
    };
    let built = ReleaseMem::end_of_pipe_write32(0x2200, 77)
        .with_interrupt(IntSel::SendInterruptAfterWriteConfirm, 3);
    same_words(Pm4Packet::ReleaseMem(built), Pm4Packet::ReleaseMem(literal));
    // INT_SEL 2 << 24 | DATA_SEL 1 << 29; the context id in dword 7.
    let w = words(Pm4Packet::ReleaseMem(built), GfxFamily::Gfx9);
    assert_eq!((w[2], w[7]), (0x2200_0000, 3));
}

/// The 64-bit write-confirmed COPY_DATA to memory as written out field by field.
fn to_memory_literal(src_sel: u8, src: u64, dst: u64, count_sel_64: bool) -> CopyData {
    CopyData {
        count_sel_64,
        dst,
        dst_cache_policy: CachePolicy::Lru,
        dst_sel: copy_sel::IMMEDIATE_OR_DST_MEMORY,
        engine_sel: 0,
        pq_exe_status: false,
        src,
        src_cache_policy: CachePolicy::Lru,
        src_sel,
        wr_confirm: true,
    }
}

#[test]
fn copy_data_to_memory() {
    for (sel, src, wide) in [
        (copy_sel::ATOMIC_RETURN_DATA, 0, true),
        (copy_sel::IMMEDIATE_OR_DST_MEMORY, 0xABCD, false),
        (copy_sel::MEMORY, 0x7F00_0000_0040, true),
    ] {
        same_words(
            Pm4Packet::CopyData(CopyData::to_memory(sel, src, 0x3000, wide)),
            Pm4Packet::CopyData(to_memory_literal(sel, src, 0x3000, wide)),
        );
    }
}

#[test]
fn copy_data_mem_to_mem32() {
    same_words(
        Pm4Packet::CopyData(CopyData::mem_to_mem32(0x1000, 0x1008)),
        Pm4Packet::CopyData(to_memory_literal(copy_sel::MEMORY, 0x1000, 0x1008, false)),
    );
    // SRC_SEL 1 | DST_SEL 5 << 8 | WR_CONFIRM 1 << 20.
    let w = words(
        Pm4Packet::CopyData(CopyData::mem_to_mem32(0x1000, 0x1008)),
        GfxFamily::Gfx9,
    );
    assert_eq!(w[1], 0x0010_0501);
}

#[test]
fn copy_data_imm64_to_mem() {
    let v = 0x1234_5678_9ABC_DEF0;
    same_words(
        Pm4Packet::CopyData(CopyData::imm64_to_mem(v, 0x2000)),
        Pm4Packet::CopyData(to_memory_literal(
            copy_sel::IMMEDIATE_OR_DST_MEMORY,
            v,
            0x2000,
            true,
        )),
    );
}

#[test]
fn copy_data_gpu_clock_to_mem() {
    same_words(
        Pm4Packet::CopyData(CopyData::gpu_clock_to_mem(0x2000)),
        Pm4Packet::CopyData(to_memory_literal(
            copy_sel::GPU_CLOCK_COUNT,
            0,
            0x2000,
            true,
        )),
    );
    // soc15d.h: SRC_SEL 9 | DST_SEL 5 << 8 | COUNT_SEL 1 << 16 | WR_CONFIRM 1 << 20.
    let w = words(
        Pm4Packet::CopyData(CopyData::gpu_clock_to_mem(0x2000)),
        GfxFamily::Gfx11,
    );
    assert_eq!(w[1], 0x0011_0509);
}

/// The single-pass ATOMIC_MEM as written out field by field.
fn single_pass_literal(atomic: u8, addr: u64, src_data: u64, cmp_data: u64) -> AtomicMem {
    AtomicMem {
        addr,
        atomic,
        cache_policy: CachePolicy::Lru,
        cmp_data,
        command: 0,
        engine_sel: 0,
        loop_interval: 0,
        src_data,
    }
}

#[test]
fn atomic_mem_single_pass() {
    for (op, src, cmp) in [(tc_op::CMPSWAP_32, 9, 0), (tc_op::ADD_RTN_32, 1, 0)] {
        same_words(
            Pm4Packet::AtomicMem(AtomicMem::single_pass(op, 0x7F00_0000_0030, src, cmp)),
            Pm4Packet::AtomicMem(single_pass_literal(op, 0x7F00_0000_0030, src, cmp)),
        );
    }
}

#[test]
fn atomic_mem_add_rtn_64() {
    same_words(
        Pm4Packet::AtomicMem(AtomicMem::add_rtn_64(0x4000, 5)),
        Pm4Packet::AtomicMem(single_pass_literal(47, 0x4000, 5, 0)),
    );
}

#[test]
fn atomic_mem_add_32() {
    // 15 | 0x40: ADD (15) in the form that returns nothing (bit 6).
    same_words(
        Pm4Packet::AtomicMem(AtomicMem::add_32(0x4000, 1)),
        Pm4Packet::AtomicMem(single_pass_literal(15 | 0x40, 0x4000, 1, 0)),
    );
}
