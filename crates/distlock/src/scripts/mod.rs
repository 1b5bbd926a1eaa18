//! The Lua scripts, one `.lua` file each; every file's header lists its KEYS, ARGV and
//! return values. They are compiled into the binary, hashed once, and run by `EVALSHA` with a
//! `SCRIPT LOAD` + retry on `NOSCRIPT` (redis-rs [`redis::Script`]), so a server restart or
//! `SCRIPT FLUSH` costs one extra round trip, never an error.
//!
//! Scripts marked `with "prelude.lua"` are run with `prelude.lua` (local helper functions:
//! exact fencing tokens from the lock's per-slot counter, server time in ms from one `TIME`
//! per run, a TTL that must not fail half-way) joined in front of their text at build time;
//! the leased-semaphore scripts also get `leases.lua` (migration of the old leases key,
//! Redisson's reclaim of ended leases), the fair-lock scripts `fair.lua` (Redisson's queue
//! score arithmetic, dead waiters at the head).

use std::sync::LazyLock;

use redis::Script;

macro_rules! scripts {
    ($($(#[$doc:meta])* $name:ident => $file:literal $(with $($prelude:literal)+)?,)*) => {
        $(
            $(#[$doc])*
            pub(crate) static $name: LazyLock<Script> = LazyLock::new(|| {
                Script::new(concat!($($(include_str!($prelude),)+)? include_str!($file)))
            });
        )*
        /// Each script file's own text, by file name (what its header documents).
        #[cfg(test)]
        pub(crate) const SOURCES: &[(&str, &str)] = &[$(($file, include_str!($file)),)*];
        /// Every script as it is run, by file name: its file's text with the prelude it uses
        /// joined in front. For tools and tests that run them directly.
        pub(crate) const RUNNABLE: &[(&str, &str)] =
            &[$(($file, concat!($($(include_str!($prelude),)+)? include_str!($file))),)*];
    };
}

/// The helpers joined in front of the scripts that issue fencing tokens or read server time.
#[cfg(test)]
const PRELUDE: &str = include_str!("prelude.lua");
/// The helpers joined (after the prelude) in front of the leased-semaphore scripts.
#[cfg(test)]
const LEASES: &str = include_str!("leases.lua");
/// The helpers joined (after the prelude, if used) in front of the fair-lock scripts.
#[cfg(test)]
const FAIR: &str = include_str!("fair.lua");

scripts! {
    /// Grant or re-enter a lock and issue its fencing token.
    LOCK_ACQUIRE => "lock_acquire.lua" with "prelude.lua",
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
    FAIR_ACQUIRE => "fair_acquire.lua" with "prelude.lua" "fair.lua",
    /// Release one hold of a fair lock; wake the head waiter on the last.
    FAIR_RELEASE => "fair_release.lua" with "prelude.lua" "fair.lua",
    /// Leave a fair queue (cancel, timeout) or force-unlock; wake the head.
    FAIR_LEAVE => "fair_leave.lua" with "fair.lua",
    /// Take a read hold (write-preferring).
    RW_READ_ACQUIRE => "rw_read_acquire.lua" with "prelude.lua",
    /// Take a write hold; register as a waiting writer when refused.
    RW_WRITE_ACQUIRE => "rw_write_acquire.lua" with "prelude.lua",
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
    LEASED_ACQUIRE => "leased_acquire.lua" with "prelude.lua" "leases.lua",
    /// Give back a leased permit.
    LEASED_RELEASE => "leased_release.lua" with "prelude.lua" "leases.lua",
    /// Move a leased permit's expiry.
    LEASED_EXTEND => "leased_extend.lua" with "prelude.lua" "leases.lua",
    /// Reclaim expired leases; report available and leased.
    LEASED_AVAILABLE => "leased_available.lua" with "prelude.lua" "leases.lua",
    /// Cancel a request of unknown outcome through its latch (tombstone).
    LATCH_CANCEL => "latch_cancel.lua",
}

#[cfg(test)]
mod tests {
    use super::{FAIR, LEASES, PRELUDE, RUNNABLE, SOURCES};

    #[test]
    fn every_script_has_a_header_with_keys_argv_and_returns() {
        assert_eq!(SOURCES.len(), 28);
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

    #[test]
    fn the_prelude_has_a_header_and_comes_first_in_every_script_that_uses_it() {
        let header: Vec<&str> = PRELUDE
            .lines()
            .take_while(|l| l.starts_with("--"))
            .collect();
        assert!(header[0].starts_with("-- prelude.lua:"), "{}", header[0]);
        for name in [
            "now_ms()",
            "next_token(counter_key, floor[, fenced_key])",
            "held_token(",
            "expire_or_undo(",
            "error_reply(",
            "Errors",
        ] {
            assert!(
                header.iter().any(|l| l.contains(name)),
                "prelude header: no {name}"
            );
        }
        assert_eq!(SOURCES.len(), RUNNABLE.len());
        for ((file, own), (run_file, run)) in SOURCES.iter().zip(RUNNABLE) {
            assert_eq!(file, run_file);
            // A helper call, not `redis.error_reply(`.
            let uses = [
                "now_ms(",
                "next_token(",
                "held_token(",
                "expire_or_undo(",
                " error_reply(",
            ]
            .iter()
            .any(|f| own.contains(f));
            // Every script reads server time through the prelude (one TIME per run).
            assert!(
                !own.contains("redis.call('time')"),
                "{file}: calls TIME itself instead of now_ms()"
            );
            let uses_leases = ["migrate_leases(", "reclaim_leases(", "earliest_lease_end("]
                .iter()
                .any(|f| own.contains(f));
            let uses_fair = [
                "drop_stale_heads(",
                "queue_score(",
                "shift_scores(",
                "leave_queue(",
            ]
            .iter()
            .any(|f| own.contains(f));
            let mut expected = String::new();
            if uses || uses_leases {
                expected.push_str(PRELUDE);
            }
            if uses_leases {
                expected.push_str(LEASES);
            }
            if uses_fair {
                expected.push_str(FAIR);
            }
            expected.push_str(own);
            assert_eq!(*run, expected, "{file}: helpers not joined as used");
        }
    }
}
