//! Structured fuzzing harnesses for kfdrt (used by the libFuzzer targets in
//! `fuzz_targets/`, by `cargo test` here, and by the seed generator).
//!
//! * [`input`]: reads an input as a stream of typed choices through
//!   [`arbitrary::Unstructured`], and [`input::Enc`] writes the same choices back
//!   (seeds are built with it).
//! * [`rig`]: one emulated GPU over heap memory with one queue (AQL, PM4 or SDMA): packets
//!   are submitted in segments, blocked waits are resolved by host writes from the input,
//!   and an engine that is still busy after a bounded budget is a panic (a livelock).
//! * [`gen`]: per-engine packet streams built with the `pm4` encoders, addresses picked
//!   from the rig's mapped memory, plus raw junk words.
//! * [`ioctl`]: arbitrary sequences of `kfd::Ioctl` calls against the emulator backend.
//!
//! Adding a target (for instance the code-object loader): write `fn run(data: &[u8])` in a
//! module here that never panics on bad input, a three-line `fuzz_targets/NAME.rs` calling
//! it, a `[[bin]]` in `Cargo.toml`, seeds in `seeds::write_all`, and add NAME to the list in
//! `.ci/run`.
#![deny(missing_docs)]

pub mod gen;
pub mod input;
pub mod ioctl;
pub mod rig;
pub mod seeds;

/// The `pm4_decode` target: the first byte picks one GPU family, one SDMA version and one
/// engine's decoder; the rest is decoded and disassembled once.
pub fn pm4_decode(data: &[u8]) {
    let Some((&sel, body)) = data.split_first() else {
        return;
    };
    let family = pm4::GfxFamily::ALL[(sel & 3) as usize];
    let version = pm4::SdmaVersion::ALL[((sel >> 2) & 3) as usize];
    let words: Vec<u32> = body
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    match (sel >> 4) % 3 {
        0 => {
            let mut off = 0;
            while let Some(rest) = words.get(off..).filter(|r| !r.is_empty()) {
                match pm4::pkt3::decode_pm4(rest, family) {
                    Ok((pkt, used)) => {
                        assert!(used >= 1 && used <= rest.len(), "PM4 decode used {used}");
                        // Every decoded packet re-encodes (or says why not).
                        let mut out = vec![0u32; pkt.dwords(family).min(1 << 14)];
                        let _ = pkt.encode(family, &mut out);
                        off += used;
                    }
                    Err(_) => off += 1,
                }
            }
            let _ = pm4::disasm::to_text(&pm4::disasm::disasm_pm4(family, &words));
        }
        1 => {
            let mut off = 0;
            while let Some(rest) = words.get(off..).filter(|r| !r.is_empty()) {
                match pm4::sdma::decode_sdma(rest, version) {
                    Ok((pkt, used)) => {
                        assert!(used >= 1 && used <= rest.len(), "SDMA decode used {used}");
                        let mut out = vec![0u32; pkt.dwords(version).min(1 << 14)];
                        let _ = pkt.encode(version, &mut out);
                        off += used;
                    }
                    Err(_) => off += 1,
                }
            }
            let _ = pm4::disasm::to_json(&pm4::disasm::disasm_sdma(version, &words));
        }
        _ => {
            for chunk in body.chunks_exact(64) {
                let mut b = [0u8; 64];
                b.copy_from_slice(chunk);
                if let Ok(p) = pm4::aql::AqlPacket::decode_bytes(&b) {
                    let _ = p.encode_bytes();
                }
            }
            let _ = pm4::disasm::to_text(&pm4::disasm::disasm_aql(&words));
        }
    }
}
