//! The Lua scripts, one `.lua` file each; every file's header lists its KEYS, ARGV and
//! return values. They are compiled into the binary, hashed once, and run by `EVALSHA` with a
//! `SCRIPT LOAD` + retry on `NOSCRIPT` (redis-rs [`redis::Script`]), so a server restart or
//! `SCRIPT FLUSH` costs one extra round trip, never an error.

use std::sync::LazyLock;

use redis::Script;

macro_rules! scripts {
    ($($(#[$doc:meta])* $name:ident => $file:literal,)*) => {
        $(
            $(#[$doc])*
            pub(crate) static $name: LazyLock<Script> =
                LazyLock::new(|| Script::new(include_str!($file)));
        )*
        /// Sources of every script, by file name, for tools and tests that run them directly.
        pub const SOURCES: &[(&str, &str)] = &[$(($file, include_str!($file)),)*];
    };
}

scripts! {
    /// Grant or re-enter a lock and issue its fencing token.
    LOCK_ACQUIRE => "lock_acquire.lua",
    /// Release one hold; publish the unlock message on the last.
    LOCK_RELEASE => "lock_release.lua",
    /// Renew many leases at once (watchdog) or extend one.
    LOCK_RENEW => "lock_renew.lua",
    /// Delete a lock whoever holds it and wake its waiters.
    LOCK_FORCE_UNLOCK => "lock_force_unlock.lua",
    /// One owner's hold count, token and TTL.
    LOCK_INSPECT => "lock_inspect.lua",
    /// Take a job lock if free; WRONGTYPE for a key of another type.
    JOB_ACQUIRE => "job_acquire.lua",
    /// Release a job lock if ours (delete, or keep for the at-least time).
    JOB_RELEASE => "job_release.lua",
    /// Extend a job lock if ours.
    JOB_EXTEND => "job_extend.lua",
    /// Grant a fair lock or queue the caller (liveness by server time).
    FAIR_ACQUIRE => "fair_acquire.lua",
    /// Release one hold of a fair lock; wake the head waiter on the last.
    FAIR_RELEASE => "fair_release.lua",
    /// Leave a fair queue (cancel, timeout) or force-unlock; wake the head.
    FAIR_LEAVE => "fair_leave.lua",
    /// Take a read hold (write-preferring).
    RW_READ_ACQUIRE => "rw_read_acquire.lua",
    /// Take a write hold; register as a waiting writer when refused.
    RW_WRITE_ACQUIRE => "rw_write_acquire.lua",
    /// Release one read hold.
    RW_READ_RELEASE => "rw_read_release.lua",
    /// Release one write hold.
    RW_WRITE_RELEASE => "rw_write_release.lua",
    /// Renew read holds (watchdog batch or extension).
    RW_READ_RENEW => "rw_read_renew.lua",
    /// A waiting writer gives up.
    RW_WRITER_LEAVE => "rw_writer_leave.lua",
    /// Set a latch's count if it has none.
    LATCH_SET => "latch_set.lua",
    /// Count a latch down; wake all at zero.
    LATCH_COUNT_DOWN => "latch_count_down.lua",
    /// Set a semaphore's permits if it has none.
    SEMAPHORE_SET => "semaphore_set.lua",
    /// Take k permits, all or nothing, recording the grant.
    SEMAPHORE_ACQUIRE => "semaphore_acquire.lua",
    /// Give back permits (optionally only a recorded grant).
    SEMAPHORE_RELEASE => "semaphore_release.lua",
    /// Take every available permit.
    SEMAPHORE_DRAIN => "semaphore_drain.lua",
    /// Take one leased permit, reclaiming expired ones.
    LEASED_ACQUIRE => "leased_acquire.lua",
    /// Give back a leased permit.
    LEASED_RELEASE => "leased_release.lua",
    /// Move a leased permit's expiry.
    LEASED_EXTEND => "leased_extend.lua",
    /// Reclaim expired leases; report available and leased.
    LEASED_AVAILABLE => "leased_available.lua",
}

#[cfg(test)]
mod tests {
    use super::SOURCES;

    #[test]
    fn every_script_has_a_header_with_keys_argv_and_returns() {
        assert_eq!(SOURCES.len(), 27);
        for (file, src) in SOURCES {
            let header: String = src
                .lines()
                .take_while(|l| l.starts_with("--"))
                .collect::<Vec<_>>()
                .join("\n");
            assert!(header.contains("KEYS[1]"), "{file}: no KEYS in header");
            assert!(header.contains("Returns"), "{file}: no Returns in header");
        }
    }
}
