//! `kfdrt disasm --engine isa --gfx TARGET FILE`: gfx9 (CDNA) machine code with the
//! `amdgpu-isa` decoder. FILE is raw little-endian words, hex words (`--hex`), or an AMDGPU
//! code object (ELF; detected by its magic): then `.text` is decoded with its symbols as
//! labels and section addresses, like `llvm-objdump -d`.

use crate::args::Args;
use crate::out::out;
use amdgpu_isa::{disassemble, Target};
use object::{Object, ObjectSection, ObjectSymbol};
use std::fmt::Write;
use std::process::ExitCode;

/// True when the `disasm` arguments ask for `--engine isa`.
pub fn wants(argv: &[String]) -> bool {
    argv.iter().enumerate().any(|(i, a)| {
        a == "--engine=isa"
            || (a == "--engine" && argv.get(i + 1).map(String::as_str) == Some("isa"))
    })
}

const HELP: &str = "\
kfdrt disasm --engine isa — disassemble gfx9 CDNA machine code (gfx90a, gfx940/941/942) in
llvm-objdump syntax: `INSTRUCTION  // ADDRESS: WORDS`.

USAGE:
    kfdrt disasm --engine isa --gfx TARGET [--hex] FILE

FILE is raw little-endian dwords, hex words with --hex, or an AMDGPU code object (ELF),
whose .text is decoded at its addresses with its symbols as labels.

EXIT CODES:
    0 every word decoded; 1 some word did not decode (printed as `.long`); 2 usage error
";

/// Runs the `isa` engine of `kfdrt disasm`.
pub fn main(argv: &[String]) -> ExitCode {
    let args = match Args::parse(argv, &["engine", "gfx"], &["hex", "help"]) {
        Ok(a) => a,
        Err(e) => return usage(&e),
    };
    if args.flag("help") {
        out!("{HELP}");
        return ExitCode::SUCCESS;
    }
    let Some(target) = args.value("gfx").and_then(Target::from_name) else {
        return usage("--gfx must be gfx90a, gfx940, gfx941 or gfx942");
    };
    let [file] = args.positional.as_slice() else {
        return usage("exactly one FILE is required");
    };
    let bytes = match std::fs::read(file) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("kfdrt disasm: reading {file}: {e}");
            return ExitCode::from(2);
        }
    };
    let result = if args.flag("hex") {
        std::str::from_utf8(&bytes)
            .map_err(|e| format!("{file} is not text: {e}"))
            .and_then(crate::disasm::parse_hex)
            .map(|w| render(&words_to_bytes(&w), 0, &[], target))
    } else if bytes.starts_with(b"\x7fELF") {
        code_object(&bytes, target)
    } else if bytes.len() % 4 != 0 {
        Err(format!(
            "{file}: {} bytes is not a whole number of dwords",
            bytes.len()
        ))
    } else {
        Ok(render(&bytes, 0, &[], target))
    };
    match result {
        Ok((text, bad)) => {
            out!("{text}");
            if bad {
                ExitCode::from(1)
            } else {
                ExitCode::SUCCESS
            }
        }
        Err(e) => {
            eprintln!("kfdrt disasm: {e}");
            ExitCode::from(2)
        }
    }
}

fn usage(msg: &str) -> ExitCode {
    eprintln!("kfdrt disasm: {msg}\n\n{HELP}");
    ExitCode::from(2)
}

fn words_to_bytes(w: &[u32]) -> Vec<u8> {
    w.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// `.text` of a code object, labelled by its symbols.
fn code_object(elf: &[u8], target: Target) -> Result<(String, bool), String> {
    let file = object::File::parse(elf).map_err(|e| format!("not a readable ELF: {e}"))?;
    let text = file
        .section_by_name(".text")
        .ok_or("the code object has no .text section")?;
    let data = text.data().map_err(|e| format!(".text: {e}"))?;
    let base = text.address();
    let mut labels: Vec<(u64, String)> = file
        .symbols()
        .filter(|s| s.section_index() == Some(text.index()) && s.size() > 0)
        .filter_map(|s| Some((s.address(), s.name().ok()?.to_string())))
        .collect();
    labels.sort();
    labels.dedup_by_key(|l| l.0);
    Ok(render(data, base, &labels, target))
}

/// One line per instruction; returns (text, whether some word did not decode).
fn render(bytes: &[u8], base: u64, labels: &[(u64, String)], target: Target) -> (String, bool) {
    let mut out = String::new();
    let mut bad = false;
    let mut li = 0;
    for line in disassemble(bytes, target) {
        let addr = base + line.offset as u64;
        while li < labels.len() && labels[li].0 <= addr {
            let _ = writeln!(out, "\n{:016x} <{}>:", labels[li].0, labels[li].1);
            li += 1;
        }
        let words: Vec<String> = line.words[..usize::from(line.nwords)]
            .iter()
            .map(|w| format!("{w:08X}"))
            .collect();
        let asm = match &line.inst {
            Ok(i) => i.to_string(),
            Err(e) => {
                bad = true;
                format!(".long 0x{:08x} ; {e}", line.words[0])
            }
        };
        let _ = writeln!(out, "\t{asm:<58} // {addr:012X}: {}", words.join(" "));
    }
    (out, bad)
}
