//! Faults found by trying to break distlock on one server: requests whose reply never came
//! (`CLIENT PAUSE` past the command timeout), a server restart while holders and waiters
//! wait, servers that accept connections and never answer, eviction policies and a full
//! server.

use std::time::Duration;

use distlock::{Client, ErrorKind, NotHeldReason};
use tokio::time::Instant;

use crate::util::*;

/// Pause every client of `server` for `ms` (the server stops answering, requests queue).
fn client_pause(server: &RedisServer, ms: u64) {
    let _: () = cmd(server, &["CLIENT", "PAUSE", &ms.to_string(), "ALL"]);
}

fn hold_count(server: &RedisServer, key: &str, owner: &str) -> Option<u64> {
    cmd::<Option<u64>>(server, &["HGET", key, owner])
}

/// A pause a little longer than the command timeout, inside the resend window: the
/// re-entry is resent with the same request id until the server answers, and the caller is
/// told the truth (hold count 2), never a failure that the server contradicts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reenter_across_a_short_pause_is_resent_until_answered() {
    let server = RedisServer::start();
    let client = quick_client(&server).await;
    let outer = client.lock("short").acquire().await.unwrap();
    client_pause(&server, 900);
    let inner = outer.reenter().await.expect("answered after the pause");
    assert_eq!(inner.hold_count(), 2);
    assert_eq!(
        hold_count(&server, "short", outer.owner().as_str()),
        Some(2)
    );
    inner.release().await.unwrap();
    outer.release().await.unwrap();
    assert!(!cmd::<bool>(&server, &["EXISTS", "short"]));
}

/// A pause longer than the resend window: the caller is told the outcome is unknown, and
/// once the server resumes the re-entry it applied is given back, so the server ends with
/// the holds the caller knows of (here: one), and the caller's release frees the lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reenter_of_unknown_outcome_is_undone_after_a_long_pause() {
    let server = RedisServer::start();
    let client = quick_client(&server).await;
    let outer = client.lock("long").acquire().await.unwrap();
    let owner = outer.owner().as_str().to_string();
    client_pause(&server, 3_000);
    let started = Instant::now();
    let err = outer
        .reenter()
        .await
        .expect_err("no answer within the window");
    assert!(err.is_outcome_unknown(), "{err}");
    assert_eq!(err.kind(), ErrorKind::Connection);
    // The README's bound: the last send goes out within the resend window (1.4 s here) and
    // waits one command timeout for its answer, so the caller is told within 1.7 s (plus
    // scheduling slack), and not before the window has passed.
    let told = started.elapsed();
    assert!(told >= Duration::from_millis(1_400), "{told:?}");
    assert!(told < Duration::from_millis(2_500), "{told:?}");
    // After the pause the server ran the re-entry (count 2); the background undo gives it
    // back.
    assert!(
        eventually(Duration::from_secs(6), || hold_count(
            &server, "long", &owner
        ) == Some(1))
        .await,
        "hold count stayed {:?}",
        hold_count(&server, "long", &owner)
    );
    let back_at = started.elapsed();
    eprintln!(
        "3 s pause around reenter: caller told 'outcome unknown' after {told:?}; \
         hold count back to 1 at {back_at:?} (pause ended at 3 s)"
    );
    // Observation window: a second undo, or a late resend, would change the count in it.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(hold_count(&server, "long", &owner), Some(1));
    outer.release().await.unwrap();
    assert!(!cmd::<bool>(&server, &["EXISTS", "long"]));
}

/// Releasing one of two holds across a pause longer than the resend window: the caller is
/// told the outcome is unknown; the release is applied exactly once (one hold left, not
/// zero), and the other hold still releases the lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_of_one_of_two_holds_is_applied_once_across_a_long_pause() {
    let server = RedisServer::start();
    let client = quick_client(&server).await;
    let outer = client.lock("two").acquire().await.unwrap();
    let owner = outer.owner().as_str().to_string();
    let inner = outer.reenter().await.unwrap();
    client_pause(&server, 2_500);
    let err = inner
        .release()
        .await
        .expect_err("no answer within the window");
    assert!(err.is_outcome_unknown(), "{err}");
    assert!(
        eventually(Duration::from_secs(6), || hold_count(
            &server, "two", &owner
        ) == Some(1))
        .await,
        "hold count {:?}",
        hold_count(&server, "two", &owner)
    );
    // Observation window: a late resend of the release would apply within it.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        hold_count(&server, "two", &owner),
        Some(1),
        "released twice or never"
    );
    outer.release().await.unwrap();
    assert!(!cmd::<bool>(&server, &["EXISTS", "two"]));
}

/// A final release whose first send got no answer (the server paused past the command
/// timeout) is resent; the first send released the lock, so the resend finds it gone. No
/// latch is kept for a final release, so the client cannot tell that from a hold lost
/// before the release, and says so: `NotHeld`, `Unconfirmed`. The lock is free.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resent_final_release_that_finds_the_lock_gone_is_unconfirmed() {
    let server = RedisServer::start();
    let client = quick_client(&server).await;
    let guard = client.lock("resent").acquire().await.unwrap();
    client_pause(&server, 900);
    let err = guard.release().await.expect_err("the resend found it gone");
    assert_eq!(err.kind(), ErrorKind::NotHeld, "{err}");
    assert_eq!(
        err.not_held_reason(),
        Some(NotHeldReason::Unconfirmed),
        "{err}"
    );
    assert!(!cmd::<bool>(&server, &["EXISTS", "resent"]));
}

/// A hold lost with the server (killed, restarted empty) just before its release: the
/// release is never reported as a clean one. (The fault suite found the release counted as
/// released when its resend found the lock re-taken after such a restart.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_after_the_server_lost_the_hold_is_not_reported_released() {
    let mut server = RedisServer::start();
    let client = quick_client(&server).await;
    let guard = client.lock("forgotten").acquire().await.unwrap();
    server.kill();
    server.restart();
    let err = guard
        .release()
        .await
        .expect_err("the server forgot the hold");
    assert_eq!(err.kind(), ErrorKind::NotHeld, "{err}");
    assert!(
        matches!(
            err.not_held_reason(),
            Some(NotHeldReason::Gone | NotHeldReason::Unconfirmed)
        ),
        "{err}"
    );
}

/// Semaphore acquire and release and latch count-down across long pauses: every request is
/// applied at most once, and a grant the caller never got is given back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn semaphore_and_latch_requests_are_applied_at_most_once_across_long_pauses() {
    let server = RedisServer::start();
    let client = quick_client(&server).await;
    let sem = client.semaphore("sem");
    assert!(sem.try_set_permits(3).await.unwrap());
    let permits = || cmd::<u64>(&server, &["GET", "sem"]);
    // Load the scripts first: a send that reaches a server without them is refused
    // (NOSCRIPT) when the server resumes, which would make the cases below trivial.
    sem.try_acquire()
        .await
        .unwrap()
        .unwrap()
        .release()
        .await
        .unwrap();

    // Acquire: the caller gets an error, the grant (applied when the server resumed) is
    // given back.
    client_pause(&server, 2_500);
    let err = sem.try_acquire().await.expect_err("no answer");
    assert_eq!(err.kind(), ErrorKind::Connection, "{err}");
    assert!(
        eventually(Duration::from_secs(6), || permits() == 3).await,
        "the grant was not given back: {} permits",
        permits()
    );
    // Observation window: a late resend of the acquire would take a permit within it.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(permits(), 3, "a grant nobody holds was kept");

    // Release: applied exactly once.
    let permit = sem.try_acquire().await.unwrap().expect("a permit");
    assert_eq!(permits(), 2);
    client_pause(&server, 2_500);
    let err = permit.release().await.expect_err("no answer");
    assert!(err.is_outcome_unknown(), "{err}");
    assert!(
        eventually(Duration::from_secs(6), || permits() == 3).await,
        "the release was not applied: {} permits",
        permits()
    );
    // Observation window: a second application of the release would show within it.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(permits(), 3, "released twice or never");

    // Count-down: applied exactly once.
    let latch = client.count_down_latch("latch");
    assert!(latch.try_set_count(6).await.unwrap());
    assert_eq!(latch.count_down().await.unwrap(), 5); // loads the script
    client_pause(&server, 2_500);
    let err = latch.count_down().await.expect_err("no answer");
    assert!(err.is_outcome_unknown(), "{err}");
    let count = || cmd::<u64>(&server, &["GET", "latch"]);
    assert!(
        eventually(Duration::from_secs(6), || count() == 4).await,
        "count {}, keys {:?}",
        count(),
        keys(&server)
    );
    // Observation window: a second application of the count-down would show within it.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(count(), 4, "counted down twice or never");
}

/// The server restarts (empty) while a holder holds and a waiter waits: the waiter rides
/// out the outage and acquires after the restart instead of failing, and the holder learns
/// at once — when its subscription connection comes back, not at its next renewal — that
/// its lock is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiter_rides_out_a_restart_and_the_holder_learns_at_once() {
    let mut server = RedisServer::start();
    let holder_client = client_for(&server).await; // 30 s watchdog lease, renewed every 10 s
    let holder = holder_client.lock("restart").acquire().await.unwrap();
    let waiter_client = client_for(&server).await;
    let waiter = tokio::spawn(async move {
        let g = waiter_client
            .lock("restart")
            .try_acquire_for(Duration::from_secs(20))
            .await;
        (Instant::now(), g)
    });
    assert!(
        eventually(Duration::from_secs(2), || numsub(
            &server,
            "redisson_lock__channel:{restart}"
        ) == 1)
        .await,
        "the waiter did not start waiting"
    );
    server.kill();
    // The scenario: a 2 s outage.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let restarted = Instant::now();
    server.restart();
    let holder_lost = tokio::time::timeout(Duration::from_secs(5), holder.lost()).await;
    let lost_at = Instant::now();
    assert!(holder_lost.is_ok(), "the holder did not learn within 5 s");
    let (granted_at, granted) = waiter.await.unwrap();
    let guard = granted
        .expect("the waiter rode out the outage")
        .expect("and acquired");
    let overlap = lost_at.saturating_duration_since(granted_at);
    eprintln!(
        "restart: waiter granted {:?} after the restart, holder's lost() {:?} after it; \
         overlap {overlap:?}",
        granted_at.saturating_duration_since(restarted),
        lost_at.saturating_duration_since(restarted),
    );
    assert!(overlap < Duration::from_secs(1), "overlap {overlap:?}");
    guard.release().await.unwrap();
}

/// A waiter whose deadline passes while the server is still down reports the connection
/// error (not "not acquired"), after its own deadline and not before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiter_reports_the_connection_error_when_its_deadline_passes_during_an_outage() {
    let mut server = RedisServer::start();
    let client = client_for(&server).await;
    let lock = client.lock("down");
    server.kill();
    let started = Instant::now();
    let err = lock
        .try_acquire_for(Duration::from_millis(1_500))
        .await
        .expect_err("the server is down");
    assert_eq!(err.kind(), ErrorKind::Connection, "{err}");
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(1_400) && took < Duration::from_secs(5),
        "{took:?}"
    );
}

/// A port that accepts connections and never answers fails within one connect timeout,
/// not three.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_listener_fails_within_one_connect_timeout() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    for url in [
        format!("redis://127.0.0.1:{port}/"),
        format!("rediss://127.0.0.1:{port}/#insecure"),
    ] {
        let started = Instant::now();
        let err = Client::builder()
            .url(&url)
            .connect_timeout(Duration::from_secs(1))
            .build()
            .await
            .expect_err("nothing answers");
        let took = started.elapsed();
        eprintln!("{url}: failed after {took:?}: {err}");
        assert_eq!(err.kind(), ErrorKind::Connection, "{err}");
        assert!(took < Duration::from_millis(1_800), "{url}: {took:?}");
    }
    drop(listener);
}

/// The eviction policy is read at connect: reported, and refused on request unless it is
/// `noeviction`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eviction_policy_is_read_and_can_be_required() {
    let lru = RedisServer::options()
        .arg("--maxmemory")
        .arg("64mb")
        .arg("--maxmemory-policy")
        .arg("allkeys-lru")
        .start();
    let client = client_for(&lru).await;
    assert_eq!(client.eviction_policy(), Some("allkeys-lru"));
    let err = Client::builder()
        .url(lru.url())
        .require_noeviction(true)
        .build()
        .await
        .expect_err("allkeys-lru refused");
    assert_eq!(err.kind(), ErrorKind::Config);
    assert!(err.to_string().contains("allkeys-lru"), "{err}");

    let plain = RedisServer::start();
    let client = Client::builder()
        .url(plain.url())
        .require_noeviction(true)
        .build()
        .await
        .expect("noeviction accepted");
    assert_eq!(client.eviction_policy(), Some("noeviction"));
}

/// Why the policy matters, measured: under `allkeys-lru` and memory pressure held locks are
/// evicted (and the renewal then reports them lost). Under `noeviction` a full server
/// refuses the acquire with `OutOfMemory` and writes nothing, and so the semaphore's acquire
/// and release and the latch's count-down.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_server_refuses_acquires_with_out_of_memory_and_lru_evicts_held_locks() {
    // allkeys-lru: hold 5 locks, then fill the server.
    let lru = RedisServer::options()
        .arg("--maxmemory")
        .arg("4mb")
        .arg("--maxmemory-policy")
        .arg("allkeys-lru")
        .start();
    let client = client_for(&lru).await;
    let mut guards = Vec::new();
    for i in 0..5 {
        guards.push(client.lock(format!("held:{i}")).acquire().await.unwrap());
    }
    let mut con = data_connection(&lru.url()).await;
    let blob = "x".repeat(10_000);
    for i in 0..2_000 {
        let _: redis::RedisResult<()> = redis::cmd("SET")
            .arg(format!("fill:{i}"))
            .arg(&blob)
            .query_async(&mut con)
            .await;
    }
    let mut evicted = 0;
    for g in &guards {
        if !g.is_held().await.unwrap() {
            evicted += 1;
        }
    }
    eprintln!("allkeys-lru, 4 MB, 20 MB written: {evicted} of 5 held locks evicted");
    assert!(evicted > 0, "expected evictions under allkeys-lru");

    // noeviction: a full server refuses, with nothing written. (4 MB: the client's Redis
    // Functions library takes about 1 MB of it.)
    let full = RedisServer::options()
        .arg("--maxmemory")
        .arg("4mb")
        .arg("--maxmemory-policy")
        .arg("noeviction")
        .start();
    let client = client_for(&full).await;
    // A semaphore with a permit held and one free, and a latch, set up while there is room.
    let sem = client.semaphore("sem");
    assert!(sem.try_set_permits(2).await.unwrap());
    let held = sem.acquire().await.unwrap();
    let latch = client.count_down_latch("latch");
    assert!(latch.try_set_count(3).await.unwrap());
    // A lock held, and one held by the watchdog, while there is room.
    let lock_held = client.lock("held").acquire().await.unwrap();
    let mut con = data_connection(&full.url()).await;
    // Fill with large values, then with small ones (a refused large SET frees its query
    // buffer again), until even a small write is refused.
    let mut refused = false;
    for (size, count) in [(10_000, 2_000), (200, 100_000)] {
        let value = "x".repeat(size);
        refused = false;
        for i in 0..count {
            let r: redis::RedisResult<()> = redis::cmd("SET")
                .arg(format!("fill:{size}:{i}"))
                .arg(&value)
                .query_async(&mut con)
                .await;
            if r.is_err() {
                refused = true;
                break;
            }
        }
    }
    assert!(refused, "the server never filled up");
    // Full by a margin: at the edge, a query buffer the server trims between two commands
    // (its cron) can bring it back under the limit for the next one.
    let memory: String = cmd(&full, &["INFO", "memory"]);
    let used: u64 = memory
        .lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("INFO memory has used_memory");
    let _: () = cmd(
        &full,
        &[
            "CONFIG",
            "SET",
            "maxmemory",
            &(used - 512 * 1024).to_string(),
        ],
    );
    let err = client
        .lock("order")
        .try_acquire()
        .await
        .expect_err("no room");
    assert_eq!(err.kind(), ErrorKind::OutOfMemory, "{err}");
    assert!(!cmd::<bool>(&full, &["EXISTS", "order"]));
    // The counts too: the semaphore's acquire and release and the latch's count-down are
    // refused as such, and nothing is taken, given back or counted.
    let records = |what: &str| -> Vec<String> { cmd(&full, &["KEYS", what]) };
    let grants = records("distlock_semaphore_grants:*").len();
    let err = sem.try_acquire().await.expect_err("no room");
    assert_eq!(err.kind(), ErrorKind::OutOfMemory, "acquire: {err}");
    let err = held.release().await.expect_err("no room");
    assert_eq!(err.kind(), ErrorKind::OutOfMemory, "release: {err}");
    let err = latch.count_down().await.expect_err("no room");
    assert_eq!(err.kind(), ErrorKind::OutOfMemory, "count down: {err}");
    assert_eq!(cmd::<String>(&full, &["GET", "sem"]), "1");
    assert_eq!(cmd::<String>(&full, &["GET", "latch"]), "3");
    assert_eq!(records("distlock_semaphore_grants:*").len(), grants);
    assert!(records("distlock_semaphore_releases:*").is_empty());
    assert!(records("distlock_latch_count_downs:*").is_empty());
    // A release frees memory and still runs on the full server (its script's first write is
    // a DEL, which a full server allows), also when scripts are Redis Functions, which a full
    // server refuses whole: the client then runs the script by EVAL.
    lock_held
        .release()
        .await
        .expect("a release runs on a full server");
    assert!(!cmd::<bool>(&full, &["EXISTS", "held"]));
}

/// Request records (the latches that make resends idempotent) are kept only where a resend
/// needs them: a final release of any lock kind leaves none (the lock is gone; a resend of it
/// is reported unconfirmed), so acquire/release cycles of plain, fair, read and write locks
/// leave no key behind; a semaphore release or a count-down leaves one for a latch TTL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_cycles_leave_no_request_records() {
    let (server, client) = setup().await;
    for _ in 0..3 {
        client
            .lock("r-plain")
            .acquire()
            .await
            .unwrap()
            .release()
            .await
            .unwrap();
        client
            .fair_lock("r-fair")
            .acquire()
            .await
            .unwrap()
            .release()
            .await
            .unwrap();
        let rw = client.rw_lock("r-rw");
        rw.read().await.unwrap().release().await.unwrap();
        rw.write().await.unwrap().release().await.unwrap();
    }
    // Contended cycles: the releases go to the full scripts (the handles met contention),
    // a hand-off included.
    for name in ["c-plain", "c-fair"] {
        let fair = name == "c-fair";
        let held = if fair {
            Box::new(client.fair_lock(name).acquire().await.unwrap())
                as Box<dyn std::any::Any + Send>
        } else {
            Box::new(client.lock(name).acquire().await.unwrap())
        };
        let waiter = {
            let client = client.clone();
            tokio::spawn(async move {
                if fair {
                    let g = client
                        .fair_lock(name)
                        .try_acquire_for(Duration::from_secs(10))
                        .await;
                    g.unwrap().expect("handed over").release().await.unwrap();
                } else {
                    let g = client
                        .lock(name)
                        .try_acquire_for(Duration::from_secs(10))
                        .await;
                    g.unwrap().expect("handed over").release().await.unwrap();
                }
            })
        };
        tokio::time::sleep(Duration::from_millis(300)).await;
        if fair {
            held.downcast::<distlock::FairLockGuard>()
                .unwrap()
                .release()
                .await
                .unwrap();
        } else {
            held.downcast::<distlock::LockGuard>()
                .unwrap()
                .release()
                .await
                .unwrap();
        }
        waiter.await.unwrap();
    }
    let mut left: Vec<String> = cmd(&server, &["KEYS", "*"]);
    left.retain(|k| !k.contains("fencing-counter"));
    assert!(left.is_empty(), "records left by lock cycles: {left:?}");
}
