//! `distlock status` and `distlock unlock --force`: what they show, what they refuse.

use distlock_test::testing::cmd;
use distlock_test::RedisServer;

use std::process::Stdio;
use std::time::Duration;

use super::{distlock, hold_until_key, output};

#[test]
fn status_json_and_force_unlock() {
    let server = RedisServer::start();
    let mut holder = hold_until_key(&server, &["inspect-me"], "inspect-me");
    let mut c = distlock(&server);
    c.args(["status", "inspect-me", "free-one", "--json"]);
    let out = output(c);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let held = &v[0];
    assert_eq!(held["name"], "inspect-me");
    assert_eq!(held["held"], true);
    assert_eq!(held["owners"][0]["hold_count"], 1);
    assert!(held["ttl_ms"].as_u64().unwrap() > 20_000);
    assert!(held["fencing_token"].as_u64().unwrap() > 0);
    assert_eq!(v[1]["held"], false);

    let mut c = distlock(&server);
    c.args(["unlock", "inspect-me"]);
    assert_eq!(output(c).status.code(), Some(2), "--force is required");
    let mut c = distlock(&server);
    c.args(["unlock", "--force", "inspect-me"]);
    let out = output(c);
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).contains("unlocked"));
    let exists: bool = cmd(&server, &["EXISTS", "inspect-me"]);
    assert!(!exists);
    holder.kill().unwrap();
    holder.wait().unwrap();
}

/// `status` says who holds a plain or a fair lock — the holding process's app (the CLI's
/// executable name by default), host and pid, and for how long in whole seconds — in text
/// and in JSON; a read-write lock has no such line.
#[test]
fn status_shows_who_holds_a_lock() {
    let server = RedisServer::start();
    for (name, run_args) in [
        ("who-plain", &["who-plain"][..]),
        ("who-fair", &["who-fair", "--fair"][..]),
    ] {
        let (secs, micros): (u64, u64) = cmd(&server, &["TIME"]);
        let before_ms = secs * 1000 + micros / 1000;
        let mut holder = hold_until_key(&server, run_args, name);
        let pid = holder.id();
        // Held for at least a second when status looks.
        std::thread::sleep(std::time::Duration::from_millis(1_200));

        let mut c = distlock(&server);
        c.args(["status", name]);
        let out = output(c);
        assert_eq!(out.status.code(), Some(0), "{name}: {out:?}");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            stdout.contains("\nscripts: FCALL (Redis Functions, library distlock_"),
            "{name}: how scripts run, in {stdout}"
        );
        let prefix = format!(
            "  holder: app distlock on {} pid {pid}, held for ",
            distlock_test::testing::host_name()
        );
        let line = stdout
            .lines()
            .find(|l| l.starts_with(&prefix))
            .unwrap_or_else(|| panic!("{name}: no line {prefix:?} in {stdout}"));
        let age = &line[prefix.len()..];
        let secs: u64 = age
            .strip_suffix('s')
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{name}: age {age:?} is not whole seconds"));
        assert!((1..30).contains(&secs), "{name}: held for {age}");

        let mut c = distlock(&server);
        c.args(["status", name, "--json"]);
        let out = output(c);
        assert_eq!(out.status.code(), Some(0), "{name}: {out:?}");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let h = &v[0]["holder"];
        assert_eq!(h["app"], "distlock", "{name}: {v}");
        assert_eq!(
            h["host"],
            distlock_test::testing::host_name().as_str(),
            "{name}: {v}"
        );
        assert_eq!(h["pid"], pid, "{name}: {v}");
        let since = h["since_ms"].as_u64().unwrap();
        let (secs_now, micros_now): (u64, u64) = cmd(&server, &["TIME"]);
        let now_ms = secs_now * 1000 + micros_now / 1000;
        // Recorded in whole seconds: the grant's second, at or after the one `before` was in.
        assert!(
            before_ms / 1000 * 1000 <= since && since + 1_000 <= now_ms,
            "{name}: since {since} not between {before_ms} (its second) and {now_ms} - 1 s"
        );
        assert!(since.is_multiple_of(1_000), "{name}: {v}");
        let held_for = h["held_for_ms"].as_u64().unwrap();
        assert!(held_for >= 1_000, "{name}: {v}");

        holder.kill().unwrap();
        holder.wait().unwrap();
    }

    let mut holder = hold_until_key(&server, &["who-rw", "--write"], "who-rw");
    let mut c = distlock(&server);
    c.args(["status", "who-rw"]);
    let out = output(c);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("mode write"), "{stdout}");
    assert!(!stdout.contains("holder:"), "{stdout}");
    holder.kill().unwrap();
    holder.wait().unwrap();
}

#[test]
fn status_reports_wrong_type_as_an_error() {
    let server = RedisServer::start();
    let _: () = cmd(&server, &["SET", "not-a-lock", "x"]);
    let mut c = distlock(&server);
    c.args(["status", "not-a-lock"]);
    let out = output(c);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a lock"));
}

/// `unlock --force NAME` on `key` must exit 1, say the key holds another type, and leave it
/// as it was.
fn assert_force_unlock_refused(server: &RedisServer, key: &str, dump: &[&str]) {
    let before: redis::Value = cmd(server, dump);
    let ttl_before: i64 = cmd(server, &["PTTL", key]);
    let mut c = distlock(server);
    c.args(["unlock", "--force", key]);
    let out = output(c);
    assert_eq!(out.status.code(), Some(1), "{key}: {out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("another type"), "{key}: {stderr}");
    assert!(stderr.contains("not a lock"), "{key}: {stderr}");
    assert!(out.stdout.is_empty(), "{key}: {out:?}");
    let after: redis::Value = cmd(server, dump);
    assert_eq!(before, after, "{key} changed");
    let ttl_after: i64 = cmd(server, &["PTTL", key]);
    assert_eq!(ttl_before, ttl_after, "{key}: TTL changed");
}

/// Keys of other types are refused, and left as they were: force-unlock used to delete
/// strings, lists and user hashes (data loss on a typo).
#[test]
fn force_unlock_refuses_keys_that_are_not_locks() {
    let server = RedisServer::start();
    let _: () = cmd(&server, &["SET", "config:feature", "on"]);
    let _: i64 = cmd(&server, &["RPUSH", "queue:emails", "a", "b", "c"]);
    let _: i64 = cmd(&server, &["HSET", "user:1", "name", "bob", "age", "42"]);
    // Hashes that look a little like locks, but are not.
    let _: i64 = cmd(&server, &["HSET", "prefs:1", "mode", "dark"]);
    let _: i64 = cmd(&server, &["HSET", "visits", "2024:01", "many"]);
    let _: i64 = cmd(&server, &["HSET", "mixed", "a:1", "1", "colour", "red"]);
    let _: i64 = cmd(&server, &["SADD", "tags", "x"]);

    assert_force_unlock_refused(&server, "config:feature", &["GET", "config:feature"]);
    assert_force_unlock_refused(
        &server,
        "queue:emails",
        &["LRANGE", "queue:emails", "0", "-1"],
    );
    assert_force_unlock_refused(&server, "user:1", &["HGETALL", "user:1"]);
    assert_force_unlock_refused(&server, "prefs:1", &["HGETALL", "prefs:1"]);
    assert_force_unlock_refused(&server, "visits", &["HGETALL", "visits"]);
    assert_force_unlock_refused(&server, "mixed", &["HGETALL", "mixed"]);
    assert_force_unlock_refused(&server, "tags", &["SMEMBERS", "tags"]);

    // A missing key is not an error.
    let mut c = distlock(&server);
    c.args(["unlock", "--force", "no-such-key"]);
    let out = output(c);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("was not locked"));
}

/// Real locks are still force-unlocked: plain (with fencing token), read-write (`mode`),
/// and a Redisson-style hash without distlock's token field.
#[test]
fn force_unlock_still_breaks_real_locks() {
    let server = RedisServer::start();
    for (name, run_args) in [
        ("plain", &["plain"][..]),
        ("rw-write", &["rw-write", "--write"][..]),
        ("rw-read", &["rw-read", "--read"][..]),
        ("fair", &["fair", "--fair"][..]),
    ] {
        let mut holder = hold_until_key(&server, run_args, name);
        let mut c = distlock(&server);
        c.args(["unlock", "--force", name]);
        let out = output(c);
        assert_eq!(out.status.code(), Some(0), "{name}: {out:?}");
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("unlocked"),
            "{name}: {out:?}"
        );
        let exists: bool = cmd(&server, &["EXISTS", name]);
        assert!(!exists, "{name} was not deleted");
        holder.kill().unwrap();
        holder.wait().unwrap();
    }
    // Held by a Redisson client (uuid:thread -> count, no distlock token field).
    let _: i64 = cmd(
        &server,
        &[
            "HSET",
            "java-lock",
            "6f0a1e52-0b5e-4a53-9b1e-2d1f1c1d1e1f:57",
            "2",
        ],
    );
    let mut c = distlock(&server);
    c.args(["unlock", "--force", "java-lock"]);
    let out = output(c);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let exists: bool = cmd(&server, &["EXISTS", "java-lock"]);
    assert!(!exists);
}

/// `status NAME` finds job locks in any environment, shows TTLs in human units, reports a
/// name it cannot read and goes on with the others (exit 1), hints at a missing key prefix,
/// and words a read-write lock's fencing tokens correctly.
#[test]
fn status_finds_job_locks_reports_errors_per_name_and_hints() {
    let server = RedisServer::start();
    let mut job = hold_until_key(
        &server,
        &["nightly", "--at-most", "1m", "--env", "prod"],
        "job-lock:prod:nightly",
    );
    let mut writer = hold_until_key(&server, &["doc", "--write"], "doc");
    let _: () = cmd(&server, &["RPUSH", "a-list", "x"]);
    let _: () = cmd(&server, &["SET", "plain", "1"]);

    let mut c = distlock(&server);
    c.args(["status", "nightly", "a-list", "doc", "never-used"]);
    let out = output(c);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "a name failed: {out:?}");
    let line = stdout
        .lines()
        .find(|l| l.starts_with("nightly (job_lock, job-lock:prod:nightly): held by "))
        .unwrap_or_else(|| panic!("no job line in {stdout}"));
    // `… TTL 59s 873ms`: human units, not raw milliseconds.
    let ttl = line.rsplit_once(", TTL ").expect("TTL").1;
    assert!(
        ttl.starts_with("5") && ttl.contains("s") && !ttl.ends_with(" ms"),
        "{line}"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(
            "distlock: a-list: status of \"a-list\": the key holds a list that is not a lock, a semaphore or a latch"
        ),
        "{stderr}"
    );
    assert!(stdout.contains("doc: held, TTL "), "{stdout}");
    assert!(
        stdout.contains("  fencing tokens: one per hold, kept by each holder"),
        "{stdout}"
    );
    assert!(stdout.contains("never-used: free"), "{stdout}");

    // The same in JSON: the failed name is an item with its error.
    let mut c = distlock(&server);
    c.args(["status", "a-list", "nightly", "--json"]);
    let out = output(c);
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v[0]["name"], "a-list");
    assert!(
        v[0]["error"].as_str().unwrap().contains("holds a list"),
        "{v}"
    );
    assert_eq!(v[1]["kind"], "job_lock");
    assert_eq!(v[1]["key"], "job-lock:prod:nightly");

    // A key prefix under which nothing exists, while the bare name does.
    let mut c = distlock(&server);
    c.args(["--key-prefix", "app:", "status", "plain"]);
    let out = output(c);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(
        stdout.contains(
            "hint: nothing at \"app:plain\" (key prefix \"app:\"), but a key \"plain\" exists"
        ),
        "{stdout}"
    );

    job.kill().unwrap();
    job.wait().unwrap();
    writer.kill().unwrap();
    writer.wait().unwrap();
}

/// `status --watch INTERVAL` shows the lock again every INTERVAL, each round under a
/// timestamp line, and follows it from held to free.
#[test]
fn status_watch_follows_a_lock() {
    let server = RedisServer::start();
    let mut holder = hold_until_key(&server, &["watched"], "watched");
    let mut c = distlock(&server);
    c.args(["status", "watched", "--watch", "200ms"])
        .stdout(Stdio::piped());
    let mut watcher = c.spawn().unwrap();
    std::thread::sleep(Duration::from_millis(700));
    holder.kill().unwrap();
    holder.wait().unwrap();
    // The killed `run` wrapper's lock stays until its lease ends: release it for the test.
    let _: () = cmd(&server, &["DEL", "watched"]);
    std::thread::sleep(Duration::from_millis(700));
    watcher.kill().unwrap();
    let out = watcher.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let rounds = stdout.lines().filter(|l| l.starts_with("--- ")).count();
    assert!(rounds >= 4, "{rounds} rounds in {stdout}");
    let held = stdout.find("watched: held").expect("seen held");
    let free = stdout.rfind("watched: free").expect("seen free");
    assert!(held < free, "{stdout}");
}

/// Printing into a pipe whose reader is gone (`distlock status a b | head -0`) ends the
/// command quietly with exit 0: no "failed printing to stdout" panic, no message. Also for
/// `--json`, `--watch` (which would otherwise print forever) and `unlock`.
#[test]
fn a_closed_stdout_ends_commands_quietly_with_0() {
    let server = RedisServer::start();
    let _: () = cmd(&server, &["SET", "unrelated", "x"]);
    let cases: [&[&str]; 5] = [
        &["status", "a", "b", "c"],
        &["status", "--json", "a", "b"],
        &["status", "a", "--watch", "50ms"],
        &["unlock", "--force", "a"],
        &["man"],
    ];
    for args in cases {
        let (reader, writer) = std::io::pipe().unwrap();
        // The reader is gone before distlock writes: every write meets a closed pipe.
        drop(reader);
        let mut c = distlock(&server);
        c.args(args).stdout(writer).stderr(Stdio::piped());
        let mut child = c.spawn().unwrap();
        // The command's copy of the writer is the only one left.
        drop(c);
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if std::time::Instant::now() > deadline {
                child.kill().unwrap();
                panic!("{args:?}: still running into a closed pipe");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut stderr = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
        assert_eq!(status.code(), Some(0), "{args:?}: {status:?} {stderr}");
        assert!(stderr.is_empty(), "{args:?}: {stderr}");
    }
}

/// `unlock --force` takes job locks (`--env ENV`, or the job-lock key), and the holder's
/// lost signal fires at once (its `--on-lost term` command is stopped long before
/// `--at-most`); a name held only as a job lock in another environment is never answered
/// "was not locked" with exit 0.
#[test]
fn force_unlock_takes_job_locks_and_never_says_not_locked_for_a_held_name() {
    let server = RedisServer::start();
    let mut job = hold_until_key(
        &server,
        &[
            "nightly",
            "--at-most",
            "1m",
            "--env",
            "prod",
            "--on-lost",
            "term",
        ],
        "job-lock:prod:nightly",
    );
    for args in [
        &["unlock", "--force", "nightly"][..],
        &["unlock", "--force", "nightly", "--env", "staging"][..],
    ] {
        let mut c = distlock(&server);
        c.args(args);
        let out = output(c);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {out:?}");
        assert!(err.contains("--env prod"), "{args:?}: {err}");
        let held: bool = cmd(&server, &["EXISTS", "job-lock:prod:nightly"]);
        assert!(held, "{args:?} deleted the job lock");
    }
    let mut c = distlock(&server);
    c.args(["unlock", "--force", "nightly", "--env", "prod"]);
    let out = output(c);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("nightly (job_lock, prod): unlocked"));
    let held: bool = cmd(&server, &["EXISTS", "job-lock:prod:nightly"]);
    assert!(!held);
    // The holder hears of it: its command is terminated (143), not left running to --at-most.
    let started = std::time::Instant::now();
    let status = loop {
        if let Some(status) = job.try_wait().unwrap() {
            break Some(status);
        }
        if started.elapsed() > Duration::from_secs(20) {
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let Some(status) = status else {
        job.kill().unwrap();
        panic!("the job's holder did not learn that its lock was force-unlocked");
    };
    assert_eq!(status.code(), Some(143), "{status:?}");

    // The key form; a free job lock is "not locked" (exit 0); a string that is not a job
    // lock is refused and kept.
    let _: () = cmd(
        &server,
        &["SET", "job-lock:dev:x", "ADDED:2026-01-01T00:00:00Z@h"],
    );
    let mut c = distlock(&server);
    c.args(["unlock", "--force", "job-lock:dev:x"]);
    assert_eq!(output(c).status.code(), Some(0));
    let held: bool = cmd(&server, &["EXISTS", "job-lock:dev:x"]);
    assert!(!held);
    let mut c = distlock(&server);
    c.args(["unlock", "--force", "x", "--env", "dev"]);
    let out = output(c);
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).contains("was not locked"));
    let _: () = cmd(&server, &["SET", "job-lock:dev:y", "42"]);
    let mut c = distlock(&server);
    c.args(["unlock", "--force", "y", "--env", "dev"]);
    let out = output(c);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a job lock"));
    let kept: String = cmd(&server, &["GET", "job-lock:dev:y"]);
    assert_eq!(kept, "42");
}
