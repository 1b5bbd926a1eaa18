//! The data behind the charts: distlock's own distributions, kept in `bench-data.json` beside
//! the charts so that `--from` can draw them again without running the benchmark, and the
//! JSON lines of other runs given with `--compare`.
//!
//! `bench-data.json` is one JSON object: `format` (`"distlock-bench-data/1"`) and
//! `workloads`, one object per workload that ran, with `line` (its JSON line, as `--json`
//! prints it) and, where recorded, `latency_ns` (the samples `p50_us`/`p99_us` come from),
//! `wait_ns` (`contended`: the acquire latency of every acquisition) and `per_client`
//! (`contended`: acquisitions per client). A distribution is a list of `[value, count]`
//! pairs, value in ns: the HdrHistogram's buckets (3 significant figures), so percentiles
//! read from it again are the ones the line reports.

use std::fmt;
use std::path::{Path, PathBuf};

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::report::{histogram, Line, IMPL};

/// The workloads the charts draw: the four standard ones.
pub const CHARTED: &[&str] = &["uncontended", "distinct", "contended", "handoff"];

/// The `format` of `bench-data.json`.
pub const FORMAT: &str = "distlock-bench-data/1";

/// A figure of a JSON line: a number at the top level or in `extra`.
pub fn figure(line: &Value, key: &str) -> Option<f64> {
    line.get(key)
        .and_then(Value::as_f64)
        .or_else(|| line.get("extra")?.get(key)?.as_f64())
        .filter(|x| x.is_finite())
}

/// One of distlock's workloads as the charts see it: its line and its distributions.
#[derive(Debug, Clone)]
pub struct Own {
    /// The JSON line.
    pub line: Value,
    /// The samples of `p50_us`/`p99_us` (ns): acquire latency in `uncontended` and
    /// `distinct`, hand-off latency in `contended` and `handoff`.
    pub latency: Option<Histogram<u64>>,
    /// `contended`: acquire latency (call → return) of every acquisition (ns).
    pub wait: Option<Histogram<u64>>,
    /// `contended`: acquisitions per client.
    pub per_client: Vec<u64>,
}

impl Own {
    /// From a line of this run.
    pub fn from_line(l: &Line) -> Own {
        Own {
            line: serde_json::to_value(l).expect("a bench line always serializes"),
            latency: l.recorded.latency.clone(),
            wait: l.recorded.wait.clone(),
            per_client: l.recorded.per_client.clone(),
        }
    }

    /// The workload's name.
    pub fn workload(&self) -> &str {
        self.line["workload"].as_str().unwrap_or("")
    }

    /// A figure of the line (top level or `extra`).
    pub fn figure(&self, key: &str) -> Option<f64> {
        figure(&self.line, key)
    }
}

#[derive(Serialize, Deserialize)]
struct DataFile {
    format: String,
    workloads: Vec<DataWorkload>,
}

#[derive(Serialize, Deserialize)]
struct DataWorkload {
    line: Value,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    latency_ns: Vec<[u64; 2]>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    wait_ns: Vec<[u64; 2]>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    per_client: Vec<u64>,
}

/// A histogram's buckets as `[value, count]` pairs (value: the bucket's highest value).
fn buckets(h: &Option<Histogram<u64>>) -> Vec<[u64; 2]> {
    h.iter()
        .flat_map(|h| h.iter_recorded())
        .map(|v| [v.value_iterated_to(), v.count_at_value()])
        .collect()
}

/// The histogram of `[value, count]` pairs; `None` when empty.
fn from_buckets(b: &[[u64; 2]]) -> Option<Histogram<u64>> {
    let mut h = histogram(&[]);
    for &[v, n] in b {
        if h.record_n(v, n).is_err() {
            h.saturating_record_n(v, n);
        }
    }
    (!h.is_empty()).then_some(h)
}

/// `bench-data.json` of the workloads that ran.
pub fn to_json(own: &[Own]) -> String {
    let file = DataFile {
        format: FORMAT.to_string(),
        workloads: own
            .iter()
            .map(|o| DataWorkload {
                line: o.line.clone(),
                latency_ns: buckets(&o.latency),
                wait_ns: buckets(&o.wait),
                per_client: o.per_client.clone(),
            })
            .collect(),
    };
    serde_json::to_string(&file).expect("bench data always serializes") + "\n"
}

/// A file given to `--compare` or `--from` that cannot be drawn. Nothing is written then.
#[derive(Debug)]
pub enum InputError {
    /// The file cannot be read (missing, a directory, no permission).
    Read {
        /// `--compare` or `--from`.
        flag: &'static str,
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A line of a `--compare` file is not a JSON object with `impl` and `workload`.
    NotJsonLines {
        /// The file.
        path: PathBuf,
        /// Line number (from 1).
        line: usize,
        /// What is wrong with it.
        reason: String,
    },
    /// A `--compare` file has no line of a charted workload with a figure to draw.
    NoUsableLines {
        /// The file.
        path: PathBuf,
    },
    /// A `--from` file is not the `bench-data.json` of `--plot`.
    NotBenchData {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
}

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InputError::Read { flag, path, .. } => {
                // The cause follows through `source()` (`{:#}` prints the chain).
                write!(f, "{flag} {}: cannot read it", path.display())
            }
            InputError::NotJsonLines { path, line, reason } => write!(
                f,
                "--compare {}: line {line} is not a benchmark line ({reason}); expected one JSON \
                 object per line with \"impl\" and \"workload\", as `distlock-bench bench --json` \
                 prints them",
                path.display()
            ),
            InputError::NoUsableLines { path } => write!(
                f,
                "--compare {}: no line to draw: none of workload {} with ops_per_s or \
                 latency percentiles",
                path.display(),
                CHARTED.join(", ")
            ),
            InputError::NotBenchData { path, reason } => write!(
                f,
                "--from {}: not the bench-data.json that `distlock-bench bench --plot` writes \
                 ({reason})",
                path.display()
            ),
        }
    }
}

impl std::error::Error for InputError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            InputError::Read { source, .. } => Some(source),
            _ => None,
        }
    }
}

fn read(flag: &'static str, path: &Path) -> Result<String, InputError> {
    std::fs::read_to_string(path).map_err(|source| InputError::Read {
        flag,
        path: path.to_path_buf(),
        source,
    })
}

/// Read `bench-data.json` (`--from`).
pub fn load_data(path: &Path) -> Result<Vec<Own>, InputError> {
    let text = read("--from", path)?;
    let bad = |reason: String| InputError::NotBenchData {
        path: path.to_path_buf(),
        reason,
    };
    let file: DataFile = serde_json::from_str(&text).map_err(|e| bad(e.to_string()))?;
    if file.format != FORMAT {
        return Err(bad(format!(
            "format {:?}, expected {FORMAT:?}",
            file.format
        )));
    }
    let own: Vec<Own> = file
        .workloads
        .into_iter()
        .map(|w| Own {
            latency: from_buckets(&w.latency_ns),
            wait: from_buckets(&w.wait_ns),
            per_client: w.per_client,
            line: w.line,
        })
        .collect();
    if let Some(o) = own.iter().find(|o| !o.line["workload"].is_string()) {
        return Err(bad(format!("a line without a workload: {}", o.line)));
    }
    Ok(own)
}

/// The figures of a compared line the charts draw.
pub const FIGURES: &[&str] = &[
    "ops_per_s",
    "p50_us",
    "p90_us",
    "p99_us",
    "max_us",
    "wait_p50_us",
    "wait_p99_us",
    "wait_max_us",
];

/// Another implementation (or another run of distlock) on one workload, from `--compare`
/// files: each figure is the median over its lines (one per round).
#[derive(Debug, Clone)]
pub struct Peer {
    /// `impl` of the lines; lines of distlock itself are labelled `rust/distlock (FILE)`.
    pub label: String,
    /// The workload.
    pub workload: String,
    /// `clients` of the first line.
    pub clients: Option<u64>,
    /// [`FIGURES`] present in the lines, as medians.
    pub figures: Vec<(&'static str, f64)>,
}

impl Peer {
    /// A figure (median), if the lines have it.
    pub fn figure(&self, key: &str) -> Option<f64> {
        self.figures
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| *v)
    }
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    Some(if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    })
}

/// Read the `--compare` files: every line must be a JSON object with `impl` and `workload`
/// (blank lines are skipped); lines of other workloads (the limits' `redis-benchmark` runs,
/// distlock's `watchdog`, …) are left out; each file must have at least one line to draw.
/// Lines of one `impl` and workload are merged (medians, as over rounds).
pub fn load_compare(paths: &[PathBuf]) -> Result<Vec<Peer>, InputError> {
    let mut groups: Vec<(String, String, Vec<Value>)> = Vec::new();
    for path in paths {
        let text = read("--compare", path)?;
        let file_name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| path.display().to_string());
        let mut usable = 0;
        for (i, raw) in text.lines().enumerate() {
            if raw.trim().is_empty() {
                continue;
            }
            let bad = |reason: String| InputError::NotJsonLines {
                path: path.clone(),
                line: i + 1,
                reason,
            };
            let v: Value = serde_json::from_str(raw).map_err(|e| bad(e.to_string()))?;
            if !v.is_object() {
                return Err(bad("not a JSON object".into()));
            }
            let Some(imp) = v["impl"].as_str() else {
                return Err(bad("no \"impl\" string".into()));
            };
            let Some(workload) = v["workload"].as_str() else {
                return Err(bad("no \"workload\" string".into()));
            };
            if !CHARTED.contains(&workload) || FIGURES.iter().all(|k| figure(&v, k).is_none()) {
                continue;
            }
            usable += 1;
            let label = if imp == IMPL {
                format!("{IMPL} ({file_name})")
            } else {
                imp.to_string()
            };
            match groups
                .iter_mut()
                .find(|(l, w, _)| *l == label && w == workload)
            {
                Some(g) => g.2.push(v),
                None => groups.push((label, workload.to_string(), vec![v])),
            }
        }
        if usable == 0 {
            return Err(InputError::NoUsableLines { path: path.clone() });
        }
    }
    Ok(groups
        .into_iter()
        .map(|(label, workload, lines)| Peer {
            clients: lines[0]["clients"].as_u64(),
            figures: FIGURES
                .iter()
                .filter_map(|k| {
                    median(lines.iter().filter_map(|l| figure(l, k)).collect()).map(|m| (*k, m))
                })
                .collect(),
            label,
            workload,
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_round_trip_keeps_the_percentiles() {
        let samples: Vec<u64> = (1..=5000).map(|i| i * 977 % 300_000 + 20_000).collect();
        let h = histogram(&samples);
        let back = from_buckets(&buckets(&Some(h.clone()))).unwrap();
        assert_eq!(back.len(), h.len());
        for q in [0.5, 0.9, 0.99, 1.0] {
            assert_eq!(back.value_at_quantile(q), h.value_at_quantile(q), "q {q}");
        }
        assert_eq!(from_buckets(&[]).map(|h| h.len()), None);
    }

    #[test]
    fn compare_lines_merge_by_impl_and_skip_other_workloads() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("round-1.jsonl");
        let b = dir.path().join("round-2.jsonl");
        std::fs::write(
            &a,
            "{\"impl\":\"rust/rslock\",\"workload\":\"uncontended\",\"clients\":1,\"ops_per_s\":100.0,\"p50_us\":10.0,\"extra\":{\"p90_us\":12.0}}\n\
             \n\
             {\"impl\":\"limit/redis-benchmark\",\"workload\":\"SET c=1\",\"ops_per_s\":5.0}\n\
             {\"impl\":\"rust/distlock\",\"workload\":\"handoff\",\"p50_us\":190.0}\n",
        )
        .unwrap();
        std::fs::write(
            &b,
            "{\"impl\":\"rust/rslock\",\"workload\":\"uncontended\",\"clients\":1,\"ops_per_s\":300.0,\"p50_us\":30.0}\n",
        )
        .unwrap();
        let peers = load_compare(&[a.clone(), b]).unwrap();
        assert_eq!(peers.len(), 2);
        assert_eq!(peers[0].label, "rust/rslock");
        assert_eq!(peers[0].figure("ops_per_s"), Some(200.0));
        assert_eq!(peers[0].figure("p90_us"), Some(12.0));
        assert_eq!(peers[0].figure("max_us"), None);
        assert_eq!(peers[1].label, "rust/distlock (round-1.jsonl)");

        let bad = dir.path().join("bad.jsonl");
        std::fs::write(
            &bad,
            "{\"impl\":\"x\",\"workload\":\"handoff\"}\nnot json\n",
        )
        .unwrap();
        let e = load_compare(&[a.clone(), bad.clone()]).unwrap_err();
        assert!(
            matches!(&e, InputError::NotJsonLines { line: 2, path, .. } if *path == bad),
            "{e}"
        );
        std::fs::write(&bad, "{\"workload\":\"handoff\",\"p50_us\":1}\n").unwrap();
        let e = load_compare(std::slice::from_ref(&bad)).unwrap_err();
        assert!(e.to_string().contains("no \"impl\""), "{e}");
        std::fs::write(
            &bad,
            "{\"impl\":\"x\",\"workload\":\"watchdog\",\"ops\":1}\n",
        )
        .unwrap();
        let e = load_compare(std::slice::from_ref(&bad)).unwrap_err();
        assert!(matches!(e, InputError::NoUsableLines { .. }), "{e}");
        let e = load_compare(&[dir.path().join("missing.jsonl")]).unwrap_err();
        assert!(matches!(e, InputError::Read { .. }), "{e}");
    }
}
