//! The fault suite's short profile, as CI runs it: every scenario on every deployment, each
//! on real redis-server processes, must pass (a scenario that shows a known limit of Redis
//! is reported and may not). The checkers' seeded-violation tests are the binary's unit
//! tests (`src/check.rs`).

use std::process::Command;

use serde_json::Value;

#[test]
fn the_short_profile_passes_on_every_deployment() {
    let out = tempfile::tempdir().expect("a temporary directory");
    let run = Command::new(env!("CARGO_BIN_EXE_distlock-chaos"))
        .args(["--profile", "short", "--out"])
        .arg(out.path())
        .output()
        .expect("distlock-chaos runs");
    let stdout = String::from_utf8_lossy(&run.stdout);
    let stderr = String::from_utf8_lossy(&run.stderr);
    // The table and any violation, for `cargo test -- --nocapture` and failed runs.
    eprintln!("{stderr}");
    let rows: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("a JSON line: {e}: {l}")))
        .collect();
    let list = Command::new(env!("CARGO_BIN_EXE_distlock-chaos"))
        .arg("--list")
        .output()
        .expect("distlock-chaos --list runs");
    let names: Vec<String> = String::from_utf8_lossy(&list.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
        .collect();
    assert!(names.len() >= 20, "{names:?}");
    let seen: Vec<&str> = rows.iter().filter_map(|r| r["scenario"].as_str()).collect();
    assert_eq!(seen, names, "one row per scenario, in order\n{stderr}");
    for r in &rows {
        let name = r["scenario"].as_str().unwrap_or("?");
        let passed = r["passed"].as_bool() == Some(true);
        let known_limit = r["known_limit"].as_bool() == Some(true);
        assert!(passed || known_limit, "{name} failed: {r}\n{stderr}");
        assert!(
            r["grants"].as_u64().unwrap_or(0) > 0,
            "{name} granted nothing: {r}"
        );
        // The fault-free scenarios: contention, the unguarded counter, the watchdog's.
        if !["contention", "counter", "watchdog"].contains(&name) {
            assert!(
                r["faults"].as_u64().unwrap_or(0) > 0,
                "{name} injected no fault: {r}"
            );
        }
        assert_eq!(r["orphans"].as_u64(), Some(0), "{name}: {r}");
    }
    let row = |n: &str| rows.iter().find(|r| r["scenario"] == n).expect("a row");
    assert!(row("contention")["grants"].as_u64() >= Some(300));
    // Fault-free holds of every kind the watchdog renews, outlasting the lease, on each
    // deployment: the watchdog lost none (R).
    let watchdog: Vec<&Value> = rows
        .iter()
        .filter(|r| r["scenario"] == "watchdog")
        .collect();
    let topologies: Vec<&str> = watchdog
        .iter()
        .filter_map(|r| r["topology"].as_str())
        .collect();
    assert_eq!(topologies, ["standalone", "sentinel", "cluster"]);
    for r in watchdog {
        assert_eq!(r["lost_leases"].as_u64(), Some(0), "{r}");
    }
    // Waiters woken by releases, not by their re-checks (W).
    for n in ["contention", "counter"] {
        assert!(row(n)["median_wake_ms"].as_f64().is_some(), "{}", row(n));
    }
    // A holder paused past its lease was caught: the loss reported, its late write refused.
    assert!(
        row("pause-holder")["lost_leases"].as_u64() >= Some(1),
        "{}",
        row("pause-holder")
    );
    assert!(
        row("pause-holder")["stale_writes_rejected"].as_u64() >= Some(1),
        "{}",
        row("pause-holder")
    );
    assert!(run.status.success(), "exit {:?}\n{stderr}", run.status);
    // The table, on stderr.
    assert!(stderr.contains("| scenario"), "{stderr}");
}
