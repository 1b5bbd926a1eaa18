//! The scripts' idempotency under a resent request, exercised by sending the same request
//! twice, as a retry after a lost reply would.

use distlock::layout::{
    acquire_latch, fencing_counter, lock_queue, lock_waiters, redisson_fenced_token, unlock_latch,
};

use crate::util::*;

fn source(file: &str) -> &'static str {
    distlock::SCRIPT_SOURCES
        .iter()
        .find(|(f, _)| *f == file)
        .map(|(_, s)| *s)
        .expect("script")
}

fn acquire(server: &RedisServer, owner: &str, mode: &str, request: &str) -> Vec<i64> {
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
        .arg("")
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
