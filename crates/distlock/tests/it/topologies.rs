//! The family on every topology: each test runs the same scenario on a standalone server, a
//! Sentinel set and a Cluster ([`topologies`]), with assertions read on the node that holds
//! the key.

use std::time::Duration;

use distlock::{Client, MultiLock};

use crate::util::*;

/// A client of `deployment` whose watchdog lease is short (renewals every 100 ms).
async fn watched_client(deployment: &Deployment) -> Client {
    Client::builder()
        .url(deployment.url())
        .watchdog_lease(Duration::from_millis(300))
        .build()
        .await
        .unwrap()
}

/// The watchdog keeps locks whose keys lie in different hash slots (on a cluster: on
/// different nodes, renewed slot by slot) past three leases; a waiter on another client is
/// woken by the release (pub/sub on every topology), not by the lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watchdog_and_wake_ups() {
    for topology in topologies() {
        let (deployment, _client) = setup_on(topology).await;
        let client = watched_client(&deployment).await;
        let names = ["w-a", "w-b", "w-c", "w-d", "w-e", "w-f"];
        let mut guards = Vec::new();
        for n in names {
            guards.push(client.lock(n).acquire().await.unwrap());
        }
        tokio::time::sleep(Duration::from_millis(1_000)).await;
        for (n, g) in names.iter().zip(&guards) {
            assert!(!g.is_lost(), "{topology:?}: {n} lost");
            let pttl: i64 = cmd(deployment.node_for(n), &["PTTL", n]);
            assert!(pttl > 0, "{topology:?}: {n} expired (pttl {pttl})");
        }
        let other = deployment.client().await;
        let waiter = {
            let lock = other.lock("w-a");
            tokio::spawn(async move { lock.try_acquire_for(Duration::from_secs(20)).await })
        };
        assert!(
            eventually(Duration::from_secs(3), || {
                deployment
                    .nodes()
                    .iter()
                    .any(|s| numsub(s, "redisson_lock__channel:{w-a}") >= 1)
            })
            .await,
            "{topology:?}: the waiter did not subscribe"
        );
        let released = std::time::Instant::now();
        guards.remove(0).release().await.unwrap();
        let got = tokio::time::timeout(Duration::from_secs(2), waiter)
            .await
            .unwrap_or_else(|_| panic!("{topology:?}: the waiter was not woken"))
            .unwrap()
            .unwrap()
            .expect("granted");
        assert!(released.elapsed() < Duration::from_secs(1), "{topology:?}");
        got.release().await.unwrap();
        for g in guards {
            g.release().await.unwrap();
        }
    }
}

/// Fair lock (FIFO hand-over between clients), read-write lock (readers share, a writer
/// excludes), semaphore, leased semaphore, latch, job lock and a MultiLock over keys in
/// several slots, on every topology.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_family_works() {
    for topology in topologies() {
        let (deployment, client) = setup_on(topology).await;
        let other = deployment.client().await;

        // Fair lock: a waiter of another client gets it on release.
        let fair = client.fair_lock("f").acquire().await.unwrap();
        let waiter = {
            let lock = other.fair_lock("f");
            tokio::spawn(async move { lock.try_acquire_for(Duration::from_secs(10)).await })
        };
        assert!(
            eventually(Duration::from_secs(3), || {
                cmd::<i64>(
                    deployment.node_for("f"),
                    &["LLEN", "redisson_lock_queue:{f}"],
                ) == 1
            })
            .await,
            "{topology:?}: not queued"
        );
        fair.release().await.unwrap();
        let next = waiter.await.unwrap().unwrap().expect("fair hand-over");
        next.release().await.unwrap();

        // Read-write lock.
        let rw = client.rw_lock("rw");
        let r1 = rw.read().await.unwrap();
        let r2 = other
            .rw_lock("rw")
            .try_read()
            .await
            .unwrap()
            .expect("shared read");
        assert!(
            other.rw_lock("rw").try_write().await.unwrap().is_none(),
            "{topology:?}"
        );
        r1.release().await.unwrap();
        r2.release().await.unwrap();
        let w = other
            .rw_lock("rw")
            .try_write()
            .await
            .unwrap()
            .expect("write");
        assert!(rw.try_read().await.unwrap().is_none(), "{topology:?}");
        w.release().await.unwrap();

        // Semaphores.
        let sem = client.semaphore("s");
        assert!(sem.try_set_permits(1).await.unwrap());
        let p = sem.acquire().await.unwrap();
        assert!(other.semaphore("s").try_acquire().await.unwrap().is_none());
        p.release().await.unwrap();
        assert_eq!(sem.available_permits().await.unwrap(), 1);
        let leased = client.leased_semaphore("ls");
        assert!(leased.try_set_permits(1).await.unwrap());
        let lp = leased.acquire(Duration::from_secs(10)).await.unwrap();
        assert_eq!(
            other.leased_semaphore("ls").permits().await.unwrap(),
            (0, 1)
        );
        lp.release().await.unwrap();

        // Latch.
        let latch = client.count_down_latch("l");
        assert!(latch.try_set_count(1).await.unwrap());
        let opened = {
            let latch = other.count_down_latch("l");
            tokio::spawn(async move { latch.wait_for(Duration::from_secs(10)).await })
        };
        latch.count_down().await.unwrap();
        assert!(opened.await.unwrap().unwrap(), "{topology:?}: latch");

        // Job lock.
        let job = client.job_lock("j").at_most_for(Duration::from_secs(10));
        let ran = job.run(async { 7 }).await.unwrap();
        assert_eq!(ran, Some(7));
        let held = job.try_acquire().await.unwrap().expect("job lock");
        assert!(other
            .job_lock("j")
            .at_most_for(Duration::from_secs(10))
            .try_acquire()
            .await
            .unwrap()
            .is_none());
        held.release().await.unwrap();

        // MultiLock over keys in several slots (several nodes on a cluster).
        let names = ["m-1", "m-2", "m-3", "m-4"];
        let multi = MultiLock::new(names.iter().map(|n| client.lock(*n))).unwrap();
        let all = multi.acquire().await.unwrap();
        for n in names {
            assert_eq!(
                cmd::<i64>(deployment.node_for(n), &["EXISTS", n]),
                1,
                "{topology:?}: {n}"
            );
            assert!(other.lock(n).try_acquire().await.unwrap().is_none());
        }
        all.release().await.unwrap();
    }
}

/// Where grants are confirmed by replicas (Sentinel and Cluster), semaphore permits, leased
/// permits and job locks are too: with the replicas of the key's master stopped, each grant
/// is given back and the call fails with `NotReplicated` — the permits are all still
/// available, no lease is left, the job lock does not exist.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permits_and_job_locks_wait_for_a_replica() {
    for topology in [Topology::Sentinel, Topology::Cluster] {
        eprintln!("--- topology: {topology:?}");
        let deployment = Deployment::start(topology);
        let client = Client::builder()
            .url(deployment.url())
            .replica_ack_timeout(Duration::from_millis(100))
            .build()
            .await
            .unwrap();
        // One hash tag: one master, whose replicas are stopped.
        let (sem_name, leased_name, job_name) = ("{wait}sem", "{wait}leased", "{wait}job");
        let sem = client.semaphore(sem_name);
        sem.try_set_permits(3).await.unwrap();
        let leased = client.leased_semaphore(leased_name);
        leased.try_set_permits(3).await.unwrap();
        let job = client
            .job_lock(job_name)
            .at_most_for(Duration::from_secs(60));
        // Confirmed while the replicas run.
        sem.try_acquire()
            .await
            .unwrap()
            .expect("a permit")
            .release()
            .await
            .unwrap();

        let replicas = deployment.replicas_of(sem_name);
        assert!(!replicas.is_empty());
        for r in &replicas {
            r.pause();
        }
        let permit = sem.try_acquire().await;
        let lease = leased.try_acquire(Duration::from_secs(30)).await;
        let job_guard = job.try_acquire().await;
        for r in &replicas {
            r.resume();
        }
        let master = deployment.node_for(sem_name);
        for (what, e) in [
            ("permit", permit.map(|_| ()).unwrap_err()),
            ("leased permit", lease.map(|_| ()).unwrap_err()),
            ("job lock", job_guard.map(|_| ()).unwrap_err()),
        ] {
            assert_eq!(e.replication(), Some((0, 1)), "{topology:?} {what}: {e:#}");
        }
        assert_eq!(
            cmd::<String>(master, &["GET", sem_name]),
            "3",
            "{topology:?}"
        );
        assert_eq!(
            cmd::<String>(master, &["GET", leased_name]),
            "3",
            "{topology:?}"
        );
        assert_eq!(
            cmd::<i64>(master, &["ZCARD", &format!("{leased_name}:timeout")]),
            0,
            "{topology:?}"
        );
        assert_eq!(
            cmd::<i64>(master, &["EXISTS", &format!("job-lock:default:{job_name}")]),
            0,
            "{topology:?}"
        );
    }
}
