//! Redis Sentinel: a master with two replicas and three sentinels, all real processes; the
//! client finds the master through the sentinels and follows failovers.

use std::time::{Duration, Instant};

use distlock::{Client, ErrorKind};
use distlock_test::sentinel::role;
use distlock_test::testing::wait_until;
use distlock_test::SentinelSet;

use crate::util::*;
use distlock::Lease;

/// The data servers that are not the current master.
fn replicas(set: &SentinelSet) -> Vec<&RedisServer> {
    let master_port = set.master_port();
    set.servers()
        .iter()
        .filter(|s| s.port() != master_port)
        .collect()
}

/// Stop (SIGSTOP) every replica; resume the returned servers.
fn pause_replicas(set: &SentinelSet) -> Vec<&RedisServer> {
    let replicas = replicas(set);
    for r in &replicas {
        r.pause();
    }
    replicas
}

async fn client_on(set: &SentinelSet) -> Client {
    Client::builder()
        .url(set.url())
        .build()
        .await
        .expect("connect through the sentinels")
}

/// The client connects to the master the sentinels name (not to a replica), and a master name
/// no sentinel knows is a `Config` error that names it, at once (nothing to wait for).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_finds_the_master_through_the_sentinels() {
    let set = SentinelSet::start();
    let client = client_on(&set).await;
    let guard = client.lock("found").acquire().await.unwrap();
    let master = set.master();
    assert_eq!(
        cmd::<i64>(master, &["HLEN", "found"]),
        3,
        "owner + token + holder metadata on the master"
    );
    guard.release().await.unwrap();

    let wrong = set
        .url()
        .replace(&format!("#{}", set.master_name()), "#nosuchmaster");
    let started = Instant::now();
    let err = Client::builder()
        .url(wrong)
        .connect_timeout(Duration::from_secs(10))
        .build()
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Config, "{err}");
    assert!(err.to_string().contains("nosuchmaster"), "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "an unknown master name was tried again for {:?}",
        started.elapsed()
    );
}

/// A process started right after the master was killed (a service restarted on a failed
/// node, a cron job) does not fail on the first refused connection: it keeps asking the
/// sentinels, within its connect timeout, until they name the promoted replica, and works
/// there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_started_during_a_failover_connects_to_the_promoted_master() {
    let mut set = SentinelSet::start();
    let old = set.kill_master();
    let client = Client::builder()
        .url(set.url())
        .connect_timeout(Duration::from_secs(20))
        .build()
        .await
        .expect("connects once the sentinels promote a replica");
    let guard = client.lock("during").acquire().await.unwrap();
    let new = set.wait_for_failover(old, Duration::from_secs(20));
    assert_ne!(new, old);
    let holds: i64 = cmd(set.master(), &["HLEN", "during"]);
    assert_eq!(holds, 3, "the lock is on the promoted master");
    guard.release().await.unwrap();
}

/// The master is killed (SIGKILL) while a lock is held and another client waits for it. The
/// client follows the failover: the holder's release goes to the new master, the waiter —
/// resubscribed on the new master — is woken by it (not by the lease), and its fencing token
/// is above the holder's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_gets_the_lock_after_a_master_failover() {
    let mut set = SentinelSet::start();
    let holder_client = client_on(&set).await;
    let waiter_client = client_on(&set).await;
    let lease = Duration::from_secs(30);
    let held = holder_client
        .lock("failover")
        .lease(lease)
        .acquire()
        .await
        .unwrap();
    let token = held.fencing_token();
    // The grant is on both replicas before the kill (no WAIT yet: wait for it here).
    let replicated = replicas(&set).into_iter().all(|r| {
        wait_until(Duration::from_secs(5), || {
            cmd::<i64>(r, &["EXISTS", "failover"]) == 1
        })
    });
    assert!(replicated, "the grant did not reach the replicas");
    let waiter = {
        let lock = waiter_client.lock("failover");
        tokio::spawn(async move { lock.try_acquire_for(Duration::from_secs(25)).await })
    };
    assert!(
        eventually(Duration::from_secs(2), || {
            numsub(set.master(), "redisson_lock__channel:{failover}") == 1
        })
        .await
    );

    let killed_at = Instant::now();
    let old = set.kill_master();
    let new = tokio::task::block_in_place(|| set.wait_for_failover(old, Duration::from_secs(15)));
    let failed_over = killed_at.elapsed();
    assert_ne!(new, old);
    // Both clients moved their subscriptions to the new master.
    assert!(
        eventually(Duration::from_secs(5), || {
            numsub(set.master(), "redisson_lock__channel:{failover}") >= 1
        })
        .await,
        "the waiter did not resubscribe on the new master"
    );
    assert!(!waiter.is_finished(), "the waiter got a lock that is held");

    let released_at = Instant::now();
    held.release()
        .await
        .expect("release through the new master");
    let got = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .expect("the waiter was not woken by the release")
        .unwrap()
        .unwrap()
        .expect("the waiter got the lock");
    let woken = released_at.elapsed();
    eprintln!(
        "sentinel failover: kill -> new master {failed_over:?}; release -> waiter granted {woken:?}"
    );
    assert!(
        woken < Duration::from_millis(1_500),
        "woken {woken:?} after the release"
    );
    assert!(
        got.fencing_token() > token,
        "tokens not ordered across the failover"
    );
    // The 64-bit form (a database column's) too.
    assert!(
        got.fencing_token().as_i64().unwrap() > token.as_i64().unwrap(),
        "64-bit tokens not ordered across the failover: {:?} after {:?}",
        got.fencing_token().as_i64(),
        token.as_i64()
    );
    got.release().await.unwrap();
}

/// Grants confirmed by a replica (`WAIT 1`, the default): with both replicas stopped
/// (SIGSTOP; for less than the sentinels' 1 s down-after, so they still count as healthy) an
/// acquire is granted on the master, not confirmed within the timeout, given back, and fails
/// with `NotReplicated` (0 of 1) leaving no hold; a waiting acquire retries and gets the lock
/// once the replicas resume.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grants_wait_for_a_replica_and_are_given_back_without_one() {
    let set = SentinelSet::start();
    let client = Client::builder()
        .url(set.url())
        .replica_ack_timeout(Duration::from_millis(300))
        .build()
        .await
        .unwrap();
    let replicas = pause_replicas(&set);
    let lock = client.lock("confirmed");
    let started = Instant::now();
    let err = lock.try_acquire().await.unwrap_err();
    let took = started.elapsed();
    assert_eq!(err.kind(), ErrorKind::NotReplicated, "{err}");
    assert_eq!(err.replication(), Some((0, 1)), "{err}");
    assert!(took >= Duration::from_millis(250), "no WAIT: {took:?}");
    assert_eq!(
        cmd::<i64>(set.master(), &["EXISTS", "confirmed"]),
        0,
        "the unconfirmed grant was not given back"
    );

    let waiter = {
        let lock = lock.clone();
        tokio::spawn(async move { lock.try_acquire_for(Duration::from_secs(10)).await })
    };
    // Past the waiter's first attempt (its WAIT gives up after 300 ms), while the replicas
    // have been stopped for well under the down-after.
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(
        !waiter.is_finished(),
        "granted while no replica could confirm"
    );
    for r in &replicas {
        r.resume();
    }
    let guard = tokio::time::timeout(Duration::from_secs(8), waiter)
        .await
        .expect("granted after the replicas resumed")
        .unwrap()
        .unwrap()
        .expect("granted");
    assert!(
        replicas
            .iter()
            .any(|r| wait_until(Duration::from_secs(2), || cmd::<i64>(
                r,
                &["EXISTS", "confirmed"]
            ) == 1)),
        "the grant is on no replica"
    );
    guard.release().await.unwrap();
}

/// Two failovers in a row: the client follows both (locks granted, released and waited for
/// on the third master), and its tokens keep rising.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_follows_two_failovers_in_a_row() {
    let mut set = SentinelSet::start();
    let client = client_on(&set).await;
    let mut last = client.lock("twice").acquire().await.unwrap();
    for round in 0..2 {
        let token = last.fencing_token();
        last.release().await.unwrap();
        // A release is not confirmed by replicas: wait until they have it, or the promoted
        // one may still hold the lock for its lease (asynchronous replication).
        for r in replicas(&set) {
            if role(r).is_some() {
                assert!(wait_until(Duration::from_secs(5), || cmd::<i64>(
                    r,
                    &["EXISTS", "twice"]
                ) == 0));
            }
        }
        let old = set.kill_master();
        let new =
            tokio::task::block_in_place(|| set.wait_for_failover(old, Duration::from_secs(20)));
        assert_ne!(new, old, "round {round}");
        let started = Instant::now();
        let guard = client
            .lock("twice")
            .try_acquire_for(Duration::from_secs(10))
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("round {round}: not granted on the new master"));
        eprintln!(
            "failover {round}: granted on the new master {:?} after the sentinels' switch",
            started.elapsed()
        );
        assert_eq!(
            cmd::<i64>(set.master(), &["EXISTS", "twice"]),
            1,
            "round {round}: not on the new master"
        );
        assert!(
            guard.fencing_token() > token,
            "round {round}: token went back"
        );
        assert!(
            guard.fencing_token().as_i64().unwrap() > token.as_i64().unwrap(),
            "round {round}: the 64-bit token went back"
        );
        last = guard;
    }
    last.release().await.unwrap();
}

/// Renewals and extensions are confirmed like grants: with both replicas stopped (for less
/// than the sentinels' down-after) `extend` fails with `NotReplicated`, the watchdog's renewals
/// are not confirmed, so the holder's lease runs out locally and `lost()` fires.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unconfirmed_renewals_let_the_lease_run_out() {
    let set = SentinelSet::start();
    let client = Client::builder()
        .url(set.url())
        .watchdog_lease(Duration::from_millis(600))
        .replica_ack_timeout(Duration::from_millis(150))
        .build()
        .await
        .unwrap();
    let guard = client.lock("renewed").acquire().await.unwrap();
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert!(!guard.is_lost(), "confirmed renewals keep the lease");
    let replicas = pause_replicas(&set);
    let paused = Instant::now();
    let err = guard.extend(Duration::from_millis(600)).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotReplicated, "{err}");
    let lost = tokio::time::timeout(Duration::from_millis(800), guard.lost()).await;
    let after = paused.elapsed();
    for r in &replicas {
        r.resume();
    }
    assert!(
        lost.is_ok(),
        "lost() did not fire {after:?} into unconfirmed renewals"
    );
    drop(guard);
}

/// The old master is stopped (SIGSTOP) past a failover, with an acquire of another client
/// already sent to it, and resumed while the new master's holder holds the lock: the old
/// master then runs that queued acquire and grants it — but none of its former replicas
/// confirms it (`WAIT`), so the grant is given back and the client keeps waiting instead of
/// holding the lock beside the new master's holder.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_old_master_resumed_after_failover_grants_nothing_confirmed() {
    let mut set = SentinelSet::start();
    let stale = Client::builder()
        .url(set.url())
        .command_timeout(Duration::from_secs(6))
        .build()
        .await
        .unwrap();
    let fresh = client_on(&set).await;
    // Open the stale client's connections set aside for grants before the pause.
    for _ in 0..8 {
        stale
            .lock("warm")
            .acquire()
            .await
            .unwrap()
            .release()
            .await
            .unwrap();
    }
    let old = set.master_port();
    set.master().pause();
    let paused = Instant::now();
    let queued = {
        let lock = stale.lock("split");
        tokio::spawn(async move { lock.try_acquire_for(Duration::from_secs(15)).await })
    };
    let new = tokio::task::block_in_place(|| set.wait_for_failover(old, Duration::from_secs(15)));
    assert_ne!(new, old);
    // Long enough for an attempt that went to the stopped master before this client switched
    // (it waits out the connect timeout, 5 s) and one more on the new master.
    let holder = fresh
        .lock("split")
        .try_acquire_for(Duration::from_secs(12))
        .await
        .unwrap();
    let resumed_after = paused.elapsed();
    let Some(holder) = holder else {
        // Under load the stale client's attempt on the stopped master timed out first and it
        // took the lock from the new master, legitimately: one holder, the scenario not played.
        set.server_mut(old).expect("old master").resume();
        let got = queued
            .await
            .unwrap()
            .unwrap()
            .expect("someone holds the lock");
        assert_eq!(
            cmd::<i64>(set.master(), &["HGET", "split", got.owner().as_str()]),
            1,
            "the stale client's grant is on the new master"
        );
        eprintln!("the stale client was granted by the new master first; scenario not played");
        got.release().await.unwrap();
        return;
    };
    set.server_mut(old).expect("old master").resume();
    let got = queued.await.unwrap();
    assert!(
        !matches!(got, Ok(Some(_))),
        "two holders: the stale client got a grant (resumed {resumed_after:?} after the pause)"
    );
    holder.release().await.unwrap();
}

/// A re-entry (`acquire_as` by an owner that holds) whose grant no replica confirms is given
/// back without touching the owner's existing hold, and retried under a new request id (the
/// acquire latch of the one given back does not answer it): once the replicas resume, the
/// owner holds twice, then once after one release.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unconfirmed_reentry_keeps_the_existing_hold() {
    let set = SentinelSet::start();
    let client = Client::builder()
        .url(set.url())
        .replica_ack_timeout(Duration::from_millis(150))
        .build()
        .await
        .unwrap();
    let owner = client.new_owner();
    let lock = client.lock("reent");
    let first = lock
        .try_acquire_as(&owner, Duration::ZERO)
        .await
        .unwrap()
        .expect("first hold");
    let replicas = pause_replicas(&set);
    let again = {
        let (lock, owner) = (lock.clone(), owner.clone());
        tokio::spawn(async move { lock.try_acquire_as(&owner, Duration::from_secs(5)).await })
    };
    let holds = |set: &SentinelSet| {
        cmd::<Option<i64>>(set.master(), &["HGET", "reent", owner.as_str()]).unwrap_or(0)
    };
    // While no replica confirms, each attempt adds a hold and gives it back: the first hold
    // is never taken away.
    let paused = Instant::now();
    while paused.elapsed() < Duration::from_millis(450) {
        let n = holds(&set);
        assert!(n >= 1, "the first hold was given back ({n} holds)");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(
        !again.is_finished(),
        "re-entered while no replica could confirm"
    );
    for r in &replicas {
        r.resume();
    }
    let second = again.await.unwrap().unwrap().expect("re-entered");
    assert_eq!(holds(&set), 2);
    second.release().await.unwrap();
    assert_eq!(holds(&set), 1);
    first.release().await.unwrap();
    assert_eq!(holds(&set), 0);
}

/// The sentinels' connections accepted so far (`INFO stats`), summed.
fn sentinel_connections(set: &SentinelSet) -> u64 {
    set.sentinels()
        .iter()
        .map(|s| {
            let info: String = cmd(s, &["INFO", "stats"]);
            info.lines()
                .find_map(|l| l.strip_prefix("total_connections_received:"))
                .and_then(|v| v.trim().parse::<u64>().ok())
                .expect("total_connections_received")
        })
        .sum()
}

/// The poll that follows failovers asks every sentinel every second over one kept
/// connection per sentinel, not a new one each time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn polling_the_sentinels_reuses_one_connection_each() {
    let set = SentinelSet::start();
    let client = client_on(&set).await;
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let before = sentinel_connections(&set);
    tokio::time::sleep(Duration::from_secs(4)).await;
    let after = sentinel_connections(&set);
    // Each `sentinel_connections` call itself connects once per sentinel.
    let ours = after - before - set.sentinels().len() as u64;
    assert!(ours == 0, "{ours} new sentinel connections in 4 polls");
    drop(client);
}
