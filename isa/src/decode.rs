//! Field extraction for every gfx9 encoding.
use crate::{DecodeError, Inst, Target};

/// Decodes the instruction at `words[0]` for `target`; `Inst::len` says how many dwords it
/// used (literal included). Never panics.
pub fn decode(words: &[u32], target: Target) -> Result<Inst, DecodeError> {
    let _ = target;
    let word = words.first().copied().ok_or(DecodeError::Truncated { need: 1, have: 0 })?;
    Err(DecodeError::NotSupported { what: "decoder being written", word })
}
