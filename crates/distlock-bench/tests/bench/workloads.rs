//! `distlock-bench bench`: every workload on a real server with tiny sizes (the `BENCH_*` knobs),
//! the JSON lines the bench-peers `summarize.py` reads, the table on the embedded server, and
//! the charts of `--plot` (SVG, PNG, `--compare`, `--from`).

use std::process::{Command, Output};

use distlock_test::testing::cmd;
use distlock_test::RedisServer;
use serde_json::Value;

/// Tiny sizes so that all workloads take a few seconds.
const SIZES: &[(&str, &str)] = &[
    ("BENCH_CLIENTS", "4"),
    ("BENCH_WARMUP", "10"),
    ("BENCH_UNCONTENDED_OPS", "50"),
    ("BENCH_DISTINCT_OPS", "100"),
    ("BENCH_KEYS", "40"),
    ("BENCH_CONTENDED_OPS", "100"),
    ("BENCH_MAX_SECONDS", "10"),
    ("BENCH_HANDOFF_REPS", "5"),
    ("BENCH_HOLD_MIN_MS", "10"),
    ("BENCH_HOLD_MAX_MS", "30"),
    ("BENCH_WAIT_SECONDS", "10"),
    ("BENCH_WATCHDOG_LOCKS", "50"),
    ("BENCH_WATCHDOG_SECONDS", "2.5"),
    ("BENCH_WATCHDOG_LEASE_MS", "1500"),
    ("BENCH_WAITERS", "50"),
    ("BENCH_MEMORY_LOCKS", "20"),
];

/// The binary with tiny sizes and no URL from the environment.
fn bench() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_distlock-bench"));
    c.env_remove("DISTLOCK_URL")
        .env("DISTLOCK_LOG", "error")
        .envs(SIZES.iter().copied())
        .arg("bench");
    c
}

fn output(mut c: Command) -> Output {
    c.output().expect("run distlock")
}

fn lines(out: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

fn f(v: &Value, key: &str) -> f64 {
    v[key]
        .as_f64()
        .unwrap_or_else(|| panic!("{key} is not a number in {v}"))
}

fn x(v: &Value, key: &str) -> f64 {
    v["extra"][key]
        .as_f64()
        .unwrap_or_else(|| panic!("extra.{key} is not a number in {v}"))
}

/// As bench-peers' `run` invokes it: `distlock-bench bench --url URL --json`, all workloads.
#[test]
fn bench_json_runs_every_workload_with_sane_figures() {
    let server = RedisServer::start();
    let mut c = bench();
    c.args(["--url", &server.url(), "--json"]);
    let out = output(c);
    assert_eq!(
        out.status.code(),
        Some(0),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines = lines(&out);
    let names: Vec<&str> = lines
        .iter()
        .map(|l| l["workload"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "uncontended",
            "distinct",
            "contended",
            "handoff",
            "watchdog",
            "waiters",
            "memory",
            "lost"
        ]
    );
    for l in &lines {
        assert_eq!(l["impl"], "rust/distlock", "{l}");
        assert!(f(l, "ops_per_s") > 0.0, "{l}");
        assert!(f(l, "seconds") > 0.0, "{l}");
        assert!(l["notes"].as_str().unwrap().contains("distlock"), "{l}");
        assert!(l["extra"].is_object(), "{l}");
        assert_eq!(l["extra"]["last_error"], "", "{l}");
        assert_eq!(x(l, "failed_acquires"), 0.0, "{l}");
        let lost = &l["lost_updates"];
        assert_eq!(lost.is_null(), l["workload"] != "contended", "{l}");
    }
    let by = |name: &str| lines.iter().find(|l| l["workload"] == name).unwrap();
    // The Redis-side cost of the standard workloads: at least the two scripts of a pair.
    for name in ["uncontended", "distinct", "contended", "handoff"] {
        let l = by(name);
        assert!(x(l, "server_us_per_pair") > 0.0, "{l}");
        assert!(x(l, "server_calls_per_pair") >= 1.9, "{l}");
        assert!(x(l, "server_reads_per_pair") > 0.0, "{l}");
    }
    // One request in flight at a time: each script call is a read of its own (and the INFO
    // calls around the measured part a few more). distinct's tasks share one multiplexed
    // connection, so its reads are at most its calls and the few INFO reads; how many of its
    // requests share a read depends on scheduling (on a loaded machine, few), so the figure is
    // bounded here, not required to be small. `lock_basic`'s pipelining test checks that
    // concurrent requests do share reads, on a runtime whose scheduling it controls.
    let u = by("uncontended");
    assert!(
        x(u, "server_reads_per_pair") >= x(u, "server_calls_per_pair"),
        "{u}"
    );
    let d = by("distinct");
    assert!(
        x(d, "server_reads_per_pair") <= x(d, "server_calls_per_pair") + 0.2,
        "more reads than requests: {d}"
    );

    let u = by("uncontended");
    assert_eq!(u["ops"], 50);
    assert_eq!(u["clients"], 1);
    assert!(
        f(u, "p50_us") > 0.0 && f(u, "p99_us") >= f(u, "p50_us"),
        "{u}"
    );
    assert_eq!(x(u, "samples"), 50.0);

    let d = by("distinct");
    assert_eq!(d["ops"], 100);
    assert_eq!(d["clients"], 4);

    let c = by("contended");
    assert_eq!(c["ops"], 100);
    assert_eq!(c["lost_updates"], 0, "{c}");
    assert!(x(c, "clients_served") >= 1.0);
    assert!(x(c, "wait_p99_us") >= x(c, "wait_p50_us"));
    let counter: i64 = cmd(&server, &["GET", "bench:c:counter"]);
    assert_eq!(
        counter, 100,
        "every acquisition incremented the counter once"
    );

    let h = by("handoff");
    assert_eq!(h["ops"], 5);
    assert_eq!(h["clients"], 2);
    // B is woken by A's release (or races it: 0), not by the 30 s lease's end.
    assert!(f(h, "p99_us") >= f(h, "p50_us"), "{h}");
    assert!(f(h, "p99_us") < 1_000_000.0, "hand-offs took a second: {h}");

    let w = by("watchdog");
    assert_eq!(w["ops"], 50);
    assert!(x(w, "renewal_calls") >= 1.0, "no renewal seen: {w}");
    assert!(x(w, "commands_per_period") > 0.0, "{w}");
    assert_eq!(x(w, "watchdog_locks"), 50.0, "{w}");
    // Held for longer than the lease: only renewals kept them.
    assert_eq!(x(w, "alive_after"), 50.0, "{w}");
    assert_eq!(x(w, "lost_leases"), 0.0, "{w}");
    assert_eq!(x(w, "failed_releases"), 0.0, "{w}");
    // CPU time over wall time, as the two figures next to it give it (each rounded to 0.1).
    let (cpu_ms, hold_s, pct) = (x(w, "cpu_ms"), x(w, "hold_s"), x(w, "cpu_pct_of_core"));
    let expected = cpu_ms / (hold_s * 1000.0) * 100.0;
    assert!(
        (pct - expected).abs() <= 0.05 * expected + 0.1,
        "cpu_pct_of_core {pct}, expected {expected:.2}: {w}"
    );

    let q = by("waiters");
    assert_eq!(x(q, "numsub"), 1.0, "one subscription for all waiters: {q}");
    assert_eq!(x(q, "status_subscribers"), 1.0, "{q}");
    assert_eq!(q["extra"]["all_waiting"], true, "{q}");
    assert_eq!(q["ops"], 50, "every waiter got the lock: {q}");
    assert_eq!(x(q, "samples"), 50.0, "{q}");

    let l = by("lost");
    assert_eq!(
        x(l, "not_fired"),
        0.0,
        "every holder's lost signal fired: {l}"
    );
    assert_eq!(x(l, "fired"), f(l, "ops"), "{l}");

    let m = by("memory");
    assert_eq!(x(m, "keys_left_per_idle_name"), 0.0, "{m}");
    assert_eq!(x(m, "lock_keys_left"), 0.0, "{m}");
    assert_eq!(x(m, "keys_per_held_lock"), 1.0, "{m}");
    // One fencing counter per cluster hash slot the names fall in, none per name.
    assert!(x(m, "fencing_counter_keys") >= 1.0, "{m}");
    assert_eq!(
        x(m, "fencing_counter_keys"),
        x(m, "fencing_counter_slots"),
        "{m}"
    );
    assert!(x(m, "memory_usage_bytes") > 0.0, "{m}");
    // A final release writes no unlock latch (only releases that leave holds do).
    assert_eq!(x(m, "unlock_latches_after_release"), 0.0, "{m}");
    assert_eq!(x(m, "latches_left_at_end"), 0.0, "the latches expire: {m}");

    // Nothing held or waited on is left behind.
    let keys: Vec<String> = cmd(&server, &["KEYS", "bench:*"]);
    let mut locks: Vec<&String> = keys.iter().filter(|k| *k != "bench:c:counter").collect();
    locks.sort();
    assert!(locks.is_empty(), "lock keys left: {locks:?}");
    let channels: Vec<String> = cmd(&server, &["PUBSUB", "CHANNELS"]);
    assert!(channels.is_empty(), "subscriptions left: {channels:?}");
}

/// Without --url the command starts its own redis-server and prints a table; unknown
/// workloads (bench-peers passes `redis-benchmark` through) are skipped with a warning.
#[test]
fn bench_table_on_the_embedded_server_skips_unknown_workloads() {
    let mut c = bench();
    c.args(["--workloads", "uncontended,redis-benchmark,handoff"]);
    let out = output(c);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(stdout.contains("private redis-server"), "{stdout}");
    let rows: Vec<&str> = stdout.lines().collect();
    assert!(rows[1].starts_with("workload"), "{stdout}");
    assert!(rows[2].starts_with("uncontended"), "{stdout}");
    assert!(rows[2].contains("µs in 2.00 scripts ("), "{stdout}");
    assert!(rows[2].contains(" reads) per pair"), "{stdout}");
    assert!(rows[3].starts_with("handoff"), "{stdout}");
    assert_eq!(rows.len(), 4, "{stdout}");
    assert!(
        stderr.contains("unknown workload \"redis-benchmark\""),
        "{stderr}"
    );
    assert!(!stdout.contains('{'), "no JSON without --json: {stdout}");
}

/// `--clients` wins over `BENCH_CLIENTS`; the URL may come from DISTLOCK_URL.
#[test]
fn bench_clients_flag_and_env_url() {
    let server = RedisServer::start();
    let mut c = bench();
    c.env("DISTLOCK_URL", server.url()).args([
        "--json",
        "--workloads",
        "contended",
        "--clients",
        "3",
    ]);
    let out = output(c);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let lines = lines(&out);
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0]["clients"], 3);
    assert_eq!(lines[0]["lost_updates"], 0);
}

/// An unreachable server is one error line and exit 1, not a panic.
#[test]
fn bench_reports_an_unreachable_server() {
    let port = distlock_test::free_port();
    let mut c = bench();
    c.args([
        "--url",
        &format!("redis://127.0.0.1:{port}/"),
        "--json",
        "--workloads",
        "uncontended",
    ]);
    let out = output(c);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(out.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with("distlock-bench: cannot connect"),
        "{stderr}"
    );
}

/// `distlock-bench bench` on a Sentinel set and a Cluster given by URL: every workload runs and
/// reports (but `memory` on a Cluster), `contended` with no lost updates.
#[test]
fn every_workload_runs_on_sentinel_and_cluster_urls() {
    let sentinel = distlock_test::SentinelSet::start();
    let cluster = distlock_test::ClusterSet::start();
    for url in [sentinel.url(), cluster.url()] {
        let mut c = bench();
        c.args(["--url", &url, "--json"]);
        let out = output(c);
        assert_eq!(out.status.code(), Some(0), "{url}: {out:?}");
        let lines = lines(&out);
        let names: Vec<&str> = lines
            .iter()
            .filter_map(|l| l["workload"].as_str())
            .collect();
        let mut expected = vec![
            "uncontended",
            "distinct",
            "contended",
            "handoff",
            "watchdog",
            "waiters",
        ];
        // `memory` counts keys on one server; it says it is skipped on a Cluster.
        if url.starts_with("redis-sentinel://") {
            expected.push("memory");
        } else {
            assert!(
                String::from_utf8_lossy(&out.stderr).contains("workload memory skipped"),
                "{url}: {out:?}"
            );
        }
        expected.push("lost");
        assert_eq!(names, expected, "{url}");
        let contended = &lines[2];
        assert_eq!(f(contended, "lost_updates"), 0.0, "{url}: {contended}");
        assert!(f(contended, "ops") > 0.0, "{url}: {contended}");
    }
}

/// The Redis-side cost of a pair: an uncontended acquire and its release are one `EVALSHA`
/// each (the server's own count says so too: warm-up and measured pairs, no `EVAL`), and the
/// time inside them is reported per pair; one server, so no per-master figures. `--topology`
/// does not apply with a URL.
#[test]
fn bench_reports_the_redis_side_cost_of_a_pair() {
    let server = RedisServer::start();
    let mut c = bench();
    c.args([
        "--url",
        &server.url(),
        "--json",
        "--workloads",
        "uncontended",
        "--topology",
        "cluster",
    ]);
    let out = output(c);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "stderr: {stderr}");
    assert!(stderr.contains("--topology cluster ignored"), "{stderr}");
    let lines = lines(&out);
    assert_eq!(lines.len(), 1);
    let u = &lines[0];
    assert_eq!(u["ops"], 50);
    assert!(x(u, "server_us_per_pair") > 0.0, "{u}");
    assert!(
        (x(u, "server_calls_per_pair") - 2.0).abs() <= 0.1,
        "one script to acquire, one to release: {u}"
    );
    assert!(u["extra"].get("server_us_per_master").is_none(), "{u}");
    let stats: String = cmd(&server, &["INFO", "commandstats"]);
    let calls = |name: &str| -> u64 {
        stats
            .lines()
            .find_map(|l| l.strip_prefix(&format!("cmdstat_{name}:calls=")))
            .map(|rest| rest.split(',').next().unwrap().parse().unwrap())
            .unwrap_or(0)
    };
    // Scripts run by FCALL (Redis Functions) or EVALSHA; each client's connect loads the
    // library and calls its probe function once.
    assert_eq!(
        calls("evalsha") + calls("fcall") - calls("function|load"),
        2 * (10 + 50),
        "{stats}"
    );
    assert_eq!(calls("eval"), 0, "{stats}");
}

/// `--topology cluster` without a URL starts a private Redis Cluster; the lock names of
/// `distinct` fall on all three masters, and each reports Redis-side time, adding up to the
/// time per pair.
#[test]
fn bench_topology_cluster_spreads_distinct_over_the_masters() {
    let mut c = bench();
    c.args(["--topology", "cluster", "--workloads", "distinct", "--json"]);
    let out = output(c);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "stderr: {stderr}");
    let lines = lines(&out);
    assert_eq!(lines.len(), 1);
    let d = &lines[0];
    assert_eq!(d["ops"], 100);
    assert!((x(d, "server_calls_per_pair") - 2.0).abs() <= 0.1, "{d}");
    let per: Vec<f64> = d["extra"]["server_us_per_master"]
        .as_array()
        .unwrap_or_else(|| panic!("no server_us_per_master: {d}"))
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    assert_eq!(per.len(), 3, "{d}");
    assert!(per.iter().all(|us| *us > 0.0), "a master got no pair: {d}");
    // Each figure is rounded to 0.1 µs.
    let sum: f64 = per.iter().sum();
    assert!(
        (sum - x(d, "server_us_per_pair")).abs() <= 0.2,
        "{sum} vs server_us_per_pair: {d}"
    );
    let masters = d["extra"]["server_masters"].as_array().unwrap();
    assert_eq!(masters.len(), 3, "{d}");
    assert!(
        masters.iter().all(|m| m.as_str().unwrap().contains(':')),
        "{d}"
    );
}

/// The lines of another implementation for `--compare`: two charted workloads (one with the
/// contended wait figures), one the charts leave out, and a blank line.
const FIXTURE: &str = r#"{"impl":"rust/fixture-lock","workload":"uncontended","clients":1,"ops":50,"seconds":0.01,"ops_per_s":5000.0,"p50_us":40.0,"p99_us":90.0,"lost_updates":null,"notes":"fixture","extra":{"samples":50,"p90_us":60.0,"max_us":400.0}}
{"impl":"rust/fixture-lock","workload":"contended","clients":4,"ops":100,"seconds":0.05,"ops_per_s":2000.0,"p50_us":30.0,"p99_us":20000.0,"lost_updates":0,"notes":"fixture","extra":{"samples":9,"p90_us":9000.0,"max_us":20000.0,"wait_p50_us":70.0,"wait_p99_us":50000.0,"wait_max_us":90000.0}}

{"impl":"limit/redis-benchmark","workload":"SET c=1","clients":1,"ops":10,"seconds":0.001,"ops_per_s":10000.0,"p50_us":20.0,"p99_us":30.0,"lost_updates":null,"notes":"","extra":{}}
"#;

/// An SVG file parsed: its root's size and every text in it.
fn svg(path: &std::path::Path) -> (u32, u32, String) {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    let doc = roxmltree::Document::parse(&text).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    let root = doc.root_element();
    assert_eq!(root.tag_name().name(), "svg", "{path:?}");
    let dim = |a: &str| -> u32 {
        root.attribute(a)
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{path:?}: no {a}"))
    };
    let texts: Vec<&str> = doc
        .descendants()
        .filter(|n| n.has_tag_name("text"))
        .filter_map(|n| n.text())
        .collect();
    (dim("width"), dim("height"), texts.join("\n"))
}

/// A PNG file decoded: its size.
fn png_size(path: &std::path::Path) -> (u32, u32) {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    assert!(bytes.len() > 1000, "{path:?}: {} bytes", bytes.len());
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "{path:?}");
    let mut reader = png::Decoder::new(std::io::Cursor::new(bytes))
        .read_info()
        .unwrap_or_else(|e| panic!("{path:?}: {e}"));
    let mut buf = vec![0; reader.output_buffer_size().expect("a size")];
    let info = reader
        .next_frame(&mut buf)
        .unwrap_or_else(|e| panic!("{path:?}: {e}"));
    (info.width, info.height)
}

/// `--plot DIR --png --compare FILE`: the JSON lines as without it, the charts as SVG and
/// PNG of the same size, distlock's series and the compared impl in them, the per-client
/// counts, and bench-data.json from which `--from` draws the charts again without a server.
#[test]
fn bench_plot_writes_charts_pngs_and_data_and_draws_them_again() {
    let server = RedisServer::start();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("charts/run");
    let fixture = tmp.path().join("fixture.jsonl");
    std::fs::write(&fixture, FIXTURE).unwrap();
    let mut c = bench();
    // Enough hand-offs for a curve of many points: with direct hand-off about half of them
    // are 0 (the waiter holds the lock before the release call returns).
    c.envs([
        ("BENCH_HANDOFF_REPS", "60"),
        ("BENCH_HOLD_MIN_MS", "1"),
        ("BENCH_HOLD_MAX_MS", "3"),
    ]);
    c.args([
        "--url",
        &server.url(),
        "--json",
        "--workloads",
        "uncontended,distinct,contended,handoff",
        "--plot",
    ])
    .arg(&dir)
    .arg("--png")
    .arg("--compare")
    .arg(&fixture);
    let out = output(c);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "stderr: {stderr}");
    // stdout keeps only the JSON lines; where the charts went is said on stderr.
    let lines = lines(&out);
    assert_eq!(lines.len(), 4);
    assert!(
        stderr.contains(&format!("charts in {}", dir.display())),
        "{stderr}"
    );

    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let charts = [
        "acquire-cdf",
        "contended-per-client",
        "handoff",
        "throughput",
    ];
    let mut expected: Vec<String> = charts
        .iter()
        .flat_map(|c| [format!("{c}.png"), format!("{c}.svg")])
        .collect();
    expected.push("bench-data.json".into());
    expected.sort();
    assert_eq!(names, expected);
    for c in charts {
        let (w, h, _) = svg(&dir.join(format!("{c}.svg")));
        assert_eq!(png_size(&dir.join(format!("{c}.png"))), (w, h), "{c}");
    }

    let (_, _, acquire) = svg(&dir.join("acquire-cdf.svg"));
    for label in [
        "uncontended",
        "distinct",
        "contended",
        "rust/distlock (this run)",
        "rust/fixture-lock",
        "1 client; distlock: 50 acquires",
        "4 clients; distlock: 100 acquires",
        "only percentiles",
    ] {
        assert!(acquire.contains(label), "{label:?} not in:\n{acquire}");
    }
    assert!(!acquire.contains("redis-benchmark"), "{acquire}");
    let (_, _, handoff) = svg(&dir.join("handoff.svg"));
    for label in [
        "handoff",
        "contended",
        "rust/fixture-lock",
        "hand-off latency",
    ] {
        assert!(handoff.contains(label), "{label:?} not in:\n{handoff}");
    }
    let (_, _, throughput) = svg(&dir.join("throughput.svg"));
    for label in [
        "rust/fixture-lock",
        "5,000",
        "2,000",
        "rust/distlock (this run)",
    ] {
        assert!(
            throughput.contains(label),
            "{label:?} not in:\n{throughput}"
        );
    }
    let (_, _, per_client) = svg(&dir.join("contended-per-client.svg"));
    assert!(
        per_client.contains("4 clients on one lock, 100 acquisitions"),
        "{per_client}"
    );
    // One bar per client, in distlock's colour.
    let per_client_svg = std::fs::read_to_string(dir.join("contended-per-client.svg")).unwrap();
    let doc = roxmltree::Document::parse(&per_client_svg).unwrap();
    let bars = doc
        .descendants()
        .filter(|n| n.has_tag_name("rect") && n.attribute("fill") == Some("#D62728"))
        .count();
    assert_eq!(bars, 4, "{per_client_svg}");

    // bench-data.json: every line, the distributions behind them.
    let data: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("bench-data.json")).unwrap())
            .unwrap();
    assert_eq!(data["format"], "distlock-bench-data/1");
    let workloads = data["workloads"].as_array().unwrap();
    assert_eq!(workloads.len(), 4);
    let count = |b: &Value| -> u64 {
        b.as_array()
            .unwrap()
            .iter()
            .map(|p| p[1].as_u64().unwrap())
            .sum()
    };
    for (w, line) in workloads.iter().zip(&lines) {
        assert_eq!(&w["line"], line, "the line as --json printed it");
        assert_eq!(
            count(&w["latency_ns"]),
            line["extra"]["samples"].as_u64().unwrap(),
            "{w}"
        );
    }
    let contended = &workloads[2];
    assert_eq!(count(&contended["wait_ns"]), 100);
    let per: Vec<u64> = serde_json::from_value(contended["per_client"].clone()).unwrap();
    assert_eq!(per.len(), 4);
    assert_eq!(per.iter().sum::<u64>(), 100);

    // Drawn again from the data alone: no server, no run, the same charts but for
    // distlock's label (and so where the legend's columns fall).
    drop(server);
    let again = tmp.path().join("again");
    let mut c = Command::new(env!("CARGO_BIN_EXE_distlock-bench"));
    c.env("DISTLOCK_URL", "redis://127.0.0.1:1/")
        .args(["bench", "--plot"])
        .arg(&again)
        .arg("--from")
        .arg(dir.join("bench-data.json"))
        .arg("--compare")
        .arg(&fixture);
    let out = output(c);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(
        stdout.starts_with("distlock-bench bench: charts in"),
        "{stdout}"
    );
    for c in charts {
        let name = format!("{c}.svg");
        let (_, _, before) = svg(&dir.join(&name));
        let (_, _, after) = svg(&again.join(&name));
        assert_eq!(
            after,
            before.replace(
                "rust/distlock (this run)",
                "rust/distlock (bench-data.json)"
            ),
            "{name}"
        );
    }
    // distlock's curves (drawn 3 px wide) have the same points: the distributions came back
    // whole.
    let own_curves = |path: &std::path::Path| -> Vec<String> {
        let text = std::fs::read_to_string(path).unwrap();
        let doc = roxmltree::Document::parse(&text).unwrap();
        doc.descendants()
            .filter(|n| {
                n.has_tag_name("polyline")
                    && n.attribute("stroke") == Some("#D62728")
                    && n.attribute("stroke-width") == Some("3")
            })
            .map(|n| n.attribute("points").unwrap().to_string())
            // Not the legend's 2-point swatch.
            .filter(|p| p.split_whitespace().count() > 2)
            .collect()
    };
    for (name, curves) in [("acquire-cdf.svg", 3), ("handoff.svg", 2)] {
        let before = own_curves(&dir.join(name));
        assert_eq!(before.len(), curves, "{name}");
        assert!(
            before.iter().all(|p| p.split_whitespace().count() > 4),
            "{name}: {before:?}"
        );
        assert_eq!(own_curves(&again.join(name)), before, "{name}");
    }
    assert!(!again.join("bench-data.json").exists());
}

/// A `--compare` file that is missing, not JSON lines, or has nothing to draw: one error
/// line naming it, exit 1, before any server is started or the directory is made.
#[test]
fn bench_plot_refuses_bad_compare_files_and_writes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("charts");
    let not_json = tmp.path().join("table.txt");
    std::fs::write(&not_json, "workload clients ops\nuncontended 1 50\n").unwrap();
    let nothing = tmp.path().join("watchdog.jsonl");
    std::fs::write(
        &nothing,
        "{\"impl\":\"rust/distlock\",\"workload\":\"watchdog\",\"ops\":50,\"extra\":{}}\n",
    )
    .unwrap();
    let missing = tmp.path().join("missing.jsonl");
    for (file, message) in [
        (&missing, "cannot read it"),
        (&not_json, "line 1 is not a benchmark line"),
        (&nothing, "no line to draw"),
    ] {
        let mut c = bench();
        // An unreachable server: the error must come before any connection.
        c.args(["--url", "redis://127.0.0.1:1/", "--plot"])
            .arg(&dir)
            .arg("--compare")
            .arg(fixture_ok(tmp.path()))
            .arg(file);
        let out = output(c);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{file:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{file:?}: {out:?}");
        assert!(
            stderr.starts_with(&format!(
                "distlock-bench: --compare {}: {message}",
                file.display()
            )),
            "{file:?}: {stderr}"
        );
        assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
        // The cause is said once (the message and its source chain do not both carry it).
        assert!(
            stderr.matches("os error").count() <= 1,
            "{file:?}: the cause twice: {stderr}"
        );
        assert!(!dir.exists(), "{file:?}: the directory was made");
    }
    // --compare, --png and --from only go with --plot (a usage error).
    let mut c = bench();
    c.arg("--compare").arg(&not_json);
    let out = output(c);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--plot"),
        "{out:?}"
    );
}

/// A good `--compare` file, written once into `dir`.
fn fixture_ok(dir: &std::path::Path) -> std::path::PathBuf {
    let path = dir.join("fixture.jsonl");
    std::fs::write(&path, FIXTURE).unwrap();
    path
}
