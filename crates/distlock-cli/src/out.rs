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

/// Logs to stderr as `DISTLOCK_LOG` asks (an `EnvFilter`), WARN and above by default; colours
/// only for a terminal, so logs piped to a file or journal stay plain text.
///
/// Without `DISTLOCK_LOG` the library's `distlock.lease_lost` event is left out: `run` says a
/// lost lease in its own words, and the benchmark's `lost` workload loses leases on purpose.
pub fn init_logging() {
    use tracing_subscriber::filter::FilterExt;
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    use tracing_subscriber::Layer;
    let asked = tracing_subscriber::EnvFilter::try_from_env("DISTLOCK_LOG").ok();
    let quiet = asked.is_none();
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        // One filter, not two stacked: a callsite one filter never wants and the other always
        // does would be asked again on every span and event, and the library's DEBUG spans
        // would cost their full creation even when nothing is logged.
        .with_filter(
            asked
                .unwrap_or_else(|| tracing_subscriber::EnvFilter::new("warn"))
                .and(tracing_subscriber::filter::filter_fn(move |meta| {
                    !(quiet && meta.name() == "distlock.lease_lost")
                })),
        );
    tracing_subscriber::registry().with(fmt).init();
}
