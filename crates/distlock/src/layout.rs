//! The wire contract: how distlock names its keys and channels in Redis — Redisson's and
//! ShedLock's names where the layouts are theirs — for tools, operators and interop tests.
//! Changing any of these is a breaking change of the data layout.
//!
//! The builders (`lock_queue`, `fair_waiters`, …) name the keys of one primitive; the
//! `*_PREFIX` and `*_SUFFIX` constants are the parts those names are built from, and
//! [`classify`] reads a key back: a helper key of some primitive, a job lock, or a name of
//! its own.

pub use crate::keys::{
    acquire_latch, client_notice_channel, fair_liveness, fair_queue, fair_timeouts, fair_waiters,
    fencing_counter, hash_tag, job_lock, job_notice_channel, key_slot, latch_channel,
    latch_count_down_latch, legacy_fencing_counter, legacy_semaphore_leases, lock_channel,
    lock_grant_channel, lock_queue, lock_waiters, permit_grant_channel, permit_queue,
    permit_waiters, redisson_fenced_token, rwlock_queue, rwlock_read_timeout, rwlock_waiters,
    rwlock_writers, semaphore_channel, semaphore_grant_latch, semaphore_leases,
    semaphore_release_latch, slot_tag, unlock_latch, HOLDER_FIELD, SLOTS, TOKEN_FIELD,
};
pub use crate::keys::{
    ACQUIRE_LATCH_PREFIX, FAIR_LIVENESS_PREFIX, FAIR_QUEUE_PREFIX, FAIR_TIMEOUTS_PREFIX,
    FAIR_WAITERS_PREFIX, FENCING_COUNTER_PREFIX, JOB_LOCK_PREFIX, LATCH_COUNT_DOWN_LATCH_PREFIX,
    LEGACY_REQUEST_RECORD_PREFIXES, LEGACY_SEMAPHORE_LEASES_PREFIX, LOCK_QUEUE_PREFIX,
    LOCK_WAITERS_PREFIX, PERMIT_QUEUE_PREFIX, PERMIT_WAITERS_PREFIX, REDISSON_FENCED_TOKEN_PREFIX,
    RWLOCK_QUEUE_PREFIX, RWLOCK_READ_TIMEOUT_SUFFIX, RWLOCK_WAITERS_PREFIX, RWLOCK_WRITERS_PREFIX,
    SEMAPHORE_GRANT_LATCH_PREFIX, SEMAPHORE_LEASES_SUFFIX, SEMAPHORE_RELEASE_LATCH_PREFIX,
    UNLOCK_LATCH_PREFIX,
};

/// The hash field that marks a plain lock whose direct hand-off queue may have a waiter.
///
/// Value `1`. distlock's acquire writes it into the lock hash when it queues a waiter behind
/// the holder, and a grant (or a hand-off) made while the queue has entries writes it with the
/// new hold; it goes with the key on the last release. A release that finds it hands the lock
/// to the first live waiter instead of freeing it; one that does not find it frees the lock
/// without reading the queue. Redisson's plain lock scripts only look at their own
/// `<uuid>:<threadId>` field and delete the key on the last release, so they are not
/// disturbed; distlock's scripts and `status` skip it when counting owners.
pub const QUEUED_FIELD: &str = "distlock:queued";

/// Every helper key named `<prefix>:…`, with the primitive it belongs to.
const PREFIXED: &[(&str, HelperOf)] = &[
    (FAIR_QUEUE_PREFIX, HelperOf::FairLock),
    (FAIR_TIMEOUTS_PREFIX, HelperOf::FairLock),
    (FAIR_LIVENESS_PREFIX, HelperOf::FairLock),
    (FAIR_WAITERS_PREFIX, HelperOf::FairLock),
    (REDISSON_FENCED_TOKEN_PREFIX, HelperOf::Lock),
    (UNLOCK_LATCH_PREFIX, HelperOf::Lock),
    (ACQUIRE_LATCH_PREFIX, HelperOf::Lock),
    (LOCK_QUEUE_PREFIX, HelperOf::Lock),
    (LOCK_WAITERS_PREFIX, HelperOf::Lock),
    (RWLOCK_QUEUE_PREFIX, HelperOf::RwLock),
    (RWLOCK_WAITERS_PREFIX, HelperOf::RwLock),
    (RWLOCK_WRITERS_PREFIX, HelperOf::RwLock),
    (PERMIT_QUEUE_PREFIX, HelperOf::LeasedSemaphore),
    (PERMIT_WAITERS_PREFIX, HelperOf::LeasedSemaphore),
    (LEGACY_SEMAPHORE_LEASES_PREFIX, HelperOf::LeasedSemaphore),
    (SEMAPHORE_GRANT_LATCH_PREFIX, HelperOf::Semaphore),
    (SEMAPHORE_RELEASE_LATCH_PREFIX, HelperOf::Semaphore),
    (LATCH_COUNT_DOWN_LATCH_PREFIX, HelperOf::Latch),
    (LEGACY_REQUEST_RECORD_PREFIXES[0], HelperOf::Semaphore),
    (LEGACY_REQUEST_RECORD_PREFIXES[1], HelperOf::Semaphore),
    (LEGACY_REQUEST_RECORD_PREFIXES[2], HelperOf::Latch),
    (FENCING_COUNTER_PREFIX, HelperOf::FencingCounter),
];

/// What a key is for, by its name alone ([`classify`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum KeyRole {
    /// A helper key: part of the state of the primitive `of`, kept beside the primitive's own key.
    ///
    /// Queues, latches of one request, lease sets and fencing counters are helper keys.
    Helper {
        /// The kind of primitive it belongs to.
        of: HelperOf,
    },
    /// A job lock (ShedLock's `job-lock:<env>:<name>`).
    Job {
        /// The environment.
        env: String,
        /// The job's name.
        name: String,
    },
    /// A key by its own name: a lock, a semaphore or a latch, or the application's data.
    ///
    /// Only its Redis shape tells which ([`Client::inspect`](crate::Client::inspect) reads it).
    Named,
}

/// The kind of primitive a helper key belongs to ([`KeyRole::Helper`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum HelperOf {
    /// A lock of the lock family.
    ///
    /// A plain lock's hand-off queue and waiters, Redisson `RFencedLock`'s token counter, and the
    /// latches of acquire and release requests (which fair and read-write locks take too).
    Lock,
    /// A fair lock (Redisson `RFairLock`).
    ///
    /// Its queue, waiter timeouts, liveness deadlines and hand-off entries.
    FairLock,
    /// A read-write lock (Redisson `RReadWriteLock`).
    ///
    /// Its read holds' keys, the waiting writers and their hand-off queue.
    RwLock,
    /// A semaphore (Redisson `RSemaphore`): the latches of acquire and release requests.
    Semaphore,
    /// A leased semaphore (Redisson `RPermitExpirableSemaphore`).
    ///
    /// Its lease set (Redisson's name and the one of older distlock versions) and hand-off queue.
    LeasedSemaphore,
    /// A count-down latch (Redisson `RCountDownLatch`): the record sets of count-down requests.
    Latch,
    /// A fencing counter (one per hash slot, shared by the locks of that slot; the server-wide
    /// one of older versions).
    FencingCounter,
}

/// What the key `key` (without the client's key prefix) is for, by its name alone.
///
/// A helper key is recognised by the names distlock, Redisson and ShedLock give them: a
/// prefix (`redisson_lock_queue:{orders}`, `distlock_lock_queue:{orders}`, …, the `*_PREFIX`
/// constants of this module), a read hold of a read-write lock
/// (`{<name>}:<owner>:rwlock_timeout:<n>`), the lease set of a leased semaphore
/// (`{<name>}:timeout`, or `<name>:timeout` for a name with a `{hash tag}`), a fencing
/// counter (`distlock:fencing-counter[:{<tag>}]`). A ShedLock key `job-lock:<env>:<name>`
/// (neither part empty; the environment ends at the first `:` after `job-lock:`) is a
/// [`KeyRole::Job`]. Any other key is [`KeyRole::Named`]: it may be a lock, a semaphore, a
/// latch or the application's own data.
///
/// Names cannot always be told apart: a lock called `{orders}:timeout` is classified as the
/// lease set of the semaphore `orders`, as Redisson names it.
///
/// # Examples
/// ```
/// use distlock::layout::{classify, HelperOf, KeyRole};
///
/// assert_eq!(classify("orders"), KeyRole::Named);
/// assert_eq!(
///     classify(&distlock::layout::fair_queue("orders")),
///     KeyRole::Helper { of: HelperOf::FairLock }
/// );
/// assert!(matches!(classify("job-lock:prod:report"), KeyRole::Job { .. }));
/// ```
pub fn classify(key: &str) -> KeyRole {
    let helper = |of| KeyRole::Helper { of };
    for &(prefix, of) in PREFIXED {
        if let Some(rest) = key.strip_prefix(prefix) {
            if rest.starts_with(':') || (of == HelperOf::FencingCounter && rest.is_empty()) {
                return helper(of);
            }
        }
    }
    if let Some((_, n)) = key.rsplit_once(&format!(":{RWLOCK_READ_TIMEOUT_SUFFIX}:")) {
        if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) {
            return helper(HelperOf::RwLock);
        }
    }
    if let Some(stem) = key
        .strip_suffix(SEMAPHORE_LEASES_SUFFIX)
        .and_then(|s| s.strip_suffix(':'))
    {
        // `suffixed` adds braces unless the name has a hash tag: either way, the stem has one.
        if hash_tag(stem.as_bytes()).len() < stem.len() {
            return helper(HelperOf::LeasedSemaphore);
        }
    }
    if let Some((env, name)) = key
        .strip_prefix(JOB_LOCK_PREFIX)
        .and_then(|s| s.strip_prefix(':'))
        .and_then(|s| s.split_once(':'))
    {
        if !env.is_empty() && !name.is_empty() {
            return KeyRole::Job {
                env: env.to_string(),
                name: name.to_string(),
            };
        }
    }
    KeyRole::Named
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every builder of a helper key names a key that classifies as the helper it is, for
    /// plain names and names with a hash tag.
    #[test]
    fn every_builder_names_a_helper_of_its_primitive() {
        type Build = fn(&str) -> String;
        let builders: &[(&str, Build, HelperOf)] = &[
            ("fair_queue", fair_queue, HelperOf::FairLock),
            ("fair_timeouts", fair_timeouts, HelperOf::FairLock),
            ("fair_liveness", fair_liveness, HelperOf::FairLock),
            ("fair_waiters", fair_waiters, HelperOf::FairLock),
            (
                "redisson_fenced_token",
                redisson_fenced_token,
                HelperOf::Lock,
            ),
            ("unlock_latch", |k| unlock_latch(k, "r1"), HelperOf::Lock),
            ("acquire_latch", |k| acquire_latch(k, "r1"), HelperOf::Lock),
            ("lock_queue", lock_queue, HelperOf::Lock),
            ("lock_waiters", lock_waiters, HelperOf::Lock),
            ("rwlock_queue", rwlock_queue, HelperOf::RwLock),
            ("rwlock_waiters", rwlock_waiters, HelperOf::RwLock),
            ("rwlock_writers", rwlock_writers, HelperOf::RwLock),
            (
                "rwlock_read_timeout",
                |k| rwlock_read_timeout(k, "6f1c0e1e-7b7a-4f55-9a59-1c0d9d7e0a11:7", 2),
                HelperOf::RwLock,
            ),
            ("permit_queue", permit_queue, HelperOf::LeasedSemaphore),
            ("permit_waiters", permit_waiters, HelperOf::LeasedSemaphore),
            (
                "semaphore_leases",
                semaphore_leases,
                HelperOf::LeasedSemaphore,
            ),
            (
                "legacy_semaphore_leases",
                legacy_semaphore_leases,
                HelperOf::LeasedSemaphore,
            ),
            (
                "semaphore_grant_latch",
                |k| semaphore_grant_latch(k, "c:0:0"),
                HelperOf::Semaphore,
            ),
            (
                "semaphore_release_latch",
                |k| semaphore_release_latch(k, "c:0:0"),
                HelperOf::Semaphore,
            ),
            (
                "latch_count_down_latch",
                |k| latch_count_down_latch(k, "c:0:0"),
                HelperOf::Latch,
            ),
            (
                "fencing_counter",
                |k| fencing_counter("", k),
                HelperOf::FencingCounter,
            ),
            (
                "legacy_fencing_counter",
                |_| legacy_fencing_counter(""),
                HelperOf::FencingCounter,
            ),
        ];
        for name in ["orders", "{user:1}:orders", "a:b:c", "timeout"] {
            for (builder, build, of) in builders {
                let key = build(name);
                assert_eq!(
                    classify(&key),
                    KeyRole::Helper { of: *of },
                    "{builder}({name:?}) = {key:?}"
                );
            }
        }
    }

    /// Helper keys as they are found on servers (the list `distlock list` skipped before
    /// the library classified them).
    #[test]
    fn helper_keys_as_found_on_servers_are_helpers() {
        for key in [
            "redisson_lock_queue:{orders}",
            "redisson_lock_timeout:{orders}",
            "redisson__timeout__set:{exports}",
            "distlock:fencing-counter:{a}",
            "distlock:fencing-counter",
            "{rw}:6f1c0e1e-7b7a-4f55-9a59-1c0d9d7e0a11:1:rwlock_timeout:1",
            "{sem}:timeout",
            "{user:1}:sem:timeout",
            "redisson_unlock_latch:{orders}:3f2",
            "distlock_lock_queue:{orders}",
            "distlock_lock_waiters:{orders}",
            "distlock_fair_waiters:{orders}",
            "distlock_fair_liveness:{orders}",
            "distlock_permit_queue:{exports}",
            "distlock_permit_waiters:{exports}",
            "distlock_rwlock_queue:{docs}",
            "distlock_rwlock_waiters:{docs}",
            "distlock_rwlock_writers:{docs}",
            "distlock_acquire_latch:{orders}:7",
            "distlock_semaphore_grant:{exports}:7",
            "distlock_semaphore_release:{exports}:7",
            "distlock_latch_count_down:{batch}:7",
            "distlock_semaphore_grants:{exports}:6f1c0e1e-7b7a-4f55-9a59-1c0d9d7e0a11:3:0",
            "distlock_semaphore_releases:{exports}:6f1c0e1e-7b7a-4f55-9a59-1c0d9d7e0a11:3:0",
            "distlock_latch_count_downs:{batch}:6f1c0e1e-7b7a-4f55-9a59-1c0d9d7e0a11:3:0",
        ] {
            assert!(
                matches!(classify(key), KeyRole::Helper { .. }),
                "{key}: {:?}",
                classify(key)
            );
        }
    }

    #[test]
    fn names_and_job_locks_are_not_helpers() {
        for name in [
            "orders",
            "timeout",
            "orders:timeout",
            "a:b:c",
            "{user:1}:orders",
            "distlock:fencing-counterfeit",
            "redisson_lock_queue",
            "x:rwlock_timeout:",
            "job-lock:prod",
            "job-lock::x",
        ] {
            assert_eq!(classify(name), KeyRole::Named, "{name:?}");
        }
        assert_eq!(
            classify(&job_lock("prod", "report:daily")),
            KeyRole::Job {
                env: "prod".into(),
                name: "report:daily".into()
            }
        );
    }
}
