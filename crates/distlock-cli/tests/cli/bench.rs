//! `distlock bench`: every workload on a real server with tiny sizes (the `BENCH_*` knobs),
//! the JSON lines the bench-peers `summarize.py` reads, and the table on the embedded server.

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
    let mut c = Command::new(env!("CARGO_BIN_EXE_distlock"));
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

/// As bench-peers' `run` invokes it: `distlock bench --url URL --json`, all workloads.
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
            "memory"
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
    assert!(stderr.starts_with("distlock: cannot connect"), "{stderr}");
}

/// `distlock bench` on a Sentinel set and a Cluster given by URL: every workload runs and
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
        assert_eq!(names, expected, "{url}");
        let contended = &lines[2];
        assert_eq!(f(contended, "lost_updates"), 0.0, "{url}: {contended}");
        assert!(f(contended, "ops") > 0.0, "{url}: {contended}");
    }
}
