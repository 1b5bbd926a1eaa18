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
    match imp::kind_index(kind) {
        // A key built once: every guard records this twice.
        Some(i) => {
            static METADATA: metrics::Metadata<'static> =
                metrics::Metadata::new(module_path!(), metrics::Level::INFO, Some(module_path!()));
            metrics::with_recorder(|r| r.register_gauge(&imp::HELD[i], &METADATA))
                .increment(f64::from(delta));
        }
        None => metrics::gauge!("distlock_held", "kind" => kind).increment(f64::from(delta)),
    }
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
    use std::sync::{LazyLock, Once};
    use std::time::Duration;

    use metrics::{Key, Label, Level, Metadata, Unit};

    use super::Outcome;

    /// Where [`crate::kind::ALL`] lists `kind`: its keys' index in the tables below.
    pub(super) fn kind_index(kind: &str) -> Option<usize> {
        crate::kind::ALL.iter().position(|k| *k == kind)
    }

    const OUTCOMES: [Outcome; 3] = [Outcome::Granted, Outcome::NotAcquired, Outcome::Error];

    /// The `kind` label of every kind ([`kind_index`]), and of every kind with every outcome
    /// (at `3 × kind + outcome`), built once, so that the keys of the metrics every acquire
    /// and guard records are built once too (a key built per record allocated its labels and
    /// hashed them).
    static KIND: LazyLock<Vec<[Label; 1]>> = LazyLock::new(|| {
        crate::kind::ALL
            .iter()
            .map(|k| [Label::from_static_parts("kind", k)])
            .collect()
    });
    static KIND_OUTCOME: LazyLock<Vec<[Label; 2]>> = LazyLock::new(|| {
        crate::kind::ALL
            .iter()
            .flat_map(|k| {
                OUTCOMES.map(|o| {
                    [
                        Label::from_static_parts("kind", k),
                        Label::from_static_parts("outcome", o.label()),
                    ]
                })
            })
            .collect()
    });

    fn by_kind(name: &'static str) -> Vec<Key> {
        KIND.iter()
            .map(|l| Key::from_static_parts(name, l))
            .collect()
    }

    pub(super) static HELD: LazyLock<Vec<Key>> = LazyLock::new(|| by_kind("distlock_held"));
    static DURATION: LazyLock<Vec<Key>> = LazyLock::new(|| {
        KIND_OUTCOME
            .iter()
            .map(|l| Key::from_static_parts("distlock_acquire_duration_seconds", l))
            .collect()
    });
    static WAIT: LazyLock<Vec<Key>> = LazyLock::new(|| by_kind("distlock_acquire_wait_seconds"));
    static WAITS: LazyLock<Vec<Key>> = LazyLock::new(|| by_kind("distlock_acquire_waits_total"));
    static GRANTS: LazyLock<Vec<Key>> = LazyLock::new(|| by_kind("distlock_acquisitions_total"));
    static TIMEOUTS: LazyLock<Vec<Key>> =
        LazyLock::new(|| by_kind("distlock_acquire_timeouts_total"));
    static ERRORS: LazyLock<Vec<Key>> = LazyLock::new(|| by_kind("distlock_acquire_errors_total"));

    static METADATA: Metadata<'static> =
        Metadata::new(module_path!(), Level::INFO, Some(module_path!()));

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
        match (&name, kind_index(kind)) {
            (None, Some(i)) => acquire_done_by_index(i, outcome, took, waited),
            _ => acquire_done_labelled(kind, name, outcome, took, waited),
        }
    }

    /// [`acquire_done`] with labels built for this record (a name label, or a kind of no
    /// table).
    pub(super) fn acquire_done_labelled(
        kind: &'static str,
        name: Option<String>,
        outcome: Outcome,
        took: Duration,
        waited: Option<Duration>,
    ) {
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

    /// [`acquire_done`] of the kind at `i` ([`kind_index`]), without a name label: the same
    /// metrics, through keys built once.
    pub(super) fn acquire_done_by_index(
        i: usize,
        outcome: Outcome,
        took: Duration,
        waited: Option<Duration>,
    ) {
        let o = OUTCOMES
            .iter()
            .position(|x| *x == outcome)
            .expect("every outcome");
        metrics::with_recorder(|r| {
            r.register_histogram(&DURATION[3 * i + o], &METADATA)
                .record(took.as_secs_f64());
            if let Some(waited) = waited {
                r.register_histogram(&WAIT[i], &METADATA)
                    .record(waited.as_secs_f64());
                r.register_counter(&WAITS[i], &METADATA).increment(1);
            }
            let counter = match outcome {
                Outcome::Granted => &GRANTS,
                Outcome::NotAcquired if waited.is_some() => &TIMEOUTS,
                Outcome::NotAcquired => return,
                Outcome::Error => &ERRORS,
            };
            r.register_counter(&counter[i], &METADATA).increment(1);
        });
    }
}

/// The metrics recorded through keys built once are the ones the macros record.
#[cfg(all(test, feature = "metrics"))]
mod tests {
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use metrics::{
        Counter, CounterFn, Gauge, GaugeFn, Histogram, HistogramFn, Key, KeyName, Metadata,
        Recorder, SharedString, Unit,
    };

    use super::{imp, Outcome};

    /// A recorder that writes down every record: the metric, its labels, the value.
    #[derive(Clone, Default)]
    struct Log(Arc<Mutex<Vec<String>>>);

    struct Record(Log, String);

    impl Log {
        fn record(&self, key: &Key, op: &str) -> Arc<Record> {
            let labels: Vec<String> = key
                .labels()
                .map(|l| format!("{}={}", l.key(), l.value()))
                .collect();
            Arc::new(Record(
                self.clone(),
                format!("{} {labels:?} {op}", key.name()),
            ))
        }

        fn take(&self) -> Vec<String> {
            std::mem::take(&mut *self.0.lock().unwrap())
        }
    }

    impl Record {
        fn push(&self, what: String) {
            self.0 .0.lock().unwrap().push(format!("{} {what}", self.1));
        }
    }

    impl CounterFn for Record {
        fn increment(&self, value: u64) {
            self.push(format!("+{value}"));
        }
        fn absolute(&self, value: u64) {
            self.push(format!("={value}"));
        }
    }

    impl GaugeFn for Record {
        fn increment(&self, value: f64) {
            self.push(format!("+{value}"));
        }
        fn decrement(&self, value: f64) {
            self.push(format!("-{value}"));
        }
        fn set(&self, value: f64) {
            self.push(format!("={value}"));
        }
    }

    impl HistogramFn for Record {
        fn record(&self, value: f64) {
            self.push(format!("{value}"));
        }
    }

    impl Recorder for Log {
        fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
        fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
        fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
        fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
            Counter::from_arc(self.record(key, "counter"))
        }
        fn register_gauge(&self, key: &Key, _: &Metadata<'_>) -> Gauge {
            Gauge::from_arc(self.record(key, "gauge"))
        }
        fn register_histogram(&self, key: &Key, _: &Metadata<'_>) -> Histogram {
            Histogram::from_arc(self.record(key, "histogram"))
        }
    }

    #[test]
    fn keys_built_once_record_what_the_macros_record() {
        let log = Log::default();
        metrics::with_local_recorder(&log, || {
            for (i, kind) in crate::kind::ALL.iter().enumerate() {
                assert_eq!(imp::kind_index(kind), Some(i));
                for outcome in [Outcome::Granted, Outcome::NotAcquired, Outcome::Error] {
                    for waited in [None, Some(Duration::from_millis(250))] {
                        let took = Duration::from_millis(500);
                        imp::acquire_done_by_index(i, outcome, took, waited);
                        let once = log.take();
                        imp::acquire_done_labelled(kind, None, outcome, took, waited);
                        assert_eq!(once, log.take(), "{kind} {outcome:?} {waited:?}");
                        assert!(!once.is_empty());
                    }
                }
                for delta in [1, -1] {
                    super::held(kind, delta);
                    let once = log.take();
                    metrics::gauge!("distlock_held", "kind" => *kind).increment(f64::from(delta));
                    assert_eq!(once, log.take(), "{kind} {delta}");
                }
            }
        });
    }
}
