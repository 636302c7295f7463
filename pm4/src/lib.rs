//! PM4 type-3, AQL and SDMA packet encoders, decoders, ring writers and a
//! disassembler for AMD GPUs (gfx9 = Vega/CDNA, gfx10, gfx11, gfx12).
//!
//! Everything the kfdrt runtime submits to a GPU is built here, and the emulated
//! device executes exactly what the decoders here return.
//!
//! * [`pkt3`] (also reachable as [`pm4`]): PM4 type-3 packets for the
//!   command processor (compute PM4 queues and indirect buffers).
//! * [`aql`]: 64-byte AQL packets (HSA kernel dispatch, barriers, AMD vendor
//!   packets) and [`aql::AqlRingWriter`].
//! * [`kd`]: the 64-byte AMDHSA kernel descriptor the CP reads for a dispatch.
//! * [`sdma`]: SDMA packets for SDMA 4.x..7.x and [`sdma::SdmaRingWriter`].
//! * `disasm` (feature `alloc`, on by default): a one-line-per-packet
//!   disassembler with a JSON form.
//!
//! The encode path never allocates; the crate is `#![no_std]` and uses `alloc`
//! only for the disassembler. There is no `unsafe` code in this crate.
//!
//! The bit layouts and the public source of every fact are listed in
//! `firmware-notes/pm4-packets.md` in the repository.
#![no_std]
#![forbid(unsafe_code)]
#![deny(missing_docs)]

#[cfg(feature = "alloc")]
extern crate alloc;

pub mod aql;
#[cfg(feature = "alloc")]
pub mod disasm;
mod error;
mod family;
pub mod hsa;
pub mod kd;
pub mod pkt3;
pub mod sdma;
mod sink;

pub use error::{DecodeError, EncodeError};
pub use family::{GfxFamily, SdmaVersion};
/// Alias of [`pkt3`]: PM4 type-3 packets.
pub use pkt3 as pm4;

/// Runs every decoder (PM4 for every family, SDMA for every version, AQL on every
/// 64-byte slot) and, with the `alloc` feature, the disassembler and its text and
/// JSON renderings, over arbitrary bytes. Used by the fuzz target and the
/// property tests: it must never panic.
#[doc(hidden)]
pub fn fuzz_decode_all(data: &[u8]) {
    let mut words = [0u32; 512];
    let n = core::cmp::min(data.len() / 4, words.len());
    for (i, w) in words.iter_mut().take(n).enumerate() {
        *w = u32::from_le_bytes([
            data[4 * i],
            data[4 * i + 1],
            data[4 * i + 2],
            data[4 * i + 3],
        ]);
    }
    let words = &words[..n];
    for fam in GfxFamily::ALL {
        let mut off = 0;
        while off < words.len() {
            match pkt3::decode_pm4(&words[off..], fam) {
                Ok((pkt, used)) => {
                    assert!(used >= 1 && used <= words.len() - off);
                    let _ = pkt.dwords(fam);
                    off += used;
                }
                Err(_) => off += 1,
            }
        }
    }
    for ver in SdmaVersion::ALL {
        let mut off = 0;
        while off < words.len() {
            match sdma::decode_sdma(&words[off..], ver) {
                Ok((pkt, used)) => {
                    assert!(used >= 1 && used <= words.len() - off);
                    let _ = pkt.dwords(ver);
                    off += used;
                }
                Err(_) => off += 1,
            }
        }
    }
    for chunk in data.chunks_exact(64) {
        let mut b = [0u8; 64];
        b.copy_from_slice(chunk);
        let _ = aql::AqlPacket::decode_bytes(&b);
    }
    #[cfg(feature = "alloc")]
    {
        use alloc::string::ToString;
        for engine in [
            disasm::Engine::Pm4,
            disasm::Engine::Aql,
            disasm::Engine::Sdma,
        ] {
            for fam in GfxFamily::ALL {
                let lines = disasm::disasm(engine, fam, words);
                for l in &lines {
                    let _ = l.to_string();
                }
                let _ = disasm::to_json(&lines);
            }
        }
    }
}
