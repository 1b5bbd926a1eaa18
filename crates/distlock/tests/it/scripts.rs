//! The scripts' idempotency under a resent request, exercised by sending the same request
//! twice, as a retry after a lost reply would.

use distlock::layout::{
    acquire_latch, fair_waiters, fencing_counter, lock_queue, lock_waiters, redisson_fenced_token,
    unlock_latch, QUEUED_FIELD,
};

use crate::util::*;

fn acquire(server: &RedisServer, owner: &str, mode: &str, request: &str) -> Vec<i64> {
    acquire_queuing(server, owner, mode, request, "")
}

/// [`acquire`] with a queue entry `<liveness_ms>;<initial_ms>;<client-id>` (`""`: none): a
/// refused caller joins the hand-off queue.
fn acquire_queuing(
    server: &RedisServer,
    owner: &str,
    mode: &str,
    request: &str,
    entry: &str,
) -> Vec<i64> {
    let mut con = server.connection();
    redis::cmd("EVAL")
        .arg(source("lock_acquire.lua"))
        .arg(6)
        .arg("idem")
        .arg(fencing_counter("", "idem"))
        .arg(acquire_latch("idem", request))
        .arg(redisson_fenced_token("idem"))
        .arg(lock_queue("idem"))
        .arg(lock_waiters("idem"))
        .arg(30000)
        .arg(owner)
        .arg(mode)
        .arg(3000)
        .arg("0")
        .arg("scripts;h;1")
        .arg("fifo")
        .arg(entry)
        .query(&mut con)
        .unwrap()
}

fn release(server: &RedisServer, owner: &str, request: &str) -> i64 {
    let mut con = server.connection();
    redis::cmd("EVAL")
        .arg(source("lock_release.lua"))
        .arg(7)
        .arg("idem")
        .arg("redisson_lock__channel:{idem}")
        .arg(unlock_latch("idem", request))
        .arg(fencing_counter("", "idem"))
        .arg(redisson_fenced_token("idem"))
        .arg(lock_queue("idem"))
        .arg(lock_waiters("idem"))
        .arg(30000)
        .arg(owner)
        .arg(3000)
        .arg("0")
        .arg("")
        .query(&mut con)
        .unwrap()
}

#[test]
fn resent_acquires_never_count_two_holds() {
    let server = RedisServer::start();
    // Fresh owner ('new'): the resend answers the same grant.
    let first = acquire(&server, "c:1", "new", "r1");
    let again = acquire(&server, "c:1", "new", "r1");
    assert_eq!(first[..2], [1, 1]);
    assert_eq!(first, again);
    // Re-entry ('as'): a resend of the same request is answered from the latch.
    let reenter = acquire(&server, "c:1", "as", "r2");
    assert_eq!(reenter[..2], [1, 2]);
    assert_eq!(acquire(&server, "c:1", "as", "r2"), reenter);
    let count: i64 = cmd(&server, &["HGET", "idem", "c:1"]);
    assert_eq!(
        count, 2,
        "Redisson #7367: a resent acquire left an extra hold"
    );
    // Another owner is refused with the PTTL.
    let refused = acquire(&server, "c:2", "new", "r3");
    assert_eq!(refused[0], 0);
    assert!(refused[1] > 0);
}

#[test]
fn resent_releases_release_once() {
    let server = RedisServer::start();
    acquire(&server, "c:1", "new", "r1");
    acquire(&server, "c:1", "as", "r2");
    assert_eq!(release(&server, "c:1", "u1"), 0);
    assert_eq!(
        release(&server, "c:1", "u1"),
        0,
        "resend answered from the latch"
    );
    let count: i64 = cmd(&server, &["HGET", "idem", "c:1"]);
    assert_eq!(count, 1);
    assert_eq!(release(&server, "c:1", "u2"), 1);
    // The final release writes no latch: its resend finds the lock gone (-1), which the
    // client, knowing it resent, counts as released. Nothing else changes.
    assert_eq!(release(&server, "c:1", "u2"), -1);
    let latches: Vec<String> = cmd(&server, &["KEYS", "redisson_unlock_latch:*"]);
    assert_eq!(
        latches.len(),
        1,
        "only the non-final release left a latch: {latches:?}"
    );
    // A new request by a non-holder is refused.
    assert_eq!(release(&server, "c:1", "u3"), -1);
    acquire(&server, "c:9", "new", "r9");
    assert_eq!(release(&server, "c:1", "u4"), -2);
}

#[test]
fn nested_mode_never_grants_a_free_lock() {
    let server = RedisServer::start();
    assert_eq!(acquire(&server, "c:1", "nested", "r1"), vec![-1]);
    acquire(&server, "c:2", "new", "r2");
    assert_eq!(acquire(&server, "c:1", "nested", "r3"), vec![-2]);
}

/// `fair_acquire.lua` for a fresh owner that waits `wait_ms` and takes hand-offs (its client
/// id `client`), at lock `fair-idem`.
fn fair_acquire(server: &RedisServer, owner: &str, wait_ms: u64, client: &str) -> Vec<String> {
    let mut con = server.connection();
    redis::cmd("EVAL")
        .arg(source("fair_acquire.lua"))
        .arg(6)
        .arg("fair-idem")
        .arg("redisson_lock_queue:{fair-idem}")
        .arg("redisson_lock_timeout:{fair-idem}")
        .arg(fencing_counter("", "fair-idem"))
        .arg("distlock_fair_liveness:{fair-idem}")
        .arg(fair_waiters("fair-idem"))
        .arg(30000)
        .arg(owner)
        .arg(5000)
        .arg("new")
        .arg(if wait_ms > 0 { "1" } else { "0" })
        .arg("redisson_lock__channel:{fair-idem}")
        .arg("0")
        .arg(wait_ms)
        .arg("scripts;h;1")
        .arg(if client.is_empty() {
            String::new()
        } else {
            format!("4000;{client}")
        })
        .query(&mut con)
        .unwrap()
}

/// `fair_leave.lua` for `owner` at lock `fair-idem`, deleting `delete` ('0', 'give-back').
fn fair_leave(server: &RedisServer, owner: &str, delete: &str, wait_ms: u64) -> i64 {
    let mut con = server.connection();
    redis::cmd("EVAL")
        .arg(source("fair_leave.lua"))
        .arg(6)
        .arg("fair-idem")
        .arg("redisson_lock_queue:{fair-idem}")
        .arg("redisson_lock_timeout:{fair-idem}")
        .arg("distlock_fair_liveness:{fair-idem}")
        .arg(fencing_counter("", "fair-idem"))
        .arg(fair_waiters("fair-idem"))
        .arg(owner)
        .arg(delete)
        .arg("redisson_lock__channel:{fair-idem}")
        .arg(wait_ms)
        .arg("0")
        .query(&mut con)
        .unwrap()
}

fn fair_release(server: &RedisServer, owner: &str, request: &str) -> i64 {
    let mut con = server.connection();
    redis::cmd("EVAL")
        .arg(source("fair_release.lua"))
        .arg(7)
        .arg("fair-idem")
        .arg("redisson_lock_queue:{fair-idem}")
        .arg("redisson_lock_timeout:{fair-idem}")
        .arg(unlock_latch("fair-idem", request))
        .arg("distlock_fair_liveness:{fair-idem}")
        .arg(fencing_counter("", "fair-idem"))
        .arg(fair_waiters("fair-idem"))
        .arg(30000)
        .arg(owner)
        .arg(3000)
        .arg("redisson_lock__channel:{fair-idem}")
        .arg("0")
        .query(&mut con)
        .unwrap()
}

fn fair_holders(server: &RedisServer) -> Vec<String> {
    let mut fields: Vec<String> = cmd(server, &["HKEYS", "fair-idem"]);
    fields.retain(|f| !f.starts_with("distlock:"));
    fields
}

/// The fair scripts' hand-off, step by step: a release hands the lock to a head with a
/// hand-off entry (with a higher token, and its initial lease) and does not to one without
/// (a Redisson-style waiter, woken instead); a leave that gives back a hold it was handed
/// passes the lock on to the next head; a plain leave keeps the hold.
#[test]
fn fair_scripts_hand_off_to_heads_with_an_entry_and_give_back_on_leave() {
    let server = RedisServer::start();
    let granted = fair_acquire(&server, "a", 0, "");
    assert_eq!(granted[0], "1");
    assert_eq!(fair_acquire(&server, "b", 60_000, "cb")[0], "0");
    assert_eq!(fair_acquire(&server, "c", 60_000, "cc")[0], "0");
    assert_eq!(
        fair_acquire(&server, "r", 60_000, "")[0],
        "0",
        "r takes no hand-offs"
    );
    let entries: i64 = cmd(&server, &["HLEN", &fair_waiters("fair-idem")]);
    assert_eq!(entries, 2, "b and c have entries, r none");

    // a's release hands the lock to b.
    assert_eq!(fair_release(&server, "a", "r1"), 1);
    assert_eq!(fair_holders(&server), vec!["b".to_string()]);
    let b_token: String = cmd(&server, &["HGET", "fair-idem", "distlock:fencing-token"]);
    assert!(b_token.parse::<u64>().unwrap() > granted[2].parse::<u64>().unwrap());
    let pttl: i64 = cmd(&server, &["PTTL", "fair-idem"]);
    assert!(pttl > 3000 && pttl <= 4000, "b's initial lease: {pttl} ms");
    let queue: Vec<String> = cmd(
        &server,
        &["LRANGE", "redisson_lock_queue:{fair-idem}", "0", "-1"],
    );
    assert_eq!(queue, vec!["c".to_string(), "r".to_string()]);

    // b leaving without giving back keeps its hold; giving back passes it to c.
    assert_eq!(fair_leave(&server, "b", "0", 60_000), 0);
    assert_eq!(fair_holders(&server), vec!["b".to_string()]);
    assert_eq!(fair_leave(&server, "b", "give-back", 60_000), 1);
    assert_eq!(fair_holders(&server), vec!["c".to_string()]);

    // c's release finds r at the head, without an entry: the lock is freed, not granted.
    assert_eq!(fair_release(&server, "c", "r2"), 1);
    assert!(fair_holders(&server).is_empty());
    assert!(!cmd::<bool>(
        &server,
        &["EXISTS", &fair_waiters("fair-idem")]
    ));
    assert_eq!(
        fair_acquire(&server, "r", 60_000, "")[0],
        "1",
        "r takes it itself"
    );
}

/// `EVAL` of the script `file` (as run, helpers joined) with `keys` and `args`.
fn eval(server: &RedisServer, file: &str, keys: &[&str], args: &[&str]) -> redis::Value {
    redis::cmd("EVAL")
        .arg(source(file))
        .arg(keys.len())
        .arg(keys)
        .arg(args)
        .query(&mut server.connection())
        .unwrap()
}

/// `lock_acquire_fast.lua` at `key` for `owner` (lease 30 s, holder metadata `fast;h;1`).
fn acquire_fast(server: &RedisServer, key: &str, owner: &str) -> redis::Value {
    acquire_fast_above(server, key, owner, None)
}

/// [`acquire_fast`] with a token floor.
fn acquire_fast_above(
    server: &RedisServer,
    key: &str,
    owner: &str,
    floor: Option<&str>,
) -> redis::Value {
    acquire_fast_with(server, key, owner, "", floor)
}

/// [`acquire_fast`] with the client's estimate of the server's clock (`""`: none, the script
/// reads `TIME`) and a token floor.
fn acquire_fast_with(
    server: &RedisServer,
    key: &str,
    owner: &str,
    clock: &str,
    floor: Option<&str>,
) -> redis::Value {
    let mut extra = vec!["fast;h;1", clock];
    extra.extend(floor);
    fast_eval(server, "lock_acquire_fast.lua", key, owner, &extra)
}

/// The plain lock's fast acquire takes the client's clock estimate for the token instead of
/// reading `TIME`, but only above the slot's counter (it never issues a token at or below
/// one issued before): at or below it, it answers nil and changes nothing; and the holder
/// record's time is the estimate's seconds. The counter is compared as a decimal.
#[test]
fn the_plain_fast_acquire_takes_the_clients_clock_estimate_above_the_counter() {
    let server = RedisServer::start();
    let counter = fencing_counter("", "est");
    let now: u128 = {
        let t: Vec<String> = cmd(&server, &["TIME"]);
        format!("{}{:0>6}", t[0], t[1]).parse().unwrap()
    };
    cmd::<()>(&server, &["SET", &counter, &now.to_string()]);
    for behind in [now - 1, now] {
        nil_and_unchanged(
            &server,
            &format!("estimate {behind} at counter {now}"),
            || acquire_fast_with(&server, "est", "c:1", &behind.to_string(), None),
        );
    }
    let estimate = (now + 5).to_string();
    let token = token_of(&acquire_fast_with(&server, "est", "c:1", &estimate, None));
    assert_eq!(token, estimate);
    assert_eq!(cmd::<String>(&server, &["GET", &counter]), estimate);
    let holder: String = cmd(&server, &["HGET", "est", "distlock:holder"]);
    assert_eq!(
        holder,
        format!("fast;h;1;{}", &estimate[..estimate.len() - 6])
    );
    assert_eq!(release_fast(&server, "est", "c:1"), redis::Value::Int(1));
    // Compared as decimals, not as strings alone: a counter with a digit more is ahead (with
    // a leading zero it is left to the full script), one with fewer digits behind.
    let later = (now + 10).to_string();
    for ahead in [format!("{now}0"), format!("0{}", now + 20)] {
        cmd::<()>(&server, &["SET", &counter, &ahead]);
        nil_and_unchanged(&server, &format!("counter {ahead}"), || {
            acquire_fast_with(&server, "est", "c:1", &later, None)
        });
    }
    cmd::<()>(&server, &["SET", &counter, "5"]);
    let token = token_of(&acquire_fast_with(&server, "est", "c:1", &later, None));
    assert_eq!(token, later);
}

/// `lock_release_fast.lua` at `key` for `owner`.
fn release_fast(server: &RedisServer, key: &str, owner: &str) -> redis::Value {
    fast_eval(server, "lock_release_fast.lua", key, owner, &[])
}

/// The fast-path script `file` at `key` for the owner's `field`: an acquire
/// (`*_acquire_fast.lua`) with the slot's counter, lease 30 s and the arguments `extra`
/// after the field, or a release with the field alone.
fn fast_eval(
    server: &RedisServer,
    file: &str,
    key: &str,
    field: &str,
    extra: &[&str],
) -> redis::Value {
    if !file.contains("_acquire_") {
        return eval(server, file, &[key], &[field]);
    }
    let counter = fencing_counter("", key);
    let mut args = vec!["30000", field];
    args.extend(extra);
    eval(server, file, &[key, &counter], &args)
}

/// A fast acquire's reply: the token, a decimal string.
fn token_of(reply: &redis::Value) -> String {
    match reply {
        redis::Value::BulkString(t) => String::from_utf8(t.clone()).unwrap(),
        other => panic!("a fast acquire of a free lock: {other:?}"),
    }
}

/// `run` answers nil and changes nothing on `server` (every key, its contents and whether it
/// has a TTL).
fn nil_and_unchanged(server: &RedisServer, what: &str, run: impl Fn() -> redis::Value) {
    let before = everything(server);
    assert_eq!(run(), redis::Value::Nil, "{what}");
    assert_eq!(everything(server), before, "{what}: changed something");
}

/// Every key with its type, contents and whether it has a TTL, the counters included.
fn everything(server: &RedisServer) -> Vec<String> {
    let mut keys: Vec<String> = cmd(server, &["KEYS", "*"]);
    keys.sort();
    keys.into_iter()
        .map(|k| {
            let dump: Vec<u8> = cmd(server, &["DUMP", &k]);
            let ttl: i64 = cmd(server, &["PTTL", &k]);
            format!("{k} {dump:?} ttl:{}", ttl > 0)
        })
        .collect()
}

/// The fast paths write what the full scripts write for the same request: the Redisson hash
/// with the hold count 1, the token (also in the slot's counter) and the holder record, the
/// lease as TTL; and the final release deletes it. The token is the reply.
#[test]
fn the_fast_paths_write_what_the_full_scripts_write() {
    let server = RedisServer::start();
    // A new counter without a floor starts at the clock reading.
    let first = acquire_fast(&server, "idem", "c:0");
    assert_eq!(release_fast(&server, "idem", "c:0"), redis::Value::Int(1));
    let counter: String = cmd(&server, &["GET", &fencing_counter("", "idem")]);
    assert_eq!(first, redis::Value::BulkString(counter.into_bytes()));
    let token = token_of(&acquire_fast(&server, "idem", "c:1"));
    let fields: std::collections::HashMap<String, String> = cmd(&server, &["HGETALL", "idem"]);
    let full = acquire(&server, "c:2", "new", "r2");
    assert_eq!(full[0], 0, "the full script finds it held: {full:?}");
    assert_eq!(fields.len(), 3, "{fields:?}");
    assert_eq!(fields["c:1"], "1");
    assert_eq!(fields["distlock:fencing-token"], token);
    let counter: String = cmd(&server, &["GET", &fencing_counter("", "idem")]);
    assert_eq!(counter, token, "the counter keeps the last token");
    assert!(token.parse::<u64>().unwrap() > token_of(&first).parse::<u64>().unwrap());
    let holder = &fields["distlock:holder"];
    let secs: u64 = holder
        .strip_prefix("fast;h;1;")
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("holder {holder}"));
    assert_eq!(token.len(), 16, "microseconds since the epoch: {token}");
    assert_eq!(secs, token[..10].parse::<u64>().unwrap());
    let pttl: i64 = cmd(&server, &["PTTL", "idem"]);
    assert!(pttl > 29_000 && pttl <= 30_000, "{pttl}");
    // Tokens keep rising through either script.
    assert_eq!(release_fast(&server, "idem", "c:1"), redis::Value::Int(1));
    assert!(!exists(&server, "idem"));
    let next = acquire(&server, "c:3", "new", "r3");
    assert_eq!(next[..2], [1, 1]);
    let stored: String = cmd(&server, &["HGET", "idem", "distlock:fencing-token"]);
    assert!(stored.parse::<u128>().unwrap() > token.parse::<u128>().unwrap());
}

/// Outside their common case the fast paths answer nil and change nothing (every key, the
/// counter included, is as it was), leaving the request to the full script.
#[test]
fn the_fast_paths_leave_everything_else_to_the_full_scripts() {
    let server = RedisServer::start();
    let counter = fencing_counter("", "idem");
    // A new counter with a floor: left to the full script.
    nil_and_unchanged(&server, "a new counter with a floor", || {
        acquire_fast_above(&server, "idem", "c:1", Some("5"))
    });
    for (value, what) in [
        ("99999999999999999", "a counter ahead of the clock"),
        ("abc", "a counter that is no number"),
        ("3:1764000000000000", "a counter of a generation"),
        ("3:1764000000000000@0123abcd", "a Cluster counter"),
    ] {
        cmd::<()>(&server, &["SET", &counter, value]);
        nil_and_unchanged(&server, what, || acquire_fast(&server, "idem", "c:1"));
    }
    cmd::<()>(&server, &["SET", &counter, "1"]);
    // Held (by another owner, or by this one: a re-entry is the full script's).
    acquire(&server, "c:9", "new", "r9");
    nil_and_unchanged(&server, "held by another", || {
        acquire_fast(&server, "idem", "c:1")
    });
    nil_and_unchanged(&server, "held by the owner", || {
        acquire_fast(&server, "idem", "c:9")
    });
    // The hand-off queue, and Redisson's RFencedLock counter, on a free lock.
    assert_eq!(release(&server, "c:9", "u9"), 1);
    for key in [lock_queue("idem"), redisson_fenced_token("idem")] {
        cmd::<()>(&server, &["SET", &key, "1"]);
        nil_and_unchanged(&server, &key, || acquire_fast(&server, "idem", "c:1"));
        cmd::<()>(&server, &["DEL", &key]);
    }
    // Releases: not held, held by another, two holds, a queue, a read-write lock's hash.
    nil_and_unchanged(&server, "not held", || release_fast(&server, "idem", "c:1"));
    acquire(&server, "c:1", "new", "r1");
    nil_and_unchanged(&server, "another's", || {
        release_fast(&server, "idem", "c:2")
    });
    acquire(&server, "c:1", "as", "r2");
    nil_and_unchanged(&server, "two holds", || {
        release_fast(&server, "idem", "c:1")
    });
    assert_eq!(release(&server, "c:1", "u1"), 0);
    // A waiter queued behind the holder marks the hash (the fast release reads no queue).
    cmd::<()>(&server, &["HSET", "idem", QUEUED_FIELD, "1"]);
    nil_and_unchanged(&server, "a queued waiter", || {
        release_fast(&server, "idem", "c:1")
    });
    cmd::<()>(&server, &["DEL", "idem"]);
    cmd::<()>(&server, &["HSET", "idem", "mode", "read", "c:1", "1"]);
    nil_and_unchanged(&server, "a read lock", || {
        release_fast(&server, "idem", "c:1")
    });
}

/// The lock hash has the queued field whenever a waiter is queued behind its holder, so the
/// fast release (which reads no queue) leaves such a release to the full one, which hands the
/// lock over: a waiter queuing behind the holder writes it, and a hand-off that leaves
/// waiters queued writes it with the new hold, and so does a grant to the queue's head with
/// waiters behind it; a hand-off to the last waiter does not.
#[test]
fn a_queued_waiter_marks_the_lock_for_the_full_release() {
    let server = RedisServer::start();
    let queued =
        |server: &RedisServer| -> Option<String> { cmd(server, &["HGET", "idem", QUEUED_FIELD]) };
    assert_eq!(acquire(&server, "c:1", "new", "r1")[..2], [1, 1]);
    assert_eq!(queued(&server), None, "nobody queued");
    let waiting = "30000;30000;cl";
    assert_eq!(acquire_queuing(&server, "c:2", "new", "r2", waiting)[0], 0);
    assert_eq!(queued(&server).as_deref(), Some("1"), "a waiter queued");
    nil_and_unchanged(&server, "a queued waiter", || {
        release_fast(&server, "idem", "c:1")
    });
    assert_eq!(acquire_queuing(&server, "c:3", "new", "r3", waiting)[0], 0);
    // The hand-off to c:2 leaves c:3 queued: the new hold is marked.
    assert_eq!(release(&server, "c:1", "u1"), 1);
    assert_eq!(
        cmd::<Option<i64>>(&server, &["HGET", "idem", "c:2"]),
        Some(1)
    );
    assert_eq!(queued(&server).as_deref(), Some("1"), "c:3 still queued");
    nil_and_unchanged(&server, "a waiter left queued", || {
        release_fast(&server, "idem", "c:2")
    });
    // The hand-off to the last waiter leaves the queue empty: no mark, the fast release frees.
    assert_eq!(release(&server, "c:2", "u2"), 1);
    assert_eq!(
        cmd::<Option<i64>>(&server, &["HGET", "idem", "c:3"]),
        Some(1)
    );
    assert_eq!(queued(&server), None, "nobody left queued");
    assert_eq!(release_fast(&server, "idem", "c:3"), redis::Value::Int(1));
    assert!(!exists(&server, "idem"));
    // The queue's head granted a lock whose holder's lease ran out, with a waiter behind it.
    assert_eq!(acquire(&server, "c:4", "new", "r4")[..2], [1, 1]);
    assert_eq!(acquire_queuing(&server, "c:5", "new", "r5", waiting)[0], 0);
    assert_eq!(acquire_queuing(&server, "c:6", "new", "r6", waiting)[0], 0);
    cmd::<()>(&server, &["DEL", "idem"]);
    assert_eq!(
        acquire_queuing(&server, "c:5", "new", "r5", waiting)[..2],
        [1, 1]
    );
    assert_eq!(queued(&server).as_deref(), Some("1"), "c:6 still queued");
    nil_and_unchanged(&server, "a grant past a waiter", || {
        release_fast(&server, "idem", "c:5")
    });
    // A force unlock takes the lock hash with its queued field, which is no owner.
    let forced = eval(
        &server,
        "lock_force_unlock.lua",
        &["idem", "redisson_lock__channel:{idem}"],
        &["0", "lock"],
    );
    let owners = vec![
        redis::Value::Int(1),
        redis::Value::BulkString(b"c:5".to_vec()),
    ];
    assert_eq!(forced, redis::Value::Array(owners));
}

/// `lock_acquire.lua` at `idem` for a fresh owner with the token `floor`; its token.
fn acquire_full_above(server: &RedisServer, owner: &str, floor: &str) -> String {
    let reply: Vec<redis::Value> = redis::cmd("EVAL")
        .arg(source("lock_acquire.lua"))
        .arg(6)
        .arg("idem")
        .arg(fencing_counter("", "idem"))
        .arg(acquire_latch("idem", owner))
        .arg(redisson_fenced_token("idem"))
        .arg(lock_queue("idem"))
        .arg(lock_waiters("idem"))
        .arg(&[
            "30000",
            owner,
            "new",
            "3000",
            floor,
            "scripts;h;1",
            "fifo",
            "",
        ])
        .query(&mut server.connection())
        .unwrap();
    token_of(&reply[2])
}

/// The full acquire's token compares the counter (and Redisson's `RFencedLock` counter) with
/// the clock reading as decimals: a counter with a digit more is ahead and counted on from,
/// one with a leading zero too, one with fewer digits is behind (the token is the reading).
#[test]
fn the_full_acquire_counts_on_from_a_counter_a_digit_ahead() {
    let server = RedisServer::start();
    let counter = fencing_counter("", "idem");
    let now: u128 = {
        let t: Vec<String> = cmd(&server, &["TIME"]);
        format!("{}{:0>6}", t[0], t[1]).parse().unwrap()
    };
    let cases = [
        (counter.clone(), format!("{now}0"), now * 10 + 1),
        (
            counter.clone(),
            format!("0{}", now + 20_000_000),
            now + 20_000_001,
        ),
        (
            redisson_fenced_token("idem"),
            format!("{now}0"),
            now * 10 + 1,
        ),
    ];
    for (i, (key, ahead, want)) in cases.into_iter().enumerate() {
        cmd::<()>(&server, &["SET", &counter, "5"]);
        cmd::<()>(&server, &["SET", &key, &ahead]);
        let token: u128 = acquire_full_above(&server, &format!("c:{i}"), "0")
            .parse()
            .unwrap();
        assert_eq!(token, want, "{key} at {ahead}");
        cmd::<()>(&server, &["DEL", "idem", &redisson_fenced_token("idem")]);
    }
    // Fewer digits: behind the clock, the token is a reading (as many digits as now).
    cmd::<()>(&server, &["SET", &counter, "5"]);
    let token: u128 = acquire_full_above(&server, "c:9", "0").parse().unwrap();
    assert!(token >= now && token < now * 10, "{token}");
}

/// With a generation (Sentinel's `<generation>:<floor>`, a Cluster's `cluster:<floor>`) the
/// fast acquire counts on only in the counter's own generation, and on a Cluster only in a
/// counter this node wrote (its replication ID after the token), as the full script would
/// without reading CLUSTER INFO; with the sequence below the clock. Every other counter is
/// left to the full script, unchanged.
#[test]
fn the_fast_acquire_counts_on_only_in_its_own_generation() {
    let server = RedisServer::start();
    let counter = fencing_counter("", "idem");
    let info: String = cmd(&server, &["INFO", "replication"]);
    let replid = info
        .lines()
        .find_map(|l| l.strip_prefix("master_replid:"))
        .unwrap()
        .trim()
        .to_string();
    let other = "0123456789abcdef0123456789abcdef01234567";
    assert_ne!(replid, other);
    let seq = "1764000000000000";
    // Sentinel: the client's generation (3) only. Cluster: any generation this node wrote.
    let sentinel_refused = vec![
        format!("2:{seq}"),
        format!("4:{seq}"),
        format!("3:{seq}@{replid}"),
        "3:99999999999999999".to_string(),
        seq.to_string(),
    ];
    let cluster_refused = vec![
        format!("3:{seq}@{other}"),
        format!("3:{seq}"),
        format!("3:99999999999999999@{replid}"),
        format!("03:{seq}@{replid}"),
        format!("3:{seq}@{replid}x"),
        seq.to_string(),
    ];
    for (floor, mine, refused) in [
        ("3:0", format!("3:{seq}"), sentinel_refused),
        ("cluster:0", format!("3:{seq}@{replid}"), cluster_refused),
        // Generation 0 (an epoch never bumped), kept with the node's ID as well.
        ("cluster:0", format!("0:{seq}@{replid}"), vec![]),
    ] {
        let generation = mine.split(':').next().unwrap();
        cmd::<()>(&server, &["DEL", &counter]);
        if floor == "3:0" {
            // A new counter starts the client's generation at the clock reading.
            let token = token_of(&acquire_fast_above(&server, "idem", "c:1", Some(floor)));
            assert!(token.starts_with("3:") && token.len() == 18, "{token}");
            assert_eq!(cmd::<String>(&server, &["GET", &counter]), token);
            assert_eq!(release_fast(&server, "idem", "c:1"), redis::Value::Int(1));
        } else {
            // On a Cluster node it reads the config epoch; not on this server (no Cluster).
            nil_and_unchanged(&server, &format!("{floor}: a new counter"), || {
                acquire_fast_above(&server, "idem", "c:1", Some(floor))
            });
        }
        for value in refused {
            cmd::<()>(&server, &["SET", &counter, &value]);
            nil_and_unchanged(&server, &format!("{floor}: counter {value}"), || {
                acquire_fast_above(&server, "idem", "c:1", Some(floor))
            });
        }
        cmd::<()>(&server, &["SET", &counter, &mine]);
        let token = token_of(&acquire_fast_above(&server, "idem", "c:1", Some(floor)));
        let sequence = token.split_once(':').unwrap().1;
        assert_eq!(
            token.split_once(':').unwrap().0,
            generation,
            "{floor}: {token}"
        );
        assert!(sequence.len() == 16 && sequence > seq, "{floor}: {token}");
        let stored: String = cmd(&server, &["HGET", "idem", "distlock:fencing-token"]);
        assert_eq!(stored, token, "{floor}");
        let written: String = cmd(&server, &["GET", &counter]);
        let expected = match floor {
            "3:0" => token.clone(),
            _ => format!("{token}@{replid}"),
        };
        assert_eq!(
            written, expected,
            "{floor}: the counter keeps the token as the full script would"
        );
        assert_eq!(release_fast(&server, "idem", "c:1"), redis::Value::Int(1));
        // The full script counts on from there.
        let next = acquire_full_above(&server, "c:2", floor);
        let (g, q) = next.split_once(':').unwrap();
        assert!(
            g == generation && q > sequence,
            "{floor}: {next} after {token}"
        );
        assert_eq!(release(&server, "c:2", "u2"), 1);
    }
}

/// A client runs the fast scripts alone for an uncontended acquire and release (the full
/// scripts are never sent: not cached after a flush), and the full acquire after the fast
/// one answered nil for a held lock.
#[tokio::test]
async fn the_common_case_sends_only_the_fast_scripts() {
    let server = RedisServer::start();
    let client = evalsha_client(&server).await;
    let files = [
        "lock_acquire_fast.lua",
        "lock_release_fast.lua",
        "lock_acquire.lua",
        "lock_release.lua",
    ];
    // The slot's counter exists.
    client
        .lock("fast")
        .acquire()
        .await
        .unwrap()
        .release()
        .await
        .unwrap();
    cmd::<()>(&server, &["SCRIPT", "FLUSH"]);
    let guard = client.lock("fast").acquire().await.unwrap();
    guard.release().await.unwrap();
    assert_eq!(cached(&server, &files), [1, 1, 0, 0], "{files:?}");
    let _held = client.lock("fast").acquire().await.unwrap();
    assert!(client.lock("fast").try_acquire().await.unwrap().is_none());
    assert_eq!(cached(&server, &files), [1, 1, 1, 0], "{files:?}");
}

/// `rw_write_acquire_fast.lua` at `rw` for `owner`'s write field (lease 30 s).
fn write_fast(server: &RedisServer, owner: &str) -> redis::Value {
    let field = format!("{owner}:write");
    fast_eval(server, "rw_write_acquire_fast.lua", "rw", &field, &[])
}

/// `rw_write_release_fast.lua` at `rw` for `owner`'s write field.
fn write_release_fast(server: &RedisServer, owner: &str) -> redis::Value {
    let field = format!("{owner}:write");
    fast_eval(server, "rw_write_release_fast.lua", "rw", &field, &[])
}

/// The write lock's fast paths write Redisson's write-mode hash (mode, the owner's write field
/// at 1, the lease as TTL) with a token from the slot's counter, and delete it on the last
/// release; outside their common case they answer nil and change nothing.
#[test]
fn the_write_locks_fast_paths_grant_and_release_or_change_nothing() {
    let server = RedisServer::start();
    let token = token_of(&write_fast(&server, "c:1"));
    let fields: std::collections::HashMap<String, String> = cmd(&server, &["HGETALL", "rw"]);
    assert_eq!(fields.len(), 2, "{fields:?}");
    assert_eq!(fields["mode"], "write");
    assert_eq!(fields["c:1:write"], "1");
    let counter: String = cmd(&server, &["GET", &fencing_counter("", "rw")]);
    assert_eq!(counter, token);
    let pttl: i64 = cmd(&server, &["PTTL", "rw"]);
    assert!(pttl > 29_000 && pttl <= 30_000, "{pttl}");
    nil_and_unchanged(&server, "held", || write_fast(&server, "c:2"));
    nil_and_unchanged(&server, "another's release", || {
        write_release_fast(&server, "c:2")
    });
    // A read hold of the writer's own, or a second write hold: the full release's.
    cmd::<()>(&server, &["HSET", "rw", "c:1", "1"]);
    nil_and_unchanged(&server, "with a read hold", || {
        write_release_fast(&server, "c:1")
    });
    cmd::<()>(&server, &["HDEL", "rw", "c:1"]);
    cmd::<()>(&server, &["HSET", "rw", "c:1:write", "2"]);
    nil_and_unchanged(&server, "two write holds", || {
        write_release_fast(&server, "c:1")
    });
    cmd::<()>(&server, &["HSET", "rw", "c:1:write", "1"]);
    cmd::<()>(
        &server,
        &["ZADD", &distlock::layout::rwlock_queue("rw"), "1", "c:5"],
    );
    nil_and_unchanged(&server, "a queue", || write_release_fast(&server, "c:1"));
    cmd::<()>(&server, &["DEL", &distlock::layout::rwlock_queue("rw")]);
    assert_eq!(write_release_fast(&server, "c:1"), redis::Value::Int(1));
    assert!(!exists(&server, "rw"));
    // Free, but a writer waits or is queued; a read lock; a plain lock's hash.
    for key in [
        distlock::layout::rwlock_writers("rw"),
        distlock::layout::rwlock_queue("rw"),
    ] {
        cmd::<()>(&server, &["ZADD", &key, "1", "c:5"]);
        nil_and_unchanged(&server, &key, || write_fast(&server, "c:1"));
        cmd::<()>(&server, &["DEL", &key]);
    }
    cmd::<()>(&server, &["HSET", "rw", "mode", "read", "c:3", "1"]);
    nil_and_unchanged(&server, "read-held", || write_fast(&server, "c:1"));
    nil_and_unchanged(&server, "a read lock's release", || {
        write_release_fast(&server, "c:3")
    });
    cmd::<()>(&server, &["DEL", "rw"]);
    cmd::<()>(
        &server,
        &[
            "HSET",
            "rw",
            "c:1:write",
            "1",
            "distlock:fencing-token",
            "5",
        ],
    );
    nil_and_unchanged(&server, "a plain lock's hash", || {
        write_release_fast(&server, "c:1")
    });
}

/// `rw_read_acquire_fast.lua` / `rw_read_release_fast.lua` at `rw` for `owner`.
fn read_fast(server: &RedisServer, file: &str, owner: &str) -> redis::Value {
    fast_eval(server, file, "rw", owner, &[])
}

/// The read lock's fast paths write Redisson's read-mode hash (mode, the owner's field at 1,
/// the lease as TTL) and the hold's timeout key `{rw}:<owner>:rwlock_timeout:1`, with a token
/// from the slot's counter, and delete both on the last release of the only reader; outside
/// their common case they answer nil and change nothing.
#[test]
fn the_read_locks_fast_paths_grant_and_release_or_change_nothing() {
    let server = RedisServer::start();
    let (acquire, release) = ("rw_read_acquire_fast.lua", "rw_read_release_fast.lua");
    let token = token_of(&read_fast(&server, acquire, "c:1"));
    let fields: std::collections::HashMap<String, String> = cmd(&server, &["HGETALL", "rw"]);
    assert_eq!(fields.len(), 2, "{fields:?}");
    assert_eq!(fields["mode"], "read");
    assert_eq!(fields["c:1"], "1");
    assert_eq!(
        cmd::<String>(&server, &["GET", &fencing_counter("", "rw")]),
        token
    );
    let timeout = "{rw}:c:1:rwlock_timeout:1";
    for key in ["rw", timeout] {
        let pttl: i64 = cmd(&server, &["PTTL", key]);
        assert!(pttl > 29_000 && pttl <= 30_000, "{key}: {pttl}");
    }
    // Read-held already (a second reader is the full script's), and others' releases.
    nil_and_unchanged(&server, "read-held", || read_fast(&server, acquire, "c:2"));
    nil_and_unchanged(&server, "another's release", || {
        read_fast(&server, release, "c:2")
    });
    cmd::<()>(&server, &["HSET", "rw", "c:2", "1"]);
    nil_and_unchanged(&server, "two readers", || {
        read_fast(&server, release, "c:1")
    });
    cmd::<()>(&server, &["HDEL", "rw", "c:2"]);
    cmd::<()>(&server, &["HSET", "rw", "c:1", "2"]);
    nil_and_unchanged(&server, "two read holds", || {
        read_fast(&server, release, "c:1")
    });
    cmd::<()>(&server, &["HSET", "rw", "c:1", "1"]);
    let queue = distlock::layout::rwlock_queue("rw");
    cmd::<()>(&server, &["ZADD", &queue, "1", "c:5"]);
    nil_and_unchanged(&server, "a queue", || read_fast(&server, release, "c:1"));
    cmd::<()>(&server, &["DEL", &queue]);
    assert_eq!(read_fast(&server, release, "c:1"), redis::Value::Int(1));
    assert!(!exists(&server, "rw") && !exists(&server, timeout));
    // Free, but a writer waits or is queued; write-held; a plain lock's hash.
    for key in [distlock::layout::rwlock_writers("rw"), queue] {
        cmd::<()>(&server, &["ZADD", &key, "1", "c:5"]);
        nil_and_unchanged(&server, &key, || read_fast(&server, acquire, "c:1"));
        cmd::<()>(&server, &["DEL", &key]);
    }
    cmd::<()>(&server, &["HSET", "rw", "mode", "write", "c:3:write", "1"]);
    nil_and_unchanged(&server, "write-held", || read_fast(&server, acquire, "c:1"));
    cmd::<()>(&server, &["HSET", "rw", "c:1", "1"]);
    nil_and_unchanged(&server, "a read hold under a write lock", || {
        read_fast(&server, release, "c:1")
    });
    cmd::<()>(&server, &["DEL", "rw"]);
    cmd::<()>(
        &server,
        &["HSET", "rw", "c:1", "1", "distlock:fencing-token", "5"],
    );
    nil_and_unchanged(&server, "a plain lock's hash", || {
        read_fast(&server, release, "c:1")
    });
}

/// A client's uncontended write, read and fair locks run their fast scripts alone (after a
/// flush, the full ones are never cached).
#[tokio::test]
async fn uncontended_write_read_and_fair_locks_send_only_the_fast_scripts() {
    let server = RedisServer::start();
    let client = evalsha_client(&server).await;
    cmd::<()>(&server, &["SCRIPT", "FLUSH"]);
    client
        .rw_lock("fast-rw")
        .write()
        .await
        .unwrap()
        .release()
        .await
        .unwrap();
    client
        .fair_lock("fast-fair")
        .acquire()
        .await
        .unwrap()
        .release()
        .await
        .unwrap();
    client
        .rw_lock("fast-read")
        .read()
        .await
        .unwrap()
        .release()
        .await
        .unwrap();
    let files = [
        "rw_write_acquire_fast.lua",
        "rw_write_release_fast.lua",
        "fair_acquire_fast.lua",
        "fair_release_fast.lua",
        "rw_read_acquire_fast.lua",
        "rw_read_release_fast.lua",
        "rw_write_acquire.lua",
        "rw_write_release.lua",
        "fair_acquire.lua",
        "fair_release.lua",
        "rw_read_acquire.lua",
        "rw_read_release.lua",
    ];
    assert_eq!(
        cached(&server, &files),
        [1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0],
        "{files:?}"
    );
}

/// `fair_acquire_fast.lua` / `fair_release_fast.lua` at `fair` for `owner`.
fn fair_fast(server: &RedisServer, file: &str, owner: &str) -> redis::Value {
    fast_eval(server, file, "fair", owner, &["fast;h;1"])
}

/// The fair lock's fast paths write what the plain one's write (the hold count, the token and
/// the holder record, the lease as TTL), and delete the hash on the last release with nothing
/// published (a fair lock wakes only its queue's head); with anyone queued (Redisson's queue
/// or its scores), or on a held lock, they answer nil and change nothing.
#[test]
fn the_fair_locks_fast_paths_grant_and_release_or_change_nothing() {
    let server = RedisServer::start();
    let (acquire, release) = ("fair_acquire_fast.lua", "fair_release_fast.lua");
    let token = token_of(&fair_fast(&server, acquire, "c:1"));
    let fields: std::collections::HashMap<String, String> = cmd(&server, &["HGETALL", "fair"]);
    assert_eq!(fields.len(), 3, "{fields:?}");
    assert_eq!(fields["c:1"], "1");
    assert_eq!(fields["distlock:fencing-token"], token);
    assert!(fields["distlock:holder"].starts_with("fast;h;1;"));
    nil_and_unchanged(&server, "held", || fair_fast(&server, acquire, "c:2"));
    nil_and_unchanged(&server, "another's release", || {
        fair_fast(&server, release, "c:2")
    });
    cmd::<()>(&server, &["RPUSH", "redisson_lock_queue:{fair}", "c:5"]);
    nil_and_unchanged(&server, "a queued waiter", || {
        fair_fast(&server, release, "c:1")
    });
    cmd::<()>(&server, &["DEL", "redisson_lock_queue:{fair}"]);
    assert_eq!(fair_fast(&server, release, "c:1"), redis::Value::Int(1));
    assert!(!exists(&server, "fair"));
    let queue = ["RPUSH", "redisson_lock_queue:{fair}", "c:5"];
    let scores = ["ZADD", "redisson_lock_timeout:{fair}", "1", "c:5"];
    for (key, add) in [(queue[1], &queue[..]), (scores[1], &scores[..])] {
        cmd::<()>(&server, add);
        nil_and_unchanged(&server, key, || fair_fast(&server, acquire, "c:1"));
        cmd::<()>(&server, &["DEL", key]);
    }
}

/// `leased_acquire_fast.lua` of semaphore `lease` for permit `id` (16 bytes), lease 30 s.
fn leased_fast(server: &RedisServer, id: &str) -> redis::Value {
    eval(
        server,
        "leased_acquire_fast.lua",
        &["lease", "{lease}:timeout"],
        &[id, "30000"],
    )
}

/// `leased_release_fast.lua` of semaphore `lease` for permit `id`.
fn leased_release_fast(server: &RedisServer, id: &str) -> redis::Value {
    eval(
        server,
        "leased_release_fast.lua",
        &["lease", "{lease}:timeout"],
        &[id],
    )
}

/// The leased semaphore's fast paths take an available permit as the full acquire does (the
/// count less one, the id in Redisson's leases zset at server time + lease, the leases given
/// the count's TTL) and give it back (the id out, the count plus one); the full acquire of the
/// same id then answers the grant. An id leased already (a resend's full script ran first),
/// no available permit, a count that is no count, a queued waiter or the old leases key:
/// nil, nothing changed. A leases key of another type is refused before any write.
#[test]
fn the_leased_fast_paths_grant_and_release_or_change_nothing() {
    let server = RedisServer::start();
    let (a, b) = ("0123456789abcdef", "fedcba9876543210");
    let leases = "{lease}:timeout";
    cmd::<()>(&server, &["SET", "lease", "2"]);
    let before = server_time_ms(&server);
    let expiry = match leased_fast(&server, a) {
        redis::Value::Int(e) => e as u64,
        other => panic!("a fast grant: {other:?}"),
    };
    assert!(
        expiry >= before + 30_000 && expiry <= server_time_ms(&server) + 30_000,
        "{expiry}"
    );
    assert_eq!(cmd::<String>(&server, &["GET", "lease"]), "1");
    assert_eq!(
        cmd::<u64>(&server, &["ZSCORE", leases, a]),
        expiry,
        "Redisson's member and score"
    );
    assert_eq!(cmd::<i64>(&server, &["PTTL", leases]), -1);
    nil_and_unchanged(&server, "its id leased already", || leased_fast(&server, a));
    let full: Vec<i64> = redis::cmd("EVAL")
        .arg(source("leased_acquire.lua"))
        .arg(6)
        .arg(&["lease", leases, "redisson_sc:{lease}"][..])
        .arg(
            &[
                "redisson__timeout__set:{lease}",
                "distlock_permit_queue:{lease}",
                "distlock_permit_waiters:{lease}",
            ][..],
        )
        .arg(&[a, "30000", ""][..])
        .query(&mut server.connection())
        .unwrap();
    assert_eq!(
        full[..2],
        [1, expiry as i64],
        "the full script finds its grant"
    );
    // The leases live as long as a count with a TTL.
    cmd::<()>(&server, &["PEXPIRE", "lease", "60000"]);
    assert!(matches!(leased_fast(&server, b), redis::Value::Int(_)));
    assert!(cmd::<i64>(&server, &["PTTL", leases]) > 59_000);
    cmd::<()>(&server, &["PERSIST", "lease"]);
    cmd::<()>(&server, &["PERSIST", leases]);
    nil_and_unchanged(&server, "no permit available", || leased_fast(&server, "x"));
    for count in ["-1", "3.5", "02", "bob", "1234567890123456789"] {
        cmd::<()>(&server, &["SET", "lease", count]);
        nil_and_unchanged(&server, count, || leased_fast(&server, "x"));
    }
    cmd::<()>(&server, &["DEL", "lease"]);
    nil_and_unchanged(&server, "no count", || leased_fast(&server, "x"));
    cmd::<()>(&server, &["HSET", "lease", "c:1", "1"]);
    nil_and_unchanged(&server, "a lock's hash", || leased_fast(&server, "x"));
    cmd::<()>(&server, &["SET", "lease", "1"]);
    for key in [
        "distlock_permit_queue:{lease}",
        "redisson__timeout__set:{lease}",
    ] {
        cmd::<()>(&server, &["ZADD", key, "1", "w"]);
        nil_and_unchanged(&server, key, || leased_fast(&server, "x"));
        if key.contains("queue") {
            nil_and_unchanged(&server, "a release with a queue", || {
                leased_release_fast(&server, a)
            });
        }
        cmd::<()>(&server, &["DEL", key]);
    }
    // The releases: the count back, published; an id not leased (given back already).
    assert_eq!(leased_release_fast(&server, a), redis::Value::Int(1));
    assert_eq!(cmd::<String>(&server, &["GET", "lease"]), "2");
    assert!(cmd::<Option<String>>(&server, &["ZSCORE", leases, a]).is_none());
    nil_and_unchanged(&server, "given back already", || {
        leased_release_fast(&server, a)
    });
    assert_eq!(leased_release_fast(&server, b), redis::Value::Int(1));
    assert!(!exists(&server, leases));
    // A leases key of another type: refused, the count unchanged.
    cmd::<()>(&server, &["SET", leases, "x"]);
    let refused = redis::cmd("EVAL")
        .arg(source("leased_acquire_fast.lua"))
        .arg(2)
        .arg(&["lease", leases][..])
        .arg(&[a, "30000"][..])
        .query::<redis::Value>(&mut server.connection())
        .unwrap_err();
    // Redis 6.2 wraps an error raised inside a script in ERR ("Error running script ...").
    assert!(
        refused.code() == Some("WRONGTYPE") || refused.to_string().contains("WRONGTYPE"),
        "{refused}"
    );
    assert_eq!(cmd::<String>(&server, &["GET", "lease"]), "3");
}

/// An uncontended leased permit is taken and given back by the fast scripts alone (the full
/// scripts never sent: not cached after a flush); an acquire that finds no permit, and the
/// release of a permit whose lease its holder no longer counts on, run the full scripts.
#[tokio::test]
async fn an_uncontended_leased_permit_sends_only_the_fast_scripts() {
    let server = RedisServer::start();
    let client = evalsha_client(&server).await;
    let files = [
        "leased_acquire_fast.lua",
        "leased_release_fast.lua",
        "leased_acquire.lua",
        "leased_release.lua",
    ];
    let sem = client.leased_semaphore("fastp");
    sem.try_set_permits(1).await.unwrap();
    cmd::<()>(&server, &["SCRIPT", "FLUSH"]);
    let permit = sem.acquire().await.unwrap();
    permit.release().await.unwrap();
    assert_eq!(cached(&server, &files), [1, 1, 0, 0], "{files:?}");
    let permit = sem
        .lease(std::time::Duration::from_millis(50))
        .acquire()
        .await
        .unwrap();
    // Another handle (this one met no contention, so its release may still try the fast
    // path) finds no permit.
    let other = client.leased_semaphore("fastp");
    assert!(other.try_acquire().await.unwrap().is_none());
    assert_eq!(cached(&server, &files), [1, 1, 1, 0], "{files:?}");
    // The lease ends on the server, after the holder's own deadline; nothing reclaims it.
    permit.lost().await;
    assert!(
        eventually(std::time::Duration::from_secs(1), || {
            let now = server_time_ms(&server).to_string();
            cmd::<u64>(&server, &["ZCOUNT", "{fastp}:timeout", "-inf", &now]) == 1
        })
        .await,
        "the lease did not end on the server"
    );
    assert_eq!(
        permit.release().await.unwrap_err().kind(),
        distlock::ErrorKind::NotHeld,
        "a lease that ended is not given back as held"
    );
    assert_eq!(cached(&server, &files), [1, 1, 1, 1], "{files:?}");
}

/// `lock_renew_one.lua` (an extension, a watchdog batch of one) answers every case as
/// `lock_renew.lua` answers a batch of that one key, an integer for an array of one, and
/// extends the same keys: the owner's plain or write hold; a lock gone; another owner's;
/// another kind's hash with a field of the owner's name (a read-write lock's for a plain
/// renewal, a plain lock's or one read-held for a write renewal); a key of another type.
#[test]
fn the_one_key_renewal_answers_as_a_batch_of_one() {
    let server = RedisServer::start();
    let (plain, write) = ("c:1", "c:1:write");
    // (case, the key's contents: a hash's fields, or a string; the renewal's kind, field)
    let cases: [(&str, &[&str], &str, &str); 8] = [
        (
            "plain held",
            &["c:1", "1", "distlock:fencing-token", "7"],
            "",
            plain,
        ),
        ("plain gone", &[], "", plain),
        ("plain, another owner's", &["d:1", "1"], "", plain),
        (
            "plain in a read-write hash",
            &["mode", "read", "c:1", "1"],
            "",
            plain,
        ),
        (
            "write held",
            &["mode", "write", "c:1:write", "1"],
            "write",
            write,
        ),
        ("write in a plain hash", &["c:1:write", "1"], "write", write),
        (
            "write in a read-held hash",
            &["mode", "read", "c:1:write", "1"],
            "write",
            write,
        ),
        ("a string", &["a string"], "", plain),
    ];
    for (case, contents, mode, field) in cases {
        let mut seen = Vec::new();
        for one in [true, false] {
            let _: i64 = cmd(&server, &["DEL", "r1"]);
            match contents {
                [] => {}
                [value] => cmd(&server, &["SET", "r1", value]),
                fields => {
                    let mut hset = vec!["HSET", "r1"];
                    hset.extend(fields);
                    let _: i64 = cmd(&server, &hset);
                }
            }
            let _: i64 = cmd(&server, &["PEXPIRE", "r1", "20000"]);
            let code = if one {
                let mut args = vec!["1000", field];
                if !mode.is_empty() {
                    args.push(mode);
                }
                match eval(&server, "lock_renew_one.lua", &["r1"], &args) {
                    redis::Value::Int(code) => code,
                    other => panic!("{case}: lock_renew_one.lua answered {other:?}"),
                }
            } else {
                match eval(&server, "lock_renew.lua", &["r1"], &["1000", mode, field]) {
                    redis::Value::Array(codes) if codes.len() == 1 => match codes[0] {
                        redis::Value::Int(code) => code,
                        _ => panic!("{case}: lock_renew.lua answered {codes:?}"),
                    },
                    other => panic!("{case}: lock_renew.lua answered {other:?}"),
                }
            };
            let pttl: i64 = cmd(&server, &["PTTL", "r1"]);
            seen.push((code, pttl > 1000));
        }
        assert_eq!(seen[0], seen[1], "{case}: one key, then a batch of one");
        let renewed = matches!(case, "plain held" | "write held");
        let want = match case {
            _ if renewed => 1,
            "plain gone" => -1,
            _ => -2,
        };
        assert_eq!(seen[0], (want, !renewed && case != "plain gone"), "{case}");
    }
}
