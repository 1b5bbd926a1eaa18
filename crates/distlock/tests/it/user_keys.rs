//! A mistyped name over a user's data (`HSET user:2 name bob …`, then
//! `fair_lock("user:2").force_unlock()`): every verb that deletes or rewrites a key whoever
//! holds it — the plain, fair and read-write locks' and the job lock's force-unlock, a latch's
//! delete, a semaphore's drain, a leased semaphore's `set_permits` — refuses a key that is not
//! its own kind's with `WrongType`, and leaves it byte for byte as it was (TYPE, DUMP, TTL),
//! writing no other key either.
//!
//! A string that is an integer (as Redis's `INCRBY` takes one) is the semaphores' and the
//! latch's own layout (Redisson's bare integer), which no script can tell from a user's number:
//! those three verbs take it for their own kind's, as documented (the latch's delete deletes
//! it, the drain takes its permits, `set_permits` counts it as the available permits); every
//! other verb refuses it. A number that is no such integer (`3.5`, `02134`) is refused by all.

use std::time::Duration;

use distlock::{Client, ErrorKind};

use crate::util::*;

/// A verb that deletes or rewrites a key whoever holds it: each lock kind's force-unlock (by
/// the kind), and the counts' verbs.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Verb {
    Plain,
    Fair,
    ReadWrite,
    Job,
    LatchDelete,
    SemaphoreDrain,
    LeasedSetPermits,
}

const VERBS: [Verb; 7] = [
    Verb::Plain,
    Verb::Fair,
    Verb::ReadWrite,
    Verb::Job,
    Verb::LatchDelete,
    Verb::SemaphoreDrain,
    Verb::LeasedSetPermits,
];

/// The verb as a caller writes it.
fn label(verb: Verb) -> &'static str {
    match verb {
        Verb::Plain => "Lock::force_unlock",
        Verb::Fair => "FairLock::force_unlock",
        Verb::ReadWrite => "RwLock::force_unlock",
        Verb::Job => "JobLock::force_unlock",
        Verb::LatchDelete => "CountDownLatch::delete",
        Verb::SemaphoreDrain => "Semaphore::drain_permits",
        Verb::LeasedSetPermits => "LeasedSemaphore::set_permits(5)",
    }
}

/// A user's value, of each type.
#[derive(Clone, Copy, Debug, PartialEq)]
enum UserValue {
    /// `HSET k name bob email b@x`
    Hash,
    /// `SADD k bob alice`
    Set,
    /// `RPUSH k bob alice`
    List,
    /// `ZADD k 1 bob 2 alice`
    SortedSet,
    /// `SET k bob`
    Text,
    /// `SET k 42`: an integer, the counts' own layout.
    Integer,
    /// `SET k 3.5`: a number to Lua's `tonumber`, but no count.
    Decimal,
    /// `SET k 02134` (a zip code): digits to Lua's `tonumber`, but no count (a leading zero).
    Digits,
}

const VALUES: [UserValue; 8] = [
    UserValue::Hash,
    UserValue::Set,
    UserValue::List,
    UserValue::SortedSet,
    UserValue::Decimal,
    UserValue::Digits,
    UserValue::Text,
    UserValue::Integer,
];

/// What `WrongType` says for data that is not distlock's (as `Lock::force_unlock` says of a
/// user's hash), after the operation's name.
const REFUSAL: &str = "the key holds a value of another type (another kind of primitive's, or \
                       data that is not distlock's); nothing was changed";

/// Write `value` at `key`, with a TTL of 10 minutes.
fn write(server: &RedisServer, value: UserValue, key: &str) {
    let args: &[&str] = match value {
        UserValue::Hash => &["HSET", key, "name", "bob", "email", "b@x"],
        UserValue::Set => &["SADD", key, "bob", "alice"],
        UserValue::List => &["RPUSH", key, "bob", "alice"],
        UserValue::SortedSet => &["ZADD", key, "1", "bob", "2", "alice"],
        UserValue::Text => &["SET", key, "bob"],
        UserValue::Integer => &["SET", key, "42"],
        UserValue::Decimal => &["SET", key, "3.5"],
        UserValue::Digits => &["SET", key, "02134"],
    };
    let _: () = cmd(server, args);
    let _: () = cmd(server, &["PEXPIRE", key, "600000"]);
}

/// The key `verb` acts on for the name `name`.
fn key_of(client: &Client, verb: Verb, name: &str) -> String {
    match verb {
        Verb::Job => client.job_lock(name).key(),
        _ => name.to_string(),
    }
}

/// Run `verb` on `name`: whether it deleted something (as 0 or 1), or the count it answered.
async fn run(client: &Client, verb: Verb, name: &str) -> distlock::Result<u64> {
    Ok(match verb {
        Verb::Plain => client.lock(name).force_unlock().await? as u64,
        Verb::Fair => client.fair_lock(name).force_unlock().await? as u64,
        Verb::ReadWrite => client.rw_lock(name).force_unlock().await? as u64,
        Verb::Job => client.job_lock(name).force_unlock().await? as u64,
        Verb::LatchDelete => client.count_down_latch(name).delete().await? as u64,
        Verb::SemaphoreDrain => client.semaphore(name).drain_permits().await?,
        Verb::LeasedSetPermits => client.leased_semaphore(name).set_permits(5).await?,
    })
}

/// A key as the server keeps it: its type and its serialized value (`DUMP`).
fn contents(server: &RedisServer, key: &str) -> (String, Vec<u8>) {
    (
        cmd(server, &["TYPE", key]),
        cmd::<Option<Vec<u8>>>(server, &["DUMP", key]).unwrap_or_default(),
    )
}

/// Every key but the fencing counters (a verb may read its slot's counter, never write it
/// here: none grants anything).
fn all_keys(server: &RedisServer) -> Vec<String> {
    let mut keys = keys(server);
    keys.retain(|k| !k.starts_with("distlock:fencing-counter:"));
    keys.sort();
    keys
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_deleting_verb_refuses_a_users_key_and_leaves_it_unchanged() {
    let (server, client) = setup().await;
    let mut refused = 0;
    for (i, verb) in VERBS.into_iter().enumerate() {
        for (j, value) in VALUES.into_iter().enumerate() {
            let what = format!("{} over a user's {value:?}", label(verb));
            let name = format!("user:{i}{j}");
            let key = key_of(&client, verb, &name);
            write(&server, value, &key);
            let before = contents(&server, &key);
            let keys_before = all_keys(&server);
            let pttl_before: i64 = cmd(&server, &["PTTL", &key]);
            let got = tokio::time::timeout(Duration::from_secs(5), run(&client, verb, &name))
                .await
                .unwrap_or_else(|_| panic!("{what}: no answer within 5 s"));
            let own_count = value == UserValue::Integer
                && matches!(
                    verb,
                    Verb::LatchDelete | Verb::SemaphoreDrain | Verb::LeasedSetPermits
                );
            if own_count {
                // Its own kind's layout: the documented behaviour.
                let left: Option<String> = cmd(&server, &["GET", &key]);
                match verb {
                    Verb::LatchDelete => {
                        assert_eq!(got.unwrap(), 1, "{what}: the latch existed");
                        assert_eq!(left, None, "{what}: the latch is deleted");
                    }
                    Verb::SemaphoreDrain => {
                        assert_eq!(got.unwrap(), 42, "{what}: every permit taken");
                        assert_eq!(left.as_deref(), Some("0"), "{what}");
                    }
                    _ => {
                        assert_eq!(got.unwrap(), 42, "{what}: the size before");
                        assert_eq!(left.as_deref(), Some("5"), "{what}: the new size");
                    }
                }
            } else {
                let e = got.expect_err(&what);
                assert_eq!(e.kind(), ErrorKind::WrongType, "{what}: {e}");
                assert!(e.to_string().ends_with(REFUSAL), "{what}: {e}");
                assert_eq!(contents(&server, &key), before, "{what}: the key changed");
                let pttl: i64 = cmd(&server, &["PTTL", &key]);
                assert!(
                    pttl <= pttl_before && pttl > pttl_before - 5_000,
                    "{what}: the TTL went from {pttl_before} to {pttl} ms"
                );
                assert_eq!(all_keys(&server), keys_before, "{what}: keys written");
                refused += 1;
            }
            let _: () = cmd(&server, &["FLUSHALL"]);
        }
    }
    assert_eq!(refused, 7 * 8 - 3, "pairs refused");
}
