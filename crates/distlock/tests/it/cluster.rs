//! Redis Cluster: three masters with a replica each, all real processes.

use std::time::{Duration, Instant};

use distlock::Client;
use distlock_harness::testing::wait_until;
use distlock_harness::ClusterSet;

use crate::util::*;

async fn client_on(set: &ClusterSet) -> Client {
    Client::builder()
        .url(set.url())
        .build()
        .await
        .expect("connect to the cluster")
}

/// `status` and `force_unlock` route by key on a cluster.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_and_force_unlock_route_by_key() {
    let set = ClusterSet::start();
    let client = client_on(&set).await;
    for name in ["s-1", "s-2", "s-3"] {
        let lock = client.lock(name);
        let guard = lock.acquire().await.unwrap();
        let status = lock.status().await.unwrap();
        assert_eq!(status.holders.len(), 1, "{name}: {status:?}");
        assert_eq!(status.fencing_token, Some(guard.fencing_token()), "{name}");
        assert!(lock.force_unlock().await.unwrap(), "{name}");
        assert_eq!(cmd::<i64>(set.node_for_key(name), &["EXISTS", name]), 0);
        drop(guard);
    }
}

/// The master serving the lock's slot is killed while the lock is held and another client
/// waits. After the cluster's failover the holder's release goes to the promoted replica,
/// the waiter is woken by it (not by the lease), and its token is above the holder's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_gets_the_lock_after_the_slots_master_fails() {
    let mut set = ClusterSet::start();
    let holder_client = client_on(&set).await;
    let waiter_client = client_on(&set).await;
    let name = "cluster-failover";
    let held = holder_client
        .lock(name)
        .lease(Duration::from_secs(30))
        .acquire()
        .await
        .unwrap();
    let token = held.fencing_token();
    let master_port = set.node_for_key(name).port();
    let replica = set.replica_of(master_port).expect("a replica");
    // A cluster replica answers reads only after READONLY (else it redirects).
    let mut on_replica = replica.connection();
    let _: () = redis::cmd("READONLY").query(&mut on_replica).unwrap();
    assert!(
        wait_until(Duration::from_secs(5), || redis::cmd("EXISTS")
            .arg(name)
            .query::<i64>(&mut on_replica)
            .unwrap()
            == 1),
        "the grant did not reach the replica"
    );
    let waiter = {
        let lock = waiter_client.lock(name);
        tokio::spawn(async move { lock.try_acquire_for(Duration::from_secs(25)).await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiter.is_finished());

    let killed_at = Instant::now();
    let old = set.kill_master_of_key(name);
    let new = tokio::task::block_in_place(|| set.wait_for_failover(old, Duration::from_secs(20)));
    let failed_over = killed_at.elapsed();
    assert_ne!(new, old);
    assert!(!waiter.is_finished(), "the waiter got a lock that is held");

    let released_at = Instant::now();
    held.release()
        .await
        .expect("release through the promoted replica");
    let got = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .expect("the waiter was not woken by the release")
        .unwrap()
        .unwrap()
        .expect("the waiter got the lock");
    let woken = released_at.elapsed();
    eprintln!(
        "cluster failover: kill -> new master {failed_over:?}; release -> waiter granted {woken:?}"
    );
    assert!(
        woken < Duration::from_millis(1_500),
        "woken {woken:?} after the release"
    );
    assert!(
        got.fencing_token() > token,
        "tokens not ordered across the failover"
    );
    assert_eq!(cmd::<i64>(set.node_for_key(name), &["EXISTS", name]), 1);
    got.release().await.unwrap();
}

/// The slot of a held lock migrates to another master: the watchdog's renewals, an
/// extension and the release follow it (MOVED/ASK are resent after the slot map is rebuilt),
/// and the lock is never lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_lock_follows_its_slot_to_another_master() {
    let set = ClusterSet::start();
    let client = Client::builder()
        .url(set.url())
        .watchdog_lease(Duration::from_millis(600))
        .build()
        .await
        .unwrap();
    let name = "migrating";
    let guard = client.lock(name).acquire().await.unwrap();
    let slot = set.key_slot(name);
    let from = set.node_for_key(name).port();
    let to = set
        .masters()
        .into_iter()
        .map(|m| m.port())
        .find(|p| *p != from)
        .expect("another master");
    // Move the slot, the fencing counter of that slot with it.
    tokio::task::block_in_place(|| set.migrate_slot(slot, to));
    assert_eq!(set.node_for_key(name).port(), to);
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    assert!(!guard.is_lost(), "renewals did not follow the slot");
    assert!(cmd::<i64>(set.node_for_key(name), &["PTTL", name]) > 0);
    guard
        .extend(Duration::from_secs(5))
        .await
        .expect("extend on the new master");
    let token = guard.fencing_token();
    guard.release().await.expect("release on the new master");
    assert_eq!(cmd::<i64>(set.node_for_key(name), &["EXISTS", name]), 0);
    let next = client
        .lock(name)
        .try_acquire()
        .await
        .unwrap()
        .expect("free");
    assert!(
        next.fencing_token() > token,
        "the slot's counter moved with it"
    );
    next.release().await.unwrap();
}
