//! `kfdrt disasm`: decode a file of little-endian dwords (raw binary or hex words).

use pm4::disasm::{self, Engine};
use pm4::GfxFamily;

/// Parse hex words: whitespace/comma separated, optional `0x`, `#` comments to end of line.
pub fn parse_hex(text: &str) -> Result<Vec<u32>, String> {
    let mut out = Vec::new();
    for (ln, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("");
        for tok in line
            .split(|c: char| c.is_whitespace() || c == ',')
            .filter(|t| !t.is_empty())
        {
            let t = tok
                .strip_prefix("0x")
                .or_else(|| tok.strip_prefix("0X"))
                .unwrap_or(tok);
            let v = u32::from_str_radix(t, 16)
                .map_err(|e| format!("line {}: {tok:?} is not a 32-bit hex word ({e})", ln + 1))?;
            out.push(v);
        }
    }
    Ok(out)
}

/// Raw bytes as little-endian dwords; a trailing partial dword is an error naming the size.
pub fn parse_binary(bytes: &[u8]) -> Result<Vec<u32>, String> {
    if bytes.len() % 4 != 0 {
        return Err(format!(
            "{} bytes is not a whole number of dwords (trailing {} bytes)",
            bytes.len(),
            bytes.len() % 4
        ));
    }
    Ok(bytes
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect())
}

/// Decode and render. Returns (text, any_problem).
pub fn run(engine: Engine, family: GfxFamily, words: &[u32], json: bool) -> (String, bool) {
    let lines = disasm::disasm(engine, family, words);
    let problem = lines.iter().any(|l| l.is_problem());
    let text = if json {
        disasm::to_json(&lines)
    } else {
        disasm::to_text(&lines)
    };
    (text, problem)
}

/// `--engine isa` (gfx9 machine code, `disasm_isa.rs`); None for the packet engines.
pub fn isa(argv: &[String]) -> Option<std::process::ExitCode> {
    crate::disasm_isa::wants(argv).then(|| crate::disasm_isa::main(argv))
}

/// Engine from the `--engine` name.
pub fn engine(name: &str) -> Result<Engine, String> {
    Engine::from_name(name)
        .ok_or_else(|| format!("unknown engine {name:?}: expected pm4, aql or sdma"))
}

/// Family from the `--gfx` name.
pub fn family(name: &str) -> Result<GfxFamily, String> {
    GfxFamily::from_name(name).ok_or_else(|| {
        format!("unknown gfx target {name:?}: expected e.g. gfx90a, gfx942, gfx1100, gfx1201")
    })
}
