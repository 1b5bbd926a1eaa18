//! `distlock list` (and `top --once` on a Cluster): every kind found by a bounded scan, with holder, TTL and counts; on a
//! standalone server and on a Cluster.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use distlock_test::testing::{cmd, wait_until};
use distlock_test::RedisServer;
use serde_json::Value;

use super::{distlock, hold, hold_until_key, output};

/// `list --json` (and `ARGS`) parsed.
fn list_json(mut c: Command, args: &[&str]) -> (Value, std::process::Output) {
    c.args(["list", "--json"]).args(args);
    let out = output(c);
    let v =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {out:?}"));
    (v, out)
}

fn entry<'a>(v: &'a Value, name: &str) -> &'a Value {
    v["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == name)
        .unwrap_or_else(|| panic!("{name} not listed: {v:#}"))
}

fn stop(mut children: Vec<Child>) {
    for c in &mut children {
        let _ = c.kill();
        let _ = c.wait();
    }
}

#[test]
fn list_shows_each_kind_with_its_holder_and_leaves_other_keys_out() {
    let server = RedisServer::start();
    let lock = hold_until_key(&server, &["orders:1"], "orders:1");
    let job = hold_until_key(
        &server,
        &["--at-most", "1m", "nightly"],
        "job-lock:default:nightly",
    );
    let rw = hold_until_key(&server, &["--read", "config"], "config");
    let sem = hold_until_key(&server, &["--semaphore", "3", "workers"], "workers");
    // A lock held by a Redisson client (no distlock fields), a latch's count, and the
    // application's own data.
    let redisson_owner = "2f1e8bd2-4b5c-4a43-9b39-1e1fd2b0a6a1:77";
    let _: i64 = cmd(&server, &["HSET", "java-lock", redisson_owner, "1"]);
    let _: bool = cmd(&server, &["PEXPIRE", "java-lock", "30000"]);
    let _: String = cmd(&server, &["SET", "latch", "4"]);
    let _: i64 = cmd(&server, &["HSET", "user:1", "name", "bob"]);
    let _: String = cmd(&server, &["SET", "greeting", "hello"]);

    // A fair lock with one waiter in its queue.
    let fair = hold_until_key(&server, &["--fair", "payouts"], "payouts");
    let fair_waiter = hold(&server, &["--fair", "--wait", "30s", "payouts"]);
    let mut v = Value::Null;
    let queued = wait_until(Duration::from_secs(5), || {
        let (listed, out) = list_json(distlock(&server), &[]);
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        v = listed;
        entry(&v, "payouts")["queue"] == 1
    });
    assert!(queued, "the fair lock's waiter is not queued: {v:#}");
    assert_eq!(entry(&v, "payouts")["kind"], "fair_lock");

    let l = entry(&v, "orders:1");
    assert_eq!(l["kind"], "lock");
    assert_eq!(l["held"], true);
    assert_eq!(
        l["holder"]["pid"],
        lock.id(),
        "the pid of the holding process"
    );
    assert!(l["ttl_ms"].as_u64().unwrap() > 20_000, "{l}");
    assert!(l["fencing_token"].as_u64().unwrap() > 0);
    let j = entry(&v, "nightly");
    assert_eq!(j["kind"], "job_lock");
    assert_eq!(j["env"], "default");
    assert_eq!(j["key"], "job-lock:default:nightly");
    assert_eq!(j["holder"]["host"], distlock_test::testing::host_name());
    let r = entry(&v, "config");
    assert_eq!(r["kind"], "read_lock");
    assert_eq!(r["mode"], "read");
    let s = entry(&v, "workers");
    assert_eq!(s["kind"], "leased_semaphore");
    assert_eq!(
        (s["value"].as_u64(), s["leased"].as_u64()),
        (Some(2), Some(1))
    );
    let java = entry(&v, "java-lock");
    assert_eq!(java["kind"], "lock");
    assert_eq!(java["owners"][0]["owner"], redisson_owner);
    assert!(
        java.get("holder").is_none(),
        "Redisson records no holder: {java}"
    );
    let names: Vec<&str> = v["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted, "sorted by name");
    for other in ["user:1", "greeting"] {
        assert!(!names.contains(&other), "{other} is not a lock: {names:?}");
    }
    // An integer key nothing marks as a semaphore or latch (no waiter, no leases) may be the
    // application's counter: listed with --all, or when named, else only counted.
    assert!(!names.contains(&"latch"), "{names:?}");
    assert_eq!(v["unmarked_integers"], 1, "{v:#}");
    for args in [&["--all"][..], &["latch"][..]] {
        let (listed, _) = list_json(distlock(&server), args);
        assert_eq!(
            entry(&listed, "latch")["kind"],
            "semaphore_or_latch",
            "{args:?}"
        );
        assert_eq!(entry(&listed, "latch")["value"], 4, "{args:?}");
    }
    // The application's keys and the locks' helper keys (fencing counters, the leases set).
    assert!(v["other_keys"].as_u64().unwrap() >= 4, "{v:#}");
    assert_eq!(v["complete"], true);

    // The table: a header, one row per entry, a summary with the counts.
    let mut c = distlock(&server);
    c.arg("list");
    let out = output(c);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    let header = text.lines().next().unwrap();
    for column in [
        "NAME", "KIND", "STATE", "HOLDER", "HELD FOR", "TTL", "WAITING",
    ] {
        assert!(header.contains(column), "{header}");
    }
    let row = text.lines().find(|l| l.contains("orders:1")).unwrap();
    assert!(row.contains(&format!("pid {}", lock.id())), "{row}");
    assert!(
        text.contains("2 locks (2 held)")
            && text.contains("1 fair lock (1 held)")
            && text.contains("1 job lock (1 held)")
            && text
                .contains("1 integer key with no sign of a semaphore or latch: --all lists them"),
        "{text}"
    );

    // A pattern over names: lock names and job names.
    let (v, _) = list_json(distlock(&server), &["ord*"]);
    assert_eq!(v["entries"].as_array().unwrap().len(), 1, "{v:#}");
    let (v, _) = list_json(distlock(&server), &["night?y"]);
    assert_eq!(entry(&v, "nightly")["kind"], "job_lock");
    stop(vec![lock, job, rw, sem, fair, fair_waiter]);
}

#[test]
fn list_is_bounded_by_examine_and_limit_and_reports_it() {
    let server = RedisServer::start();
    for i in 0..5 {
        let owner = format!("2f1e8bd2-4b5c-4a43-9b39-1e1fd2b0a6a1:{i}");
        let _: i64 = cmd(&server, &["HSET", &format!("lock:{i}"), &owner, "1"]);
    }
    // 5,000 keys of the application's own.
    let _: String = cmd(&server, &["DEBUG", "POPULATE", "5000", "data"]);

    let (v, out) = list_json(distlock(&server), &["--limit", "2", "lock:*"]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(v["entries"].as_array().unwrap().len(), 2);
    assert_eq!(v["unread_keys"], 3);
    let (v, _) = list_json(distlock(&server), &["--examine", "1000"]);
    assert_eq!(v["complete"], false, "one SCAN call cannot see 5,005 keys");
    let (v, _) = list_json(distlock(&server), &[]);
    assert_eq!(v["complete"], true);
    assert_eq!(v["entries"].as_array().unwrap().len(), 5);
    assert_eq!(v["other_keys"], 5000);

    let text = |args: &[&str]| {
        let mut c = distlock(&server);
        c.arg("list").args(args);
        String::from_utf8_lossy(&output(c).stdout).into_owned()
    };
    let limited = text(&["--limit", "1", "lock:*"]);
    assert!(
        limited.contains("4 more keys not read (--limit)"),
        "{limited}"
    );
    let stopped = text(&["--examine", "1000"]);
    assert!(stopped.contains("stopped at --examine"), "{stopped}");
}

#[test]
fn a_key_that_cannot_be_read_is_reported_and_the_others_still_listed() {
    let server = RedisServer::start();
    let owner = "2f1e8bd2-4b5c-4a43-9b39-1e1fd2b0a6a1:1";
    let _: i64 = cmd(&server, &["HSET", "good", owner, "1"]);
    let _: i64 = cmd(&server, &["HSET", "bad", owner, "1"]);
    // `bad`'s fencing counter (of its hash slot) holds garbage: its status cannot be read.
    let counter = distlock::layout::fencing_counter("", "bad");
    assert_ne!(counter, distlock::layout::fencing_counter("", "good"));
    let _: String = cmd(&server, &["SET", &counter, "not-a-number"]);
    let (v, out) = list_json(distlock(&server), &[]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert_eq!(entry(&v, "good")["held"], true);
    assert_eq!(v["errors"][0]["key"], "bad", "{v:#}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("bad") && stderr.contains("fencing counter"),
        "{stderr}"
    );
}

#[test]
fn list_and_top_find_locks_on_every_master_of_a_cluster() {
    let set = distlock_test::ClusterSet::start();
    let masters: Vec<u16> = set.masters().iter().map(|m| m.port()).collect();
    // One lock name per master.
    let mut names = Vec::new();
    for i in 0.. {
        let name = format!("c-lock-{i}");
        let port = set.node_for_key(&name).port();
        if !names.iter().any(|(_, p)| *p == port) {
            names.push((name, port));
        }
        if names.len() == masters.len() {
            break;
        }
    }
    let distlock = || {
        let mut c = Command::new(env!("CARGO_BIN_EXE_distlock"));
        c.env("DISTLOCK_URL", set.url()).env_remove("DISTLOCK_LOG");
        c
    };
    let holders: Vec<Child> = names
        .iter()
        .map(|(name, _)| {
            let mut c = distlock();
            c.args(["run", name, "--", "sleep", "30"])
                .stdout(Stdio::null());
            c.spawn().unwrap()
        })
        .collect();
    for (name, _) in &names {
        assert!(wait_until(Duration::from_secs(5), || cmd::<bool>(
            set.node_for_key(name),
            &["EXISTS", name]
        )));
    }
    // A waiter (sharded pub/sub on this Redis 7 Cluster) is counted.
    let waiter = {
        let mut c = distlock();
        c.args(["run", "--wait", "30s", &names[0].0, "--", "true"])
            .stdout(Stdio::null());
        c.spawn().unwrap()
    };
    let mut v = Value::Null;
    let counted = wait_until(Duration::from_secs(5), || {
        let (listed, out) = list_json(distlock(), &["c-lock-*"]);
        assert!(out.status.success(), "{out:?}");
        v = listed;
        entry(&v, &names[0].0)["waiting"] == 1
    });
    assert!(counted, "the waiter is not counted: {v:#}");
    for (name, _) in &names {
        assert_eq!(entry(&v, name)["held"], true, "{name}");
    }
    assert_eq!(v["entries"].as_array().unwrap().len(), names.len());
    let mut c = distlock();
    c.args(["top", "--once", "--json", "--interval", "200ms", "c-lock-*"]);
    let out = output(c);
    assert!(out.status.success(), "{out:?}");
    let top: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(top["held"], names.len(), "{top:#}");
    stop(holders);
    stop(vec![waiter]);
}

/// `status --json`, `list --json` and `top --once --json` describe a lock in one schema
/// (doc/cli-json.md) and agree on it, field by field, for every kind: the same names, the
/// same waiter counts for a read-write lock, the same kind for a fair lock.
#[test]
fn status_list_and_top_agree_on_one_schema() {
    let server = RedisServer::start();
    let plain = hold_until_key(&server, &["same-plain"], "same-plain");
    let fair = hold_until_key(&server, &["same-fair", "--fair"], "same-fair");
    let fair_waiter = hold(&server, &["same-fair", "--fair", "--wait", "30s"]);
    let reader = hold_until_key(&server, &["same-rw", "--read"], "same-rw");
    let writer = hold(&server, &["same-rw", "--write", "--wait", "30s"]);
    let sem = hold_until_key(&server, &["same-sem", "--semaphore", "2"], "same-sem");
    let job = hold_until_key(
        &server,
        &["same-job", "--at-most", "1m", "--env", "prod"],
        "job-lock:prod:same-job",
    );
    assert!(
        wait_until(Duration::from_secs(10), || {
            let (v, _) = list_json(distlock(&server), &["same-*"]);
            entry(&v, "same-fair")["queue"] == 1 && entry(&v, "same-rw")["waiting_writers"] == 1
        }),
        "the waiters did not queue"
    );
    // What may change between two reads: the TTLs and the holders' ages.
    let stable = |mut e: Value| {
        let o = e.as_object_mut().unwrap();
        o.remove("ttl_ms");
        o.remove("grants_seen");
        if let Some(h) = o.get_mut("holder").and_then(Value::as_object_mut) {
            h.remove("held_for_ms");
        }
        e
    };
    let names = ["same-plain", "same-fair", "same-rw", "same-sem", "same-job"];
    let (listed, _) = list_json(distlock(&server), &["same-*"]);
    let mut c = distlock(&server);
    c.arg("status").args(names).arg("--json");
    let out = output(c);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let status: Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut c = distlock(&server);
    c.args(["top", "same-*", "--once", "--json", "--interval", "100ms"]);
    let out = output(c);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let top: Value = serde_json::from_slice(&out.stdout).unwrap();
    for (i, name) in names.iter().enumerate() {
        let from_list = stable(entry(&listed, name).clone());
        let from_status = stable(status[i].clone());
        let from_top = stable(
            top["rows"]
                .as_array()
                .unwrap()
                .iter()
                .find(|r| r["name"] == *name)
                .unwrap_or_else(|| panic!("{name} not in top: {top:#}"))
                .clone(),
        );
        assert_eq!(from_status, from_list, "{name}: status vs list");
        assert_eq!(from_top, from_list, "{name}: top vs list");
    }
    assert_eq!(entry(&listed, "same-fair")["kind"], "fair_lock");
    assert_eq!(entry(&listed, "same-rw")["kind"], "read_lock");
    // The waiting writer's client listens on the read-write lock's own channel.
    assert_eq!(entry(&listed, "same-rw")["waiting"], 1, "{listed:#}");
    assert_eq!(entry(&listed, "same-job")["kind"], "job_lock");
    stop(vec![plain, fair, fair_waiter, reader, writer, sem, job]);
}

/// One vocabulary of kind names: `list`'s KIND column and JSON, `status`'s JSON and text, and
/// `top`'s table and JSON name each kind as the library does (`distlock::kind`: the `kind` of
/// its spans and metrics).
#[test]
fn every_command_names_kinds_as_the_library_does() {
    use distlock::kind;
    let server = RedisServer::start();
    let plain = hold_until_key(&server, &["k-plain"], "k-plain");
    let fair = hold_until_key(&server, &["--fair", "k-fair"], "k-fair");
    let fair_waiter = hold(&server, &["--fair", "--wait", "30s", "k-fair"]);
    let reader = hold_until_key(&server, &["--read", "k-read"], "k-read");
    let writer = hold_until_key(&server, &["--write", "k-write"], "k-write");
    let sem = hold_until_key(&server, &["--semaphore", "2", "k-leased"], "k-leased");
    let job = hold_until_key(
        &server,
        &["--at-most", "1m", "--env", "prod", "k-job"],
        "job-lock:prod:k-job",
    );
    let _: String = cmd(&server, &["SET", "k-counter", "4"]);
    let expected = [
        ("k-plain", kind::LOCK),
        ("k-fair", kind::FAIR_LOCK),
        ("k-read", kind::READ_LOCK),
        ("k-write", kind::WRITE_LOCK),
        ("k-leased", kind::LEASED_SEMAPHORE),
        ("k-job", kind::JOB_LOCK),
        ("k-counter", kind::SEMAPHORE_OR_LATCH),
    ];
    let queued = wait_until(Duration::from_secs(5), || {
        let (v, _) = list_json(distlock(&server), &["--all"]);
        entry(&v, "k-fair")["queue"] == 1
    });
    assert!(queued, "the fair lock's waiter is not queued");
    let (listed, _) = list_json(distlock(&server), &["--all"]);
    let mut c = distlock(&server);
    c.args(["list", "--all"]);
    let table = String::from_utf8(output(c).stdout).unwrap();
    let mut c = distlock(&server);
    c.args(["top", "--once", "--interval", "100ms"]);
    let top_table = String::from_utf8(output(c).stdout).unwrap();
    let mut c = distlock(&server);
    c.args(["top", "--once", "--json", "--interval", "100ms"]);
    let top: Value = serde_json::from_slice(&output(c).stdout).unwrap();
    for (name, kind) in expected {
        assert_eq!(entry(&listed, name)["kind"], kind, "list --json: {name}");
        // `top` has no --all: an integer key nothing marks is not its row.
        let tables = if kind == distlock::kind::SEMAPHORE_OR_LATCH {
            vec![("list", &table)]
        } else {
            vec![("list", &table), ("top --once", &top_table)]
        };
        for (what, text) in tables {
            let row = text
                .lines()
                .find(|l| l.split_whitespace().any(|w| w == name))
                .unwrap_or_else(|| panic!("{what}: no row for {name}: {text}"));
            assert!(
                row.split_whitespace().any(|w| w == kind),
                "{what}: the KIND of {name} is not {kind}: {row}"
            );
        }
        if let Some(row) = top["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == name)
        {
            assert_eq!(row["kind"], kind, "top --json: {name}");
        } else {
            assert_eq!(kind, distlock::kind::SEMAPHORE_OR_LATCH, "{name}: {top:#}");
        }
        let mut c = distlock(&server);
        c.args(["status", "--json", name]);
        if name == "k-job" {
            c.args(["--env", "prod"]);
        }
        let status: Value = serde_json::from_slice(&output(c).stdout).unwrap();
        assert_eq!(status[0]["kind"], kind, "status --json: {name}");
    }
    // `status` in words names the kinds it shows by the same names.
    for (args, said) in [
        (&["k-job", "--env", "prod"][..], "k-job (job_lock, "),
        (&["k-leased"][..], "k-leased (leased_semaphore): "),
        (&["k-counter"][..], "k-counter (semaphore_or_latch, "),
    ] {
        let mut c = distlock(&server);
        c.arg("status").args(args);
        let text = String::from_utf8(output(c).stdout).unwrap();
        assert!(text.contains(said), "status {args:?}: {text}");
    }
    stop(vec![plain, fair, fair_waiter, reader, writer, sem, job]);
}
