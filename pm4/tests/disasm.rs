//! Disassembler output: text lines, unknown/truncated packets, JSON.
use pm4::disasm::{disasm, to_json, to_text, Engine};
use pm4::pkt3::*;
use pm4::sdma::{self, SdmaPacket};
use pm4::{GfxFamily, SdmaVersion};

fn encode_all(pkts: &[Pm4Packet<'_>], fam: GfxFamily) -> Vec<u32> {
    let mut out = vec![];
    for p in pkts {
        let mut buf = vec![0u32; p.dwords(fam)];
        p.encode(fam, &mut buf).unwrap();
        out.extend(buf);
    }
    out
}

#[test]
fn pm4_listing() {
    let fam = GfxFamily::Gfx9;
    let mut words = encode_all(
        &[
            Pm4Packet::WaitRegMem(WaitRegMem::memory(
                CompareFn::GreaterEqual,
                0x7F00_0000_1000,
                5,
                0xFFFF_FFFF,
                4,
            )),
            Pm4Packet::Nop(Nop { dwords: 1 }),
            Pm4Packet::IndirectBuffer(IndirectBuffer::new(0x2000, 16)),
        ],
        fam,
    );
    // An opcode this crate does not decode (SET_UCONFIG_REG, 3 dwords), a type-2
    // header, then a RELEASE_MEM cut short.
    words.extend([
        packet3(0x79, 1),
        0x10,
        0x20,
        0x8000_0000,
        packet3(op::RELEASE_MEM, 6),
        0x514,
    ]);
    let lines = disasm(Engine::Pm4, fam, &words);
    let text = to_text(&lines);
    let expected = "\
0x0000 WAIT_REG_MEM function=GEQ mem_space=memory addr=0x7f0000001000 reference=0x5 mask=0xffffffff poll_interval=4
0x001c NOP dwords=1
0x0020 INDIRECT_BUFFER ib_base=0x2000 ib_size=16 chain=0 offload_polling=0 volatile=0 valid=1 vmid=0 cache_policy=lru pre_resume=0 priv=0
0x0030 SET_UCONFIG_REG opcode=0x79 (unknown)
0x003c BAD_HEADER header=0x80000000 error=\"bad header type 2 in 0x80000000\"
0x0040 TRUNCATED header=0xc0064900 opcode=RELEASE_MEM error=\"truncated: need 8 dwords, have 2\"
";
    assert_eq!(text, expected);
    assert!(lines[3].unknown && lines[4].error.is_some() && lines[5].error.is_some());
    assert!(!lines[0].is_problem());
}

#[test]
fn pm4_bad_body_is_skipped_by_length() {
    // WAIT_REG_MEM with the reserved function 7, followed by a valid NOP: the
    // listing reports the bad packet and continues after its 7 dwords.
    let words = [
        packet3(op::WAIT_REG_MEM, 5),
        0x17,
        0x1000,
        0,
        0,
        0,
        4,
        NOP_HEADER_ONLY,
    ];
    let lines = disasm(Engine::Pm4, GfxFamily::Gfx10, &words);
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0].name, "WAIT_REG_MEM");
    assert_eq!(lines[0].error.as_deref(), Some("invalid function=0x7"));
    assert_eq!(lines[1].to_string(), "0x001c NOP dwords=1");
}

#[test]
fn sdma_listing() {
    let v = SdmaVersion::V4;
    let mut words = vec![];
    for p in [
        SdmaPacket::CopyLinear(sdma::CopyLinear {
            src: 0x1000,
            dst: 0x2000,
            bytes: 64,
            tmz: false,
            parameter: 0,
        }),
        SdmaPacket::Fence(sdma::Fence::new(0x3000, 9)),
        SdmaPacket::Trap(sdma::Trap { int_context: 9 }),
    ] {
        let mut buf = vec![0u32; p.dwords(v)];
        p.encode(v, &mut buf).unwrap();
        words.extend(buf);
    }
    words.push(0x0000_00FF); // unknown op 255
    words.push(0x0000_0005); // FENCE cut short
    let text = to_text(&disasm(Engine::Sdma, GfxFamily::Gfx9, &words));
    let expected = "\
0x0000 COPY_LINEAR count=63 bytes=64 tmz=0 parameter=0x0 src_addr=0x1000 dst_addr=0x2000
0x001c FENCE mtype=0 gcc=0 sys=0 snp=0 gpa=0 l2_policy=0 addr=0x3000 data=0x9
0x002c TRAP int_context=0x9
0x0034 UNKNOWN op=255 sub_op=0 header=0xff (unknown) error=\"unknown SDMA op=255 sub_op=0\"
0x0038 TRUNCATED header=0x5 error=\"truncated: need 4 dwords, have 1\"
";
    assert_eq!(text, expected);
}

#[test]
fn aql_listing_and_json() {
    use pm4::aql::*;
    let b = AqlPacket::BarrierAnd(Barrier {
        control: PacketControl::SYSTEM_BARRIER,
        dep_signals: [0x10, 0, 0, 0, 0],
        completion_signal: 0x40,
    });
    let mut words = b.encode().to_vec();
    words.extend(AqlPacket::Invalid.encode());
    words.extend([2u32, 0, 0]); // partial slot
    let lines = pm4::disasm::disasm(Engine::Aql, GfxFamily::Gfx11, &words);
    assert_eq!(
        lines[0].to_string(),
        "0x0000 BARRIER_AND barrier=1 acquire=system release=system dep_signal=0x10,0x0,0x0,0x0,0x0 completion_signal=0x40"
    );
    assert_eq!(lines[1].to_string(), "0x0040 INVALID");
    assert_eq!(lines[2].name, "TRUNCATED");
    let json = to_json(&lines[1..]);
    assert_eq!(
        json,
        "[{\"offset\":64,\"name\":\"INVALID\",\"dwords\":16,\"fields\":{},\"unknown\":false,\"error\":null},\
{\"offset\":128,\"name\":\"TRUNCATED\",\"dwords\":3,\"fields\":{},\"unknown\":false,\
\"error\":\"truncated: need 16 dwords, have 3\"}]"
    );
}

#[test]
fn json_escapes_and_parses() {
    // Error strings contain quotes-free text, but field values from WRITE_DATA
    // contain commas; check the JSON is valid by a small structural parse.
    let data = [1u32, 2, 3];
    let p = Pm4Packet::WriteData(WriteData::memory(0x100, &data));
    let mut buf = [0u32; 7];
    p.encode(GfxFamily::Gfx12, &mut buf).unwrap();
    let lines = disasm(Engine::Pm4, GfxFamily::Gfx12, &buf);
    let j = lines[0].to_json();
    assert!(j.contains("\"data\":\"0x1,0x2,0x3\""), "{j}");
    let mut depth = 0i32;
    let mut in_str = false;
    let mut esc = false;
    for c in j.chars() {
        if in_str {
            match (esc, c) {
                (true, _) => esc = false,
                (false, '\\') => esc = true,
                (false, '"') => in_str = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_str = true,
            '{' | '[' => depth += 1,
            '}' | ']' => depth -= 1,
            _ => {}
        }
        assert!(depth >= 0);
    }
    assert_eq!(depth, 0);
    assert!(!in_str);
}
