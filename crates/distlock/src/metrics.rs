//! Metrics through the [`metrics`](https://docs.rs/metrics) facade (feature `metrics`):
//! whatever recorder the application installs (e.g. `metrics-exporter-prometheus`) receives
//! them; without the feature every function here compiles to nothing.
//!
//! Every metric is labelled by `kind` — `lock`, `fair_lock`, `read_lock`, `write_lock`,
//! `semaphore`, `leased_semaphore`, `job_lock`, `latch` — and, for the acquire metrics only,
//! by `name` (the lock's name) when the client opted in
//! ([`ClientBuilder::metrics_lock_names`](crate::ClientBuilder::metrics_lock_names)):
//! names are unbounded, and an unbounded label set breaks Prometheus.
//!
//! | metric | type | labels | what |
//! |---|---|---|---|
//! | `distlock_acquire_duration_seconds` | histogram | kind, outcome, (name) | an acquire call, from its start to its outcome: `granted`, `not_acquired`, `error` |
//! | `distlock_acquire_wait_seconds` | histogram | kind, (name) | time an acquire spent waiting after finding the lock taken (contended acquires only) |
//! | `distlock_acquisitions_total` | counter | kind, (name) | grants |
//! | `distlock_acquire_waits_total` | counter | kind, (name) | acquires that found the lock taken and waited |
//! | `distlock_acquire_timeouts_total` | counter | kind, (name) | acquires whose wait ended without a grant |
//! | `distlock_acquire_errors_total` | counter | kind, (name) | acquires that failed with an error |
//! | `distlock_leases_lost_total` | counter | kind | leases lost while held (expired, taken over, found gone) |
//! | `distlock_watchdog_renewals_total` | counter | kind | leases renewed by the watchdog: `lock` for the hash renewals of plain and fair locks, `write_lock`, `read_lock`, and a keep-alive's own kind (`leased_semaphore`, `job_lock`, `redlock`) |
//! | `distlock_watchdog_renewal_failures_total` | counter | kind | renewals that failed (server unreachable or unconfirmed) |
//! | `distlock_held` | gauge | kind | guards this process holds now |
//! | `distlock_waiting` | gauge | kind | acquire calls waiting now |

use std::time::Duration;

/// The outcome label of an acquire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    Granted,
    NotAcquired,
    Error,
}

impl Outcome {
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    fn label(self) -> &'static str {
        match self {
            Outcome::Granted => "granted",
            Outcome::NotAcquired => "not_acquired",
            Outcome::Error => "error",
        }
    }
}

/// One acquire ended: `took` from start to outcome, `waited` the time spent waiting when it
/// found the lock taken and waited (`None`: it did not wait).
pub(crate) fn acquire_done(
    kind: &'static str,
    name: Option<String>,
    outcome: Outcome,
    took: Duration,
    waited: Option<Duration>,
) {
    #[cfg(feature = "metrics")]
    imp::acquire_done(kind, name, outcome, took, waited);
    #[cfg(not(feature = "metrics"))]
    let _ = (kind, name, outcome.label(), took, waited);
}

/// A lease was lost while held.
pub(crate) fn lease_lost(kind: &'static str) {
    #[cfg(feature = "metrics")]
    metrics::counter!("distlock_leases_lost_total", "kind" => kind).increment(1);
    #[cfg(not(feature = "metrics"))]
    let _ = kind;
}

/// The watchdog renewed `renewed` leases of `kind` and failed to renew `failed`.
pub(crate) fn renewals(kind: &'static str, renewed: u64, failed: u64) {
    #[cfg(feature = "metrics")]
    {
        if renewed > 0 {
            metrics::counter!("distlock_watchdog_renewals_total", "kind" => kind)
                .increment(renewed);
        }
        if failed > 0 {
            metrics::counter!("distlock_watchdog_renewal_failures_total", "kind" => kind)
                .increment(failed);
        }
    }
    #[cfg(not(feature = "metrics"))]
    let _ = (kind, renewed, failed);
}

/// A guard of `kind` came (`+1`) or went (`-1`).
pub(crate) fn held(kind: &'static str, delta: i8) {
    #[cfg(feature = "metrics")]
    metrics::gauge!("distlock_held", "kind" => kind).increment(f64::from(delta));
    #[cfg(not(feature = "metrics"))]
    let _ = (kind, delta);
}

/// Counts an acquire as waiting (`distlock_waiting`) until dropped.
#[derive(Debug)]
pub(crate) struct Waiting(#[cfg_attr(not(feature = "metrics"), allow(dead_code))] &'static str);

impl Waiting {
    pub(crate) fn start(kind: &'static str) -> Waiting {
        #[cfg(feature = "metrics")]
        metrics::gauge!("distlock_waiting", "kind" => kind).increment(1.0);
        Waiting(kind)
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        #[cfg(feature = "metrics")]
        metrics::gauge!("distlock_waiting", "kind" => self.0).decrement(1.0);
    }
}

#[cfg(feature = "metrics")]
mod imp {
    use std::sync::Once;
    use std::time::Duration;

    use metrics::{Label, Unit};

    use super::Outcome;

    /// Describe every metric once per process (for the recorder installed by then).
    fn describe() {
        static ONCE: Once = Once::new();
        ONCE.call_once(|| {
            metrics::describe_histogram!(
                "distlock_acquire_duration_seconds",
                Unit::Seconds,
                "Acquire calls, from start to outcome (granted, not_acquired, error)"
            );
            metrics::describe_histogram!(
                "distlock_acquire_wait_seconds",
                Unit::Seconds,
                "Time acquires spent waiting after finding the lock taken"
            );
            metrics::describe_counter!("distlock_acquisitions_total", "Grants");
            metrics::describe_counter!(
                "distlock_acquire_waits_total",
                "Acquires that found the lock taken and waited"
            );
            metrics::describe_counter!(
                "distlock_acquire_timeouts_total",
                "Acquires whose wait ended without a grant"
            );
            metrics::describe_counter!(
                "distlock_acquire_errors_total",
                "Acquires that failed with an error"
            );
            metrics::describe_counter!(
                "distlock_leases_lost_total",
                "Leases lost while held (expired, taken over, found gone)"
            );
            metrics::describe_counter!(
                "distlock_watchdog_renewals_total",
                "Leases renewed by the watchdog"
            );
            metrics::describe_counter!(
                "distlock_watchdog_renewal_failures_total",
                "Lease renewals that failed"
            );
            metrics::describe_gauge!("distlock_held", "Guards this process holds now");
            metrics::describe_gauge!("distlock_waiting", "Acquire calls waiting now");
        });
    }

    pub(super) fn acquire_done(
        kind: &'static str,
        name: Option<String>,
        outcome: Outcome,
        took: Duration,
        waited: Option<Duration>,
    ) {
        describe();
        let mut labels = vec![Label::new("kind", kind)];
        if let Some(name) = name {
            labels.push(Label::new("name", name));
        }
        let mut with_outcome = labels.clone();
        with_outcome.push(Label::new("outcome", outcome.label()));
        metrics::histogram!("distlock_acquire_duration_seconds", with_outcome)
            .record(took.as_secs_f64());
        if let Some(waited) = waited {
            metrics::histogram!("distlock_acquire_wait_seconds", labels.clone())
                .record(waited.as_secs_f64());
            metrics::counter!("distlock_acquire_waits_total", labels.clone()).increment(1);
        }
        let counter = match outcome {
            Outcome::Granted => "distlock_acquisitions_total",
            Outcome::NotAcquired if waited.is_some() => "distlock_acquire_timeouts_total",
            Outcome::NotAcquired => return,
            Outcome::Error => "distlock_acquire_errors_total",
        };
        metrics::counter!(counter, labels).increment(1);
    }
}
