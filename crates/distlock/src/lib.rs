//! # distlock
//!
//! Distributed locks and coordination primitives for Rust services, on Redis and Valkey.
//!
//! - [`Lock`]: a reentrant lock with a lease, a watchdog that renews it while the holder
//!   lives, waiting by pub/sub wake-ups (not polling), ownership-checked release, a lost-lease
//!   signal and a [`FencingToken`] on every grant. Its data layout is Redisson's `RLock`, so
//!   Java services using Redisson and Rust services using distlock share one lock.
//! - [`FairLock`] (FIFO), [`RwLock`] (write-preferring), [`Semaphore`],
//!   [`LeasedSemaphore`] (permits with leases), [`CountDownLatch`]: the rest of Redisson's
//!   family, in Redisson's layouts.
//! - [`JobLock`]: scheduled work once per cluster, ShedLock's format, safe release.
//! - [`MultiLock`]: several locks (on one or several servers) taken all or nothing;
//!   [`RedLock`]: the Redlock algorithm over independent masters.
//! - [`Release`], [`Lease`] and [`Fenced`]: the verbs guards share (`release`; `lost`,
//!   `is_lost`, `valid_until`, `extend`; `fencing_token`, `owner`, `hold_count`), one
//!   vocabulary for every kind, and generic code over guards. The commonest, `release` and
//!   `lost`, are every guard's own methods too: no import needed for them.
//! - [`Client`]: one multiplexed command connection, one shared subscription connection and
//!   one watchdog task per client.
//!
//! ```no_run
//! use std::time::Duration;
//!
//! # async fn f() -> distlock::Result<()> {
//! let client = distlock::Client::connect("redis://127.0.0.1:6379/").await?;
//! let lock = client.lock("stock:sku-1");
//! let guard = lock.acquire().await?;              // waits at most 60 s by default
//! let token = guard.fencing_token();              // pass it to the protected resource
//! tokio::select! {
//!     _ = guard.lost() => eprintln!("lease lost: stop writing"),
//!     _ = tokio::time::sleep(Duration::from_millis(10)) => { /* the work */ }
//! }
//! guard.release().await?;
//! # let _ = token; Ok(()) }
//! ```
//!
//! # Features
//!
//! - `tls` (default): `rediss://` URLs, with rustls (see [`ClientBuilder::url`]).
//! - `blocking`: `distlock::blocking`, the whole API for synchronous code.
//! - `metrics`: metrics through the [`metrics`](https://docs.rs/metrics) facade, for whatever
//!   recorder the application installs:
//!
//! | metric | type | what |
//! |---|---|---|
//! | `distlock_acquire_duration_seconds` | histogram | acquire calls, start to outcome (label `outcome`: `granted`, `not_acquired`, `error`) |
//! | `distlock_acquire_wait_seconds` | histogram | time waited by acquires that found the lock taken |
//! | `distlock_acquisitions_total` | counter | grants |
//! | `distlock_acquire_waits_total` | counter | acquires that found the lock taken and waited |
//! | `distlock_acquire_timeouts_total` | counter | acquires whose wait ended without a grant |
//! | `distlock_acquire_errors_total` | counter | acquires that failed |
//! | `distlock_leases_lost_total` | counter | leases lost while held |
//! | `distlock_watchdog_renewals_total` | counter | leases renewed by the watchdog or a keep-alive |
//! | `distlock_watchdog_renewal_failures_total` | counter | renewals that failed |
//! | `distlock_held` | gauge | guards this process holds |
//! | `distlock_waiting` | gauge | acquire calls waiting now |
//!
//! Every metric is labelled by `kind` (`lock`, `fair_lock`, `read_lock`, `write_lock`,
//! `semaphore`, `leased_semaphore`, `job_lock`, `latch`: the names of [`kind`], which spans
//! and the `distlock` command use too); the acquire metrics also by `name`
//! when the client opts in ([`ClientBuilder::metrics_lock_names`]). Watchdog renewals of
//! plain and fair locks share one script and are counted as `lock` (write and read locks'
//! as `write_lock` and `read_lock`). A [`RedLock`]
//! records only its keep-alive renewals (`redlock`): its acquires run on each node's lock
//! directly, and its validity has a lost signal of its own.
//!
//! The [design notes](https://github.com/distlock/distlock/blob/main/doc/design.md) give the
//! data layout and the design choices.

#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub, missing_debug_implementations)]
#![cfg_attr(docsrs, feature(doc_cfg))]

// Every module is private; the API is the flat list of re-exports below.
mod acquire;
#[cfg(feature = "blocking")]
#[cfg_attr(docsrs, doc(cfg(feature = "blocking")))]
pub mod blocking;
mod client;
mod config;
mod conn;
mod duration;
mod error;
mod inspect;
mod job;
mod keys;
pub mod kind;
mod latch;
pub mod layout;
mod lease;
mod lock;
mod metrics;
#[cfg(test)]
mod model;
mod notice;
mod redlock;
mod registry;
mod scripts;
mod semaphore;
mod watchdog;

/// The `chrono` crate (0.4) that [`spawn_cron`] takes its time zone from, re-exported:
/// `distlock::chrono::Utc`, `Local` and `FixedOffset` need no `chrono` dependency of your own.
/// Named zones with their daylight-saving changes come from the `chrono-tz` crate (0.10,
/// built on the same `chrono`).
#[cfg(feature = "cron")]
#[cfg_attr(docsrs, doc(cfg(feature = "cron")))]
pub use chrono;
pub use client::{
    Client, ClientBuilder, KeyScan, PubSubMode, RedisConnection, DEFAULT_COMMAND_TIMEOUT,
    DEFAULT_CONNECT_TIMEOUT, DEFAULT_WAIT, DEFAULT_WATCHDOG_LEASE,
};
pub use config::{ClusterServers, Config, SentinelServers, SingleServer};
pub use conn::{redact_url, ScriptCalls};
pub use duration::parse_duration;
pub use error::{Error, ErrorKind, Fix, NodeFailure, NotHeldReason, Result};
pub use inspect::{InspectedKind, Inspection};
#[allow(deprecated)]
pub use job::assert_locked;
#[cfg(feature = "cron")]
pub use job::spawn_cron;
pub use job::{
    holds_job_lock, spawn_every, spawn_every_with, JobGuard, JobHolder, JobLease, JobLock,
    JOB_POLL_INTERVAL,
};
pub use keys::{MAX_NAME_LEN, MAX_PERMITS};
pub use latch::CountDownLatch;
pub use lease::{Fenced, Lease, Release};
pub use lock::{FairLock, FairLockGuard, HoldGuard, LockHandle, DEFAULT_FAIR_LIVENESS};
pub use lock::{FencingToken, Handoff, HolderInfo, Lock, LockGuard, LockMode, LockStatus, Owner};
pub use lock::{MultiLock, MultiLockGuard};
pub use lock::{RwLock, RwLockReadGuard, RwLockWriteGuard, DEFAULT_WRITER_LIVENESS};
pub use redlock::{RedLock, RedLockBuilder, RedLockGuard, RedLockNodes};
pub use semaphore::{LeasedPermit, LeasedSemaphore, Semaphore, SemaphorePermit};

/// Histogram buckets, in seconds, for distlock's latency histograms.
///
/// They serve `distlock_acquire_duration_seconds` and `distlock_acquire_wait_seconds` (feature
/// `metrics`) and span 0.5 ms to 5 s: from an acquire's uncontended grant on a local server
/// (below 1 ms) to waits behind a holder.
///
/// A recorder decides how histograms are exported: `metrics-exporter-prometheus` renders one
/// without buckets as a Prometheus *summary*, which `histogram_quantile` cannot read (the
/// README's queries then return nothing). Give it these buckets:
///
/// ```no_run
/// # fn f() -> Result<(), Box<dyn std::error::Error>> {
/// use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};
/// PrometheusBuilder::new()
///     .set_buckets_for_metric(
///         Matcher::Prefix("distlock_acquire".into()),
///         distlock::ACQUIRE_BUCKETS,
///     )?
///     .install()?;
/// # Ok(()) }
/// ```
pub const ACQUIRE_BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
];

/// The Lua scripts distlock runs, as `(file name, source)`, for tools and interop tests.
///
/// Tools may inspect them or load them into another client. Each source is the text as run,
/// with the shared `prelude.lua` joined in front where the script uses it.
pub const SCRIPT_SOURCES: &[(&str, &str)] = scripts::RUNNABLE;

/// Returns the SHA-1 of every variant a client may run of the script `file`.
///
/// It serves tests that look in a server's script cache. `file` is a name of
/// [`SCRIPT_SOURCES`], whose variants publish wake-ups by `PUBLISH`, `SPUBLISH` or both; `None`
/// for another name. Not part of the API.
#[doc(hidden)]
pub fn __script_hashes(file: &str) -> Option<Vec<String>> {
    scripts::variant_hashes(file).map(|h| h.to_vec())
}

/// Entry points for distlock's criterion benches.
///
/// The client-side pieces of the hot path, callable without a server. Not part of the API; may
/// change at any time.
#[doc(hidden)]
pub mod __bench {
    use crate::lock::raw::{self as lock, Mode};

    /// The names of a plain lock on `key` (no key prefix).
    fn names(key: &str) -> lock::Names {
        lock::Names::new(&lock::Plain::default(), "", key.to_string())
    }

    /// Builds the `EVALSHA` of `lock_acquire.lua` a plain acquire sends.
    ///
    /// It is a fresh owner's single attempt, built through the raw layer as the engine builds
    /// it.
    pub fn acquire_invocation(key: &str, owner: &str) -> redis::Cmd {
        use lock::RawLock;
        let owner = crate::Owner::parse(owner).expect("owner of the form <client>:<n>");
        let call = lock::AcquireCall {
            owner: &owner,
            mode: Mode::New,
            lease_ms: 30_000,
            request_id: "",
            wait_ms: 0,
            latch_ms: 3_000,
            floor: "0",
            holder: "app=bench;host=localhost;pid=1",
            client_id: "bench",
            handoff: true,
            fast: false,
            clock: None,
        };
        lock::Plain::default()
            .acquire(&names(key), &call)
            .evalsha(crate::scripts::Publish::Classic)
    }

    /// Builds the `EVALSHA` of `lock_release.lua` a plain release sends.
    ///
    /// It is built through the raw layer, as the engine builds it.
    pub fn release_invocation(key: &str, owner: &str, latch: &str) -> redis::Cmd {
        use lock::RawLock;
        let owner = crate::Owner::parse(owner).expect("owner of the form <client>:<n>");
        let call = lock::ReleaseCall {
            owner: &owner,
            lease_ms: 30_000,
            latch,
            latch_ms: 3_000,
            floor: "0",
            fast: false,
        };
        lock::Plain::default()
            .release(&names(key), &call)
            .evalsha(crate::scripts::Publish::Classic)
    }

    /// Parse an acquire reply; true when it is a grant.
    pub fn parse_acquire_reply(reply: &redis::Value) -> bool {
        let Ok(v) = redis::from_redis_value::<Vec<String>>(reply.clone()) else {
            return false;
        };
        matches!(lock::parse_attempt(&v), Ok(lock::Attempt::Granted { .. }))
    }

    /// The wake channel of a lock key (`redisson_lock__channel:{key}`).
    pub fn lock_channel(key: &str) -> String {
        crate::keys::lock_channel(key)
    }

    /// Hash every script source the way the registry does on first use (SHA-1 per script).
    pub fn hash_all_scripts() -> usize {
        crate::scripts::RUNNABLE
            .iter()
            .map(|(_, src)| redis::Script::new(src).get_hash().len())
            .sum()
    }
}

/// The crate's README (its crates.io and docs.rs front page), compiled with the doctests so
/// that its example compiles as pasted.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

/// The project's README: its Rust blocks compiled with the doctests (`no_run`: they need a
/// server).
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ProjectReadmeDoctests;

#[cfg(test)]
mod send_sync {
    //! Compile-time checks: every public future and guard is `Send`.
    use super::*;

    fn is_send<T: Send>(_: &T) {}
    fn is_send_sync<T: Send + Sync>() {}

    #[allow(dead_code, unused_must_use)]
    fn futures_are_send(lock: Lock, guard: LockGuard, owner: Owner) {
        is_send(&lock.acquire());
        is_send(&lock.try_acquire());
        is_send(&lock.try_acquire_for(std::time::Duration::ZERO));
        is_send(&lock.acquire_as(&owner));
        is_send(&lock.adopt(owner.clone()));
        is_send(&lock.is_locked());
        is_send(&lock.force_unlock());
        is_send(&guard.reenter());
        is_send(&guard.extend(std::time::Duration::from_secs(1)));
        is_send(&guard.is_held());
        is_send(&guard.remaining());
        is_send(&guard.lost());
        is_send(&guard.release());
        is_send(&Client::connect("redis://x"));
    }

    #[test]
    fn public_types_are_send_and_sync() {
        is_send_sync::<Client>();
        is_send_sync::<Lock>();
        is_send_sync::<LockGuard>();
        is_send_sync::<Owner>();
        is_send_sync::<Error>();
    }
}
