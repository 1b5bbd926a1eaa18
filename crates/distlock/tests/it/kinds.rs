//! One name used by two kinds of primitive (`lock("orders")` in one service,
//! `rw_lock("orders")` in another): every kind held, every other kind tried. A kind whose data
//! cannot be told apart from the held kind's is refused with `WrongType`, naming both, and
//! changes nothing; the plain and fair lock share Redisson's `RLock` layout and exclude each
//! other as one lock. The server answers at once after every try (a read release once looped
//! over another kind's fencing token and hung Redis for every client).
//!
//! The semaphore, leased semaphore and count-down latch share one layout in Redisson (a bare
//! integer string), which no script can tell apart: those pairs are not tried here.

use std::time::Duration;

use distlock::{Client, ErrorKind};

use crate::util::*;
use distlock::Lease;

/// What holds the name before the other kind tries it.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Held {
    Plain,
    Fair,
    Read,
    Write,
    /// A Java service's Redisson `RLock`: hash `<uuid>:<threadId>` -> 1, with a lease.
    RedissonLock,
    /// A Java service's Redisson read lock: hash `mode read`, `<uuid>:<threadId>` -> 1, and the
    /// hold's `{name}:<uuid>:<threadId>:rwlock_timeout:1` key.
    RedissonRead,
    Semaphore,
    Leased,
    Latch,
}

/// The kind that tries the name.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Tried {
    Plain,
    Fair,
    Read,
    Write,
    Semaphore,
    Leased,
    Latch,
}

/// What a try must come to.
#[derive(Debug, PartialEq)]
enum Outcome {
    /// `WrongType`, with a message that names what the key holds and what was asked for.
    Refused,
    /// Not granted (the plain and fair lock are one lock in Redisson's layout).
    Contended,
}

const HELD: [Held; 9] = [
    Held::Plain,
    Held::Fair,
    Held::Read,
    Held::Write,
    Held::RedissonLock,
    Held::RedissonRead,
    Held::Semaphore,
    Held::Leased,
    Held::Latch,
];
const TRIED: [Tried; 7] = [
    Tried::Plain,
    Tried::Fair,
    Tried::Read,
    Tried::Write,
    Tried::Semaphore,
    Tried::Leased,
    Tried::Latch,
];

/// The family a kind's data belongs to: a hash without `mode` (plain, fair), a hash with it
/// (read-write), or an integer string (semaphores, latch).
#[derive(Clone, Copy, Debug, PartialEq)]
enum Layout {
    LockHash,
    RwHash,
    Count,
}

fn held_layout(h: Held) -> Layout {
    match h {
        Held::Plain | Held::Fair | Held::RedissonLock => Layout::LockHash,
        Held::Read | Held::Write | Held::RedissonRead => Layout::RwHash,
        Held::Semaphore | Held::Leased | Held::Latch => Layout::Count,
    }
}

fn tried_layout(t: Tried) -> Layout {
    match t {
        Tried::Plain | Tried::Fair => Layout::LockHash,
        Tried::Read | Tried::Write => Layout::RwHash,
        Tried::Semaphore | Tried::Leased | Tried::Latch => Layout::Count,
    }
}

/// The expected outcome, or `None` for pairs of one layout (the kind's own semantics, tested
/// elsewhere, or counts no script can tell apart).
fn expected(h: Held, t: Tried) -> Option<Outcome> {
    match (held_layout(h), tried_layout(t)) {
        (Layout::LockHash, Layout::LockHash) => Some(Outcome::Contended),
        (a, b) if a == b => None,
        _ => Some(Outcome::Refused),
    }
}

/// Words the refusal's message must hold for what the key holds.
fn found_words(h: Held) -> &'static str {
    match held_layout(h) {
        Layout::LockHash => "plain or fair lock",
        Layout::RwHash => "read-write lock",
        Layout::Count => "string",
    }
}

/// Words the refusal's message must hold for what was asked for.
fn wanted_words(t: Tried) -> &'static str {
    match t {
        Tried::Plain => "plain lock",
        Tried::Fair => "fair lock",
        Tried::Read | Tried::Write => "read-write lock",
        Tried::Semaphore => "semaphore",
        Tried::Leased => "leased semaphore",
        Tried::Latch => "latch",
    }
}

/// Keeps what holds the name alive (guards release on drop in the background; the test
/// deletes the keys itself before the next pair).
#[allow(dead_code)]
enum Holding {
    Lock(distlock::LockGuard),
    Fair(distlock::FairLockGuard),
    Read(distlock::RwLockReadGuard),
    Write(distlock::RwLockWriteGuard),
    Leased(distlock::LeasedPermit),
    Permit(distlock::SemaphorePermit),
    Nothing,
}

async fn hold(server: &RedisServer, client: &Client, h: Held, name: &str) -> Holding {
    let lease = Duration::from_secs(60);
    match h {
        Held::Plain => Holding::Lock(client.lock(name).lease(lease).acquire().await.unwrap()),
        Held::Fair => Holding::Fair(client.fair_lock(name).lease(lease).acquire().await.unwrap()),
        Held::Read => Holding::Read(client.rw_lock(name).lease(lease).read().await.unwrap()),
        Held::Write => Holding::Write(client.rw_lock(name).lease(lease).write().await.unwrap()),
        Held::RedissonLock => {
            let field = "6b0f7d1e-redisson-java:1";
            let _: () = cmd(server, &["HSET", name, field, "1"]);
            let _: () = cmd(server, &["PEXPIRE", name, "60000"]);
            Holding::Nothing
        }
        Held::RedissonRead => {
            let field = "6b0f7d1e-redisson-java:1";
            let _: () = cmd(server, &["HSET", name, "mode", "read", field, "1"]);
            let _: () = cmd(server, &["PEXPIRE", name, "60000"]);
            let hold = format!("{{{name}}}:{field}:rwlock_timeout:1");
            let _: () = cmd(server, &["SET", &hold, "1", "PX", "60000"]);
            Holding::Nothing
        }
        Held::Semaphore => {
            let s = client.semaphore(name);
            assert!(s.try_set_permits(3).await.unwrap());
            Holding::Permit(s.acquire().await.unwrap())
        }
        Held::Leased => {
            let s = client.leased_semaphore(name);
            assert!(s.try_set_permits(3).await.unwrap());
            Holding::Leased(s.lease(lease).acquire().await.unwrap())
        }
        Held::Latch => {
            assert!(client
                .count_down_latch(name)
                .try_set_count(3)
                .await
                .unwrap());
            Holding::Nothing
        }
    }
}

/// One try of `t` on `name`: `Ok(true)` granted, `Ok(false)` not, or the error. Whatever was
/// granted is forgotten (its keys go with the pair's clean-up).
async fn attempt(client: &Client, t: Tried, name: &str) -> distlock::Result<bool> {
    let lease = Duration::from_secs(5);
    Ok(match t {
        Tried::Plain => client
            .lock(name)
            .lease(lease)
            .try_acquire()
            .await?
            .is_some(),
        Tried::Fair => client
            .fair_lock(name)
            .lease(lease)
            .try_acquire()
            .await?
            .is_some(),
        Tried::Read => client
            .rw_lock(name)
            .lease(lease)
            .try_read()
            .await?
            .is_some(),
        Tried::Write => client
            .rw_lock(name)
            .lease(lease)
            .try_write()
            .await?
            .is_some(),
        Tried::Semaphore => client.semaphore(name).try_acquire().await?.is_some(),
        Tried::Leased => client
            .leased_semaphore(name)
            .lease(lease)
            .try_acquire()
            .await?
            .is_some(),
        Tried::Latch => {
            client.count_down_latch(name).count_down().await?;
            true
        }
    })
}

/// Every key of the deployment with its type and contents, for "nothing changed".
fn snapshot(server: &RedisServer) -> Vec<(String, String)> {
    let mut keys: Vec<String> = cmd(server, &["KEYS", "*"]);
    keys.retain(|k| !k.contains("fencing-counter"));
    keys.sort();
    keys.into_iter()
        .map(|k| {
            let t: String = cmd(server, &["TYPE", &k]);
            let v = match t.as_str() {
                "hash" => {
                    let mut kv: Vec<String> = cmd(server, &["HGETALL", &k]);
                    kv.sort();
                    kv.join(",")
                }
                "string" => cmd::<Vec<u8>>(server, &["GET", &k])
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect(),
                "zset" => cmd::<Vec<Vec<u8>>>(server, &["ZRANGE", &k, "0", "-1", "WITHSCORES"])
                    .len()
                    .to_string(),
                other => other.to_string(),
            };
            (k, format!("{t}:{v}"))
        })
        .collect()
}

/// The server answers a PING within a second (a looping script makes it answer `BUSY`).
async fn responsive(server: &RedisServer, what: &str) {
    let mut con = data_connection(&server.url()).await;
    let pong: redis::RedisResult<String> = tokio::time::timeout(
        Duration::from_secs(1),
        redis::cmd("PING").query_async(&mut con),
    )
    .await
    .unwrap_or_else(|_| panic!("{what}: the server did not answer PING within 1 s"));
    assert_eq!(pong.unwrap_or_else(|e| panic!("{what}: PING: {e}")), "PONG");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kind_held_every_other_kind_tried_is_refused_and_changes_nothing() {
    let (server, client) = setup().await;
    let mut tried = 0;
    for (i, h) in HELD.into_iter().enumerate() {
        for (j, t) in TRIED.into_iter().enumerate() {
            let Some(want) = expected(h, t) else { continue };
            let name = format!("orders-{i}-{j}");
            let holding = hold(&server, &client, h, &name).await;
            let before = snapshot(&server);
            let what = format!("{h:?} held, {t:?} tried");
            let got = tokio::time::timeout(Duration::from_secs(5), attempt(&client, t, &name))
                .await
                .unwrap_or_else(|_| panic!("{what}: no answer within 5 s"));
            match (want, got) {
                (Outcome::Contended, Ok(false)) => {}
                (Outcome::Refused, Err(e)) if e.kind() == ErrorKind::WrongType => {
                    let msg = e.to_string();
                    assert!(
                        msg.contains(found_words(h)) && msg.contains(wanted_words(t)),
                        "{what}: the refusal names both kinds: {msg}"
                    );
                }
                (want, got) => panic!("{what}: wanted {want:?}, got {got:?}"),
            }
            assert_eq!(snapshot(&server), before, "{what}: the try changed data");
            responsive(&server, &what).await;
            drop(holding);
            // Let guards dropped above finish their background release before the keys go.
            tokio::time::sleep(Duration::from_millis(20)).await;
            let _: () = cmd(&server, &["FLUSHALL"]);
            tried += 1;
        }
    }
    assert_eq!(tried, 48, "pairs tried");
}

/// The loop of a read release is bounded. It walks each reader's hold count to find the
/// longest read lease left; a fencing token of another kind's hash (about 1.8e15) taken for a
/// count once made it run for days, answering `BUSY` to every client. Values that are not
/// reader hold counts are skipped, and a reader's count is walked for its newest 1,024 holds
/// at most, so the release returns at once and the server answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_release_walks_only_bounded_hold_counts() {
    let (server, client) = setup().await;
    let rw = client.rw_lock("coll");
    let mine = rw.try_read().await.unwrap().expect("free");
    let other = rw.try_read().await.unwrap().expect("readers share");
    // What another kind (or a Java service's Redisson over a lock hash) leaves in the hash.
    let _: () = cmd(
        &server,
        &["HSET", "coll", "distlock:fencing-token", "1795739903974939"],
    );
    let _: () = cmd(&server, &["HSET", "coll", "6b0f7d1e-java:1", "100000000"]);
    let released = tokio::time::timeout(Duration::from_secs(5), mine.release())
        .await
        .expect("the read release returns within 5 s");
    released.unwrap();
    responsive(&server, "after the read release").await;
    let mode: String = cmd(&server, &["HGET", "coll", "mode"]);
    assert_eq!(mode, "read", "the other reader still holds it");
    assert!(other.is_held().await.unwrap());
}

/// Force-unlock by kind: a plain lock's does not delete a read-write lock, nor a read-write
/// lock's a plain lock; a fair lock's never deletes a semaphore.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn force_unlock_deletes_only_its_own_kind() {
    let (server, client) = setup().await;
    let w = client.rw_lock("a").write().await.unwrap();
    let e = client.lock("a").force_unlock().await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::WrongType, "{e}");
    assert!(e.to_string().contains("read-write lock"), "{e}");
    assert!(w.is_held().await.unwrap(), "the write lock survives");
    let g = client.lock("b").acquire().await.unwrap();
    let e = client.rw_lock("b").force_unlock().await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::WrongType, "{e}");
    assert!(g.is_held().await.unwrap(), "the plain lock survives");
    assert!(client.semaphore("c").try_set_permits(2).await.unwrap());
    let e = client.fair_lock("c").force_unlock().await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::WrongType, "{e}");
    assert_eq!(client.semaphore("c").available_permits().await.unwrap(), 2);
    // Each kind still force-unlocks its own.
    assert!(client.rw_lock("a").force_unlock().await.unwrap());
    assert!(client.lock("b").force_unlock().await.unwrap());
    responsive(&server, "after the force-unlocks").await;
}

/// Renewals touch only their own kind's hash, even where the other kind has a field of the
/// owner's name (an owner given explicitly to both kinds): the watchdog's plain-lock renewal
/// does not extend a read-write lock, and the read renewal not a plain lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewal_does_not_extend_another_kinds_hash() {
    let (server, client) = setup().await;
    let lease = Duration::from_secs(2);
    let g = client.lock("r").lease(lease).acquire().await.unwrap();
    let field = g.owner().as_str().to_string();
    // The plain lock's hash becomes a read-write lock's with the same owner field.
    let _: () = cmd(&server, &["DEL", "r"]);
    let _: () = cmd(&server, &["HSET", "r", "mode", "read", &field, "1"]);
    let _: () = cmd(&server, &["PEXPIRE", "r", "1000"]);
    let e = g.extend(Duration::from_secs(30)).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotHeld, "{e}");
    let pttl: i64 = cmd(&server, &["PTTL", "r"]);
    assert!(
        pttl <= 1000,
        "the read-write lock was extended to {pttl} ms"
    );
    let _: () = cmd(&server, &["DEL", "r"]);

    let r = client.rw_lock("q").lease(lease).read().await.unwrap();
    let field = r.owner().as_str().to_string();
    let _: () = cmd(&server, &["DEL", "q"]);
    let _: () = cmd(&server, &["HSET", "q", &field, "1"]);
    let _: () = cmd(&server, &["PEXPIRE", "q", "1000"]);
    let e = r.extend(Duration::from_secs(30)).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotHeld, "{e}");
    let pttl: i64 = cmd(&server, &["PTTL", "q"]);
    assert!(pttl <= 1000, "the plain lock was extended to {pttl} ms");
    responsive(&server, "after the renewals").await;
}
