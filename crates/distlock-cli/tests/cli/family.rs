//! `distlock run --fair | --read | --write | --semaphore N` and their `status`.

use std::process::{Child, Command};
use std::time::Duration;

use distlock_test::testing::{cmd, wait_until};
use distlock_test::RedisServer;

use super::{distlock, hold, hold_until_key, output};

fn stop(mut c: Child) {
    unsafe {
        libc::kill(c.id() as libc::pid_t, libc::SIGTERM);
    }
    c.wait().unwrap();
}

fn status_json(server: &RedisServer, name: &str) -> serde_json::Value {
    let mut c = distlock(server);
    c.args(["status", name, "--json"]);
    let out = output(c);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()[0].clone()
}

/// At most N commands at once across hosts; status shows the permits.
#[test]
fn semaphore_mode_limits_concurrency() {
    let server = RedisServer::start();
    let a = hold(&server, &["jobs", "--semaphore", "2"]);
    let b = hold(&server, &["jobs", "--semaphore", "2"]);
    assert!(wait_until(Duration::from_secs(5), || cmd::<i64>(
        &server,
        &["ZCARD", "{jobs}:timeout"]
    ) == 2));
    let mut third = distlock(&server);
    third.args([
        "run",
        "jobs",
        "--semaphore",
        "2",
        "--wait",
        "200ms",
        "--verbose",
        "--",
        "true",
    ]);
    let out = output(third);
    assert_eq!(out.status.code(), Some(75), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("no permit"));
    let v = status_json(&server, "jobs");
    assert_eq!(v["kind"], "leased_semaphore");
    assert_eq!(v["value"], 0, "available permits");
    assert_eq!(v["leased"], 2);
    stop(a);
    let mut third = distlock(&server);
    third.args(["run", "jobs", "--semaphore", "2", "--", "true"]);
    assert_eq!(output(third).status.code(), Some(0));
    stop(b);
    let v = status_json(&server, "jobs");
    assert_eq!(v["value"], 2, "available permits");
}

/// `--semaphore N` on a semaphore that exists with another number of permits is refused
/// (exit 125, both sizes named, nothing changed, CMD not run); `--set-permits` resizes it
/// while a holder keeps its permit.
#[test]
fn semaphore_of_another_size_is_refused_unless_set_permits() {
    let server = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let run = |args: &[&str]| {
        let mut c = distlock(&server);
        c.arg("run").args(args).args(["--", "touch"]).arg(&marker);
        output(c)
    };
    let holder = hold(&server, &["pool", "--semaphore", "2"]);
    assert!(wait_until(Duration::from_secs(5), || cmd::<i64>(
        &server,
        &["ZCARD", "{pool}:timeout"]
    ) == 1));
    let out = run(&["pool", "--semaphore", "3"]);
    assert_eq!(out.status.code(), Some(125), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("has 2 permits, not 3"), "{stderr}");
    assert!(stderr.contains("--set-permits"), "{stderr}");
    assert!(!marker.exists(), "the command ran");
    assert_eq!(cmd::<i64>(&server, &["GET", "pool"]), 1, "changed");

    // Shrunk to 1 while the holder keeps its permit: no permit for anyone else.
    let out = run(&[
        "pool",
        "--semaphore",
        "1",
        "--set-permits",
        "--wait",
        "300ms",
    ]);
    assert_eq!(out.status.code(), Some(75), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("resized from 2 to 1"));
    assert_eq!(cmd::<i64>(&server, &["GET", "pool"]), 0);
    assert_eq!(cmd::<i64>(&server, &["ZCARD", "{pool}:timeout"]), 1, "kept");
    assert!(!marker.exists());
    stop(holder);
    // The size now matches: runs without --set-permits.
    let out = run(&["pool", "--semaphore", "1"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(marker.exists());
    let out = run(&["pool", "--semaphore", "4", "--set-permits"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(cmd::<i64>(&server, &["GET", "pool"]), 4);
    let out = run(&["pool", "--set-permits"]);
    assert_eq!(out.status.code(), Some(125), "needs --semaphore: {out:?}");
}

#[test]
fn fair_mode_queues_and_status_shows_the_queue() {
    let server = RedisServer::start();
    let holder = hold_until_key(&server, &["fifo", "--fair"], "fifo");
    let waiter = hold(&server, &["fifo", "--fair", "--wait", "20s"]);
    assert!(wait_until(Duration::from_secs(5), || cmd::<i64>(
        &server,
        &["LLEN", "redisson_lock_queue:{fifo}"]
    ) == 1));
    let v = status_json(&server, "fifo");
    assert_eq!(v["kind"], "fair_lock");
    assert_eq!(v["queue"], 1);
    assert_eq!(v["queue_owners"].as_array().unwrap().len(), 1);
    stop(holder);
    // The waiter gets the lock and holds it.
    assert!(wait_until(Duration::from_secs(5), || cmd::<i64>(
        &server,
        &["LLEN", "redisson_lock_queue:{fifo}"]
    ) == 0));
    assert!(cmd::<bool>(&server, &["EXISTS", "fifo"]));
    stop(waiter);
}

#[test]
fn read_and_write_modes_share_and_exclude() {
    let server = RedisServer::start();
    let r1 = hold(&server, &["doc", "--read"]);
    let r2 = hold(&server, &["doc", "--read"]);
    assert!(wait_until(Duration::from_secs(5), || cmd::<i64>(
        &server,
        &["HLEN", "doc"]
    ) == 3));
    let mut w = distlock(&server);
    w.args(["run", "doc", "--write", "--wait", "200ms", "--", "true"]);
    assert_eq!(output(w).status.code(), Some(75));
    let v = status_json(&server, "doc");
    assert_eq!(v["kind"], "read_lock");
    assert_eq!(v["mode"], "read");
    assert_eq!(v["owners"].as_array().unwrap().len(), 2);
    stop(r1);
    stop(r2);
    let mut w = distlock(&server);
    w.args(["run", "doc", "--write", "--", "true"]);
    assert_eq!(output(w).status.code(), Some(0));
    let mut bad = Command::new(env!("CARGO_BIN_EXE_distlock"));
    bad.args(["run", "doc", "--read", "--write", "--", "true"]);
    assert_eq!(output(bad).status.code(), Some(125), "a usage error of run");
}

/// `DISTLOCK_FENCING_TOKEN` in every mode whose grant has a token (plain, fair, read, write):
/// a number that grows from one run to the next. Job locks, semaphore permits and RedLocks
/// have none: there it is unset, even when distlock's own environment has one.
#[test]
fn the_command_gets_a_growing_fencing_token_where_the_mode_has_one() {
    let server = RedisServer::start();
    let url = server.url();
    let token = |args: &[&str]| -> String {
        let mut c = distlock(&server);
        c.env("DISTLOCK_FENCING_TOKEN", "inherited")
            .arg("run")
            .args(args)
            .args(["--", "sh", "-c", "echo ${DISTLOCK_FENCING_TOKEN-unset}"]);
        let out = output(c);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {out:?}");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    for mode in [
        &["plain"][..],
        &["fifo", "--fair"],
        &["doc", "--read"],
        &["doc", "--write"],
    ] {
        let [first, second]: [u128; 2] = [(); 2].map(|()| {
            let t = token(mode);
            t.parse()
                .unwrap_or_else(|_| panic!("{mode:?}: not a number: {t:?}"))
        });
        assert!(second > first, "{mode:?}: {first} then {second}");
    }
    for mode in [
        &["nightly", "--at-most", "1m"][..],
        &["jobs", "--semaphore", "2"],
        &["rl", "--redlock", &url],
    ] {
        assert_eq!(token(mode), "unset", "{mode:?}");
    }
}

/// Every lock mode of `run` keeps its lock across several watchdog renewals: a command that
/// runs for six renewal periods ends with its own exit code, not killed for a lost lease
/// (a write lock's renewal once refused its hash, so `run --write` killed every command
/// that outlived a third of the lease).
#[test]
fn every_lock_mode_keeps_its_lock_across_renewals() {
    let server = RedisServer::start();
    for mode in [None, Some("--fair"), Some("--read"), Some("--write")] {
        let name = format!("renewed{}", mode.unwrap_or(""));
        let mut c = distlock(&server);
        c.args(["--watchdog-lease", "600ms", "run", &name]);
        c.args(mode);
        c.args(["--", "sh", "-c", "sleep 1.2; exit 3"]);
        let out = output(c);
        assert_eq!(
            out.status.code(),
            Some(3),
            "{mode:?}: the command did not run to its end under the lock: {out:?}"
        );
    }
}
