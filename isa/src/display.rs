//! llvm-objdump-19 syntax.
use crate::{decode, DecodeError, Inst, Target};
use std::fmt;

impl fmt::Display for Inst {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One line of a disassembly: byte offset, the words, and the instruction or error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DisasmLine {
    /// Byte offset from the start of the range.
    pub offset: usize,
    /// Decoded instruction, or why not (then one dword is skipped).
    pub inst: Result<Inst, DecodeError>,
}

/// Disassembles `bytes` (little-endian code, trailing partial dword ignored) for `target`.
pub fn disassemble(bytes: &[u8], target: Target) -> Vec<DisasmLine> {
    let words: Vec<u32> = bytes
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < words.len() {
        let r = decode(&words[i..], target);
        let n = r.as_ref().map(|x| usize::from(x.len)).unwrap_or(1).max(1);
        out.push(DisasmLine { offset: i * 4, inst: r });
        i += n;
    }
    out
}
