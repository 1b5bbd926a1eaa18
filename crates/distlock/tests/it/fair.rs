//! FairLock: FIFO grants, direct hand-off to the head, crashed and cancelled waiters.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use distlock::layout::fair_waiters;
use distlock::FairLock;

use crate::util::*;

/// A task that acquires `lock` (waiting the default wait) and returns the guard.
fn spawn_acquire(lock: &FairLock) -> tokio::task::JoinHandle<distlock::FairLockGuard> {
    let lock = lock.clone();
    tokio::spawn(async move { lock.acquire().await.unwrap() })
}

fn queue_len(server: &RedisServer, name: &str) -> i64 {
    cmd(
        server,
        &["LLEN", &format!("redisson_lock_queue:{{{name}}}")],
    )
}

/// 20 waiters queued in a known order are granted in exactly that order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_waiters_are_granted_in_arrival_order() {
    let (server, client) = setup().await;
    let lock = client.fair_lock("fifo");
    let holder = lock.acquire().await.unwrap();
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for i in 0..20 {
        let lock = lock.clone();
        let order = order.clone();
        tasks.push(tokio::spawn(async move {
            let g = lock.acquire().await.unwrap();
            order.lock().unwrap().push(i);
            g.release().await.unwrap();
        }));
        assert!(
            eventually(Duration::from_secs(2), || queue_len(&server, "fifo")
                == i + 1)
            .await,
            "waiter {i} did not queue"
        );
    }
    holder.release().await.unwrap();
    for t in tasks {
        tokio::time::timeout(Duration::from_secs(10), t)
            .await
            .unwrap()
            .unwrap();
    }
    assert_eq!(*order.lock().unwrap(), (0..20).collect::<Vec<_>>());
    assert_eq!(queue_len(&server, "fifo"), 0);
}

/// A waiter process killed in the middle of the queue does not stall the ones behind it for
/// longer than its liveness timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_waiter_process_does_not_stall_the_queue() {
    let (server, client) = setup().await;
    let liveness = Duration::from_millis(900);
    let lock = client.fair_lock("stall").liveness_timeout(liveness);
    let holder = lock.acquire().await.unwrap();
    let first = {
        let lock = lock.clone();
        tokio::spawn(async move { lock.acquire().await.unwrap() })
    };
    assert!(eventually(Duration::from_secs(2), || queue_len(&server, "stall") == 1).await);
    let mut victim = family(&["fair-wait", &server.url(), "stall", "900"]);
    assert!(eventually(Duration::from_secs(5), || queue_len(&server, "stall") == 2).await);
    let last = {
        let lock = lock.clone();
        tokio::spawn(async move { lock.acquire().await.unwrap() })
    };
    assert!(eventually(Duration::from_secs(2), || queue_len(&server, "stall") == 3).await);
    victim.kill().unwrap();
    victim.wait().unwrap();
    holder.release().await.unwrap();
    let g1 = tokio::time::timeout(Duration::from_secs(2), first)
        .await
        .unwrap()
        .unwrap();
    let released = tokio::time::Instant::now();
    g1.release().await.unwrap();
    let g3 = tokio::time::timeout(Duration::from_secs(5), last)
        .await
        .expect("the queue stalled behind the dead waiter")
        .unwrap();
    // The dead waiter's place lapses within its liveness (0.9 s; Redisson keeps it for 5
    // minutes by default); the bound leaves slack for a loaded machine.
    let waited = released.elapsed();
    assert!(waited < liveness * 3, "waited {waited:?}");
    g3.release().await.unwrap();
    assert_eq!(
        first_line(&mut victim),
        "",
        "the killed waiter never got the lock"
    );
}

/// A cancelled waiter leaves the queue at once; a timed-out one too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelled_and_timed_out_waiters_leave_the_queue() {
    let (server, client) = setup().await;
    let lock = client.fair_lock("leave");
    let holder = lock.acquire().await.unwrap();
    let waiter = {
        let lock = lock.clone();
        tokio::spawn(async move { lock.acquire().await })
    };
    assert!(eventually(Duration::from_secs(2), || queue_len(&server, "leave") == 1).await);
    waiter.abort();
    assert!(waiter.await.unwrap_err().is_cancelled());
    assert!(
        eventually(Duration::from_millis(500), || queue_len(&server, "leave")
            == 0)
        .await,
        "the cancelled waiter stayed queued"
    );
    let zcard: i64 = cmd(&server, &["ZCARD", "redisson_lock_timeout:{leave}"]);
    assert_eq!(zcard, 0);
    assert!(lock
        .try_acquire_for(Duration::from_millis(100))
        .await
        .unwrap()
        .is_none());
    assert_eq!(
        queue_len(&server, "leave"),
        0,
        "the timed-out waiter stayed queued"
    );
    let status = lock.status().await.unwrap();
    assert!(status.queue.is_empty());
    holder.release().await.unwrap();
}

/// The fair lock is reentrant, has fencing tokens and a watchdog like Lock; try_acquire does
/// not jump the queue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fair_lock_shares_the_lock_guard_semantics() {
    let (server, client) = setup().await;
    let lock = client.fair_lock("fair-basic");
    let g = lock.acquire().await.unwrap();
    let first_token = g.fencing_token();
    let inner = g.reenter().await.unwrap();
    assert_eq!(inner.hold_count(), 2);
    assert_eq!(inner.fencing_token(), first_token);
    let waiter = {
        let lock = lock.clone();
        tokio::spawn(async move { lock.acquire().await.unwrap() })
    };
    assert!(
        eventually(Duration::from_secs(2), || queue_len(&server, "fair-basic")
            == 1)
        .await
    );
    inner.release().await.unwrap();
    g.release().await.unwrap();
    // The queued waiter is first: a newcomer's single attempt does not overtake it.
    let w = tokio::time::timeout(Duration::from_secs(2), waiter)
        .await
        .unwrap()
        .unwrap();
    assert!(lock.try_acquire().await.unwrap().is_none());
    // A new grant, so a new token, above the first holder's.
    assert!(
        w.fencing_token() > first_token,
        "token {} after {first_token}",
        w.fencing_token()
    );
    w.release().await.unwrap();
}

/// The last release grants the fair lock to the head waiter itself: the waiter's acquire
/// returns on the grant message alone (no attempt of its own after the release), with a
/// token above the releaser's, its hold in the lock hash, a lease of at most its own, and
/// nothing left of it in the queue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_hands_the_fair_lock_to_the_head_waiter() {
    let (server, client) = setup().await;
    // Long lease and liveness for the waiter: no heartbeat attempt inside the measured window.
    let holder_lock = client
        .fair_lock("fair-direct")
        .lease(Duration::from_secs(60));
    let waiter_lock = client
        .fair_lock("fair-direct")
        .lease(Duration::from_secs(20))
        .liveness_timeout(Duration::from_secs(30));
    let held = holder_lock.acquire().await.unwrap();
    let got = crate::handoff::handed_to_the_first_waiter(
        &server,
        held,
        &waiter_lock,
        || queue_len(&server, "fair-direct") as usize,
        &[&fair_waiters("fair-direct")],
        &[
            "redisson_lock_timeout:{fair-direct}",
            "distlock_fair_liveness:{fair-direct}",
            &fair_waiters("fair-direct"),
        ],
        // The holder's handle met no contention: its release tries the fast path, which
        // leaves a queued lock to the full release.
        2,
    )
    .await;
    assert!(got.is_held().await.unwrap());
    got.release().await.unwrap();
    assert!(!exists(&server, "fair-direct"));
}

/// With hand-off off, a queued fair waiter has no hand-off entry (the queue alone, as
/// Redisson's); the release wakes it, and it takes the lock by an attempt of its own, still
/// in queue order. The settings survive each other's builders.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fair_waiter_with_handoff_off_is_woken_not_handed_the_lock() {
    let (server, client) = setup().await;
    let lock = client.fair_lock("fair-off");
    let off = lock
        .handoff(false)
        .liveness_timeout(Duration::from_secs(2))
        .lease(Duration::from_secs(20));
    let held = lock.acquire().await.unwrap();
    let before = script_calls(&server);
    let waiter = spawn_acquire(&off);
    waiter_settled(&server, before).await;
    assert_eq!(queue_len(&server, "fair-off"), 1);
    assert!(
        !exists(&server, &fair_waiters("fair-off")),
        "it took hand-offs"
    );
    // Its liveness is the 2 s given before the lease: its place lapses at most 2 s on.
    let owner: String = cmd(&server, &["LINDEX", "redisson_lock_queue:{fair-off}", "0"]);
    let deadline: f64 = cmd(
        &server,
        &["ZSCORE", "distlock_fair_liveness:{fair-off}", &owner],
    );
    assert!(deadline as u64 <= server_time_ms(&server) + 2_000);
    let _: () = cmd(&server, &["CONFIG", "RESETSTAT"]);
    let token = held.fencing_token();
    held.release().await.unwrap();
    let got = tokio::time::timeout(Duration::from_secs(2), waiter)
        .await
        .expect("the waiter was not woken")
        .unwrap();
    assert!(
        script_calls(&server) >= 2,
        "the waiter took the lock by an attempt of its own"
    );
    assert!(got.fencing_token() > token);
    let pttl: i64 = cmd(&server, &["PTTL", "fair-off"]);
    assert!(
        pttl > 15_000,
        "the lease set before the hand-off setting was lost: {pttl}"
    );
    got.release().await.unwrap();
    assert!(!exists(&server, "fair-off"));
}

/// A fair waiter whose acquire is cancelled around the release never keeps the lock: its
/// leave gives a racing hand-off back, to the next waiter or free, whatever the timing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_fair_waiter_leaves_no_lock() {
    let (server, client) = setup().await;
    crate::handoff::cancelled_waiters_leave_no_lock(
        &server,
        &client.fair_lock("fair-cancel"),
        120,
        || queue_len(&server, "fair-cancel") as usize,
        || !exists(&server, &fair_waiters("fair-cancel")),
    )
    .await;
}

/// A fair waiter whose wait ends while the lock is being handed to it either returns the
/// grant or gives it back: the lock is never left held by nobody.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timed_out_fair_waiter_takes_or_gives_back_a_racing_hand_off() {
    let (server, client) = setup().await;
    crate::handoff::timed_out_waiters_leave_no_lock(
        &server,
        &client.fair_lock("fair-deadline"),
        || queue_len(&server, "fair-deadline") as usize,
    )
    .await;
}

/// A force unlock leaves a fair lock free, as Redisson's `forceUnlock` (`isLocked()` is
/// false afterwards), even with a waiter queued whose process is dead: the head is only woken,
/// never handed the lock, so a dead head cannot keep it for its liveness timeout. A live head
/// woken so takes the lock by its own attempt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_force_unlock_leaves_the_fair_lock_free_and_wakes_the_head_waiter() {
    let (server, client) = setup().await;
    let lock = client.fair_lock("fair-force");
    let held = lock.acquire().await.unwrap();
    let mut dead = family(&["fair-wait", &server.url(), "fair-force", "5000"]);
    assert!(
        eventually(Duration::from_secs(5), || queue_len(&server, "fair-force")
            == 1)
        .await
    );
    dead.kill().unwrap();
    dead.wait().unwrap();
    assert!(lock.force_unlock().await.unwrap());
    assert!(
        !lock.is_locked().await.unwrap(),
        "the force unlock handed the lock to the dead head waiter"
    );
    assert_eq!(
        queue_len(&server, "fair-force"),
        1,
        "the live-by-deadline head stays queued"
    );
    assert!(!held.is_held().await.unwrap());
    let _ = held.forget();

    // A live waiter at the head is woken and takes the lock itself.
    let held = client.fair_lock("fair-force-live").acquire().await.unwrap();
    let live = client.fair_lock("fair-force-live");
    let waiter = spawn_acquire(&live);
    assert!(
        eventually(Duration::from_secs(2), || queue_len(
            &server,
            "fair-force-live"
        ) == 1)
        .await
    );
    assert!(live.force_unlock().await.unwrap());
    let got = tokio::time::timeout(Duration::from_secs(2), waiter)
        .await
        .expect("the woken head waiter did not take the lock")
        .unwrap();
    assert!(got.fencing_token() > held.fencing_token());
    assert!(got.is_held().await.unwrap());
    let _ = held.forget();
    got.release().await.unwrap();
}

/// A force unlock drops the dead waiters at the queue's head — the usual reason to force-unlock
/// is a stuck lock, whose head waiter's process died too — and wakes the live waiter behind
/// them, which takes the lock at once. Left in place, a dead distlock head keeps its entry in
/// `redisson_lock_timeout:{name}` with a Redisson score its lease plus its wait ahead: a
/// Redisson waiter behind it waits that long (Redisson's own `testFirstThreadDeathTimeoutDrift`),
/// and a distlock waiter until its next attempt (a third of its liveness; 20 s here).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_force_unlock_drops_a_dead_head_waiter_and_wakes_the_live_one_behind_it() {
    let (server, client) = setup().await;
    let name = "fair-dead-head";
    let (queue, timeouts, liveness) = (
        format!("redisson_lock_queue:{{{name}}}"),
        format!("redisson_lock_timeout:{{{name}}}"),
        format!("distlock_fair_liveness:{{{name}}}"),
    );
    let lease = Duration::from_secs(60);
    let held = client.fair_lock(name).lease(lease).acquire().await.unwrap();
    // The head: a waiter in a process of its own with a 1 s liveness, killed while queued.
    let mut dead = family(&["fair-wait", &server.url(), name, "1000"]);
    assert!(eventually(Duration::from_secs(5), || queue_len(&server, name) == 1).await);
    let dead_owner: String = cmd(&server, &["LINDEX", &queue, "0"]);
    // Behind it, a live waiter that attempts again only every 20 s (a third of its liveness
    // and of its lease): nothing but the force unlock can drop the dead head in this test.
    let live = client
        .fair_lock(name)
        .lease(lease)
        .liveness_timeout(Duration::from_secs(60));
    let waiter = spawn_acquire(&live);
    assert!(eventually(Duration::from_secs(2), || queue_len(&server, name) == 2).await);
    dead.kill().unwrap();
    dead.wait().unwrap();
    // The dead head's liveness ends at most 1 s after its last attempt; its Redisson score is
    // about the holder's lease plus its wait ahead.
    let deadline: f64 = cmd(&server, &["ZSCORE", &liveness, &dead_owner]);
    let score: f64 = cmd(&server, &["ZSCORE", &timeouts, &dead_owner]);
    let now = server_time_ms(&server);
    assert!(
        score as u64 > now + 60_000,
        "the dead head's Redisson score is only {} ms ahead",
        score as i64 - now as i64
    );
    assert!(
        eventually(Duration::from_secs(3), || server_time_ms(&server)
            > deadline as u64)
        .await
    );
    let head: String = cmd(&server, &["LINDEX", &queue, "0"]);
    assert_eq!(head, dead_owner, "the dead head is still in place");
    let unlocked = tokio::time::Instant::now();
    assert!(client.fair_lock(name).force_unlock().await.unwrap());

    let queued: Vec<String> = cmd(&server, &["LRANGE", &queue, "0", "-1"]);
    assert!(
        !queued.contains(&dead_owner),
        "the dead head stays queued: {queued:?}"
    );
    for key in [&timeouts, &liveness] {
        let left: Option<f64> = cmd(&server, &["ZSCORE", key, &dead_owner]);
        assert_eq!(left, None, "the dead head stays in {key}");
    }
    let entry: i64 = cmd(&server, &["HEXISTS", &fair_waiters(name), &dead_owner]);
    assert_eq!(entry, 0, "the dead head's hand-off entry stays");
    let got = tokio::time::timeout(Duration::from_secs(3), waiter)
        .await
        .expect("the live waiter behind the dead head was not woken")
        .unwrap();
    assert!(
        unlocked.elapsed() < Duration::from_secs(3),
        "took {:?}",
        unlocked.elapsed()
    );
    assert!(got.is_held().await.unwrap());
    assert!(got.fencing_token() > held.fencing_token());
    let _ = held.forget();
    got.release().await.unwrap();
    assert_eq!(
        first_line(&mut dead),
        "",
        "the killed waiter never got the lock"
    );
}

/// A hand-off read late — the waiter's process was stopped past the hand-off's initial lease,
/// and the lock went on meanwhile — is not taken as a grant, even when the resumed waiter's
/// own attempt runs before it reads the message (the attempt reports the last token issued,
/// which is above the stale one): the waiter waits its turn and gets a newer token than the
/// holder after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fair_hand_off_read_after_its_lease_ran_out_is_not_a_grant() {
    let (server, client) = setup().await;
    let lock = client.fair_lock("fair-late");
    let holder = lock.acquire().await.unwrap();
    crate::handoff::a_late_hand_off_is_no_grant(
        &server,
        "fair-wait",
        "fair-late",
        holder,
        || spawn_acquire(&lock),
        || queue_len(&server, "fair-late") as usize,
    )
    .await;
}

/// A hand-off message that no release published is no grant of the fair lock: the head
/// waiter asks the server, is refused, and waits on; after the real release it holds the
/// lock with the server's token (see `handoff::a_forged_hand_off_is_no_grant`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_hand_off_message_is_no_fair_grant() {
    let (server, client) = setup().await;
    let lock = client
        .fair_lock("fair-forged")
        .lease(Duration::from_secs(60));
    let holder = lock.acquire().await.unwrap();
    crate::handoff::a_forged_hand_off_is_no_grant(
        &server,
        "distlock_lock_grant:*",
        holder,
        || {
            let lock = lock.clone();
            tokio::spawn(async move {
                crate::handoff::Queued::take_within(&lock, Duration::from_secs(20)).await
            })
        },
        || {
            cmd(
                &server,
                &["LINDEX", "redisson_lock_queue:{fair-forged}", "0"],
            )
        },
        || cmd(&server, &["HGET", "fair-forged", "distlock:fencing-token"]),
    )
    .await;
}
