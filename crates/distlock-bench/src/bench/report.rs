//! The JSON line every workload emits (the other libraries' drivers' format, so the lines
//! compare side by side), the latency percentiles (an HdrHistogram of the samples) and
//! the hand-off statistics.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::Value;

/// The `impl` of every line distlock emits.
pub const IMPL: &str = "rust/distlock";

/// One workload's result: one JSON line, or one row of the table.
#[derive(serde::Serialize, Debug, Clone)]
pub struct Line {
    /// Always [`IMPL`].
    #[serde(rename = "impl")]
    pub impl_name: &'static str,
    /// Workload name (`uncontended`, `distinct`, …).
    pub workload: &'static str,
    /// Concurrent clients (tasks) of the workload.
    pub clients: u64,
    /// Measured operations (pairs, acquisitions, repetitions, locks held).
    pub ops: u64,
    /// Wall time of the measured part, in seconds (3 decimals).
    pub seconds: f64,
    /// `ops / seconds` (1 decimal).
    pub ops_per_s: f64,
    /// Median of the workload's latency samples in µs; `null` without samples.
    pub p50_us: Option<f64>,
    /// 99th percentile of the samples in µs; `null` without samples.
    pub p99_us: Option<f64>,
    /// Acquisitions − final counter (`contended` only; `null` elsewhere).
    pub lost_updates: Option<i64>,
    /// Library version, wait strategy and non-default settings.
    pub notes: String,
    /// Further figures: `samples`, `p90_us`, `max_us`, then the workload's own.
    pub extra: Extra,
    /// The distributions behind the figures, for the charts (not part of the line).
    #[serde(skip)]
    pub recorded: Recorded,
}

/// What a workload recorded beyond its line: the whole distributions the charts draw.
#[derive(Debug, Clone, Default)]
pub struct Recorded {
    /// The samples `p50_us`/`p99_us` come from, in ns: acquire latency in `uncontended` and
    /// `distinct`, hand-off latency in `contended`, `handoff` and `waiters`; `None` without
    /// samples.
    pub latency: Option<Histogram<u64>>,
    /// `contended`: the acquire latency (call → return) of every acquisition, in ns.
    pub wait: Option<Histogram<u64>>,
    /// `contended`: acquisitions of each client, by client index.
    pub per_client: Vec<u64>,
}

/// The `extra` object: keys in insertion order (the peers' harness order).
#[derive(Debug, Clone, Default)]
pub struct Extra(pub Vec<(&'static str, Value)>);

impl Extra {
    /// The value of `key`, if present.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.0.iter().find(|(k, _)| *k == key).map(|(_, v)| v)
    }

    /// `get(key)` as a float (numbers only).
    pub fn f64(&self, key: &str) -> Option<f64> {
        self.get(key).and_then(Value::as_f64)
    }
}

impl Serialize for Extra {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

/// Round to `digits` decimals (the harness prints `{:.1}` / `{:.3}`).
fn round(x: f64, digits: i32) -> f64 {
    let f = 10f64.powi(digits);
    (x * f).round() / f
}

/// Significant figures of the latency histograms: a figure read from one is within 0.1 %
/// of the sample it stands for.
const SIGFIG: u8 = 3;

/// An HdrHistogram (3 significant figures) of nanosecond samples.
pub fn histogram(samples_ns: &[u64]) -> Histogram<u64> {
    let mut h = Histogram::new(SIGFIG).expect("3 significant figures are supported");
    for &v in samples_ns {
        // It grows as needed; only a value beyond its largest range (about 146 years in ns)
        // fails, and that one is clamped.
        if h.record(v).is_err() {
            h.saturating_record(v);
        }
    }
    h
}

/// The `q` quantile (0 to 1) of a nanosecond histogram, in µs; `None` without samples.
/// Nearest rank, as `value_at_quantile` reads it (the largest value equivalent to the
/// sample at that rank).
pub fn pct(h: &Histogram<u64>, q: f64) -> Option<f64> {
    (!h.is_empty()).then(|| h.value_at_quantile(q) as f64 / 1000.0)
}

/// The largest sample of a nanosecond histogram, in µs (same precision); `None` without
/// samples.
pub fn max_us(h: &Histogram<u64>) -> Option<f64> {
    (!h.is_empty()).then(|| h.max() as f64 / 1000.0)
}

/// A µs figure as a JSON number with one decimal, or `null`.
pub fn num(v: Option<f64>) -> Value {
    match v {
        Some(x) if x.is_finite() => Value::from(round(x, 1)),
        _ => Value::Null,
    }
}

/// A float as a JSON number with one decimal.
pub fn num1(x: f64) -> Value {
    num(Some(x))
}

/// Nanoseconds of a duration (saturating).
pub fn ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl Line {
    /// A line as the peers' `emit` builds it: derives p50/p99 from the latency samples
    /// `lat_ns` (nanoseconds) and puts `samples`, `p90_us`, `max_us` first in `extra`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        workload: &'static str,
        clients: u64,
        ops: u64,
        seconds: f64,
        lat_ns: &[u64],
        lost_updates: Option<i64>,
        notes: String,
        extra: Vec<(&'static str, Value)>,
    ) -> Line {
        let h = histogram(lat_ns);
        let mut ex = vec![
            ("samples", Value::from(h.len())),
            ("p90_us", num(pct(&h, 0.90))),
            ("max_us", num(max_us(&h))),
        ];
        ex.extend(extra);
        Line {
            impl_name: IMPL,
            workload,
            clients,
            ops,
            seconds: round(seconds, 3),
            ops_per_s: if seconds > 0.0 {
                round(ops as f64 / seconds, 1)
            } else {
                0.0
            },
            p50_us: pct(&h, 0.50).map(|x| round(x, 1)),
            p99_us: pct(&h, 0.99).map(|x| round(x, 1)),
            lost_updates,
            notes,
            extra: Extra(ex),
            recorded: Recorded {
                latency: (!h.is_empty()).then_some(h),
                ..Recorded::default()
            },
        }
    }

    /// The line as one line of JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a bench line always serializes")
    }
}

/// One acquisition for the hand-off statistics: acquire returned, release returned, client.
pub type Event = (Instant, Instant, usize);

/// Hand-off statistics over acquisitions ordered by acquire time (the peers' contended
/// post-processing): a hand-off is a pair of consecutive acquisitions by different clients,
/// its latency next.acquired − previous.released (negative → 0, counted as a release race).
#[derive(Debug, Default)]
pub struct HandoffStats {
    /// Latencies of the hand-offs between different clients (ns).
    pub handoffs_ns: Vec<u64>,
    /// Latencies over all consecutive pairs (ns).
    pub all_ns: Vec<u64>,
    /// Pairs whose next acquire returned before the previous release call returned.
    pub release_races: u64,
    /// Pairs where the releasing client took the lock again.
    pub same_client: u64,
    /// Clients with at least one acquisition.
    pub clients_served: usize,
    /// The busiest client's share of all acquisitions, in %.
    pub max_share_pct: f64,
}

/// Compute [`HandoffStats`] over `events`.
pub fn handoff_stats(mut events: Vec<Event>) -> HandoffStats {
    events.sort_by_key(|e| e.0);
    let mut per_client: HashMap<usize, u64> = HashMap::new();
    for e in &events {
        *per_client.entry(e.2).or_default() += 1;
    }
    let max = per_client.values().copied().max().unwrap_or(0);
    let mut h = HandoffStats {
        all_ns: Vec::with_capacity(events.len()),
        clients_served: per_client.len(),
        max_share_pct: if events.is_empty() {
            0.0
        } else {
            100.0 * max as f64 / events.len() as f64
        },
        ..HandoffStats::default()
    };
    for w in events.windows(2) {
        let (prev, next) = (w[0], w[1]);
        let d = if next.0 < prev.1 {
            h.release_races += 1;
            0
        } else {
            ns(next.0 - prev.1)
        };
        h.all_ns.push(d);
        if next.2 == prev.2 {
            h.same_client += 1;
        } else {
            h.handoffs_ns.push(d);
        }
    }
    h
}

/// The contended workload's `extra` figures (after `samples`, `p90_us`, `max_us`).
pub fn contended_extra(h: &HandoffStats, fails: u64, last_err: &str) -> Vec<(&'static str, Value)> {
    let n = h.all_ns.len().max(1) as f64;
    let all = histogram(&h.all_ns);
    vec![
        ("failed_acquires", Value::from(fails)),
        ("same_client_pct", num1(100.0 * h.same_client as f64 / n)),
        ("clients_served", Value::from(h.clients_served as u64)),
        ("max_client_share_pct", num1(h.max_share_pct)),
        ("any_next_p50_us", num(pct(&all, 0.50))),
        ("any_next_p99_us", num(pct(&all, 0.99))),
        ("release_races", Value::from(h.release_races)),
        ("last_error", Value::from(last_err)),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_within_the_histogram_precision() {
        let v: Vec<u64> = (1..=100).map(|i| i * 1000).collect();
        let h = histogram(&v);
        // 50 000 ns and 99 000 ns fall in buckets 32 ns and 64 ns wide.
        assert_eq!(pct(&h, 0.50), Some(50.015));
        assert_eq!(pct(&h, 0.99), Some(99.007));
        assert_eq!(num(pct(&h, 0.50)), 50.0);
        assert_eq!(num(pct(&h, 0.99)), 99.0);
        assert_eq!(max_us(&h), Some(100.031));
        // Below 2048 ns every nanosecond has its own bucket.
        assert_eq!(pct(&histogram(&[1000]), 0.99), Some(1.0));
        // Nearest rank: p50 of 1..=4 µs is the 2nd sample, p99 the 4th.
        let h = histogram(&[4000, 1000, 3000, 2000]);
        assert_eq!(num(pct(&h, 0.50)), 2.0);
        assert_eq!(num(pct(&h, 0.99)), 4.0);
        let empty = histogram(&[]);
        assert_eq!(pct(&empty, 0.5), None);
        assert_eq!(max_us(&empty), None);
    }

    #[test]
    fn handoffs_skip_same_client_and_clamp_races() {
        let t = Instant::now();
        let ms = |n| t + Duration::from_millis(n);
        let h = handoff_stats(vec![
            (ms(10), ms(12), 1),
            (ms(0), ms(5), 0),
            (ms(6), ms(8), 0),
            (ms(11), ms(13), 2), // acquired before client 1's release returned
        ]);
        assert_eq!(h.handoffs_ns, vec![2_000_000, 0]);
        assert_eq!(h.all_ns, vec![1_000_000, 2_000_000, 0]);
        assert_eq!(h.same_client, 1);
        assert_eq!(h.release_races, 1);
        assert_eq!(h.clients_served, 3);
        assert_eq!(h.max_share_pct, 50.0);
    }

    #[test]
    fn line_shape() {
        let lat = vec![3000, 1000, 2000];
        let line = Line::new(
            "uncontended",
            1,
            3,
            0.5,
            &lat,
            None,
            "n".into(),
            vec![("failed_acquires", Value::from(0))],
        );
        let v: Value = serde_json::from_str(&line.to_json()).unwrap();
        assert_eq!(v["impl"], "rust/distlock");
        assert_eq!(v["ops_per_s"], 6.0);
        assert_eq!(v["p50_us"], 2.0);
        assert_eq!(v["lost_updates"], Value::Null);
        assert_eq!(v["extra"]["samples"], 3);
        assert_eq!(v["extra"]["max_us"], 3.0);
        let text = line.to_json();
        assert!(text.find("\"samples\"").unwrap() < text.find("\"failed_acquires\"").unwrap());
    }
}
