//! "Who holds it": each client names its connections (`CLIENT SETNAME
//! distlock:<app>:<host>:<pid>`, library name `distlock`) and each grant of a plain or fair
//! lock records its holder (`distlock:holder`), which `Lock::status` reads back.

use std::collections::HashMap;
use std::time::{Duration, SystemTime};

use distlock::layout::HOLDER_FIELD;
use distlock::{Client, ErrorKind, HolderInfo};

use crate::util::*;

async fn client_named(server: &RedisServer, app: &str) -> Client {
    Client::builder()
        .url(server.url())
        .app_name(app)
        .build()
        .await
        .expect("connect to test server")
}

/// The holder field of `key`, if any.
fn holder_field(server: &RedisServer, key: &str) -> Option<String> {
    cmd(server, &["HGET", key, HOLDER_FIELD])
}

/// Checks a raw holder field against `app`, this host and process, and a grant made between
/// the server times `before` and `after` (ms); returns its `since` (whole seconds).
fn check_holder_field(raw: &str, app: &str, before: u64, after: u64) -> u64 {
    let prefix = format!(
        "{app};{};{};",
        distlock_test::testing::host_name(),
        std::process::id()
    );
    let since = raw
        .strip_prefix(&prefix)
        .unwrap_or_else(|| panic!("holder field {raw:?} does not start with {prefix:?}"));
    let since: u64 = since
        .parse()
        .unwrap_or_else(|e| panic!("since {since:?}: {e}"));
    assert!(
        before / 1000 <= since && since <= after / 1000,
        "since {since} s outside the server times {before}..={after} ms around the grant"
    );
    // Within Redis's compact hash encoding (hash-max-listpack-value 64).
    assert!(
        raw.len() <= 64,
        "holder field of {} bytes: {raw:?}",
        raw.len()
    );
    since
}

/// `since` in seconds as a `SystemTime`.
fn at(secs: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
}

/// Checks what `Lock::status` reports of the holder.
fn check_status_holder(holder: Option<HolderInfo>, owner: &str, app: &str, since: u64) {
    let h = holder.expect("status reports the holder");
    assert_eq!(h.owner, owner);
    assert_eq!(h.app, app);
    assert_eq!(h.host, distlock_test::testing::host_name());
    assert_eq!(h.pid, std::process::id());
    assert_eq!(h.since, at(since));
}

/// A plain grant records owner, app, host, pid and the server time of the grant; status
/// reads it back; a re-entry and a partial release keep it as it was; the last release
/// deletes it with the key; the next grant records its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_grant_records_its_holder() {
    let server = RedisServer::start();
    let client = client_named(&server, "billing-test").await;
    let lock = client.lock("who");
    let before = server_time_ms(&server);
    let guard = lock.try_acquire().await.unwrap().expect("free");
    let after = server_time_ms(&server);
    let raw = holder_field(&server, "who").expect("the grant wrote the holder field");
    let owner = guard.owner().as_str().to_string();
    let since = check_holder_field(&raw, "billing-test", before, after);

    let status = lock.status().await.unwrap();
    assert_eq!(status.holders, vec![(owner.clone(), 1)], "one owner field");
    assert!(status.fencing_token.is_some());
    check_status_holder(status.holder, &owner, "billing-test", since);

    // Re-entry (guard and acquire_as) and a partial release keep the record, `since` too
    // (past a second boundary of the server clock, so a rewrite would show).
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let inner = guard.reenter().await.unwrap();
    let again = lock.acquire_as(guard.owner()).await.unwrap();
    assert_eq!(again.hold_count(), 3);
    assert_eq!(holder_field(&server, "who").as_deref(), Some(raw.as_str()));
    again.release().await.unwrap();
    inner.release().await.unwrap();
    assert_eq!(holder_field(&server, "who").as_deref(), Some(raw.as_str()));
    let status = lock.status().await.unwrap();
    assert_eq!(status.holders, vec![(owner.clone(), 1)]);
    check_status_holder(status.holder, &owner, "billing-test", since);

    // Another client's refused attempt changes nothing.
    let other = client_named(&server, "other-app").await;
    assert!(other.lock("who").try_acquire().await.unwrap().is_none());
    assert_eq!(holder_field(&server, "who").as_deref(), Some(raw.as_str()));

    guard.release().await.unwrap();
    let exists: bool = cmd(&server, &["EXISTS", "who"]);
    assert!(
        !exists,
        "the last release deletes the key and its holder field"
    );
    assert_eq!(lock.status().await.unwrap().holder, None);

    // The next grant, by the other client, records the other client.
    let before = server_time_ms(&server);
    let next = other
        .lock("who")
        .try_acquire()
        .await
        .unwrap()
        .expect("free");
    let after = server_time_ms(&server);
    let raw = holder_field(&server, "who").expect("holder field");
    check_holder_field(&raw, "other-app", before, after);
    next.release().await.unwrap();
}

/// `acquire_as` on a free lock is a grant to a new holder: recorded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquire_as_on_a_free_lock_records_the_holder() {
    let server = RedisServer::start();
    let client = client_named(&server, "as-app").await;
    let owner = client.new_owner();
    let before = server_time_ms(&server);
    let guard = client.lock("as").acquire_as(&owner).await.unwrap();
    let after = server_time_ms(&server);
    let raw = holder_field(&server, "as").expect("holder field");
    check_holder_field(&raw, "as-app", before, after);
    guard.release().await.unwrap();
    assert_eq!(holder_field(&server, "as"), None);
}

/// The fair lock records its holder like the plain lock; its queue and re-entry leave the
/// record alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fair_grant_records_its_holder() {
    let server = RedisServer::start();
    let client = client_named(&server, "fair-app").await;
    let fair = client.fair_lock("fair-who");
    let before = server_time_ms(&server);
    let guard = fair.try_acquire().await.unwrap().expect("free");
    let after = server_time_ms(&server);
    let owner = guard.owner().as_str().to_string();
    let raw = holder_field(&server, "fair-who").expect("the grant wrote the holder field");
    let since = check_holder_field(&raw, "fair-app", before, after);
    let status = fair.status().await.unwrap();
    assert_eq!(status.holders, vec![(owner.clone(), 1)]);
    check_status_holder(status.holder, &owner, "fair-app", since);

    // A queued waiter of another client, then a re-entry: the record stays.
    let other = client_named(&server, "fair-other").await;
    let waiter = {
        let other = other.clone();
        tokio::spawn(async move {
            other
                .fair_lock("fair-who")
                .try_acquire_for(Duration::from_secs(10))
                .await
        })
    };
    assert!(
        eventually(Duration::from_secs(5), || {
            cmd::<i64>(&server, &["LLEN", "redisson_lock_queue:{fair-who}"]) == 1
        })
        .await,
        "the waiter queued"
    );
    tokio::time::sleep(Duration::from_millis(1100)).await; // past a second boundary
    let inner = guard.reenter().await.unwrap();
    assert_eq!(inner.hold_count(), 2);
    assert_eq!(
        holder_field(&server, "fair-who").as_deref(),
        Some(raw.as_str())
    );
    inner.release().await.unwrap();
    assert_eq!(
        holder_field(&server, "fair-who").as_deref(),
        Some(raw.as_str())
    );
    let status = fair.status().await.unwrap();
    assert_eq!(status.queue.len(), 1);
    check_status_holder(status.holder, &owner, "fair-app", since);

    // The last release hands the lock to the waiter, whose grant records it.
    let before = server_time_ms(&server);
    guard.release().await.unwrap();
    let next = waiter
        .await
        .unwrap()
        .unwrap()
        .expect("the waiter was granted");
    let after = server_time_ms(&server);
    let raw = holder_field(&server, "fair-who").expect("holder field");
    check_holder_field(&raw, "fair-other", before, after);
    next.release().await.unwrap();
    let exists: bool = cmd(&server, &["EXISTS", "fair-who"]);
    assert!(!exists);
}

/// Read-write locks carry no holder field (Redisson's read-write unlock scripts count the
/// hash's fields), and their status reports none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_write_locks_record_no_holder() {
    let (server, client) = setup().await;
    let rw = client.rw_lock("rw-who");
    let w = rw.write().await.unwrap();
    assert_eq!(holder_field(&server, "rw-who"), None);
    let fields: i64 = cmd(&server, &["HLEN", "rw-who"]);
    assert_eq!(fields, 2, "mode + the writer's field");
    let status = rw.status().await.unwrap();
    assert_eq!(status.holder, None);
    assert_eq!(status.mode, Some(distlock::LockMode::Write));
    w.release().await.unwrap();
    let r = rw.read().await.unwrap();
    assert_eq!(holder_field(&server, "rw-who"), None);
    let status = rw.status().await.unwrap();
    assert_eq!(status.holder, None);
    assert_eq!(status.mode, Some(distlock::LockMode::Read));
    r.release().await.unwrap();
    assert_eq!(rw.status().await.unwrap().mode, None, "free");
}

/// `force_unlock` takes a hash with a holder field for a lock (it refuses hashes with
/// fields no lock has) and deletes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn force_unlock_deletes_a_lock_with_a_holder_field() {
    let (server, client) = setup().await;
    let guard = client.lock("forced").try_acquire().await.unwrap().unwrap();
    assert!(holder_field(&server, "forced").is_some());
    assert!(client.lock("forced").force_unlock().await.unwrap());
    let exists: bool = cmd(&server, &["EXISTS", "forced"]);
    assert!(!exists);
    let _ = guard.forget();
    // A hash whose holder field is not a holder record is still refused.
    let _: () = cmd(&server, &["HSET", "not-a-lock", HOLDER_FIELD, "hello"]);
    let err = client.lock("not-a-lock").force_unlock().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::WrongType);
    let exists: bool = cmd(&server, &["EXISTS", "not-a-lock"]);
    assert!(exists);
}

/// `CLIENT LIST` as one map per connection.
fn client_list(server: &RedisServer) -> Vec<HashMap<String, String>> {
    let text: String = cmd(server, &["CLIENT", "LIST"]);
    text.lines()
        .map(|line| {
            line.split(' ')
                .filter_map(|kv| kv.split_once('='))
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        })
        .collect()
}

/// The connections named `name`: (subscribed to something, the whole entry).
fn named(server: &RedisServer, name: &str) -> Vec<(bool, HashMap<String, String>)> {
    client_list(server)
        .into_iter()
        .filter(|c| c.get("name").map(String::as_str) == Some(name))
        .map(|c| {
            let subscribed = c.get("sub").is_some_and(|n| n != "0");
            (subscribed, c)
        })
        .collect()
}

/// Whether the server reports library names in `CLIENT LIST` (Redis 7.2 and later).
fn reports_lib_name(server: &RedisServer) -> bool {
    let info: String = cmd(server, &["INFO", "server"]);
    let version = info
        .lines()
        .find_map(|l| l.strip_prefix("redis_version:"))
        .unwrap_or("0")
        .trim()
        .to_string();
    let mut parts = version.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    let (major, minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    (major, minor) >= (7, 2)
}

/// Wait (at most 10 s) until `server` shows a command connection (not subscribed) and a
/// subscription connection (subscribed, with a waiter waiting) both named `name`; returns
/// the two entries.
async fn both_named(
    server: &RedisServer,
    name: &str,
) -> (HashMap<String, String>, HashMap<String, String>) {
    let found = eventually(Duration::from_secs(10), || {
        let conns = named(server, name);
        conns.iter().any(|(s, _)| *s) && conns.iter().any(|(s, _)| !*s)
    })
    .await;
    let conns = named(server, name);
    assert!(
        found,
        "no command and subscription connection named {name}: {:?}",
        client_list(server)
    );
    let sub = conns.iter().find(|(s, _)| *s).unwrap().1.clone();
    let command = conns.iter().find(|(s, _)| !*s).unwrap().1.clone();
    (command, sub)
}

/// The client's connections are named `distlock:<app>:<host>:<pid>` — the command
/// connection and the subscription connection — and report the library `distlock` (Redis
/// 7.2+). After a server restart both are named again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_are_named_and_named_again_after_a_restart() {
    // Persistent, so that the held lock survives the restart and the waiter keeps waiting
    // (with its subscription) through it.
    let mut server = RedisServer::options().persistent().start();
    let client = client_named(&server, "conn-names").await;
    let name = format!(
        "distlock:conn-names:{}:{}",
        distlock_test::testing::host_name(),
        std::process::id()
    );
    assert_eq!(client.connection_name(), name);
    assert_eq!(client.app_name(), "conn-names");

    // A waiter on a lock another client holds keeps a subscription open.
    let other = client_named(&server, "holder-app").await;
    let held = other.lock("busy").try_acquire().await.unwrap().unwrap();
    let waiter = {
        let client = client.clone();
        tokio::spawn(async move {
            client
                .lock("busy")
                .try_acquire_for(Duration::from_secs(60))
                .await
        })
    };
    let (command, sub) = both_named(&server, &name).await;
    if reports_lib_name(&server) {
        for c in [&command, &sub] {
            assert_eq!(c.get("lib-name").map(String::as_str), Some("distlock"));
            assert_eq!(
                c.get("lib-ver").map(String::as_str),
                Some(env!("CARGO_PKG_VERSION"))
            );
        }
    } else {
        eprintln!("redis-server below 7.2: lib-name not reported, not checked");
    }
    // The other client's connections carry its own name.
    let other_name = format!(
        "distlock:holder-app:{}:{}",
        distlock_test::testing::host_name(),
        std::process::id()
    );
    assert!(!named(&server, &other_name).is_empty());

    // Restart: every connection breaks; the hub reconnects, names its new connection and
    // has the command connection named again. The lock is in the snapshot, so the waiter
    // still waits (subscribed) after the restart.
    let _ = held.forget();
    let _: () = cmd(&server, &["SAVE"]);
    server.restart();
    let (command, sub) = both_named(&server, &name).await;
    assert_ne!(command.get("id"), sub.get("id"));
    assert!(!waiter.is_finished(), "the lock survived the restart");
    let freed = loop {
        // The other client reconnects too; its first requests may fail.
        match other.lock("busy").force_unlock().await {
            Ok(freed) => break freed,
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    };
    assert!(freed, "the forgotten hold was still there");
    let granted = waiter.await.unwrap().unwrap();
    granted
        .expect("the waiter was granted")
        .release()
        .await
        .unwrap();
}

/// A user whose ACL denies `CLIENT SETNAME` connects and locks all the same; its
/// connections stay unnamed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_without_client_rights_connects_unnamed() {
    let server = RedisServer::start();
    let _: () = cmd(
        &server,
        &[
            "ACL", "SETUSER", "noclient", "reset", "on", ">pw", "~*", "&*", "+@all", "-client",
        ],
    );
    let client = Client::builder()
        .url(format!("redis://noclient:pw@127.0.0.1:{}/", server.port()))
        .app_name("no-names")
        .build()
        .await
        .expect("connects without CLIENT rights");
    let guard = client.lock("unnamed").try_acquire().await.unwrap().unwrap();
    let raw = holder_field(&server, "unnamed").expect("the holder is recorded all the same");
    assert!(raw.starts_with("no-names;"), "{raw}");
    guard.release().await.unwrap();
    assert!(named(&server, client.connection_name()).is_empty());
    let users: Vec<String> = client_list(&server)
        .into_iter()
        .filter_map(|c| c.get("user").cloned())
        .collect();
    assert!(
        users.iter().any(|u| u == "noclient"),
        "the client is connected: {users:?}"
    );
}

/// A bad app name is a configuration error, found before anything is connected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_app_name_is_refused_before_connecting() {
    let server = RedisServer::start();
    let accepted = || -> u64 {
        let info: String = cmd(&server, &["INFO", "stats"]);
        info.lines()
            .find_map(|l| l.strip_prefix("total_connections_received:"))
            .expect("total_connections_received")
            .trim()
            .parse()
            .unwrap()
    };
    let accepted_before = accepted();
    for bad in ["", "has space", "colon:in", "ünï", &"x".repeat(65)] {
        let err = Client::builder()
            .url(server.url())
            .app_name(bad)
            .build()
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Config, "{bad:?}: {err}");
        assert!(err.to_string().contains("app name"), "{err}");
    }
    // No connection but the test's own (one per INFO) reached the server.
    assert_eq!(
        accepted(),
        accepted_before + 1,
        "a refused client connected"
    );
    // The name is checked before the server is even looked for.
    let err = Client::builder()
        .url("redis://127.0.0.1:1/")
        .app_name("bad name")
        .build()
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Config, "{err}");
    // A good one is taken as given; the default is the executable's name.
    let c = client_named(&server, "a-Z_0.9").await;
    assert_eq!(c.app_name(), "a-Z_0.9");
    let d = client_for(&server).await;
    let exe = std::env::current_exe().unwrap();
    let stem = exe.file_stem().unwrap().to_string_lossy();
    assert_eq!(d.app_name(), stem);
}
