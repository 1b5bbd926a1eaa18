//! Key and channel names (the wire contract of doc/design.md §Data layout) and input checks.
//!
//! Names follow Redisson's `prefixName`: a helper key for lock `name` is
//! `<prefix>:{<name>}`, or `<prefix>:<name>` when the name already carries a `{hash tag}`, so
//! that every key one script touches hashes to the lock's cluster slot.

use std::time::Duration;

use crate::error::{Error, Result};

/// Longest lock name accepted, in bytes (64 KiB). Redis allows 512 MB keys; a longer name is
/// almost surely a bug in the caller, and every script call carries it several times.
pub const MAX_NAME_LEN: usize = 64 * 1024;

/// Longest lease, wait or extension accepted: 365 days.
pub const MAX_DURATION: Duration = Duration::from_secs(365 * 24 * 3600);

/// Largest count or number of permits accepted: 2^53, the largest integer a Lua number
/// (a double) holds exactly.
pub const MAX_COUNT: u64 = 1 << 53;

/// The hash field that stores the current holder's fencing token inside a lock hash.
/// Redisson's scripts only look at their own `<uuid>:<threadId>` field, so the extra field
/// does not disturb them; distlock's scripts and `status` skip it when counting owners.
pub const TOKEN_FIELD: &str = "distlock:fencing-token";

/// Unlock message published on the wake channel when a lock is freed (Redisson's
/// `LockPubSub.UNLOCK_MESSAGE`): wakes one waiter.
pub const UNLOCK_MESSAGE: &str = "0";

/// Redisson's `prefixName(prefix, name)`.
pub fn prefixed(prefix: &str, key: &str) -> String {
    if key.contains('{') {
        format!("{prefix}:{key}")
    } else {
        format!("{prefix}:{{{key}}}")
    }
}

/// Redisson's `suffixName(name, suffix)`: `{<key>}:<suffix>`, or `<key>:<suffix>` when the key
/// already carries a `{hash tag}`.
pub fn suffixed(key: &str, suffix: &str) -> String {
    format!("{}:{suffix}", hash_tagged(key))
}

/// `{<key>}`, or the key itself when it already carries a `{hash tag}`.
pub fn hash_tagged(key: &str) -> String {
    if key.contains('{') {
        key.to_string()
    } else {
        format!("{{{key}}}")
    }
}

/// Wake channel of a lock: `redisson_lock__channel:{key}`.
pub fn lock_channel(key: &str) -> String {
    prefixed("redisson_lock__channel", key)
}

/// Unlock latch of one release request: `redisson_unlock_latch:{key}:<request-id>` (seed 004).
pub fn unlock_latch(key: &str, request_id: &str) -> String {
    format!("{}:{request_id}", prefixed("redisson_unlock_latch", key))
}

/// Acquire latch of one re-entrant acquire request: `distlock_acquire_latch:{key}:<id>`.
/// Makes a resent acquire idempotent (Redisson issue #7367: a resent acquire leaves hold
/// count 2).
pub fn acquire_latch(key: &str, request_id: &str) -> String {
    format!("{}:{request_id}", prefixed("distlock_acquire_latch", key))
}

/// The fencing counter a lock's acquire script reads and advances.
///
/// On a standalone server (and behind Sentinel) one key serves every lock: `<key
/// prefix>distlock:fencing-counter`. Tokens are strictly increasing across all names in it,
/// hence per name. No key is ever created per lock name (Redisson issue #6510).
pub fn fencing_counter(key_prefix: &str) -> String {
    format!("{key_prefix}distlock:fencing-counter")
}

/// Check a lock name: non-empty, at most [`MAX_NAME_LEN`] bytes.
pub fn check_name(name: &str) -> Result<()> {
    if name.is_empty() {
        return Err(Error::invalid("lock name is empty"));
    }
    if name.len() > MAX_NAME_LEN {
        return Err(Error::invalid(format!(
            "lock name is {} bytes; the limit is {MAX_NAME_LEN}",
            name.len()
        )));
    }
    Ok(())
}

/// A lease, extension or TTL as whole milliseconds: at least 1 ms, at most [`MAX_DURATION`].
pub fn lease_ms(what: &str, d: Duration) -> Result<u64> {
    if d.is_zero() {
        return Err(Error::invalid(format!("{what} is zero")));
    }
    if d > MAX_DURATION {
        return Err(Error::invalid(format!(
            "{what} of {d:?} exceeds the limit of {MAX_DURATION:?}"
        )));
    }
    let ms = d.as_millis() as u64;
    if ms == 0 {
        return Err(Error::invalid(format!(
            "{what} of {d:?} is shorter than 1 ms (Redis key TTLs are whole milliseconds)"
        )));
    }
    Ok(ms)
}

/// A wait: zero means one attempt, at most [`MAX_DURATION`].
pub fn check_wait(d: Duration) -> Result<()> {
    if d > MAX_DURATION {
        return Err(Error::invalid(format!(
            "wait of {d:?} exceeds the limit of {MAX_DURATION:?}"
        )));
    }
    Ok(())
}

/// Clock drift allowance subtracted from local validity: 1 % of the lease + 2 ms, as the
/// redis.io Redlock description and go-redsync (`driftFactor` 0.01).
pub fn drift(lease: Duration) -> Duration {
    lease / 100 + Duration::from_millis(2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_redisson_prefix_name() {
        assert_eq!(lock_channel("orders"), "redisson_lock__channel:{orders}");
        assert_eq!(
            lock_channel("{u1}:cart"),
            "redisson_lock__channel:{u1}:cart"
        );
        assert_eq!(
            unlock_latch("orders", "r1"),
            "redisson_unlock_latch:{orders}:r1"
        );
    }

    #[test]
    fn durations_are_checked() {
        assert!(lease_ms("lease", Duration::ZERO).is_err());
        assert!(lease_ms("lease", Duration::from_micros(10)).is_err());
        assert!(lease_ms("lease", Duration::MAX).is_err());
        assert_eq!(lease_ms("lease", Duration::from_secs(30)).unwrap(), 30_000);
        assert!(check_wait(Duration::ZERO).is_ok());
        assert!(check_wait(Duration::MAX).is_err());
    }

    #[test]
    fn names_are_checked() {
        assert!(check_name("").is_err());
        assert!(check_name(&"x".repeat(MAX_NAME_LEN + 1)).is_err());
        assert!(check_name(&"x".repeat(MAX_NAME_LEN)).is_ok());
    }

    #[test]
    fn drift_is_one_percent_plus_two_ms() {
        assert_eq!(drift(Duration::from_secs(10)), Duration::from_millis(102));
    }
}
