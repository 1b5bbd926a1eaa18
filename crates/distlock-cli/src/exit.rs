//! Exit codes of `distlock` (documented in the README and in `distlock run --help`).
//!
//! `run` passes CMD's own code through, so its own failures use codes that commands rarely
//! exit with, following coreutils' `timeout`, `env`, `nice` and `chroot`: 125 when the
//! wrapper itself fails, 126 when CMD cannot be executed, 127 when it is not found.

/// An error of a command other than `run`: unreachable server, bad input, wrong password,
/// wrong key type.
pub const ERROR: u8 = 1;
/// A usage error (clap's), for commands other than `run`.
pub const USAGE: u8 = 2;
// 0: success (for `run`, the command's own code passes through).
/// `distlock-bench demo` and `bench`: an invariant broke (oversold, duplicate order,
/// inconsistent total, a lost update). Listed here so the two commands' codes cannot clash.
#[allow(dead_code)]
pub const INVARIANT_BROKEN: u8 = 3;
/// `run`: the lock was not acquired within `--wait` (EX_TEMPFAIL, like `flock -E 75`).
pub const NOT_ACQUIRED: u8 = 75;
/// `run`: distlock itself failed (a usage error, an unreachable server, a wrong password,
/// bad input, a key of the wrong type, a semaphore of another size), so CMD did not run, or
/// distlock could not tell how it ended. Distinct from CMD's own codes in common use (1, 2),
/// as coreutils' `timeout`, `env`, `nice` and `chroot` exit 125 when they fail themselves.
pub const RUN_FAILED: u8 = 125;
/// `run`: CMD was found but could not be executed (not executable, permission denied), as
/// shells and coreutils report it.
pub const CANNOT_EXEC: u8 = 126;
/// `run`: CMD was not found, as shells report "command not found".
pub const NOT_FOUND: u8 = 127;
/// `run`: the command died of signal N → 128 + N, as shells report it.
pub const SIGNAL_BASE: u8 = 128;
