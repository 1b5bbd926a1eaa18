//! RedLock over independent redis-server processes.

use std::time::Duration;

use distlock::{ErrorKind, RedLockNodes};

use crate::util::*;
use distlock::Lease;

async fn nodes(n: usize) -> (Vec<RedisServer>, Vec<distlock::Client>) {
    let servers: Vec<RedisServer> = (0..n).map(|_| RedisServer::start()).collect();
    let mut clients = Vec::new();
    for s in &servers {
        clients.push(client_for(s).await);
    }
    (servers, clients)
}

/// Every pattern of nodes pre-locked by another owner: the acquire succeeds exactly when the
/// free nodes form a quorum, and after a failure no node keeps our hold.
async fn quorum_masks(n: usize) {
    let (servers, clients) = nodes(n).await;
    let redlock = RedLockNodes::builder(clients.clone())
        .ttl(Duration::from_secs(10))
        .node_timeout(Duration::from_millis(200))
        .build()
        .await
        .unwrap();
    let quorum = n / 2 + 1;
    assert_eq!(redlock.quorum(), quorum);
    for mask in 0u32..(1 << n) {
        let name = format!("mask:{mask}");
        let mut blockers = Vec::new();
        for (i, c) in clients.iter().enumerate() {
            if mask & (1 << i) != 0 {
                blockers.push(c.lock(name.as_str()).acquire().await.unwrap());
            }
        }
        let free = n - mask.count_ones() as usize;
        let got = redlock.lock(&name).try_acquire().await.unwrap();
        assert_eq!(got.is_some(), free >= quorum, "mask {mask:0n$b}");
        if let Some(g) = got {
            assert_eq!(g.granted_nodes(), free);
            g.release().await.unwrap();
        }
        // No node keeps a hold of ours: only the blockers' fields remain (owner, token,
        // holder record).
        for (i, s) in servers.iter().enumerate() {
            let fields: Vec<String> = cmd(s, &["HKEYS", &name]);
            let blocked = mask & (1 << i) != 0;
            assert_eq!(
                fields.len(),
                if blocked { 3 } else { 0 },
                "mask {mask:0n$b} node {i}: {fields:?}"
            );
        }
        for b in blockers {
            b.release().await.unwrap();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quorum_masks_3_nodes() {
    quorum_masks(3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quorum_masks_5_nodes() {
    quorum_masks(5).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn minority_killed_still_locks_majority_killed_fails_fast() {
    let (mut servers, clients) = nodes(5).await;
    let redlock = RedLockNodes::builder(clients)
        .ttl(Duration::from_secs(10))
        .node_timeout(Duration::from_millis(100))
        .build()
        .await
        .unwrap();
    servers[0].kill();
    servers[1].kill();
    let g = redlock.lock("k").acquire().await.expect("3 of 5 alive");
    assert_eq!(g.granted_nodes(), 3);
    g.release().await.unwrap();
    servers[2].kill();
    let start = tokio::time::Instant::now();
    let err = redlock.lock("k").try_acquire().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::QuorumNotReached, "{err}");
    assert!(
        start.elapsed() < Duration::from_millis(400),
        "took {:?}",
        start.elapsed()
    );
    assert_eq!(err.node_failures().len(), 3, "{err}");
    for f in err.node_failures() {
        assert!(!f.node.is_empty() && !f.cause.is_empty());
    }
    // The surviving nodes keep nothing.
    for s in &servers[3..] {
        let exists: bool = cmd(s, &["EXISTS", "k"]);
        assert!(!exists);
    }
}

/// One node hangs (SIGSTOP): the lock is had within the node timeout from the others, and
/// the hung node's late grant is released once it resumes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paused_node_is_skipped_and_its_late_grant_released() {
    let (servers, clients) = nodes(3).await;
    let redlock = RedLockNodes::builder(clients)
        .ttl(Duration::from_secs(30))
        .node_timeout(Duration::from_millis(100))
        .build()
        .await
        .unwrap();
    servers[2].pause();
    let start = tokio::time::Instant::now();
    let g = redlock
        .lock("hung")
        .try_acquire()
        .await
        .unwrap()
        .expect("2 of 3 answer");
    // Within the node timeout (100 ms), not after the hung node: bounded loosely, as a loaded
    // machine may be late, while the node stays hung until resumed below.
    assert!(
        start.elapsed() < Duration::from_millis(1_100),
        "took {:?}",
        start.elapsed()
    );
    assert_eq!(g.granted_nodes(), 2);
    // The scenario: the node stays hung well past the round.
    tokio::time::sleep(Duration::from_millis(300)).await;
    servers[2].resume();
    // The late grant lands, then its release.
    assert!(
        eventually(Duration::from_secs(3), || !cmd::<bool>(
            &servers[2],
            &["EXISTS", "hung"]
        ))
        .await,
        "the paused node kept the late grant"
    );
    let exists: bool = cmd(&servers[0], &["EXISTS", "hung"]);
    assert!(exists, "the counted nodes keep the lock");
    g.release().await.unwrap();
}

/// Acquiring takes longer than the TTL (slow nodes): the round fails and every node is
/// released right away (checked before the TTL could have expired the keys).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquire_slower_than_ttl_fails_and_releases() {
    let (servers, clients) = nodes(3).await;
    let redlock = RedLockNodes::builder(clients)
        .ttl(Duration::from_secs(1))
        .node_timeout(Duration::from_millis(990))
        // drift = 502 ms: grants arriving after ~500 ms leave no validity.
        .drift_factor(0.5)
        .build()
        .await
        .unwrap();
    // Slow down two nodes for 0.9 s: found asleep within ~0.2 s below, their grants arrive
    // after ~0.7 s or later, leaving less than the drift.
    let sleepers: Vec<_> = servers[1..]
        .iter()
        .map(|s| {
            let url = s.url();
            std::thread::spawn(move || {
                let mut con = redis::Client::open(url).unwrap().get_connection().unwrap();
                let _: () = redis::cmd("DEBUG")
                    .arg("SLEEP")
                    .arg("0.9")
                    .query(&mut con)
                    .unwrap();
            })
        })
        .collect();
    // Both nodes are asleep (the DEBUG SLEEP has begun) before the round starts.
    for (i, s) in servers[1..].iter().enumerate() {
        assert!(
            // 150 ms: far beyond a busy server's answer to PING, so a slow answer is the sleep.
            eventually(Duration::from_secs(2), || !responds_within(
                s,
                Duration::from_millis(150)
            ))
            .await,
            "node {} did not start sleeping",
            i + 1
        );
    }
    let err = redlock.lock("slow").try_acquire().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::QuorumNotReached, "{err}");
    for s in sleepers {
        s.join().unwrap();
    }
    for (i, s) in servers.iter().enumerate() {
        let fields: Vec<String> = cmd(s, &["HKEYS", "slow"]);
        assert!(fields.is_empty(), "node {i} kept {fields:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extend_needs_a_quorum_and_respects_the_limit() {
    let (servers, clients) = nodes(3).await;
    let redlock = RedLockNodes::builder(clients)
        .ttl(Duration::from_millis(800))
        .max_extensions(2)
        .build()
        .await
        .unwrap();
    let lease = Duration::from_millis(800);
    let g = redlock.lock("ext").acquire().await.unwrap();
    let before = g.valid_until();
    // The scenario: some time passes, so the extension visibly moves the deadline.
    tokio::time::sleep(Duration::from_millis(100)).await;
    g.extend(lease).await.unwrap();
    assert!(g.valid_until() > before);
    // Lose the lock on two nodes: an extension no longer reaches a quorum.
    for s in &servers[..2] {
        let deleted: i64 = cmd(s, &["DEL", "ext"]);
        assert_eq!(deleted, 1, "the node did not hold the lock");
    }
    assert_eq!(
        g.extend(lease).await.unwrap_err().kind(),
        ErrorKind::NotHeld
    );
    let g2 = redlock.lock("ext2").acquire().await.unwrap();
    g2.extend(lease).await.unwrap();
    g2.extend(lease).await.unwrap();
    assert_eq!(
        g2.extend(lease).await.unwrap_err().kind(),
        ErrorKind::InvalidInput
    );
    g2.release().await.unwrap();
    assert_eq!(g.release().await.unwrap_err().kind(), ErrorKind::NotHeld);
}

/// `extend(lease)` sets every node's TTL to `lease` and measures the validity from it: longer
/// or shorter than the TTL, drift = lease × 0.01 + 2 ms. Bad leases change nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extend_takes_a_lease_and_redoes_the_validity_with_it() {
    let (servers, clients) = nodes(3).await;
    let redlock = RedLockNodes::builder(clients)
        .ttl(Duration::from_secs(2))
        .node_timeout(Duration::from_millis(100))
        .build()
        .await
        .unwrap();
    let g = redlock.lock("lease").acquire().await.unwrap();
    // Longer than the TTL.
    let start = std::time::Instant::now();
    g.extend(Duration::from_secs(20)).await.unwrap();
    let validity = g.valid_until() - start;
    assert!(
        // 20 s − 202 ms of drift − the extend round's time (~1 ms; up to 700 ms allowed)
        validity > Duration::from_millis(19_100) && validity <= Duration::from_millis(19_798),
        "validity {validity:?} for a 20 s lease (drift 202 ms)"
    );
    for (i, s) in servers.iter().enumerate() {
        let pttl: i64 = cmd(s, &["PTTL", "lease"]);
        assert!(pttl > 19_000 && pttl <= 20_000, "node {i}: pttl {pttl}");
    }
    // Shorter than the TTL: the nodes' TTL comes down too.
    let start = std::time::Instant::now();
    g.extend(Duration::from_millis(500)).await.unwrap();
    let validity = g.valid_until() - start;
    assert!(
        validity <= Duration::from_millis(493),
        "validity {validity:?} for a 500 ms lease (drift 7 ms)"
    );
    for (i, s) in servers.iter().enumerate() {
        let pttl: i64 = cmd(s, &["PTTL", "lease"]);
        assert!(pttl > 0 && pttl <= 500, "node {i}: pttl {pttl}");
    }
    // Zero, overflowing, or not above the node timeout: refused, nothing sent.
    for bad in [Duration::ZERO, Duration::MAX, Duration::from_millis(100)] {
        assert_eq!(
            g.extend(bad).await.unwrap_err().kind(),
            ErrorKind::InvalidInput,
            "{bad:?}"
        );
    }
    let pttl: i64 = cmd(&servers[0], &["PTTL", "lease"]);
    assert!(pttl > 100, "a refused extension changed the TTL: {pttl}");
    g.release().await.unwrap();
}

/// `acquire` waits up to the default wait, round after round: it gets the lock once the
/// holder releases, and ends with `NotAcquired` (naming the nodes) when the lock stays held;
/// `try_acquire_for` gives `Ok(None)` then. Node failures in the last round stay
/// `QuorumNotReached`, from `try_acquire_for` as from `try_acquire`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquire_waits_up_to_the_default_wait() {
    let (mut servers, clients) = nodes(3).await;
    let redlock = RedLockNodes::builder(clients)
        .ttl(Duration::from_secs(10))
        .node_timeout(Duration::from_millis(100))
        .default_wait(Duration::from_millis(600))
        .retry_delay(Duration::from_millis(20), Duration::from_millis(40))
        .build()
        .await
        .unwrap();
    let holder = redlock.lock("w").acquire().await.unwrap();

    let start = tokio::time::Instant::now();
    let err = redlock.lock("w").acquire().await.unwrap_err();
    let took = start.elapsed();
    assert_eq!(err.kind(), ErrorKind::NotAcquired, "{err}");
    assert!(
        took >= Duration::from_millis(550) && took < Duration::from_millis(1_500),
        "took {took:?}"
    );
    assert_eq!(err.node_failures().len(), 3, "{err}");
    assert!(err.to_string().contains("held by another owner"), "{err}");

    let start = tokio::time::Instant::now();
    let none = redlock
        .lock("w")
        .try_acquire_for(Duration::from_millis(300))
        .await
        .unwrap();
    assert!(none.is_none());
    assert!(
        start.elapsed() >= Duration::from_millis(250),
        "{:?}",
        start.elapsed()
    );

    // Released while a waiter rounds: the waiter gets it.
    let waiter = {
        let redlock = redlock.clone();
        tokio::spawn(async move { redlock.lock("w").acquire().await })
    };
    // The scenario: the waiter fails a few rounds first.
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert!(!waiter.is_finished(), "the waiter got a held lock");
    holder.release().await.unwrap();
    let g = waiter.await.unwrap().expect("acquired after the release");
    // A round that races the release (the holder's nodes are freed one by one) may win
    // on a majority only: that is a grant, as in the RedLock algorithm.
    assert!(
        g.granted_nodes() >= 2,
        "granted on {} nodes",
        g.granted_nodes()
    );
    g.release().await.unwrap();

    // A majority down: node failures, not contention, whatever the wait.
    servers[0].kill();
    servers[1].kill();
    let err = redlock
        .lock("w")
        .try_acquire_for(Duration::from_millis(200))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::QuorumNotReached, "{err}");
    let err = redlock.lock("w").acquire().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::QuorumNotReached, "{err}");
    assert_eq!(err.node_failures().len(), 2, "{err}");
}

/// Contention on a majority decides a round even when another node hangs: `Ok(None)`. A
/// majority of hung nodes is a node failure (`QuorumNotReached`, each timeout named), not
/// contention.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contention_and_timeouts_are_told_apart() {
    let (servers, clients) = nodes(3).await;
    let redlock = RedLockNodes::builder(clients.clone())
        .ttl(Duration::from_secs(10))
        .node_timeout(Duration::from_millis(100))
        .build()
        .await
        .unwrap();
    let blockers = [
        clients[0].lock("c").acquire().await.unwrap(),
        clients[1].lock("c").acquire().await.unwrap(),
    ];
    servers[2].pause();
    assert!(redlock.lock("c").try_acquire().await.unwrap().is_none());
    assert!(redlock
        .lock("c")
        .try_acquire_for(Duration::from_millis(200))
        .await
        .unwrap()
        .is_none());
    servers[2].resume();
    for b in blockers {
        b.release().await.unwrap();
    }

    servers[1].pause();
    servers[2].pause();
    let err = redlock.lock("t").try_acquire().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::QuorumNotReached, "{err}");
    let timeouts = err
        .node_failures()
        .iter()
        .filter(|f| f.cause.contains("no answer"))
        .count();
    assert_eq!(timeouts, 2, "{err}");
    servers[1].resume();
    servers[2].resume();
    // The late grants of the hung nodes are given back once they answer.
    for s in &servers {
        assert!(
            eventually(Duration::from_secs(3), || !cmd::<bool>(s, &["EXISTS", "t"])).await,
            "a node kept a grant of the failed round"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_redlock_settings_are_config_errors() {
    let (_servers, clients) = nodes(3).await;
    for (what, b) in [
        (
            "quorum of half",
            RedLockNodes::builder(clients.clone()).quorum(1),
        ),
        (
            "quorum over n",
            RedLockNodes::builder(clients.clone()).quorum(4),
        ),
        (
            "zero ttl",
            RedLockNodes::builder(clients.clone()).ttl(Duration::ZERO),
        ),
        (
            "node timeout >= ttl",
            RedLockNodes::builder(clients.clone())
                .ttl(Duration::from_secs(1))
                .node_timeout(Duration::from_secs(1)),
        ),
        (
            "drift factor",
            RedLockNodes::builder(clients.clone()).drift_factor(1.5),
        ),
        ("no nodes", RedLockNodes::builder(Vec::new())),
        (
            "overflowing default wait",
            RedLockNodes::builder(clients.clone()).default_wait(Duration::MAX),
        ),
    ] {
        let err = b.build().await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Config, "{what}: {err}");
    }
}

/// Counter fuzz across 3 OS processes through RedLock over 5 nodes: the exact total.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counter_fuzz_three_processes_over_five_nodes() {
    let (servers, _clients) = nodes(5).await;
    let data = RedisServer::start();
    let urls: Vec<String> = servers.iter().map(|s| s.url()).collect();
    let (nodes, data_url) = (urls.join(","), data.url());
    run_examples(
        &example_bin("redlock_counter"),
        &[&nodes, &data_url, "rl-counter", "60"],
        3,
    )
    .await;
    let total: u64 = cmd(&data, &["GET", "rl-counter"]);
    assert_eq!(total, 180);
}

/// A watchdog keeps a RedLock past its TTL (each extension with a quorum), stops at release,
/// and refuses a lease that is not above the node timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keep_alive_extends_a_redlock_until_release() {
    let (servers, clients) = nodes(3).await;
    let ttl = Duration::from_millis(600);
    let redlock = RedLockNodes::builder(clients)
        .ttl(ttl)
        .node_timeout(Duration::from_millis(100))
        .build()
        .await
        .unwrap();
    let mut g = redlock.lock("kept").acquire().await.unwrap();
    assert_eq!(
        g.keep_alive(Duration::from_millis(100)).unwrap_err().kind(),
        ErrorKind::InvalidInput
    );
    g.keep_alive(ttl).unwrap();
    // The scenario: three TTLs long, the lock must stay valid on every node.
    tokio::time::sleep(ttl * 3).await;
    assert!(
        g.valid_until() > std::time::Instant::now(),
        "the validity ended"
    );
    for (i, s) in servers.iter().enumerate() {
        let pttl: i64 = cmd(s, &["PTTL", "kept"]);
        assert!(pttl > 0, "node {i}: pttl {pttl}");
    }
    g.release().await.unwrap();
    for s in &servers {
        assert!(!cmd::<bool>(s, &["EXISTS", "kept"]));
    }
}
