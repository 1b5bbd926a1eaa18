//! Writing to stdout and stderr without the panics of `println!` and `eprintln!`.
//!
//! Stdout closed by its reader (`distlock status a b c | head -1`): [`outln!`] returns
//! [`Closed`], the command stops where it is (its destructors run: a private `redis-server`
//! is stopped) and `distlock` exits 0 without a message, as `distlock man | head` does and as
//! a command killed by SIGPIPE would not. SIGPIPE itself stays ignored (Rust's default): with
//! its default action a closed pipe would kill `distlock run` while CMD runs, leaving the
//! lock to expire under it. [`errln!`] drops what cannot be written to stderr, so a closed
//! stderr never ends the wrapper either.

use std::fmt;
use std::io::{ErrorKind, Write};

/// Stdout was closed by its reader. Ends the command quietly with exit 0 (see `main`).
#[derive(Debug)]
pub struct Closed;

impl fmt::Display for Closed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("stdout was closed by its reader")
    }
}

impl std::error::Error for Closed {}

/// Write `args` and a newline to stdout. A closed pipe is [`Closed`]; other write errors
/// are errors ("cannot write the output").
pub fn line(args: fmt::Arguments<'_>) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_fmt(args).and_then(|()| out.write_all(b"\n")) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == ErrorKind::BrokenPipe => Err(Closed.into()),
        Err(e) => Err(anyhow::Error::new(e).context("cannot write the output")),
    }
}

/// Whether `e` is (or was caused by) a closed stdout.
pub fn is_closed(e: &anyhow::Error) -> bool {
    e.chain().any(|cause| cause.is::<Closed>())
}

/// `println!` that returns `anyhow::Result<()>`: [`Closed`] when stdout was closed.
#[macro_export]
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::out::line(format_args!($($arg)*))
    };
}

/// `eprintln!` that never panics: what cannot be written to stderr is dropped.
#[macro_export]
macro_rules! errln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

pub use crate::{errln, outln};
