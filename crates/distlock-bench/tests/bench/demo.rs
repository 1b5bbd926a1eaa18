//! `distlock-bench demo`: the flash sale on each private deployment sells out exactly, with no
//! oversell and no duplicate order.

use std::process::{Command, Output};

fn output(mut c: Command) -> Output {
    c.output().expect("run distlock-bench")
}

/// The demo on a private deployment of `topology` (no --url): sells out exactly, no oversell,
/// no duplicates.
fn demo_on_an_embedded(topology: &str) {
    let mut c = Command::new(env!("CARGO_BIN_EXE_distlock-bench"));
    c.env_remove("DISTLOCK_URL").args([
        "demo",
        "--topology",
        topology,
        "--stock",
        "60",
        "--vouchers",
        "5",
        "--users",
        "20",
        "--attempts",
        "20",
        "--processes",
        "2",
        "--concurrency",
        "4",
        "--json",
    ]);
    let out = output(c);
    assert_eq!(out.status.code(), Some(0), "{topology}: {out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["stock_initial"], 60);
    assert_eq!(v["oversold"], 0, "{topology}");
    assert_eq!(v["duplicate_orders"], 0, "{topology}");
    let orders = v["orders"].as_i64().unwrap();
    let left = v["stock_left"].as_i64().unwrap();
    assert_eq!(orders + left, 60, "{topology}");
    assert!(orders > 0);
    assert!(v["acquisitions"].as_u64().unwrap() >= 400);
    assert!(v["acquisitions_per_s"].as_f64().unwrap() > 0.0);
    assert!(v["wait_p99_us"].as_u64().unwrap() >= v["wait_p50_us"].as_u64().unwrap());
}

#[test]
fn demo_on_the_embedded_server() {
    demo_on_an_embedded("standalone");
}

/// `demo --topology sentinel`: a master, two replicas and three sentinels, grants confirmed
/// by a replica (`WAIT`).
#[test]
fn demo_on_an_embedded_sentinel_set() {
    demo_on_an_embedded("sentinel");
}

/// `demo --topology cluster`: three masters with a replica each; the sale's keys spread
/// over the slots, each lock's wake-ups on sharded pub/sub.
#[test]
fn demo_on_an_embedded_cluster() {
    demo_on_an_embedded("cluster");
}

#[test]
fn demo_without_redis_server_says_how_to_install_it() {
    let empty = tempfile::tempdir().unwrap();
    let mut c = Command::new(env!("CARGO_BIN_EXE_distlock-bench"));
    c.env_remove("DISTLOCK_URL")
        .env_remove("DISTLOCK_REDIS_SERVER")
        .env("PATH", empty.path())
        .args(["demo"]);
    let out = output(c);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("apt-get install redis-server"), "{stderr}");
}
