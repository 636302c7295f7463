//! Output that never panics: `println!` panics when stdout is a closed pipe
//! (`kfdrt check | head -1`), because Rust ignores SIGPIPE. Every write to stdout goes
//! through here instead: a closed pipe ends the process quietly with exit 0 (the reader
//! asked for no more), any other write error (a full disk) is reported on stderr with
//! exit 2 (an unwritable output, as in the README's exit-code table). Writes to stderr
//! ignore errors: there is nowhere left to report them.

use std::io::{self, Write};

/// Exit code for an output that cannot be written (other than a closed pipe).
const UNWRITABLE: i32 = 2;

/// End the process after a failed write to stdout.
pub fn fail(e: &io::Error) -> ! {
    if e.kind() == io::ErrorKind::BrokenPipe {
        std::process::exit(0);
    }
    let _ = writeln!(io::stderr(), "kfdrt: writing the output: {e}");
    std::process::exit(UNWRITABLE);
}

/// Write to stdout and flush; see the module docs for errors.
pub fn stdout(args: std::fmt::Arguments<'_>) {
    let mut o = io::stdout().lock();
    if let Err(e) = o.write_fmt(args).and_then(|()| o.flush()) {
        fail(&e);
    }
}

/// Write to stderr, ignoring errors.
pub fn stderr(args: std::fmt::Arguments<'_>) {
    let _ = io::stderr().lock().write_fmt(args);
}

/// A buffered stdout for bulk output (`disasm`): the same error rules, checked on every
/// write and on flush.
pub struct Out(io::BufWriter<io::StdoutLock<'static>>);

impl Out {
    /// Buffered, locked stdout.
    pub fn new() -> Self {
        Out(io::BufWriter::with_capacity(64 << 10, io::stdout().lock()))
    }
    /// Write formatted text.
    pub fn fmt(&mut self, args: std::fmt::Arguments<'_>) {
        if let Err(e) = self.0.write_fmt(args) {
            fail(&e);
        }
    }
    /// Write a string.
    pub fn str(&mut self, s: &str) {
        if let Err(e) = self.0.write_all(s.as_bytes()) {
            fail(&e);
        }
    }
    /// Flush what is buffered (before a pause, so the reader sees lines as they come).
    pub fn flush(&mut self) {
        if let Err(e) = self.0.flush() {
            fail(&e);
        }
    }
}

impl Drop for Out {
    fn drop(&mut self) {
        if let Err(e) = self.0.flush() {
            fail(&e);
        }
    }
}

/// `print!` that exits quietly on a closed pipe.
macro_rules! out {
    ($($t:tt)*) => { $crate::out::stdout(format_args!($($t)*)) };
}
/// `println!` that exits quietly on a closed pipe.
macro_rules! outln {
    () => { $crate::out::stdout(format_args!("\n")) };
    ($($t:tt)*) => { $crate::out::stdout(format_args!("{}\n", format_args!($($t)*))) };
}
/// `eprint!` that ignores errors.
macro_rules! err {
    ($($t:tt)*) => { $crate::out::stderr(format_args!($($t)*)) };
}
/// `eprintln!` that ignores errors.
macro_rules! errln {
    ($($t:tt)*) => { $crate::out::stderr(format_args!("{}\n", format_args!($($t)*))) };
}
pub(crate) use {err, errln, out, outln};
