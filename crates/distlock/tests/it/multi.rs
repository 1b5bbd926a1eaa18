//! MultiLock over independent servers.

use std::time::Duration;

use distlock::MultiLock;

use crate::util::*;
use distlock::Lease;

async fn three() -> (Vec<RedisServer>, Vec<distlock::Client>) {
    let servers: Vec<RedisServer> = (0..3).map(|_| RedisServer::start()).collect();
    let mut clients = Vec::new();
    for s in &servers {
        clients.push(client_for(s).await);
    }
    (servers, clients)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_or_nothing_when_one_member_is_held_elsewhere() {
    let (servers, clients) = three().await;
    let multi = MultiLock::new(clients.iter().map(|c| c.lock("order:7"))).unwrap();
    let other = client_for(&servers[1]).await;
    let blocker = other.lock("order:7").acquire().await.unwrap();
    assert!(multi
        .try_acquire_for(Duration::from_millis(200))
        .await
        .unwrap()
        .is_none());
    // Nothing of ours stays on any node; only the blocker's lock on node 1.
    for (i, s) in servers.iter().enumerate() {
        let exists: bool = cmd(s, &["EXISTS", "order:7"]);
        assert_eq!(exists, i == 1, "node {i}");
    }
    blocker.release().await.unwrap();
    let g = multi.try_acquire().await.unwrap().expect("all free now");
    assert_eq!(g.fencing_tokens().len(), 3);
    for s in &servers {
        let exists: bool = cmd(s, &["EXISTS", "order:7"]);
        assert!(exists);
    }
    g.release().await.unwrap();
    for s in &servers {
        let exists: bool = cmd(s, &["EXISTS", "order:7"]);
        assert!(!exists);
    }
}

/// Two MultiLocks over the same members given in opposite orders, hammered concurrently:
/// no deadlock (both finish), because members are taken in one global order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_deadlock_between_opposite_orders() {
    let (_servers, clients) = three().await;
    let forward = MultiLock::new(clients.iter().map(|c| c.lock("a"))).unwrap();
    let backward = MultiLock::new(clients.iter().rev().map(|c| c.lock("a"))).unwrap();
    let run = |m: MultiLock| {
        tokio::spawn(async move {
            for _ in 0..50 {
                let g = m.acquire().await.unwrap();
                tokio::task::yield_now().await;
                g.release().await.unwrap();
            }
        })
    };
    let (a, b) = (run(forward), run(backward));
    tokio::time::timeout(Duration::from_secs(20), async {
        a.await.unwrap();
        b.await.unwrap();
    })
    .await
    .expect("deadlock: the MultiLocks did not finish");
}

/// Seed 003's re-entrancy test over a MultiLock: hold counts 2 on every node, then 1, then
/// released.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reentrancy_over_three_nodes() {
    let (servers, clients) = three().await;
    let multi = MultiLock::new(clients.iter().map(|c| c.lock("lock:order:9"))).unwrap();
    let outer = multi.acquire().await.unwrap();
    assert_eq!(outer.hold_counts(), vec![1, 1, 1]);
    let inner = outer.reenter().await.unwrap();
    assert_eq!(inner.hold_counts(), vec![2, 2, 2]);
    for (s, g) in servers_in_member_order(&servers, &multi)
        .iter()
        .zip(outer.guards())
    {
        let n: u64 = cmd(s, &["HGET", "lock:order:9", g.owner().as_str()]);
        assert_eq!(n, 2);
    }
    inner.release().await.unwrap();
    for (s, g) in servers_in_member_order(&servers, &multi)
        .iter()
        .zip(outer.guards())
    {
        let n: u64 = cmd(s, &["HGET", "lock:order:9", g.owner().as_str()]);
        assert_eq!(n, 1);
    }
    outer.release().await.unwrap();
    for s in &servers {
        let exists: bool = cmd(s, &["EXISTS", "lock:order:9"]);
        assert!(!exists);
    }
}

fn servers_in_member_order<'a>(
    servers: &'a [RedisServer],
    multi: &MultiLock,
) -> Vec<&'a RedisServer> {
    multi
        .members()
        .iter()
        .map(|m| {
            servers
                .iter()
                .find(|s| m.client().redacted_url() == s.url())
                .expect("member's server")
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_fires_when_any_member_is_lost() {
    let servers: Vec<RedisServer> = (0..2).map(|_| RedisServer::start()).collect();
    let mut clients = Vec::new();
    for s in &servers {
        clients.push(client_with_watchdog(s, Duration::from_millis(600)).await);
    }
    let multi = MultiLock::new(clients.iter().map(|c| c.lock("m"))).unwrap();
    let g = multi.acquire().await.unwrap();
    let deleted: i64 = cmd(&servers[1], &["DEL", "m"]);
    assert_eq!(deleted, 1, "member 1's key was not there");
    tokio::time::timeout(Duration::from_secs(2), g.lost())
        .await
        .expect("lost() fired");
    assert!(g.is_lost());
    assert_eq!(
        g.release().await.unwrap_err().kind(),
        distlock::ErrorKind::NotHeld
    );
    let exists: bool = cmd(&servers[0], &["EXISTS", "m"]);
    assert!(!exists, "the other member was released all the same");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_multilocks_are_refused() {
    let (_s, c) = setup().await;
    assert_eq!(
        MultiLock::new(Vec::new()).unwrap_err().kind(),
        distlock::ErrorKind::InvalidInput
    );
    assert_eq!(
        MultiLock::new([c.lock("x"), c.lock("x")])
            .unwrap_err()
            .kind(),
        distlock::ErrorKind::InvalidInput
    );
    assert_eq!(
        MultiLock::new([c.lock("")]).unwrap_err().kind(),
        distlock::ErrorKind::InvalidInput
    );
}
