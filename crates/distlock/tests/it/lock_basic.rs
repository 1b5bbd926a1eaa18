use std::time::Duration;

use distlock::{ErrorKind, NotHeldReason};

use crate::util::*;
use distlock::Lease;

/// One owner at a time, whoever asks; free again after the release. On every topology.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn second_owner_refused() {
    for topology in topologies() {
        let (deployment, client) = setup_on(topology).await;
        let lock = client.lock("orders");
        let first = lock.try_acquire().await.unwrap().expect("first grant");
        // The same Lock value, another call: a fresh owner, refused.
        assert!(lock.try_acquire().await.unwrap().is_none());
        // Another client too.
        let other = deployment.client().await;
        assert!(other.lock("orders").try_acquire().await.unwrap().is_none());
        assert!(other
            .lock("orders")
            .try_acquire_for(Duration::from_millis(100))
            .await
            .unwrap()
            .is_none());
        first.release().await.unwrap();
        assert!(other.lock("orders").try_acquire().await.unwrap().is_some());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_are_independent() {
    let (_server, client) = setup().await;
    let a = client.lock("a").try_acquire().await.unwrap().expect("a");
    let b = client.lock("b").try_acquire().await.unwrap().expect("b");
    assert_ne!(a.owner(), b.owner());
    a.release().await.unwrap();
    assert!(b.is_held().await.unwrap());
    b.release().await.unwrap();
}

/// An explicit lease is not renewed: the key expires and another owner gets in; the old
/// guard then finds the lock held by another. On every topology.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lease_expiry_frees_the_lock() {
    for topology in topologies() {
        let (deployment, client) = setup_on(topology).await;
        let lock = client.lock("short").lease(Duration::from_millis(300));
        let guard = lock.try_acquire().await.unwrap().expect("grant");
        let pttl: i64 = cmd(deployment.node_for("short"), &["PTTL", "short"]);
        assert!(pttl > 0 && pttl <= 300, "pttl {pttl}");
        assert!(client.lock("short").try_acquire().await.unwrap().is_none());
        // No watchdog for an explicit lease: the key expires and another owner gets in.
        let next = client
            .lock("short")
            .try_acquire_for(Duration::from_secs(3))
            .await
            .unwrap()
            .expect("granted after expiry");
        assert!(!guard.is_held().await.unwrap());
        let err = guard.release().await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::NotHeld);
        assert_eq!(err.not_held_reason(), Some(NotHeldReason::HeldByOther));
        next.release().await.unwrap();
    }
}

/// Released locks are free at once, and each grant's token is above the last. On every
/// topology.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relock_right_after_release_ten_times() {
    for topology in topologies() {
        let (deployment, client) = setup_on(topology).await;
        let lock = client.lock("again");
        let mut last = 0;
        for _ in 0..10 {
            let g = lock
                .try_acquire()
                .await
                .unwrap()
                .expect("free after release");
            assert!(g.fencing_token().get() > last);
            last = g.fencing_token().get();
            g.release().await.unwrap();
            let exists: bool = cmd(deployment.node_for("again"), &["EXISTS", "again"]);
            assert!(!exists);
        }
    }
}

/// Seed 003's method1 → method2: method2 re-enters the lock method1 holds; hold counts go
/// 1 → 2 → 1 → released.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reentrancy_method1_method2() {
    let (server, client) = setup().await;
    let lock = client.lock("lock:order:1");

    async fn method2(outer: &distlock::LockGuard, server: &RedisServer) {
        let inner = outer.reenter().await.expect("re-enter");
        assert_eq!(inner.hold_count(), 2);
        assert_eq!(inner.fencing_token(), outer.fencing_token());
        let count: u64 = cmd(server, &["HGET", "lock:order:1", outer.owner().as_str()]);
        assert_eq!(count, 2);
        inner.release().await.unwrap();
        let count: u64 = cmd(server, &["HGET", "lock:order:1", outer.owner().as_str()]);
        assert_eq!(count, 1);
    }

    let outer = lock.try_acquire().await.unwrap().expect("method1");
    assert_eq!(outer.hold_count(), 1);
    method2(&outer, &server).await;
    assert!(outer.is_held().await.unwrap());
    // acquire_as with the same owner is re-entry too.
    let again = lock.acquire_as(outer.owner()).await.unwrap();
    assert_eq!(again.hold_count(), 2);
    again.release().await.unwrap();
    outer.release().await.unwrap();
    let exists: bool = cmd(&server, &["EXISTS", "lock:order:1"]);
    assert!(!exists);
}

/// Each release of a hold that is not the owner's last is its own request: two handles of one
/// lock (each on its fast path, which defers to the full release) release one hold each, and
/// neither is answered by the other's unlock latch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn releases_of_held_holds_through_two_handles_are_two_requests() {
    let (server, client) = setup().await;
    let outer = client.lock("twice").try_acquire().await.unwrap().unwrap();
    let owner = outer.owner().clone();
    for _ in 0..2 {
        let again = client.lock("twice").acquire_as(&owner).await.unwrap();
        assert_eq!(again.hold_count(), 2);
        again.release().await.unwrap();
        let count: u64 = cmd(&server, &["HGET", "twice", owner.as_str()]);
        assert_eq!(count, 1);
    }
    outer.release().await.unwrap();
    let exists: bool = cmd(&server, &["EXISTS", "twice"]);
    assert!(!exists);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_by_non_owner_is_refused_and_changes_nothing() {
    let (server, client) = setup().await;
    let holder = client.lock("res").try_acquire().await.unwrap().unwrap();
    let before: Vec<(String, String)> = cmd(&server, &["HGETALL", "res"]);
    // An adopted guard for an owner that does not hold the lock is refused up front.
    let stranger = client.new_owner();
    let err = client
        .lock("res")
        .adopt(stranger.clone())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotHeld);
    // A stale guard (its lease ran out, someone else got in) cannot release the new holder.
    holder.release().await.unwrap();
    let stale = client
        .lock("res")
        .lease(Duration::from_millis(100))
        .try_acquire()
        .await
        .unwrap()
        .unwrap();
    // The scenario: the stale guard's 100 ms lease runs out on purpose.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let current = client.lock("res").try_acquire().await.unwrap().unwrap();
    let snapshot: Vec<(String, String)> = cmd(&server, &["HGETALL", "res"]);
    let pttl_before: i64 = cmd(&server, &["PTTL", "res"]);
    let err = stale.release().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotHeld);
    assert_eq!(err.not_held_reason(), Some(NotHeldReason::HeldByOther));
    let after: Vec<(String, String)> = cmd(&server, &["HGETALL", "res"]);
    assert_eq!(snapshot, after);
    let pttl_after: i64 = cmd(&server, &["PTTL", "res"]);
    assert!(pttl_after <= pttl_before && pttl_after > 0);
    assert_eq!(
        before.len(),
        3,
        "owner field + token field + holder field: {before:?}"
    );
    current.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_reports_holder_and_ttl() {
    let (_server, client) = setup().await;
    let lock = client.lock("st");
    let free = lock.status().await.unwrap();
    assert!(free.holders.is_empty());
    let g = lock.acquire().await.unwrap();
    let held = lock.status().await.unwrap();
    assert_eq!(held.holders, vec![(g.owner().to_string(), 1)]);
    assert_eq!(held.fencing_token, Some(g.fencing_token()));
    assert!(held.ttl.unwrap() > Duration::from_secs(25));
    assert!(lock.is_locked().await.unwrap());
    assert!(lock.force_unlock().await.unwrap());
    assert!(!lock.is_locked().await.unwrap());
    assert!(!g.is_held().await.unwrap());
}

/// 16 tasks × 200 increments of a GET/SET counter under the lock: the exact total.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counter_fuzz_16_tasks() {
    let (server, client) = setup().await;
    let url = server.url();
    let mut tasks = Vec::new();
    for _ in 0..16 {
        let lock = client.lock("fuzz");
        let url = url.clone();
        tasks.push(tokio::spawn(async move {
            let mut con = data_connection(&url).await;
            for _ in 0..200 {
                let g = lock.acquire().await.unwrap();
                unguarded_increment(&mut con, "counter").await;
                g.release().await.unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    // Every task ran its 200 increments (or its join above failed): any lost update under
    // the lock shows here.
    let total: u64 = cmd(&server, &["GET", "counter"]);
    assert_eq!(total, 3200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_guard_is_released_in_the_background() {
    let (server, client) = setup().await;
    {
        let _g = client.lock("dropped").acquire().await.unwrap();
        assert_eq!(client.watchdog_locks(), 1);
    }
    assert_eq!(client.watchdog_locks(), 0);
    assert!(
        eventually(Duration::from_secs(2), || !cmd::<bool>(
            &server,
            &["EXISTS", "dropped"]
        ))
        .await,
        "the dropped guard's lock was not released"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forget_and_adopt_hand_a_lock_over() {
    let (server, client) = setup().await;
    let g = client.lock("handover").acquire().await.unwrap();
    let token = g.fencing_token();
    let owner = g.forget();
    let serialized = owner.as_str().to_string();
    // "Another process": a second client adopts the owner from its string form.
    let other = client_for(&server).await;
    let adopted = other
        .lock("handover")
        .adopt(distlock::Owner::parse(&serialized).unwrap())
        .await
        .unwrap();
    assert_eq!(adopted.fencing_token(), token);
    assert_eq!(adopted.hold_count(), 1);
    adopted.release().await.unwrap();
    assert!(!other.lock("handover").is_locked().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extend_and_remaining() {
    let (_server, client) = setup().await;
    let g = client
        .lock("ext")
        .lease(Duration::from_secs(1))
        .acquire()
        .await
        .unwrap();
    assert!(g.remaining().await.unwrap() <= Duration::from_secs(1));
    let before = g.valid_until();
    g.extend(Duration::from_secs(20)).await.unwrap();
    assert!(g.remaining().await.unwrap() > Duration::from_secs(15));
    assert!(g.valid_until() > before);
    g.lock().force_unlock().await.unwrap();
    let err = g.extend(Duration::from_secs(20)).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotHeld);
    assert_eq!(err.not_held_reason(), Some(NotHeldReason::Gone));
    assert!(g.is_lost());
    assert_eq!(g.remaining().await.unwrap_err().kind(), ErrorKind::NotHeld);
    let _ = g.forget();
}

/// Extending to a shorter lease moves the local deadline back too, so `lost()` fires at the
/// end of the shortened lease (it used to stay at the old, later value and fire ~30 s late).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extending_to_a_shorter_lease_moves_the_deadline_back() {
    let (server, client) = setup().await;
    let g = client
        .lock("shorten")
        .lease(Duration::from_secs(30))
        .acquire()
        .await
        .unwrap();
    g.extend(Duration::from_millis(300)).await.unwrap();
    assert!(g.valid_until() < std::time::Instant::now() + Duration::from_millis(300));
    tokio::time::timeout(Duration::from_secs(1), g.lost())
        .await
        .expect("lost() at the end of the shortened lease");
    // lost() fires at the local deadline (lease minus drift), a little before the server
    // expires the key: wait for that, then the lock is free.
    assert!(
        eventually(Duration::from_secs(1), || !cmd::<bool>(
            &server,
            &["EXISTS", "shorten"]
        ))
        .await,
        "the server did not expire the shortened lease"
    );
    assert!(client
        .lock("shorten")
        .try_acquire()
        .await
        .unwrap()
        .is_some());
    let _ = g.forget();
}

/// Concurrent requests of one client's tasks share its multiplexed connection and reach the
/// server pipelined, several script calls to one socket read (`total_reads_processed` of
/// `INFO stats`), not one round trip after another. On one thread, so that every request is
/// queued before the connection's writer runs, whatever the machine's load (on more threads
/// the writer may send each as it comes: the bench's `server_reads_per_pair` shows how many
/// go together there).
#[tokio::test(flavor = "current_thread")]
async fn concurrent_requests_of_one_client_arrive_pipelined() {
    let (server, client) = setup().await;
    // Scripts cached and connections open before counting.
    let warm = client.lock("pipelined:warm").acquire().await.unwrap();
    warm.release().await.unwrap();
    // Script calls and socket reads so far, over one connection of its own (its two INFO
    // commands are two of the reads counted).
    let mut stats = server.connection();
    let mut counts = || -> (u64, u64) {
        let mut field = |section: &str, prefixes: &[&str]| -> u64 {
            let info: String = redis::cmd("INFO").arg(section).query(&mut stats).unwrap();
            let values: Vec<u64> = prefixes
                .iter()
                .filter_map(|prefix| {
                    info.lines()
                        .find_map(|l| l.strip_prefix(prefix))
                        .and_then(|rest| rest.split(',').next())
                        .and_then(|n| n.trim().parse().ok())
                })
                .collect();
            assert!(!values.is_empty(), "none of {prefixes:?} in INFO {section}");
            values.iter().sum()
        };
        (
            // Scripts are called by FCALL (Redis Functions) or EVALSHA.
            field(
                "commandstats",
                &["cmdstat_evalsha:calls=", "cmdstat_fcall:calls="],
            ),
            field("stats", &["total_reads_processed:"]),
        )
    };
    // One script per request; one after another, they would take a read each (64, and the
    // two INFOs).
    let pipelined = |before: (u64, u64), after: (u64, u64), what: &str| {
        let (calls, reads) = (after.0 - before.0, after.1 - before.1);
        assert_eq!(calls, 64, "one script per {what}");
        assert!(
            reads <= calls / 2,
            "64 {what}s in {reads} reads: not pipelined"
        );
    };
    let locks: Vec<_> = (0..64)
        .map(|i| client.lock(format!("pipelined:{i}")))
        .collect();
    let before = counts();
    let guards = futures_util::future::try_join_all(locks.iter().map(|l| l.acquire()))
        .await
        .unwrap();
    pipelined(before, counts(), "acquire");
    let mut tokens: Vec<_> = guards.iter().map(|g| g.fencing_token()).collect();
    tokens.sort();
    tokens.dedup();
    assert_eq!(tokens.len(), 64, "a token of its own for every grant");
    let before = counts();
    futures_util::future::try_join_all(guards.into_iter().map(|g| g.release()))
        .await
        .unwrap();
    pipelined(before, counts(), "release");
    drop(stats);
    assert!(lock_keys(&server).is_empty(), "{:?}", lock_keys(&server));
}

/// A nested acquire of a lock its own task holds (Redisson users re-enter with lock() out of
/// habit) waits like any new owner, and its error says why and how to re-enter; another
/// client's error says nothing of the kind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nested_acquire_times_out_with_a_hint_to_reenter() {
    let server = RedisServer::start();
    let client = distlock::Client::builder()
        .url(server.url())
        .default_wait(Duration::from_millis(200))
        .build()
        .await
        .unwrap();
    let guard = client.lock("nested").acquire().await.unwrap();
    let e = client.lock("nested").acquire().await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotAcquired);
    let text = e.to_string();
    assert!(
        text.contains("this task already holds it") && text.contains("LockGuard::reenter"),
        "{text}"
    );
    let held_write = client.rw_lock("nested-rw").write().await.unwrap();
    let e = client.rw_lock("nested-rw").write().await.unwrap_err();
    assert!(e.to_string().contains("this task already holds it"), "{e}");
    held_write.release().await.unwrap();

    let other = distlock::Client::builder()
        .url(server.url())
        .default_wait(Duration::from_millis(200))
        .build()
        .await
        .unwrap();
    let e = other.lock("nested").acquire().await.unwrap_err();
    assert!(!e.to_string().contains("holds it"), "{e}");
    // The hold itself is untouched, and re-entry as the hint says works at once.
    let again = guard.reenter().await.unwrap();
    again.release().await.unwrap();
    guard.release().await.unwrap();
}

/// Two tasks of one client contending for a lock (a web service's per-user lock) is ordinary
/// contention, whichever task holds it (a spawned task or the test's own body): the waiter's
/// `NotAcquired` error says nothing of a nested acquire or of re-entry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contention_between_tasks_of_one_client_is_not_a_nested_acquire() {
    let server = RedisServer::start();
    let client = distlock::Client::builder()
        .url(server.url())
        .default_wait(Duration::from_millis(200))
        .build()
        .await
        .unwrap();
    let no_hint = |e: distlock::Error| {
        assert_eq!(e.kind(), ErrorKind::NotAcquired);
        let text = e.to_string();
        assert!(
            !text.contains("already holds") && !text.contains("reenter"),
            "{text}"
        );
    };
    // A spawned task holds the lock until told to release it.
    let (held_tx, held_rx) = tokio::sync::oneshot::channel();
    let (release_tx, release_rx) = tokio::sync::oneshot::channel::<()>();
    let holder = tokio::spawn({
        let client = client.clone();
        async move {
            let guard = client.lock("contended").acquire().await.unwrap();
            held_tx.send(()).unwrap();
            release_rx.await.unwrap();
            guard.release().await.unwrap();
        }
    });
    held_rx.await.unwrap();
    // Another spawned task, and the test's body, wait for it.
    let waiter = tokio::spawn({
        let client = client.clone();
        async move { client.lock("contended").acquire().await.unwrap_err() }
    });
    no_hint(waiter.await.unwrap());
    no_hint(client.lock("contended").acquire().await.unwrap_err());
    release_tx.send(()).unwrap();
    holder.await.unwrap();
    // The body holds it; a spawned task waits.
    let guard = client.lock("contended").acquire().await.unwrap();
    let waiter = tokio::spawn({
        let client = client.clone();
        async move { client.lock("contended").acquire().await.unwrap_err() }
    });
    no_hint(waiter.await.unwrap());
    // The body's own nested acquire is still one.
    let e = client.lock("contended").acquire().await.unwrap_err();
    assert!(e.to_string().contains("this task already holds it"), "{e}");
    guard.release().await.unwrap();
}
