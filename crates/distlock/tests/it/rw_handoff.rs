//! Direct hand-off of a read-write lock's write lock: a release that frees the lock (the last
//! write hold, or the last read hold) grants it to the first live queued writer itself;
//! writers are served in arrival order; dead, cancelled and timed-out writers never keep it.

use std::time::Duration;

use distlock::layout::{rwlock_queue, rwlock_waiters, rwlock_writers};
use distlock::{RwLock, RwLockWriteGuard};

use crate::handoff::{cancelled_waiters_leave_no_lock, timed_out_waiters_leave_no_lock, Queued};
use crate::util::*;

/// The writers queued for `name`'s write lock, first in line first.
fn queued(server: &RedisServer, name: &str) -> Vec<String> {
    cmd(server, &["ZRANGE", &rwlock_queue(name), "0", "-1"])
}

/// Whether `name`'s hand-off queue holds `n` writers within `limit`.
async fn queued_within(server: &RedisServer, name: &str, n: usize, limit: Duration) -> bool {
    eventually(limit, || queued(server, name).len() == n).await
}

/// A task that write-locks `rw` (waiting the default wait) and returns the guard.
/// The write holds `owner` has on the read-write lock `key` (its `<owner>:write` field).
fn write_holds(server: &RedisServer, key: &str, owner: &str) -> Option<i64> {
    cmd(server, &["HGET", key, &format!("{owner}:write")])
}

fn spawn_write(rw: &RwLock) -> tokio::task::JoinHandle<RwLockWriteGuard> {
    let rw = rw.clone();
    tokio::spawn(async move { rw.write().await.unwrap() })
}

impl Queued for RwLock {
    type Guard = RwLockWriteGuard;
    fn key(&self) -> &str {
        self.name()
    }
    async fn take(&self) -> RwLockWriteGuard {
        self.write().await.unwrap()
    }
    async fn take_within(&self, wait: Duration) -> Option<RwLockWriteGuard> {
        self.try_write_for(wait).await.unwrap()
    }
}

/// The release of the last write hold is the only script that runs: the queued writer is
/// granted the write lock by it (mode `write`, its `:write` field, a token above the
/// releaser's), leaves the queue and the waiting writers, and returns without an attempt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_release_hands_the_lock_to_the_queued_writer() {
    let (server, client) = setup().await;
    // A lease no longer than the writer's liveness: the hand-off grants the full lease, so
    // the new holder runs no script of its own to lengthen it (which could fall within the
    // count below).
    let rw = client
        .rw_lock("rw-h")
        .lease(distlock::DEFAULT_WRITER_LIVENESS);
    let held = rw.write().await.unwrap();
    let before = script_calls(&server);
    let waiter = spawn_write(&rw);
    assert!(queued_within(&server, "rw-h", 1, Duration::from_secs(2)).await);
    waiter_settled(&server, before).await;
    let _: () = cmd(&server, &["CONFIG", "RESETSTAT"]);
    let token = held.fencing_token();
    held.release().await.unwrap();
    let got = tokio::time::timeout(Duration::from_secs(2), waiter)
        .await
        .expect("the queued writer was not handed the lock")
        .unwrap();
    assert_eq!(
        script_calls(&server),
        2,
        "the release and the writer's confirming attempt alone ran scripts"
    );
    assert!(got.fencing_token() > token);
    let mode: Option<String> = cmd(&server, &["HGET", "rw-h", "mode"]);
    assert_eq!(mode.as_deref(), Some("write"));
    assert_eq!(write_holds(&server, "rw-h", got.owner().as_str()), Some(1));
    for key in [
        rwlock_queue("rw-h"),
        rwlock_waiters("rw-h"),
        rwlock_writers("rw-h"),
    ] {
        assert!(!exists(&server, &key), "{key} left after the hand-off");
    }
    got.release().await.unwrap();
    assert!(!exists(&server, "rw-h"));
}

/// With hand-off off, a waiting writer does not queue (it still holds new readers back), and
/// the release frees the lock and wakes it: it takes the lock by an attempt of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_with_handoff_off_is_woken_not_handed_the_lock() {
    let (server, client) = setup().await;
    let rw = client.rw_lock("rw-off");
    let held = rw.write().await.unwrap();
    let before = script_calls(&server);
    let waiter = spawn_write(&rw.handoff(false));
    waiter_settled(&server, before).await;
    assert!(!exists(&server, &rwlock_queue("rw-off")), "it queued");
    assert!(exists(&server, &rwlock_writers("rw-off")));
    assert!(
        rw.try_read().await.unwrap().is_none(),
        "a reader passed a waiting writer"
    );
    let _: () = cmd(&server, &["CONFIG", "RESETSTAT"]);
    held.release().await.unwrap();
    let got = tokio::time::timeout(Duration::from_secs(2), waiter)
        .await
        .expect("the writer was not woken")
        .unwrap();
    assert!(
        script_calls(&server) >= 2,
        "the writer took the lock by an attempt of its own"
    );
    assert_eq!(
        write_holds(&server, "rw-off", got.owner().as_str()),
        Some(1)
    );
    got.release().await.unwrap();
    assert!(!exists(&server, "rw-off"));
}

/// The last read hold's release frees the lock and hands it to the queued writer; an earlier
/// read release (another reader still holds) hands nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_last_read_release_hands_the_lock_to_the_queued_writer() {
    let (server, client) = setup().await;
    let rw = client.rw_lock("rw-r");
    let (r1, r2) = (rw.read().await.unwrap(), rw.read().await.unwrap());
    let before = script_calls(&server);
    let waiter = spawn_write(&rw);
    assert!(queued_within(&server, "rw-r", 1, Duration::from_secs(2)).await);
    waiter_settled(&server, before).await;
    // A read release that leaves a reader publishes nothing: the writer stays asleep.
    r1.release().await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!waiter.is_finished(), "a writer got in beside a reader");
    let _: () = cmd(&server, &["CONFIG", "RESETSTAT"]);
    r2.release().await.unwrap();
    let got = tokio::time::timeout(Duration::from_secs(2), waiter)
        .await
        .expect("the queued writer was not handed the lock")
        .unwrap();
    assert_eq!(
        script_calls(&server),
        2,
        "the release and the writer's confirming attempt alone ran scripts"
    );
    let mode: Option<String> = cmd(&server, &["HGET", "rw-r", "mode"]);
    assert_eq!(mode.as_deref(), Some("write"));
    got.release().await.unwrap();
}

/// Writers get the write lock in the order they queued, each handed it by the release
/// before it; a `try_write` (one attempt) meanwhile does not pass them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queued_writers_are_served_in_arrival_order() {
    let (server, client) = setup().await;
    let rw = client.rw_lock("rw-o");
    let held = rw.write().await.unwrap();
    let mut waiters = Vec::new();
    for i in 0..3 {
        waiters.push(spawn_write(&rw));
        assert!(queued_within(&server, "rw-o", i + 1, Duration::from_secs(2)).await);
    }
    let order = queued(&server, "rw-o");
    held.release().await.unwrap();
    for (i, waiter) in waiters.into_iter().enumerate() {
        let got = tokio::time::timeout(Duration::from_secs(2), waiter)
            .await
            .unwrap_or_else(|_| panic!("writer {i} was not served"))
            .unwrap();
        assert_eq!(got.owner().as_str(), order[i], "writer {i} out of order");
        if i == 0 {
            assert!(
                rw.try_write().await.unwrap().is_none(),
                "a try_write passed the queue"
            );
        }
        got.release().await.unwrap();
    }
    assert!(!exists(&server, "rw-o"));
    assert!(!exists(&server, &rwlock_queue("rw-o")));
}

/// A writer whose acquire is cancelled around the release never keeps the lock: its leave
/// gives a racing hand-off back to the next writer (or frees it), whatever the timing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_writer_leaves_no_lock() {
    let (server, client) = setup().await;
    cancelled_waiters_leave_no_lock(
        &server,
        &client.rw_lock("rw-cancel"),
        150,
        || queued(&server, "rw-cancel").len(),
        || {
            !exists(&server, &rwlock_queue("rw-cancel"))
                && !exists(&server, &rwlock_waiters("rw-cancel"))
                && !exists(&server, &rwlock_writers("rw-cancel"))
        },
    )
    .await;
}

/// A writer whose wait ends while the lock is being handed to it either returns the grant or
/// gives it back: the lock is never left held by nobody.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timed_out_writer_takes_or_gives_back_a_racing_hand_off() {
    let (server, client) = setup().await;
    timed_out_waiters_leave_no_lock(&server, &client.rw_lock("rw-deadline"), || {
        queued(&server, "rw-deadline").len()
    })
    .await;
}

/// A writer process killed while queued, its liveness deadline still ahead, may be handed the
/// lock; the hand-off's lease ends at that deadline, after which the next writer gets it.
/// Never two holders.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_writer_blocks_the_lock_at_most_until_its_liveness_deadline() {
    let (server, client) = setup().await;
    let liveness = distlock::DEFAULT_WRITER_LIVENESS;
    let rw = client.rw_lock("rw-dead");
    let held = rw.write().await.unwrap();
    let mut victim = family(&["write-wait", &server.url(), "rw-dead"]);
    assert!(queued_within(&server, "rw-dead", 1, Duration::from_secs(5)).await);
    let victim_owner = queued(&server, "rw-dead")[0].clone();
    let next = spawn_write(&rw);
    assert!(queued_within(&server, "rw-dead", 2, Duration::from_secs(2)).await);
    victim.kill().unwrap();
    victim.wait().unwrap();
    // Half a second on, what is left of its liveness is clearly less than a whole one (which
    // a hand-off that ignored the deadline would grant).
    tokio::time::sleep(Duration::from_millis(500)).await;
    // Its liveness deadline, as its last attempt set it in its entry (`<deadline ms>;…`): it
    // renews it every third of the liveness, so it is seconds ahead.
    let entry: Vec<u8> = cmd(
        &server,
        &["HGET", &rwlock_waiters("rw-dead"), &victim_owner],
    );
    let (deadline, now) = deadline_ahead(&server, entry_deadline(&entry));
    let released = tokio::time::Instant::now();
    held.release().await.unwrap();
    assert_eq!(
        write_holds(&server, "rw-dead", &victim_owner),
        Some(1),
        "the hand-off went to the first queued writer"
    );
    let pttl: i64 = cmd(&server, &["PTTL", "rw-dead"]);
    assert!(
        pttl > 0 && pttl as u64 <= deadline - now,
        "initial lease {pttl} ms: longer than what was left of the dead writer's liveness \
         ({} ms)",
        deadline - now
    );
    let got = tokio::time::timeout(liveness * 3, next)
        .await
        .expect("the next writer never got the lock")
        .unwrap();
    // The dead writer's lease (at most what was left of its liveness), then the next
    // writer's recheck (a third of its liveness), bounded loosely.
    let waited = released.elapsed();
    assert!(waited < liveness * 2, "waited {waited:?}");
    assert_eq!(write_holds(&server, "rw-dead", &victim_owner), None);
    got.release().await.unwrap();
    assert_eq!(
        first_line(&mut victim),
        "",
        "the killed writer never got the lock"
    );
}

/// A write lock freed without a release (its lease ran out) with a writer queued goes to that
/// writer at the next attempt of anyone: a `try_write` then hands it to the queued writer (a
/// process killed right after queueing, so only the `try_write` attempts) and is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_freed_by_expiry_goes_to_the_queued_writer_first() {
    let (server, client) = setup().await;
    let rw = client.rw_lock("rw-free");
    let _lapsing = rw.lease(Duration::from_millis(400)).write().await.unwrap();
    let mut victim = family(&["write-wait", &server.url(), "rw-free"]);
    assert!(queued_within(&server, "rw-free", 1, Duration::from_secs(5)).await);
    let victim_owner = queued(&server, "rw-free")[0].clone();
    victim.kill().unwrap();
    victim.wait().unwrap();
    assert!(
        eventually(Duration::from_secs(2), || !exists(&server, "rw-free")).await,
        "the lease did not run out"
    );
    assert!(
        rw.try_write().await.unwrap().is_none(),
        "a try_write took the free lock past the queued writer"
    );
    assert_eq!(
        write_holds(&server, "rw-free", &victim_owner),
        Some(1),
        "the queued writer was not handed the lock"
    );
    assert!(queued(&server, "rw-free").is_empty());
}

/// A hand-off message that no release published is no grant of the write lock: the queued
/// writer asks the server, is refused, and waits on; after the real release it holds the
/// lock with a token the server issued (see `handoff::a_forged_hand_off_is_no_grant`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_hand_off_message_is_no_write_grant() {
    let (server, client) = setup().await;
    let rw = client
        .rw_lock("rw-forged")
        .lease(std::time::Duration::from_secs(60));
    let holder = rw.write().await.unwrap();
    crate::handoff::a_forged_hand_off_is_no_grant(
        &server,
        "distlock_lock_grant:*",
        holder,
        || {
            let rw = rw.clone();
            tokio::spawn(async move { rw.take_within(Duration::from_secs(20)).await })
        },
        || queued(&server, "rw-forged").first().cloned(),
        || None,
    )
    .await;
}
