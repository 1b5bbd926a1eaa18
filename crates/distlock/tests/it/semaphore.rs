//! Semaphore and LeasedSemaphore.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use distlock::ErrorKind;

use crate::util::*;
use distlock::Lease;

/// 32 tasks, 5 permits: never more than 5 holders at once. On every topology.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn never_more_than_n_holders() {
    for topology in topologies() {
        let (deployment, client) = setup_on(topology).await;
        let sem = client.semaphore("pool");
        assert!(sem.try_set_permits(5).await.unwrap());
        assert!(!sem.try_set_permits(7).await.unwrap(), "set only once");
        let inside = Arc::new(AtomicUsize::new(0));
        let max = Arc::new(AtomicUsize::new(0));
        let mut tasks = Vec::new();
        for _ in 0..32 {
            let (sem, inside, max) = (sem.clone(), inside.clone(), max.clone());
            tasks.push(tokio::spawn(async move {
                for _ in 0..10 {
                    let p = sem.acquire().await.unwrap();
                    let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                    max.fetch_max(now, Ordering::SeqCst);
                    // The scenario: hold the permit a moment, so holders overlap.
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    inside.fetch_sub(1, Ordering::SeqCst);
                    p.release().await.unwrap();
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        let max = max.load(Ordering::SeqCst);
        assert!(max <= 5, "{max} holders at once");
        assert!(max >= 2, "no concurrency at all ({max})");
        assert_eq!(sem.available_permits().await.unwrap(), 5);
        let stored: u64 = cmd(deployment.node_for("pool"), &["GET", "pool"]);
        assert_eq!(stored, 5, "the server's count of available permits");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquire_many_is_all_or_nothing() {
    let (_server, client) = setup().await;
    let sem = client.semaphore("bulk");
    sem.try_set_permits(5).await.unwrap();
    let three = sem.acquire_many(3).await.unwrap();
    assert!(sem
        .try_acquire_many_for(3, Duration::from_millis(100))
        .await
        .unwrap()
        .is_none());
    assert_eq!(
        sem.available_permits().await.unwrap(),
        2,
        "a refused acquire took nothing"
    );
    let two = sem.acquire_many(2).await.unwrap();
    assert_eq!(sem.available_permits().await.unwrap(), 0);
    three.release().await.unwrap();
    two.release().await.unwrap();
    assert_eq!(sem.available_permits().await.unwrap(), 5);
    assert_eq!(sem.drain_permits().await.unwrap(), 5);
    assert_eq!(sem.add_permits(2).await.unwrap(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_wake_when_permits_return_and_cancel_gives_nothing_away() {
    let (server, client) = setup().await;
    let channel = "redisson_sc:{wake}";
    let sem = client.semaphore("wake");
    sem.try_set_permits(1).await.unwrap();
    let held = sem.acquire().await.unwrap();
    let waiter = {
        let sem = sem.clone();
        tokio::spawn(async move {
            sem.acquire()
                .await
                .map(|p| (tokio::time::Instant::now(), p))
        })
    };
    // A waiter subscribes to the permit channel once its first attempt found none.
    assert!(
        eventually(Duration::from_secs(2), || numsub(&server, channel) == 1).await,
        "the waiter did not start waiting"
    );
    let released = tokio::time::Instant::now();
    held.release().await.unwrap();
    let (at, p) = waiter.await.unwrap().unwrap();
    assert!(at.duration_since(released) < Duration::from_millis(500));
    assert!(
        eventually(Duration::from_secs(2), || numsub(&server, channel) == 0).await,
        "the woken waiter stayed subscribed"
    );
    // A waiter cancelled mid-wait takes no permit.
    let cancelled = {
        let sem = sem.clone();
        tokio::spawn(async move { sem.acquire().await })
    };
    assert!(
        eventually(Duration::from_secs(2), || numsub(&server, channel) == 1).await,
        "the second waiter did not start waiting"
    );
    cancelled.abort();
    assert!(cancelled.await.unwrap_err().is_cancelled());
    assert!(
        eventually(Duration::from_secs(2), || numsub(&server, channel) == 0).await,
        "the cancelled waiter stayed subscribed"
    );
    p.release().await.unwrap();
    assert_eq!(sem.available_permits().await.unwrap(), 1);
    // Observation window: an acquire left running by the cancelled waiter would take the
    // returned permit within it.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(sem.available_permits().await.unwrap(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_semaphore_inputs_are_refused() {
    let (server, client) = setup().await;
    let sem = client.semaphore("bad");
    assert_eq!(
        sem.try_set_permits(0).await.unwrap_err().kind(),
        ErrorKind::InvalidInput
    );
    assert_eq!(
        sem.try_set_permits(u64::MAX).await.unwrap_err().kind(),
        ErrorKind::InvalidInput
    );
    assert_eq!(
        sem.acquire_many((1 << 53) + 1).await.unwrap_err().kind(),
        ErrorKind::InvalidInput
    );
    assert_eq!(
        sem.add_permits((1 << 53) + 1).await.unwrap_err().kind(),
        ErrorKind::InvalidInput
    );
    let leased = client.leased_semaphore("bad-leased");
    assert_eq!(
        leased
            .lease(Duration::ZERO)
            .try_acquire()
            .await
            .unwrap_err()
            .kind(),
        ErrorKind::InvalidInput
    );
    assert_eq!(
        client
            .semaphore("")
            .available_permits()
            .await
            .unwrap_err()
            .kind(),
        ErrorKind::InvalidInput
    );
    assert!(keys(&server).is_empty());
    let _: () = cmd(&server, &["HSET", "hashy", "f", "v"]);
    assert_eq!(
        client
            .semaphore("hashy")
            .try_acquire()
            .await
            .unwrap_err()
            .kind(),
        ErrorKind::WrongType
    );
}

/// Zero permits are a no-op, as in Redisson (`acquire(0)`, `release(0)`) and tokio
/// (`acquire_many(0)`, `add_permits(0)`): granted at once even with none available, given back
/// without a change, and nothing written, not even the key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zero_permits_are_a_no_op() {
    let (server, client) = setup().await;
    let sem = client.semaphore("zero");
    let before = script_calls(&server);
    let none = sem.acquire_many(0).await.unwrap();
    assert_eq!(none.permits(), 0);
    assert!(sem
        .try_acquire_many_for(0, Duration::ZERO)
        .await
        .unwrap()
        .is_some());
    assert_eq!(none.release().await.unwrap(), 0);
    assert_eq!(sem.add_permits(0).await.unwrap(), 0);
    assert_eq!(script_calls(&server), before, "no script ran");
    assert!(
        keys(&server).is_empty(),
        "nothing written: {:?}",
        keys(&server)
    );
    // With permits: zero takes none and gives none back; a dropped empty permit neither.
    sem.try_set_permits(2).await.unwrap();
    let one = sem.acquire().await.unwrap();
    let none = sem.acquire_many(0).await.unwrap();
    assert_eq!(sem.available_permits().await.unwrap(), 1);
    drop(none);
    assert_eq!(sem.add_permits(0).await.unwrap(), 1);
    assert_eq!(one.release().await.unwrap(), 2);
    let leased = client.leased_semaphore("zero-leased");
    leased.set_permits(1).await.unwrap();
    assert_eq!(leased.add_permits(0).await.unwrap(), 1);
    assert_eq!(leased.total_permits().await.unwrap(), 1);
}

/// `set_permits` resizes a leased semaphore as Redisson's `setPermits` does: the size is
/// available plus leased permits; shrinking takes no held permit away (the available count
/// goes below zero until enough come back), growing wakes a waiter; repeating changes nothing;
/// bad input and wrong types change nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_permits_resizes_and_keeps_held_permits_valid() {
    let (server, client) = setup().await;
    let lease = Duration::from_secs(30);
    let sem = client.leased_semaphore("resize").lease(lease);
    assert_eq!(sem.set_permits(3).await.unwrap(), 0, "created");
    assert_eq!(sem.total_permits().await.unwrap(), 3);
    let held: Vec<_> = futures_util::future::join_all((0..3).map(|_| sem.acquire()))
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert_eq!(sem.set_permits(1).await.unwrap(), 3, "the size before");
    assert_eq!(sem.total_permits().await.unwrap(), 1);
    assert_eq!(
        sem.permits().await.unwrap(),
        (0, 3),
        "every held permit kept"
    );
    let stored: i64 = cmd(&server, &["GET", "resize"]);
    assert_eq!(stored, -2, "Redisson's counter, below zero");
    assert_eq!(sem.available_permits().await.unwrap(), 0);
    assert_eq!(
        sem.available_permits_signed().await.unwrap(),
        -2,
        "as Redisson's availablePermits()"
    );
    for p in &held {
        p.extend(lease).await.expect("a held permit stays valid");
    }
    let mut held = held.into_iter();
    for left in [2, 1] {
        held.next().unwrap().release().await.unwrap();
        assert!(
            sem.lease(lease).try_acquire().await.unwrap().is_none(),
            "granted while {left} of 1 are held"
        );
    }
    let last = held.next().unwrap();
    let waiter = {
        let sem = sem.clone();
        tokio::spawn(async move {
            sem.lease(lease)
                .try_acquire_for(Duration::from_secs(10))
                .await
        })
    };
    // The waiter is parked before the semaphore grows.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!waiter.is_finished());
    assert_eq!(sem.set_permits(2).await.unwrap(), 1);
    let woken = waiter
        .await
        .unwrap()
        .unwrap()
        .expect("growing gave the waiter a permit");
    assert_eq!(sem.set_permits(2).await.unwrap(), 2, "repeated: no change");
    assert_eq!(sem.permits().await.unwrap(), (0, 2));
    last.release().await.unwrap();
    woken.release().await.unwrap();
    assert_eq!(sem.permits().await.unwrap(), (2, 0));

    for bad in [0, distlock::MAX_PERMITS + 1] {
        assert_eq!(
            sem.set_permits(bad).await.unwrap_err().kind(),
            ErrorKind::InvalidInput,
            "{bad}"
        );
    }
    assert_eq!(
        sem.total_permits().await.unwrap(),
        2,
        "bad input changed nothing"
    );
    let _: () = cmd(&server, &["HSET", "hashy", "f", "v"]);
    assert_eq!(
        client
            .leased_semaphore("hashy")
            .set_permits(1)
            .await
            .unwrap_err()
            .kind(),
        ErrorKind::WrongType
    );
    let field: String = cmd(&server, &["HGET", "hashy", "f"]);
    assert_eq!(field, "v");
}

/// A holder process killed with SIGKILL gets its leased permit back after the lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_holder_returns_its_leased_permit_after_the_lease() {
    let (server, client) = setup().await;
    let sem = client.leased_semaphore("workers");
    sem.try_set_permits(1).await.unwrap();
    let mut child = family(&["leased-hold", &server.url(), "workers", "1000"]);
    let line = first_line(&mut child);
    assert!(line.starts_with("held "), "{line}");
    assert!(sem
        .lease(Duration::from_secs(5))
        .try_acquire()
        .await
        .unwrap()
        .is_none());
    child.kill().unwrap();
    child.wait().unwrap();
    let start = tokio::time::Instant::now();
    let p = sem
        .lease(Duration::from_secs(10))
        .try_acquire_for(Duration::from_secs(5))
        .await
        .unwrap()
        .expect("the dead holder's permit came back");
    // At the end of the dead holder's 1 s lease, not of the 10 s wait; slack for a loaded
    // machine.
    assert!(
        start.elapsed() < Duration::from_secs(3),
        "{:?}",
        start.elapsed()
    );
    p.release().await.unwrap();
    assert_eq!(sem.permits().await.unwrap(), (1, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leased_permits_extend_and_signal_loss() {
    let (server, client) = setup().await;
    let sem = client.leased_semaphore("leases");
    sem.try_set_permits(2).await.unwrap();
    let p = sem
        .lease(Duration::from_millis(300))
        .acquire()
        .await
        .unwrap();
    p.extend(Duration::from_secs(5)).await.unwrap();
    // The scenario: outlive the first 300 ms lease, which the extension replaced.
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(
        sem.permits().await.unwrap(),
        (1, 1),
        "extended, still leased"
    );
    let q = sem
        .lease(Duration::from_millis(200))
        .acquire()
        .await
        .unwrap();
    tokio::time::timeout(Duration::from_secs(1), q.lost())
        .await
        .expect("lost() at the end of the lease");
    // lost() fires at the local deadline (lease minus drift), a little before the server's:
    // wait until the server's clock has passed q's expiry (p's is seconds away).
    let leases = "{leases}:timeout";
    assert!(
        eventually(Duration::from_secs(1), || {
            let now = server_time_ms(&server).to_string();
            cmd::<u64>(&server, &["ZCOUNT", leases, "-inf", &now]) == 1
        })
        .await,
        "q's lease did not end on the server"
    );
    assert_eq!(
        q.extend(Duration::from_secs(1)).await.unwrap_err().kind(),
        ErrorKind::NotHeld
    );
    assert_eq!(q.release().await.unwrap_err().kind(), ErrorKind::NotHeld);
    p.release().await.unwrap();
    assert_eq!(sem.permits().await.unwrap(), (2, 0));
}

/// The watchdog keeps a leased permit alive past its lease while the holder lives, fires
/// `lost()` when the permit is taken away on the server, and stops when it is released.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watchdog_keeps_a_leased_permit_and_signals_its_loss() {
    let (server, client) = setup().await;
    let sem = client.leased_semaphore("kept");
    assert!(sem.try_set_permits(1).await.unwrap());
    let lease = Duration::from_millis(600);
    let mut permit = sem.lease(lease).acquire().await.unwrap();
    assert_eq!(
        permit.keep_alive(Duration::ZERO).unwrap_err().kind(),
        ErrorKind::InvalidInput
    );
    permit.keep_alive(lease).unwrap();
    // The scenario: three leases long, the permit must stay held.
    tokio::time::sleep(lease * 3).await;
    assert!(!permit.is_lost());
    let score: Option<f64> = permit_cmd(&server, "ZSCORE", "{kept}:timeout", permit.id());
    assert!(score.is_some(), "the permit's lease ran out");
    assert!(sem.lease(lease).try_acquire().await.unwrap().is_none());

    // Taken away on the server: the next keep-alive reports it lost.
    let removed: u64 = permit_cmd(&server, "ZREM", "{kept}:timeout", permit.id());
    assert_eq!(removed, 1);
    tokio::time::timeout(lease, permit.lost())
        .await
        .expect("lost() fired within one lease");
    drop(permit);
}

/// `<command> <leases key> <member>` where the member is a leased permit's id as Redisson
/// stores it: the 16 bytes its 32 hex characters spell.
fn permit_cmd<T: redis::FromRedisValue>(
    server: &distlock_test::RedisServer,
    command: &str,
    leases: &str,
    id: &str,
) -> T {
    let bytes = uuid::Uuid::try_parse(id).expect("a 32-hex permit id");
    redis::cmd(command)
        .arg(leases)
        .arg(&bytes.as_bytes()[..])
        .query(&mut server.connection())
        .unwrap()
}

/// A permit's acquire and release leave their request records as members of the client's
/// record sets (one for grants, one for releases, per epoch and block of request numbers),
/// each set with a TTL: at most its epoch (one latch TTL, 13 s by default) plus the records'
/// lifetime (ten latch lifetimes for a grant, which a give-back of unknown outcome may need;
/// one for a release) plus a latch TTL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permits_leave_their_request_records_in_sets_with_ttls() {
    let (server, client) = setup().await;
    let sem = client.semaphore("records");
    assert!(sem.try_set_permits(2).await.unwrap());
    let sets =
        |server: &RedisServer, pattern: &str| -> Vec<String> { cmd(server, &["KEYS", pattern]) };
    let members = |server: &RedisServer, pattern: &str| -> usize {
        sets(server, pattern)
            .iter()
            .map(|k| cmd::<usize>(server, &["SCARD", k]) - 1)
            .sum()
    };
    let pttl = |server: &RedisServer, key: &str| -> i64 { cmd(server, &["PTTL", key]) };
    let held = sem.acquire().await.unwrap();
    assert_eq!(members(&server, "distlock_semaphore_grants:*"), 1);
    for _ in 0..5 {
        sem.acquire().await.unwrap().release().await.unwrap();
    }
    held.release().await.unwrap();
    assert_eq!(members(&server, "distlock_semaphore_grants:*"), 6);
    assert_eq!(members(&server, "distlock_semaphore_releases:*"), 6);
    let latch = 13_000;
    for (pattern, most) in [
        ("distlock_semaphore_grants:*", 12 * latch),
        ("distlock_semaphore_releases:*", 3 * latch),
    ] {
        for set in sets(&server, pattern) {
            let left = pttl(&server, &set);
            assert!(
                left > 0 && left <= most,
                "{set}: {left} ms left, over {most}"
            );
        }
    }
}

/// A send of an acquire held up on its way (its resend was granted, used and released first)
/// that reaches the server after the release finds the grant recorded and takes nothing: the
/// permit is not taken again for no one. (Found by the model check: the release used to
/// delete the grant's record, and the held-up send then took a permit that nobody would ever
/// give back.)
#[tokio::test]
async fn an_acquire_held_up_until_after_its_release_takes_nothing() {
    let (server, client) = setup().await;
    let sem = client.semaphore("held-up");
    assert!(sem.try_set_permits(2).await.unwrap());
    let permit = sem.acquire().await.unwrap();
    let sets: Vec<String> = cmd(&server, &["KEYS", "distlock_semaphore_grants:*"]);
    assert_eq!(sets.len(), 1);
    let mut members: Vec<String> = cmd(&server, &["SMEMBERS", &sets[0]]);
    members.retain(|m| m != "0");
    assert_eq!(members.len(), 1);
    permit.release().await.unwrap();
    assert_eq!(sem.available_permits().await.unwrap(), 2);
    // The held-up send: the same script call, the same grant record, run now.
    let script = source("semaphore_acquire.lua");
    let got: i64 = cmd(
        &server,
        &[
            "EVAL",
            script,
            "2",
            "held-up",
            &sets[0],
            "1",
            &members[0],
            "50000",
            "0",
        ],
    );
    assert_eq!(got, 1, "answered as the grant it was");
    assert_eq!(
        sem.available_permits().await.unwrap(),
        2,
        "the held-up send took a permit nobody holds"
    );
}

/// An acquire that gives up names what it waited for in plain words: "a permit" for one,
/// "3 permits" for several (not "1 permits"), as the leased semaphore's does.
#[tokio::test]
async fn not_acquired_names_the_permits_waited_for() {
    let server = distlock_test::RedisServer::start();
    let client = distlock::Client::builder()
        .url(server.url())
        .default_wait(Duration::from_millis(50))
        .build()
        .await
        .unwrap();
    let sem = client.semaphore("workers");
    assert!(sem.try_set_permits(2).await.unwrap());
    let _held = sem.acquire_many(2).await.unwrap();
    let e = sem.acquire().await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotAcquired);
    assert!(
        e.to_string()
            .starts_with("a permit of semaphore \"workers\" not acquired within"),
        "{e}"
    );
    let e = sem.acquire_many(3).await.unwrap_err();
    assert!(
        e.to_string()
            .starts_with("3 permits of semaphore \"workers\" not acquired within"),
        "{e}"
    );
}

/// An acquire whose wait elapses after an attempt that was resent (a pause past the command
/// timeout) gives back through its grant record: a send of that attempt still on its way
/// could otherwise run later, when permits are free, and take one that has no lease, for no
/// one. The give-back leaves the record's tombstone, and such a send then takes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acquire_that_gives_up_after_a_resend_leaves_a_late_send_nothing() {
    let server = RedisServer::start();
    // A 300 ms command timeout: a 900 ms pause makes the first attempt resent.
    let client = quick_client(&server).await;
    let sem = client.semaphore("resent");
    assert!(sem.try_set_permits(1).await.unwrap());
    let _held = sem.acquire().await.unwrap();
    let _: () = cmd(&server, &["CLIENT", "PAUSE", "900", "ALL"]);
    let got = sem.try_acquire_for(Duration::from_millis(1_500)).await;
    assert!(
        matches!(got, Ok(None)),
        "not acquired: {:?}",
        got.map(|p| p.is_some())
    );
    // The give-back runs in the background: its tombstone (-<member>) is in the attempt's
    // grant records.
    let mut found = None;
    let given_back = eventually(Duration::from_secs(2), || {
        let sets: Vec<String> = cmd(&server, &["KEYS", "distlock_semaphore_grants:*"]);
        found = sets.into_iter().find_map(|set| {
            let members: Vec<i64> = cmd(&server, &["SMEMBERS", &set]);
            let tombstone = members.into_iter().find(|m| *m < 0)?;
            Some((set, (-tombstone).to_string()))
        });
        found.is_some()
    })
    .await;
    assert!(
        given_back,
        "the resent attempt's record given back (a tombstone)"
    );
    let (set, member) = found.expect("found");
    // Permits free again, then the held-up send of that attempt arrives: it takes nothing.
    drop(_held);
    let free = eventually(Duration::from_secs(2), || {
        cmd::<String>(&server, &["GET", "resent"]) == "1"
    })
    .await;
    assert!(free, "the held permit given back");
    let script = source("semaphore_acquire.lua");
    let got: i64 = cmd(
        &server,
        &[
            "EVAL", script, "2", "resent", &set, "1", &member, "50000", "0",
        ],
    );
    assert_eq!(got, -4, "the late send is told it was cancelled");
    assert_eq!(sem.available_permits().await.unwrap(), 1, "it took nothing");
}
