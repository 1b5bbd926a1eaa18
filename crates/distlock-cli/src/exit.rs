//! Exit codes of `distlock` (documented in the README).

/// An error: unreachable server, bad input, wrong password, wrong key type.
pub const ERROR: u8 = 1;
// 0: success (for `run`, the command's own code passes through); 2: usage error (clap's).
/// `demo`: an invariant broke (oversold, duplicate order, inconsistent total).
pub const INVARIANT_BROKEN: u8 = 3;
/// `run`: the lock was not acquired within `--wait` (EX_TEMPFAIL, like `flock -E 75`).
pub const NOT_ACQUIRED: u8 = 75;
/// `run`: the command could not be started (as shells report "command not found").
pub const CANNOT_EXEC: u8 = 127;
/// `run`: the command died of signal N → 128 + N, as shells report it.
pub const SIGNAL_BASE: u8 = 128;
