//! `kfdrt disasm`: decode a file of little-endian dwords (raw binary or hex words).

use std::io::{BufRead, BufReader, IsTerminal, Read};

use pm4::disasm::{self, Engine};
use pm4::GfxFamily;

use crate::out::{errln, Out};

/// Parse one line of hex words (`ln` from 1, for messages), appending to `out`:
/// whitespace/comma separated, optional `0x`, `#` comments to end of line.
fn parse_hex_line(line: &str, ln: usize, out: &mut Vec<u32>) -> Result<(), String> {
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
            .map_err(|e| format!("line {ln}: {tok:?} is not a 32-bit hex word ({e})"))?;
        out.push(v);
    }
    Ok(())
}

/// Parse a whole text of hex words (see [`parse_hex_line`]); used by `--engine isa`.
pub fn parse_hex(text: &str) -> Result<Vec<u32>, String> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        parse_hex_line(line, i + 1, &mut out)?;
    }
    Ok(out)
}

/// What `kfdrt disasm` was asked to do.
pub struct Options {
    /// Packet format.
    pub engine: Engine,
    /// Family (PM4 layout, SDMA version).
    pub family: GfxFamily,
    /// The input holds hex words, not raw bytes.
    pub hex: bool,
    /// A JSON array instead of text lines.
    pub json: bool,
    /// Report progress on stderr even when it is not a terminal.
    pub progress: bool,
}

/// How a run ended (when the input could be read).
pub enum Outcome {
    /// Every packet decoded.
    Clean,
    /// Some packet was unknown, malformed or truncated, or the input was empty.
    Problem,
}

/// Why a run could not read its input (exit 2).
pub enum Failure {
    /// The message, naming the file.
    Input(String),
}

/// Bytes read and decoded per step: memory stays at a few of these whatever the input.
const CHUNK: usize = 1 << 20;
/// Inputs above this size report progress when stderr is a terminal.
const PROGRESS_MIN: u64 = 16 << 20;

/// Writes lines as text or as one JSON array, and remembers problems.
struct Sink {
    out: Out,
    json: bool,
    lines: u64,
    problem: bool,
}

impl Sink {
    fn line(&mut self, l: disasm::DisasmLine) {
        self.problem |= l.is_problem();
        if self.json {
            self.out.str(if self.lines == 0 { "[" } else { "," });
            self.out.str(&l.to_json());
        } else {
            self.out.fmt(format_args!("{l}\n"));
        }
        self.lines += 1;
    }
    fn end(&mut self) {
        if self.json {
            self.out.str(if self.lines == 0 { "[]\n" } else { "]\n" });
        }
        self.out.flush();
    }
}

/// Progress on stderr: `\r` updates on a terminal, lines otherwise.
struct Progress {
    total: Option<u64>,
    tty: bool,
    last: std::time::Instant,
    shown: bool,
}

impl Progress {
    fn new(total: Option<u64>, forced: bool) -> Option<Self> {
        let tty = std::io::stderr().is_terminal();
        let big = total.is_none_or(|t| t > PROGRESS_MIN);
        (forced || (tty && big)).then(|| Progress {
            total,
            tty,
            last: std::time::Instant::now(),
            shown: false,
        })
    }
    fn update(&mut self, done: u64, lines: u64) {
        if self.last.elapsed() < std::time::Duration::from_millis(500) {
            return;
        }
        self.last = std::time::Instant::now();
        self.show(done, lines);
    }

    fn show(&mut self, done: u64, lines: u64) {
        self.shown = true;
        let mib = |b: u64| b as f64 / (1u64 << 20) as f64;
        let of = match self.total {
            Some(t) if t > 0 => format!(
                " of {:.1} MiB ({:.0}%)",
                mib(t),
                done as f64 * 100.0 / t as f64
            ),
            _ => String::new(),
        };
        let msg = format!("disasm: {:.1} MiB{of} decoded, {lines} packets", mib(done));
        if self.tty {
            errln_raw(&format!("\r{msg}\x1b[K"));
        } else {
            errln!("{msg}");
        }
    }

    /// The final figures (always, so a run with `--progress` ends with a total).
    fn done(&mut self, total: u64, lines: u64) {
        self.show(total, lines);
        if self.tty {
            errln!("");
        }
    }
}

fn errln_raw(s: &str) {
    crate::out::err!("{s}");
}

/// Whether the start of a binary input looks like hex text (for the `--hex` hint).
fn looks_like_text(head: &[u8]) -> bool {
    let head = &head[..head.len().min(4096)];
    !head.is_empty()
        && head
            .iter()
            .all(|b| b.is_ascii_graphic() || b.is_ascii_whitespace())
        && head.iter().filter(|b| b.is_ascii_hexdigit()).count() * 2 >= head.len()
}

/// Read FILE (`-` = stdin) in chunks, decode as it goes, print the lines.
pub fn run_file(file: &str, o: &Options) -> Result<Outcome, Failure> {
    let (mut input, size): (Box<dyn Read>, Option<u64>) = if file == "-" {
        (Box::new(std::io::stdin().lock()), None)
    } else {
        let f = std::fs::File::open(file)
            .map_err(|e| Failure::Input(format!("reading {file}: {e}")))?;
        let meta = f
            .metadata()
            .map_err(|e| Failure::Input(format!("reading {file}: {e}")))?;
        if meta.is_dir() {
            return Err(Failure::Input(format!(
                "reading {file}: it is a directory, not a file"
            )));
        }
        let size = meta.is_file().then_some(meta.len());
        if let Some(n) = size.filter(|n| !o.hex && n % 4 != 0) {
            return Err(Failure::Input(format!(
                "{file}: {n} bytes is not a whole number of dwords (trailing {} bytes); \
                 if it holds hex words, add --hex",
                n % 4
            )));
        }
        (Box::new(f), size)
    };
    let mut sink = Sink {
        out: Out::new(),
        json: o.json,
        lines: 0,
        problem: false,
    };
    let mut progress = Progress::new(size, o.progress);
    let mut d = disasm::Disassembler::new(o.engine, o.family);
    let mut read_total = 0u64;
    if o.hex {
        let mut r = BufReader::with_capacity(CHUNK, input);
        let mut line = String::new();
        let mut ln = 0usize;
        let mut words = Vec::new();
        loop {
            line.clear();
            let n = match r.read_line(&mut line) {
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
                    sink.end();
                    return Err(Failure::Input(format!(
                        "{file} line {}: not text (a binary input needs no --hex)",
                        ln + 1
                    )));
                }
                Err(e) => {
                    sink.end();
                    return Err(Failure::Input(format!("reading {file}: {e}")));
                }
            };
            if n == 0 {
                break;
            }
            ln += 1;
            read_total += n as u64;
            parse_hex_line(&line, ln, &mut words).map_err(|e| {
                sink.end();
                Failure::Input(format!("{file}: {e}"))
            })?;
            if words.len() >= CHUNK / 4 {
                d.push(&words, &mut |l| sink.line(l));
                words.clear();
                sink.out.flush();
                if let Some(p) = progress.as_mut() {
                    p.update(read_total, sink.lines);
                }
            }
        }
        d.push(&words, &mut |l| sink.line(l));
    } else {
        let mut buf = vec![0u8; CHUNK];
        let mut words: Vec<u32> = Vec::with_capacity(CHUNK / 4);
        // Bytes of a dword cut by a read boundary (pipes return any length).
        let mut carry = 0usize;
        loop {
            let n = match input.read(&mut buf[carry..]) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    sink.end();
                    return Err(Failure::Input(format!("reading {file}: {e}")));
                }
            };
            if read_total == 0 && looks_like_text(&buf[..n]) {
                errln!(
                    "kfdrt disasm: {file} looks like text, not raw packet bytes: \
                     if it holds hex words, add --hex"
                );
            }
            read_total += n as u64;
            let have = carry + n;
            let whole = have / 4 * 4;
            words.clear();
            words.extend(
                buf[..whole]
                    .chunks_exact(4)
                    .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])),
            );
            buf.copy_within(whole..have, 0);
            carry = have - whole;
            d.push(&words, &mut |l| sink.line(l));
            sink.out.flush();
            if let Some(p) = progress.as_mut() {
                p.update(read_total, sink.lines);
            }
        }
        if carry != 0 {
            errln!(
                "kfdrt disasm: {file}: {carry} trailing bytes after the last whole dword \
                 were not decoded"
            );
            sink.problem = true;
        }
    }
    d.finish(&mut |l| sink.line(l));
    sink.end();
    if let Some(p) = progress.as_mut() {
        p.done(read_total, sink.lines);
    }
    if read_total == 0 {
        errln!("kfdrt disasm: {file} is empty: no packets to decode");
        return Ok(Outcome::Problem);
    }
    if sink.lines == 0 {
        errln!("kfdrt disasm: {file} holds no hex words: no packets to decode");
        return Ok(Outcome::Problem);
    }
    Ok(if sink.problem {
        Outcome::Problem
    } else {
        Outcome::Clean
    })
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
