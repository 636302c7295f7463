//! Shared helpers of the amdgpu-isa tests: run LLVM's disassembler on words.

#![allow(dead_code)]

use std::io::Write;
use std::process::{Command, Stdio};

/// True when `llvm-mc-19` runs.
pub fn llvm_mc_available() -> bool {
    Command::new("llvm-mc-19")
        .arg("--version")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

/// Disassembles each line (a run of dwords) with `llvm-mc-19 -disassemble` and returns, per
/// line, the text and byte length of the instruction that starts the line (None where
/// LLVM rejects it). Lines are concatenated into one byte stream, as LLVM reads them.
pub fn llvm_mc(mcpu: &str, lines: &[Vec<u32>]) -> Vec<Option<(String, usize)>> {
    let mut out = Vec::with_capacity(lines.len());
    for chunk in lines.chunks(1000) {
        out.extend(llvm_mc_robust(mcpu, chunk));
    }
    out
}

/// llvm-mc-19 crashes (SIGSEGV) on some reserved encodings: bisect and drop those lines.
fn llvm_mc_robust(mcpu: &str, lines: &[Vec<u32>]) -> Vec<Option<(String, usize)>> {
    match llvm_mc_once(mcpu, lines) {
        Some(v) => v,
        None if lines.len() <= 1 => vec![None; lines.len()],
        None => {
            let (a, b) = lines.split_at(lines.len() / 2);
            let mut v = llvm_mc_robust(mcpu, a);
            v.extend(llvm_mc_robust(mcpu, b));
            v
        }
    }
}

/// `s_nop 0`: three of them, then a marker `s_movk_i32 ttmp15, INDEX`, precede each
/// sample, so LLVM's output can be split per sample whatever it skipped or swallowed
/// (an instruction swallows at most two dwords past its sample).
const FENCE: u32 = 0xBF80_0000;
const MARK: u32 = 0xB000_0000 | 123 << 16;

fn llvm_mc_once(mcpu: &str, lines: &[Vec<u32>]) -> Option<Vec<Option<(String, usize)>>> {
    let mut src = String::new();
    let hex = |ws: &[u32]| {
        ws.iter()
            .flat_map(|w| w.to_le_bytes())
            .map(|b| format!("0x{b:02x}"))
            .collect::<Vec<_>>()
            .join(",")
    };
    for (i, ws) in lines.iter().enumerate() {
        src.push_str(&hex(&[FENCE, FENCE, FENCE, MARK | i as u32]));
        src.push('\n');
        src.push_str(&hex(ws));
        src.push('\n');
    }
    let mut child = Command::new("llvm-mc-19")
        .args([
            "-disassemble",
            "-triple=amdgcn-amd-amdhsa",
            "-show-encoding",
        ])
        .arg(format!("-mcpu={mcpu}"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("llvm-mc-19 runs");
    let mut stdin = child.stdin.take().expect("stdin");
    // write from a thread: llvm-mc's output can fill the pipe before input ends
    let t = std::thread::spawn(move || stdin.write_all(src.as_bytes()));
    let out = child.wait_with_output().expect("llvm-mc-19 finishes");
    let _ = t.join();
    if !out.status.success() {
        return None;
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let mut bad_line = std::collections::HashSet::new();
    for l in stderr.lines() {
        if let Some(rest) = l.strip_prefix("<stdin>:") {
            let mut it = rest.split(':');
            let line: usize = it.next().and_then(|x| x.parse().ok()).unwrap_or(0);
            let col: usize = it.next().and_then(|x| x.parse().ok()).unwrap_or(0);
            if col == 1 {
                bad_line.insert(line);
            }
        }
    }
    let insts: Vec<(String, usize)> = stdout
        .lines()
        .filter_map(|l| {
            let (asm, enc) = l.split_once("; encoding:")?;
            let n = enc
                .trim()
                .trim_matches(|c| c == '[' || c == ']')
                .split(',')
                .count();
            Some((asm.trim().to_string(), n))
        })
        .collect();
    let mut res = vec![None; lines.len()];
    for k in 1..insts.len() {
        if insts[k - 1].0 != "s_nop 0" {
            continue;
        }
        let Some(idx) = insts[k].0.strip_prefix("s_movk_i32 ttmp15, 0x") else {
            continue;
        };
        let Ok(i) = usize::from_str_radix(idx, 16) else {
            continue;
        };
        if i >= lines.len() || bad_line.contains(&(2 * i + 2)) {
            continue;
        }
        if let Some(next) = insts.get(k + 1) {
            res[i] = Some(next.clone());
        }
    }
    Some(res)
}

/// Whitespace-normalized text: single spaces, no spaces after commas.
pub fn norm(s: &str) -> String {
    let s = s.split("//").next().unwrap_or("");
    let s = s.split(';').next().unwrap_or("");
    s.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace(", ", ",")
}
