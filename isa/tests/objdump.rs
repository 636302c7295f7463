//! Every kernel source in `test-kernels/cl/` is compiled by clang-19 for gfx90a and gfx942;
//! `llvm-objdump-19 -d --mcpu=TARGET` and amdgpu-isa must print every instruction of
//! `.text` identically (mnemonic and operands, whitespace normalized; objdump's trailing
//! `// address: words <label>` comment dropped). Fails listing every mismatch. Skips with a
//! message when clang-19/llvm-objdump-19 are not installed.

mod common;

use amdgpu_isa::{decode, Target};
use object::{Object, ObjectSection};
use std::process::Command;

fn objdump_available() -> bool {
    Command::new("llvm-objdump-19")
        .arg("--version")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

/// (address, text) of each instruction llvm-objdump prints.
fn objdump(elf: &[u8], mcpu: &str, tag: &str) -> Vec<(u64, String)> {
    let path = std::env::temp_dir().join(format!(
        "amdgpu-isa-objdump-{}-{tag}.co",
        std::process::id()
    ));
    std::fs::write(&path, elf).expect("write code object");
    let out = Command::new("llvm-objdump-19")
        .args(["-d", &format!("--mcpu={mcpu}")])
        .arg(&path)
        .output();
    let _ = std::fs::remove_file(&path);
    let out = out.expect("llvm-objdump-19 runs");
    assert!(
        out.status.success(),
        "llvm-objdump-19 failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let mut v = Vec::new();
    for line in text.lines() {
        if !line.starts_with('\t') {
            continue;
        }
        let Some((asm, comment)) = line.split_once("//") else {
            continue;
        };
        let Some((addr, _)) = comment.trim().split_once(':') else {
            continue;
        };
        let Ok(addr) = u64::from_str_radix(addr.trim(), 16) else {
            continue;
        };
        v.push((addr, asm.trim().to_string()));
    }
    v
}

#[test]
fn agrees_with_llvm_objdump_on_every_test_kernel() {
    if !test_kernels::toolchain_available() || !objdump_available() {
        eprintln!("SKIP: clang-19, ld.lld-19 or llvm-objdump-19 not installed");
        return;
    }
    let dir = test_kernels::source_dir().join("cl");
    let mut sources: Vec<String> = std::fs::read_dir(&dir)
        .expect("test-kernels/cl")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".cl"))
        .collect();
    sources.sort();
    assert!(
        sources.len() >= 6,
        "expected the test kernels, found {sources:?}"
    );
    let mut mismatches = Vec::new();
    let mut compared = 0usize;
    for (target, mcpu) in [(Target::Gfx90a, "gfx90a"), (Target::Gfx942, "gfx942")] {
        for src in &sources {
            let rel = format!("cl/{src}");
            let elf = test_kernels::build(&rel, mcpu).unwrap_or_else(|e| panic!("{rel}: {e}"));
            let file = object::File::parse(&*elf).expect("ELF");
            let text = file.section_by_name(".text").expect(".text");
            let base = text.address();
            let bytes = text.data().expect(".text data");
            let words: Vec<u32> = bytes
                .chunks_exact(4)
                .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect();
            let listing = objdump(&elf, mcpu, &format!("{mcpu}-{src}"));
            assert!(!listing.is_empty(), "{rel} {mcpu}: objdump printed nothing");
            for (addr, theirs) in listing {
                compared += 1;
                let idx = ((addr - base) / 4) as usize;
                let ours = match words.get(idx..) {
                    Some(ws) => match decode(ws, target) {
                        Ok(i) => i.to_string(),
                        Err(e) => format!("<error: {e}>"),
                    },
                    None => "<outside .text>".to_string(),
                };
                if common::norm(&theirs) != common::norm(&ours) {
                    mismatches.push(format!(
                        "{mcpu} {src} {addr:#x}:\n  objdump: {theirs}\n  ours:    {ours}"
                    ));
                }
            }
        }
    }
    eprintln!(
        "objdump agreement: {compared} instructions compared, {} mismatches",
        mismatches.len()
    );
    assert!(compared > 1000, "too few instructions compared: {compared}");
    assert!(
        mismatches.is_empty(),
        "{} mismatches:\n{}",
        mismatches.len(),
        mismatches.join("\n")
    );
}
