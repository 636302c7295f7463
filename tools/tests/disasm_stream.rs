//! `kfdrt disasm` streams: a 256 MiB input is decoded with bounded memory, and the first
//! line comes out while most of the input has not even been written yet.
//!
//! The input goes through the child's stdin (`FILE` = `-`) so the test controls how much
//! of it exists: after the first 4 MiB the writer stops until the first output line has
//! arrived. A disassembler that decodes the whole input before printing could not print
//! it then. Peak memory is the child's `VmHWM` (from /proc), read after all 256 MiB were
//! written, before stdin is closed.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

const TOTAL: u64 = 256 << 20;
const GATE: u64 = 4 << 20;
const LIMIT_KB: u64 = 200 * 1000;
/// PM4 type-3 NOP with `body` dwords after the header (count field = body - 1; count
/// 0x3FFF is the 1-dword NOP, so at most 0x3FFF body dwords).
fn nop_header(body: u32) -> u32 {
    assert!((1..=0x3FFF).contains(&body));
    (3 << 30) | ((body - 1) << 16) | (0x10 << 8)
}

fn vm_hwm_kb(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc status");
    s.lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM line")
}

/// The input as a sequence of (header body-dwords) NOPs: 1 MiB of 2-dword NOPs (many
/// lines), then maximal 16384-dword NOPs, sized to exactly TOTAL bytes.
fn plan() -> Vec<u32> {
    let total_dw = (TOTAL / 4) as u32;
    let mut bodies = vec![1u32; (1 << 20) / 8];
    let mut left = total_dw - bodies.len() as u32 * 2;
    if left % 0x4000 == 1 {
        bodies.push(1);
        left -= 2;
    }
    bodies.extend(std::iter::repeat_n(0x3FFF, (left / 0x4000) as usize));
    if left % 0x4000 != 0 {
        bodies.push(left % 0x4000 - 1);
    }
    assert_eq!(bodies.iter().map(|b| b + 1).sum::<u32>(), total_dw);
    bodies
}

#[test]
fn a_256_mib_input_streams_with_bounded_memory() {
    let bodies = plan();
    let mut child = Command::new(env!("CARGO_BIN_EXE_kfdrt"))
        .args(["disasm", "--engine", "pm4", "--gfx", "gfx942", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let written = Arc::new(AtomicU64::new(0));
    let (gate_tx, gate_rx) = mpsc::channel::<()>();
    let mut stdin = child.stdin.take().unwrap();
    let w = written.clone();
    let expected_lines = bodies.len() as u64;
    let writer = std::thread::spawn(move || -> Result<u64, String> {
        let mut buf: Vec<u8> = Vec::with_capacity(1 << 20);
        let mut gated = false;
        for &b in &bodies {
            buf.extend_from_slice(&nop_header(b).to_le_bytes());
            buf.resize(buf.len() + b as usize * 4, 0);
            if buf.len() >= 1 << 20 {
                stdin.write_all(&buf).map_err(|e| format!("write: {e}"))?;
                w.fetch_add(buf.len() as u64, Ordering::SeqCst);
                buf.clear();
            }
            if !gated && w.load(Ordering::SeqCst) >= GATE {
                gated = true;
                gate_rx
                    .recv_timeout(Duration::from_secs(120))
                    .map_err(|_| "no first line after 4 MiB of input".to_string())?;
            }
        }
        stdin.write_all(&buf).map_err(|e| format!("write: {e}"))?;
        w.fetch_add(buf.len() as u64, Ordering::SeqCst);
        stdin.flush().map_err(|e| format!("flush: {e}"))?;
        // Everything is written; the child is alive until stdin closes.
        let hwm = vm_hwm_kb(pid);
        drop(stdin);
        Ok(hwm)
    });
    // Watchdog: no test may hang.
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let watchdog = std::thread::spawn(move || {
        if done_rx.recv_timeout(Duration::from_secs(600)).is_err() {
            let _ = std::process::Command::new("kill")
                .arg(pid.to_string())
                .status();
        }
    });

    let t0 = Instant::now();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    out.read_line(&mut first).unwrap();
    let first_after = t0.elapsed();
    let at_first = written.load(Ordering::SeqCst);
    let hwm_first = vm_hwm_kb(pid);
    assert_eq!(first, "0x0000 NOP dwords=2\n");
    assert!(
        at_first <= GATE + (1 << 20),
        "first line after {at_first} of {TOTAL} bytes were written"
    );
    assert!(
        child.try_wait().unwrap().is_none(),
        "kfdrt exited before its input was complete"
    );
    gate_tx.send(()).unwrap();
    let reader = std::thread::spawn(move || {
        let mut n = 1u64;
        let mut last = String::new();
        let mut line = String::new();
        while out.read_line(&mut line).unwrap() > 0 {
            n += 1;
            std::mem::swap(&mut last, &mut line);
            line.clear();
        }
        (n, last)
    });
    let hwm_end = writer.join().unwrap().expect("writer");
    let (lines, last) = reader.join().unwrap();
    let status = child.wait().unwrap();
    let _ = done_tx.send(());
    watchdog.join().unwrap();
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert_eq!(status.code(), Some(0), "{err}");
    assert_eq!(lines, expected_lines);
    assert!(last.contains(" NOP dwords="), "{last}");
    eprintln!(
        "disasm 256 MiB: first line after {:.0} ms with {} KiB of input written; \
         VmHWM {hwm_first} kB at the first line, {hwm_end} kB after all input",
        first_after.as_secs_f64() * 1e3,
        at_first >> 10
    );
    assert!(
        hwm_end < LIMIT_KB && hwm_first < LIMIT_KB,
        "peak memory {hwm_end} kB (limit {LIMIT_KB} kB)"
    );
}
