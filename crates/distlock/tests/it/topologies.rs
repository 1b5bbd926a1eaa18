//! The family on every topology: each test runs the same scenario on a standalone server, a
//! Sentinel set and a Cluster ([`topologies`]), with assertions read on the node that holds
//! the key.

use std::time::Duration;

use distlock::{Client, MultiLock};

use crate::util::*;
use distlock::Lease;

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
        let lp = leased
            .lease(Duration::from_secs(10))
            .acquire()
            .await
            .unwrap();
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
        let lease = leased.lease(Duration::from_secs(30)).try_acquire().await;
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

/// What the workers of `totals_survive_a_failover` saw.
#[derive(Default, Debug)]
struct Tally {
    /// Count-downs answered.
    counted: u64,
    /// Count-downs whose outcome is unknown (applied once or not at all).
    count_unknown: u64,
    /// Permit releases whose outcome is unknown.
    release_unknown: u64,
    /// Acquire+release rounds completed.
    rounds: u64,
}

/// Semaphore permits and a latch's count are conserved across a failover of their master
/// (`kill -9` while workers acquire, release and count down): every operation is applied
/// once, or reported with its outcome unknown — never twice, and a confirmed one is never
/// lost. Grants and releases wait for every replica here (`replica_acks(2)`), so the
/// promoted replica has each of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn totals_survive_a_failover() {
    use std::sync::{Arc, Mutex};
    const PERMITS: u64 = 3;
    const COUNT: u64 = 1_000_000;
    for topology in [Topology::Sentinel, Topology::Cluster] {
        eprintln!("--- topology: {topology:?}");
        let mut deployment = Deployment::start(topology);
        let client = Client::builder()
            .url(deployment.url())
            .replica_acks(2)
            .build()
            .await
            .unwrap();
        let sem_name = "{tot}sem";
        // A latch's channel is Redisson's `redisson_countdownlatch__channel__{<name>}`, so its
        // name takes no hash tag on a Cluster: pick one served by the semaphore's master.
        let master_port = deployment.node_for(sem_name).port();
        let latch_name = (0..)
            .map(|i| format!("tot-latch-{i}"))
            .find(|n| deployment.node_for(n).port() == master_port)
            .unwrap();
        let latch_name = latch_name.as_str();
        let sem = client.semaphore(sem_name);
        assert!(sem.try_set_permits(PERMITS).await.unwrap());
        let latch = client.count_down_latch(latch_name);
        assert!(latch.try_set_count(COUNT).await.unwrap());
        let tally = Arc::new(Mutex::new(Tally::default()));
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let mut workers = Vec::new();
        for _ in 0..3 {
            let (sem, latch) = (sem.clone(), latch.clone());
            let (tally, stop) = (tally.clone(), stop.clone());
            workers.push(tokio::spawn(async move {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    match latch.count_down().await {
                        Ok(_) => tally.lock().unwrap().counted += 1,
                        Err(e) if e.is_outcome_unknown() => {
                            tally.lock().unwrap().count_unknown += 1
                        }
                        Err(_) => {}
                    }
                    // A failed acquire gave back what it may have got.
                    let Ok(Some(permit)) = sem.try_acquire_for(Duration::from_secs(2)).await else {
                        continue;
                    };
                    match permit.release().await {
                        Ok(_) => tally.lock().unwrap().rounds += 1,
                        Err(e) if e.is_outcome_unknown() => {
                            tally.lock().unwrap().release_unknown += 1
                        }
                        Err(e) => panic!("release: {e:#}"),
                    }
                }
            }));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        let new =
            tokio::task::block_in_place(|| deployment.fail_over(sem_name, Duration::from_secs(20)));
        // Work on the new master for a while, then stop.
        tokio::time::sleep(Duration::from_secs(2)).await;
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for w in workers {
            tokio::time::timeout(Duration::from_secs(30), w)
                .await
                .expect("workers stop")
                .unwrap();
        }
        let tally = std::mem::take(&mut *tally.lock().unwrap());
        eprintln!("{topology:?}: new master {new}; {tally:?}");
        let master = deployment.node_for(sem_name);
        let available: u64 = cmd::<String>(master, &["GET", sem_name]).parse().unwrap();
        let count: u64 = cmd::<String>(master, &["GET", latch_name]).parse().unwrap();
        assert!(
            tally.rounds > 0 && tally.counted > 0,
            "{topology:?}: no work done"
        );
        // Never more permits than there are; fewer only by releases of unknown outcome.
        assert!(
            available <= PERMITS && available + tally.release_unknown >= PERMITS,
            "{topology:?}: {available} permits available of {PERMITS}, {tally:?}"
        );
        // Every answered count-down is there once; unknown ones at most once.
        let applied = COUNT - count;
        assert!(
            applied >= tally.counted && applied <= tally.counted + tally.count_unknown,
            "{topology:?}: {applied} count-downs applied, {tally:?}"
        );
    }
}

/// Scripts run as Redis Functions on a standalone server and through Sentinel where the
/// server has them (Redis 7+, Valkey), by `EVALSHA` on older servers and on a Cluster; a
/// lock cycles either way, by the calls the client says it makes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scripts_are_called_as_the_server_allows() {
    for topology in topologies() {
        let (deployment, client) = setup_on(topology).await;
        let calls = client.script_calls();
        let functions = matches!(calls, distlock::ScriptCalls::Functions { .. });
        let has_functions = distlock_test::server_major_version() >= 7;
        assert_eq!(
            functions,
            has_functions && !matches!(topology, Topology::Cluster),
            "{topology:?}: {calls}"
        );
        if !has_functions {
            assert!(
                matches!(topology, Topology::Cluster)
                    || calls.to_string().contains("before Redis 7"),
                "{topology:?}: {calls}"
            );
        }
        let node = deployment.node_for("sc-cycle");
        let command = if functions { "fcall" } else { "evalsha" };
        let before = command_calls(node, command);
        let guard = client.lock("sc-cycle").acquire().await.unwrap();
        guard.release().await.unwrap();
        assert!(
            command_calls(node, command) >= before + 2,
            "{topology:?}: {command} not called"
        );
    }
}
