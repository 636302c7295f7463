//! Property tests: decode(encode(x)) == x for every packet kind and family,
//! decoders are lossless on the words they accept, and no decoder or the
//! disassembler ever panics on arbitrary input.

use pm4::aql::{
    self, AqlPacket, Barrier, BarrierValue, FenceScope, KernelDispatch, PacketControl,
    SignalCondition, VendorPm4Ib,
};
use pm4::pkt3::*;
use pm4::sdma::{self, SdmaPacket};
use pm4::{GfxFamily, SdmaVersion};
use proptest::prelude::*;
use proptest::sample::select;

fn fam() -> impl Strategy<Value = GfxFamily> {
    select(GfxFamily::ALL.to_vec())
}
fn ver() -> impl Strategy<Value = SdmaVersion> {
    select(SdmaVersion::ALL.to_vec())
}
fn cache() -> impl Strategy<Value = CachePolicy> {
    select(vec![
        CachePolicy::Lru,
        CachePolicy::Stream,
        CachePolicy::Noa,
        CachePolicy::Bypass,
    ])
}
fn cmp() -> impl Strategy<Value = CompareFn> {
    select(CompareFn::ALL.to_vec())
}
fn op_kind() -> impl Strategy<Value = WaitOperation> {
    select(vec![
        WaitOperation::WaitRegMem,
        WaitOperation::WrWaitWrReg,
        WaitOperation::WaitRegMemCond,
        WaitOperation::WaitMemPreemptable,
    ])
}
fn scope() -> impl Strategy<Value = FenceScope> {
    select(vec![
        FenceScope::None,
        FenceScope::Agent,
        FenceScope::System,
    ])
}
fn control() -> impl Strategy<Value = PacketControl> {
    (any::<bool>(), scope(), scope()).prop_map(|(barrier, acquire, release)| PacketControl {
        barrier,
        acquire,
        release,
    })
}
/// (mem_space, addr) valid for a wait packet with memory alignment `align`.
fn wait_target(align: u64) -> impl Strategy<Value = (MemSpace, u64)> {
    prop_oneof![
        any::<u64>().prop_map(move |a| (MemSpace::Memory, a & !(align - 1))),
        (0u64..(1 << 18), 0u64..(1 << 18)).prop_map(|(p, w)| (MemSpace::Register, (w << 32) | p)),
    ]
}

/// Encodes with `fam`, decodes, and checks the round trip and the length.
fn roundtrip(p: &Pm4Packet<'_>, fam: GfxFamily) -> Result<(), TestCaseError> {
    let mut buf = vec![0u32; p.dwords(fam) + 3];
    let n = p
        .encode(fam, &mut buf)
        .map_err(|e| TestCaseError::fail(format!("{e}")))?;
    prop_assert_eq!(n, p.dwords(fam));
    let (d, used) = decode_pm4(&buf, fam).map_err(|e| TestCaseError::fail(format!("{e}")))?;
    prop_assert_eq!(used, n);
    prop_assert_eq!(&d, p);
    // Too small a buffer is an error, not a panic.
    if n > 0 {
        prop_assert!(p.encode(fam, &mut buf[..n - 1]).is_err());
    }
    Ok(())
}

fn roundtrip_sdma(p: &SdmaPacket<'_>, v: SdmaVersion) -> Result<(), TestCaseError> {
    let mut buf = vec![0u32; p.dwords(v) + 2];
    let n = p
        .encode(v, &mut buf)
        .map_err(|e| TestCaseError::fail(format!("{e}")))?;
    prop_assert_eq!(n, p.dwords(v));
    let (d, used) = sdma::decode_sdma(&buf, v).map_err(|e| TestCaseError::fail(format!("{e}")))?;
    prop_assert_eq!(used, n);
    prop_assert_eq!(&d, p);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, rng_seed: proptest::test_runner::RngSeed::Fixed(0x6b66_6472_7400_0001), ..ProptestConfig::default() })]

    #[test]
    fn nop(fam in fam(), n in 1u32..=64) {
        roundtrip(&Pm4Packet::Nop(Nop { dwords: n }), fam)?;
    }

    #[test]
    fn write_data(fam in fam(), dst in select(vec![WriteDataDst::Register, WriteDataDst::MemorySync,
            WriteDataDst::TcL2, WriteDataDst::Gds, WriteDataDst::Memory]),
            addr_incr in any::<bool>(), wr_confirm in any::<bool>(), cp in cache(), engine_sel in 0u8..4,
            addr in any::<u64>(), data in prop::collection::vec(any::<u32>(), 1..20)) {
        let addr = if matches!(dst, WriteDataDst::Register | WriteDataDst::Gds) { addr } else { addr & !3 };
        let p = WriteData { dst_sel: dst, addr_incr, wr_confirm, cache_policy: cp, engine_sel, addr, data: &data };
        roundtrip(&Pm4Packet::WriteData(p), fam)?;
    }

    #[test]
    fn wait_reg_mem(fam in fam(), function in cmp(), (mem_space, addr) in wait_target(4), operation in op_kind(),
            engine in 0u8..4, cp in cache(), reference in any::<u32>(), mask in any::<u32>(),
            poll_interval in any::<u16>(), ace in any::<bool>()) {
        let p = WaitRegMem { function, mem_space, operation, engine, cache_policy: cp, addr, reference, mask,
            poll_interval, optimize_ace_offload: ace };
        roundtrip(&Pm4Packet::WaitRegMem(p), fam)?;
    }

    #[test]
    fn wait_reg_mem64(fam in fam(), function in cmp(), (mem_space, addr) in wait_target(8), operation in op_kind(),
            engine in 0u8..4, cp in cache(), reference in any::<u64>(), mask in any::<u64>(), poll_interval in any::<u16>()) {
        let p = WaitRegMem64 { function, mem_space, operation, engine, cache_policy: cp, addr, reference, mask, poll_interval };
        roundtrip(&Pm4Packet::WaitRegMem64(p), fam)?;
    }

    #[test]
    fn release_mem(fam in fam(), event_type in 0u8..64, event_index in 0u8..16, cache_bits in any::<u32>(), cp in cache(),
            execute in any::<bool>(), dst_sel in 0u8..4,
            int_sel in select(vec![IntSel::None, IntSel::SendInterruptOnly, IntSel::SendInterruptAfterWriteConfirm, IntSel::SendDataAfterWriteConfirm]),
            data_sel in select(vec![DataSel::None, DataSel::Value32, DataSel::Value64, DataSel::GpuClock, DataSel::SystemClock, DataSel::Gds]),
            addr in any::<u64>(), data in any::<u64>(), int_ctxid in any::<u32>()) {
        let p = ReleaseMem { event_type, event_index, cache_actions: cache_bits & release_cache::mask(fam), cache_policy: cp,
            execute, dst_sel, int_sel, data_sel, addr: addr & !7, data, int_ctxid };
        roundtrip(&Pm4Packet::ReleaseMem(p), fam)?;
    }

    #[test]
    fn acquire_mem(fam in fam(), engine in 0u8..2, coher_cntl in 0u32..(1 << 31), coher_size in any::<u64>(),
            coher_base in any::<u64>(), poll_interval in any::<u16>(), gcr_cntl in 0u32..(1 << 19)) {
        let p = AcquireMem { engine, coher_cntl, coher_size, coher_base, poll_interval,
            gcr_cntl: if fam.has_gcr() { gcr_cntl } else { 0 } };
        roundtrip(&Pm4Packet::AcquireMem(p), fam)?;
    }

    #[test]
    fn indirect_buffer(fam in fam(), addr in any::<u64>(), size_dw in 0u32..(1 << 20), bits in any::<u8>(), vmid in 0u8..16, cp in cache()) {
        let p = IndirectBuffer { addr: addr & !3, size_dw, chain: bits & 1 != 0, offload_polling: bits & 2 != 0,
            volatile: bits & 4 != 0, valid: bits & 8 != 0, vmid, cache_policy: cp, pre_resume: bits & 16 != 0, priv_: bits & 32 != 0 };
        roundtrip(&Pm4Packet::IndirectBuffer(p), fam)?;
    }

    #[test]
    fn event_write(fam in fam(), event_type in 0u8..64, event_index in 0u8..16, addr in prop::option::of(any::<u64>())) {
        let p = EventWrite { event_type, event_index, addr: addr.map(|a| a & !7) };
        roundtrip(&Pm4Packet::EventWrite(p), fam)?;
    }

    #[test]
    fn copy_data(fam in fam(), src_sel in 0u8..16, dst_sel in 0u8..16, scp in cache(), dcp in cache(), bits in any::<u8>(),
            engine_sel in 0u8..4, src in any::<u64>(), dst in any::<u64>()) {
        let p = CopyData { src_sel, dst_sel, src_cache_policy: scp, count_sel_64: bits & 1 != 0, wr_confirm: bits & 2 != 0,
            dst_cache_policy: dcp, pq_exe_status: bits & 4 != 0, engine_sel, src, dst };
        roundtrip(&Pm4Packet::CopyData(p), fam)?;
    }

    #[test]
    fn dma_data(fam in fam(), engine_sel in 0u8..2, scp in cache(), dcp in cache(),
            dst_sel in select(vec![DmaDstSel::DstAddr, DmaDstSel::Gds, DmaDstSel::Nowhere, DmaDstSel::DstAddrTcL2]),
            src_sel in select(vec![DmaSrcSel::SrcAddr, DmaSrcSel::Gds, DmaSrcSel::Data, DmaSrcSel::SrcAddrTcL2]),
            bits in any::<u8>(), src in any::<u64>(), dst in any::<u64>(), byte_count in 0u32..(1 << 26)) {
        let src = if matches!(src_sel, DmaSrcSel::Data) { src & 0xFFFF_FFFF } else { src };
        let p = DmaData { engine_sel, src_cache_policy: scp, dst_sel, dst_cache_policy: dcp, src_sel, cp_sync: bits & 1 != 0,
            src, dst, byte_count, sas: bits & 2 != 0, das: bits & 4 != 0, saic: bits & 8 != 0, daic: bits & 16 != 0,
            raw_wait: bits & 32 != 0, dis_wc: bits & 64 != 0 };
        roundtrip(&Pm4Packet::DmaData(p), fam)?;
    }

    #[test]
    fn atomic_mem(fam in fam(), atomic in 0u8..128, command in 0u8..16, cp in cache(), engine_sel in 0u8..4,
            addr in any::<u64>(), src_data in any::<u64>(), cmp_data in any::<u64>(), loop_interval in 0u16..(1 << 13)) {
        let p = AtomicMem { atomic, command, cache_policy: cp, engine_sel, addr: addr & !3, src_data, cmp_data, loop_interval };
        roundtrip(&Pm4Packet::AtomicMem(p), fam)?;
    }

    #[test]
    fn set_sh_reg(fam in fam(), reg_offset in any::<u16>(), values in prop::collection::vec(any::<u32>(), 1..16)) {
        roundtrip(&Pm4Packet::SetShReg(SetShReg { reg_offset, values: &values }), fam)?;
    }

    #[test]
    fn dispatch_direct(fam in fam(), x in any::<u32>(), y in any::<u32>(), z in any::<u32>(), i in any::<u32>()) {
        roundtrip(&Pm4Packet::DispatchDirect(DispatchDirect { dim_x: x, dim_y: y, dim_z: z, dispatch_initiator: i }), fam)?;
    }

    // ------------------------------------------------------------------ AQL

    #[test]
    fn aql_roundtrip(c in control(), which in 0u8..5, sigs in prop::array::uniform8(any::<u64>()),
            dims in 1u8..=3, wg in prop::array::uniform3(any::<u16>()), grid in prop::array::uniform3(any::<u32>()),
            seg in (any::<u32>(), any::<u32>()), ib_size in 0u32..(1 << 20), cond in 0u8..4) {
        let p = match which {
            0 => AqlPacket::KernelDispatch(KernelDispatch { control: c, dimensions: dims, workgroup_size: wg, grid_size: grid,
                private_segment_size: seg.0, group_segment_size: seg.1, kernel_object: sigs[0], kernarg_address: sigs[1],
                completion_signal: sigs[2] }),
            1 => AqlPacket::BarrierAnd(Barrier { control: c, dep_signals: [sigs[0], sigs[1], sigs[2], sigs[3], sigs[4]], completion_signal: sigs[5] }),
            2 => AqlPacket::BarrierOr(Barrier { control: c, dep_signals: [sigs[3], sigs[4], sigs[5], sigs[6], sigs[7]], completion_signal: sigs[0] }),
            3 => AqlPacket::VendorPm4Ib(VendorPm4Ib { control: c, ib: IndirectBuffer::new(sigs[0] & !3, ib_size), completion_signal: sigs[1] }),
            _ => AqlPacket::BarrierValue(BarrierValue { control: c, signal: sigs[0], value: sigs[1] as i64, mask: sigs[2] as i64,
                cond: [SignalCondition::Eq, SignalCondition::Ne, SignalCondition::Lt, SignalCondition::Gte][cond as usize],
                completion_signal: sigs[3] }),
        };
        prop_assert!(p.validate().is_ok());
        let w = p.encode();
        prop_assert_eq!(AqlPacket::decode(&w).unwrap(), p);
        prop_assert_eq!(AqlPacket::decode_bytes(&p.encode_bytes()).unwrap(), p);
        // Through the ring writer: same words, header published.
        let ring: Vec<std::sync::atomic::AtomicU32> = (0..64).map(|_| Default::default()).collect();
        aql::init_invalid(&ring);
        let wr = aql::AqlRingWriter::new(&ring).unwrap();
        let idx = sigs[7] % 1000;
        prop_assert_eq!(wr.write(idx, &p), idx);
        prop_assert_eq!(wr.read(idx).unwrap(), p);
    }

    // ----------------------------------------------------------------- SDMA

    #[test]
    fn sdma_roundtrip(v in ver(), which in 0u8..11, a in any::<u64>(), b in any::<u64>(), c in any::<u32>(), d in any::<u32>(),
            data in prop::collection::vec(any::<u32>(), 1..12), small in any::<u16>(), func in cmp(), bits in any::<u8>()) {
        let max = v.max_copy_bytes();
        let p = match which {
            0 => SdmaPacket::Nop(sdma::Nop { count: small % 32 }),
            1 => SdmaPacket::CopyLinear(sdma::CopyLinear { src: a, dst: b, bytes: 1 + c % max, tmz: bits & 1 != 0, parameter: d }),
            2 => SdmaPacket::ConstFill(sdma::ConstFill { dst: a, data: c, bytes: 1 + d % max, fill_size: bits & 3 }),
            3 => SdmaPacket::Fence(sdma::Fence { addr: a & !3, data: c, mtype: bits & 7, gcc: bits & 8 != 0, sys: bits & 16 != 0,
                snp: bits & 32 != 0, gpa: bits & 64 != 0, l2_policy: (d & 3) as u8 }),
            4 => SdmaPacket::PollRegmem(sdma::PollRegmem { func, mem_poll: bits & 1 != 0, hdp_flush: bits & 2 != 0, addr: a & !3,
                reference: c, mask: d, interval: small, retry_count: (b as u16) & 0xFFF }),
            5 => SdmaPacket::Trap(sdma::Trap { int_context: c & 0x0FFF_FFFF }),
            6 => SdmaPacket::Timestamp(sdma::Timestamp { kind: sdma::TimestampKind::SetLocal, value: a }),
            7 => SdmaPacket::Timestamp(sdma::Timestamp { kind: sdma::TimestampKind::GetLocal, value: a & !7 }),
            8 => SdmaPacket::Timestamp(sdma::Timestamp { kind: sdma::TimestampKind::GetGlobal, value: a & !7 }),
            9 => SdmaPacket::Write(sdma::Write { dst: a & !3, data: &data }),
            _ => SdmaPacket::Indirect(sdma::Indirect { vmid: bits & 15, ib_addr: a & !31, ib_dwords: c & 0xFFFFF, csa_addr: b }),
        };
        roundtrip_sdma(&p, v)?;
    }

    #[test]
    fn sdma_ring_writer_never_straddles(v in ver(), start in 0u64..64, sizes in prop::collection::vec(0u16..12, 1..20)) {
        let ring: Vec<std::sync::atomic::AtomicU32> = (0..32).map(|_| Default::default()).collect();
        let w = sdma::SdmaRingWriter::new(&ring, v).unwrap();
        let mut wptr = start * 4;
        for s in sizes {
            let p = SdmaPacket::Nop(sdma::Nop { count: s });
            let before = wptr;
            wptr = w.write(wptr, &p).unwrap();
            let end = wptr / 4;
            let begin = end - p.dwords(v) as u64;
            // The packet lies inside one pass over the ring.
            prop_assert_eq!(begin / 32, (end - 1) / 32);
            prop_assert!(begin >= before / 4);
        }
    }

    #[test]
    fn copy_split_covers_exactly(v in ver(), src in any::<u32>(), dst in any::<u32>(), bytes in 0u64..(1u64 << 33)) {
        let mut next_src = src as u64;
        let mut next_dst = dst as u64;
        let mut total = 0;
        for c in sdma::copy_linear_split(src as u64, dst as u64, bytes, v) {
            prop_assert_eq!(c.src, next_src);
            prop_assert_eq!(c.dst, next_dst);
            prop_assert!(c.bytes >= 1 && c.bytes <= v.max_copy_bytes());
            let mut buf = [0u32; 7];
            prop_assert!(SdmaPacket::CopyLinear(c).encode(v, &mut buf).is_ok());
            next_src += c.bytes as u64;
            next_dst += c.bytes as u64;
            total += c.bytes as u64;
        }
        prop_assert_eq!(total, bytes);
    }

    // ------------------------------------------------ robustness / losslessness

    #[test]
    fn pm4_decoder_never_panics_and_is_lossless(fam in fam(),
            op in select(vec![0x10u8, 0x15, 0x1E, 0x37, 0x3C, 0x3F, 0x40, 0x46, 0x49, 0x50, 0x58, 0x76, 0x93, 0x77, 0xFF]),
            count in 0u16..12, body in prop::collection::vec(any::<u32>(), 0..16), sparse in any::<u32>()) {
        let mut words = vec![packet3(op, count)];
        // Mostly-zero bodies get through the reserved-bit checks more often.
        words.extend(body.iter().map(|w| w & sparse));
        if let Ok((p, n)) = decode_pm4(&words, fam) {
            prop_assert!(n >= 1 && n <= words.len());
            if !matches!(p, Pm4Packet::Unknown { .. } | Pm4Packet::Nop(_)) {
                let mut out = vec![0u32; n];
                prop_assert_eq!(p.encode(fam, &mut out), Ok(n));
                prop_assert_eq!(&out[..], &words[..n]);
            }
        }
    }

    #[test]
    fn sdma_decoder_never_panics_and_is_lossless(v in ver(), op in 0u8..16, sub in 0u8..3, hi in any::<u16>(),
            body in prop::collection::vec(any::<u32>(), 0..16), sparse in any::<u32>()) {
        let mut words = vec![sdma::header(op, sub, ((hi as u32) << 16) & sparse)];
        words.extend(body.iter().map(|w| w & sparse));
        if let Ok((p, n)) = sdma::decode_sdma(&words, v) {
            prop_assert!(n >= 1 && n <= words.len());
            if !matches!(p, SdmaPacket::Nop(_)) {
                let mut out = vec![0u32; n];
                prop_assert_eq!(p.encode(v, &mut out), Ok(n));
                prop_assert_eq!(&out[..], &words[..n]);
            }
        }
    }

    #[test]
    fn aql_decoder_never_panics_and_is_lossless(w in prop::array::uniform16(any::<u32>()), ty in 0u32..6, sparse in any::<u32>()) {
        let mut w = w.map(|x| x & sparse);
        w[0] = (w[0] & !0xFF) | ty;
        if let Ok(p) = AqlPacket::decode(&w) {
            if !matches!(p, AqlPacket::Invalid) {
                prop_assert_eq!(p.encode(), w);
            }
        }
    }

    #[test]
    fn anything_goes(data in prop::collection::vec(any::<u8>(), 0..600)) {
        pm4::fuzz_decode_all(&data);
    }

    #[test]
    fn disasm_covers_buffer(fam in fam(), words in prop::collection::vec(any::<u32>(), 0..64)) {
        for engine in [pm4::disasm::Engine::Pm4, pm4::disasm::Engine::Sdma] {
            let lines = pm4::disasm::disasm(engine, fam, &words);
            // Lines are in order, start where the previous ended, and cover the
            // buffer (a truncated tail ends the listing).
            let mut off = 0;
            for l in &lines {
                prop_assert_eq!(l.offset, off * 4);
                prop_assert!(l.dwords >= 1);
                off += l.dwords;
            }
            prop_assert_eq!(off, words.len());
        }
    }

    #[test]
    fn streaming_disasm_equals_whole_buffer(
        fam in fam(),
        words in prop::collection::vec(any::<u32>(), 0..200),
        cuts in prop::collection::vec(0usize..40, 0..12),
    ) {
        use pm4::disasm::{disasm, Disassembler, Engine};
        for engine in [Engine::Pm4, Engine::Sdma, Engine::Aql] {
            let whole = disasm(engine, fam, &words);
            let mut d = Disassembler::new(engine, fam);
            let mut got = Vec::new();
            let mut rest = &words[..];
            for c in &cuts {
                let (a, b) = rest.split_at((*c).min(rest.len()));
                d.push(a, &mut |l| got.push(l));
                rest = b;
            }
            d.push(rest, &mut |l| got.push(l));
            d.finish(&mut |l| got.push(l));
            prop_assert_eq!(got, whole);
        }
    }
}
