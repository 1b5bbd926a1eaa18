//! `Client::shutdown` and the end of the runtime: nothing a client held outlives it.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use distlock::ErrorKind;

use crate::util::*;

/// Run the `return_while_holding` example (`bin`) once per run number at the same time —
/// lock `<prefix><run>`, a multi-thread runtime for even runs and a current-thread one for
/// odd runs — and assert that every process exits successfully.
async fn run_returning_holders(
    bin: &std::path::Path,
    url: &str,
    runs: impl Iterator<Item = usize>,
    prefix: &str,
) {
    let children: Vec<_> = runs
        .map(|run| {
            let flavor = if run % 2 == 0 { "multi" } else { "current" };
            std::process::Command::new(bin)
                .args([url, &format!("{prefix}{run}"), flavor])
                .stdout(std::process::Stdio::null())
                .spawn()
                .expect("spawn the example")
        })
        .collect();
    wait_all_succeed(children, "return_while_holding").await;
}

/// Keys that show something is still held: lock hashes, fair queues, job locks, permits
/// taken from the two semaphores (`sem` and `leased` must be back at 100).
fn leftovers(server: &RedisServer, name: &str) -> Vec<String> {
    let mut left: Vec<String> = lock_keys(server)
        .into_iter()
        .filter(|k| k.contains(name))
        .filter(|k| !k.starts_with("distlock_acquire_latch:"))
        .filter(|k| !k.starts_with("distlock_semaphore_"))
        .filter(|k| !k.ends_with(":sem") && !k.ends_with(":leased"))
        .collect();
    for sem in [format!("{name}:sem"), format!("{name}:leased")] {
        let permits: Option<u64> = cmd(server, &["GET", &sem]);
        if permits.is_some_and(|p| p != 100) {
            left.push(format!("{sem} = {permits:?}"));
        }
    }
    left
}

/// Every live guard, permit and job lock is released by `shutdown`; afterwards the client
/// makes no new grants, and the guards still around release nothing more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_releases_every_live_hold_and_refuses_new_grants() {
    let (server, client) = setup().await;
    let lock = client.lock("sd:lock");
    let outer = lock.acquire().await.unwrap();
    let inner = outer.reenter().await.unwrap();
    let fair = client.fair_lock("sd:fair").acquire().await.unwrap();
    let read = client.rw_lock("sd:rw").read().await.unwrap();
    let sem = client.semaphore("sd:sem");
    sem.try_set_permits(100).await.unwrap();
    let permit = sem.acquire_many(3).await.unwrap();
    let leased = client.leased_semaphore("sd:leased");
    leased.try_set_permits(100).await.unwrap();
    let lp = leased
        .lease(Duration::from_secs(60))
        .acquire()
        .await
        .unwrap();
    let job = client
        .job_lock("sd:job")
        .at_most_for(Duration::from_secs(60))
        .try_acquire()
        .await
        .unwrap()
        .unwrap();
    assert!(!leftovers(&server, "sd:").is_empty());

    client.shutdown().await.unwrap();
    assert_eq!(leftovers(&server, "sd:"), Vec::<String>::new());

    let err = lock.try_acquire().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Closed, "{err}");
    let err = sem.try_acquire().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Closed, "{err}");

    // Another client takes the lock now; the old guards must not touch it.
    let other = client_for(&server).await;
    let taken = other.lock("sd:lock").acquire().await.unwrap();
    assert_eq!(
        inner.release().await.unwrap_err().kind(),
        ErrorKind::NotHeld
    );
    drop(outer);
    drop(fair);
    drop(read);
    assert_eq!(
        permit.release().await.unwrap_err().kind(),
        ErrorKind::NotHeld
    );
    drop(lp);
    drop(job);
    // Observation window: a background release by a dropped guard would run within it.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(taken.is_held().await.unwrap());
    let permits: u64 = cmd(&server, &["GET", "sd:sem"]);
    assert_eq!(permits, 100, "a permit was given back twice");
    taken.release().await.unwrap();
}

/// Releases of dropped guards still under way are awaited by `shutdown`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_waits_for_background_releases() {
    let (server, client) = setup().await;
    for i in 0..50 {
        drop(client.lock(format!("bg:{i}")).acquire().await.unwrap());
    }
    client.shutdown().await.unwrap();
    assert_eq!(leftovers(&server, "bg:"), Vec::<String>::new());
}

/// A scheduled job finishes the run in progress when the client shuts down, releases its
/// lock, and its loop ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spawn_every_finishes_its_run_then_stops_on_shutdown() {
    let (server, client) = setup().await;
    let runs = Arc::new(AtomicU32::new(0));
    let finished = Arc::new(AtomicU32::new(0));
    let job = client
        .job_lock("sd:every")
        .at_most_for(Duration::from_secs(30));
    let handle = distlock::spawn_every(job, Duration::from_millis(200), {
        let (runs, finished) = (runs.clone(), finished.clone());
        move || {
            let (runs, finished) = (runs.clone(), finished.clone());
            async move {
                runs.fetch_add(1, Ordering::SeqCst);
                // The scenario: a run that is still going when shutdown starts.
                tokio::time::sleep(Duration::from_millis(600)).await;
                finished.fetch_add(1, Ordering::SeqCst);
            }
        }
    });
    assert!(eventually(Duration::from_secs(3), || runs.load(Ordering::SeqCst) == 1).await);
    assert!(cmd::<bool>(
        &server,
        &["EXISTS", "job-lock:default:sd:every"]
    ));
    client.shutdown().await.unwrap();
    // The run in progress finished before shutdown returned, and released its lock.
    assert_eq!(finished.load(Ordering::SeqCst), runs.load(Ordering::SeqCst));
    assert!(!cmd::<bool>(
        &server,
        &["EXISTS", "job-lock:default:sd:every"]
    ));
    tokio::time::timeout(Duration::from_secs(2), handle)
        .await
        .expect("the loop ended")
        .unwrap();
    let after = runs.load(Ordering::SeqCst);
    // Observation window: more than two intervals, in which a live loop would run again.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(runs.load(Ordering::SeqCst), after, "ran after shutdown");
}

/// The measurement: 100 processes return from `main` while holding a lock, a fair lock, a
/// semaphore permit, a leased permit and a job lock (half on a multi-thread runtime, half on
/// a current-thread one); afterwards nothing is held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn returning_from_main_while_holding_leaves_nothing_100_runs() {
    let server = RedisServer::start();
    let bin = example_bin("return_while_holding");
    let url = server.url();
    let mut left_after = Vec::new();
    for batch in 0..25 {
        run_returning_holders(&bin, &url, (0..4).map(|i| batch * 4 + i), "r").await;
        for i in 0..4 {
            let run = batch * 4 + i;
            left_after.extend(leftovers(&server, &format!("r{run}:")));
        }
    }
    eprintln!(
        "100 runs returning from main while holding 5 guards: {} left",
        left_after.len()
    );
    assert_eq!(left_after, Vec::<String>::new());
}

/// A waiter of the client already waiting when `shutdown` runs gets `Closed`, not the lock
/// that shutdown just released.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_acquire_of_a_shut_down_client_is_refused() {
    let (server, client) = setup().await;
    let held = client.lock("sd:wait").acquire().await.unwrap();
    let waiter = {
        let client = client.clone();
        tokio::spawn(async move {
            client
                .lock("sd:wait")
                .try_acquire_for(Duration::from_secs(10))
                .await
        })
    };
    assert!(
        eventually(Duration::from_secs(2), || numsub(
            &server,
            "redisson_lock__channel:{sd:wait}"
        ) == 1)
        .await
    );
    client.shutdown().await.unwrap();
    let err = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .expect("the waiter returned")
        .unwrap()
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Closed, "{err}");
    assert!(!cmd::<bool>(&server, &["EXISTS", "sd:wait"]));
    drop(held);
}

/// `shutdown` called from inside a scheduled job returns (it does not wait for the job's own
/// loop), and the loop ends after that run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_from_inside_a_scheduled_job_returns() {
    let (_server, client) = setup().await;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let job = client
        .job_lock("sd:self")
        .at_most_for(Duration::from_secs(30));
    let handle = distlock::spawn_every(job, Duration::from_millis(200), {
        let client = client.clone();
        move || {
            let (client, tx) = (client.clone(), tx.clone());
            async move {
                client.shutdown().await.unwrap();
                let _ = tx.send(());
            }
        }
    });
    tokio::time::timeout(Duration::from_secs(5), rx.recv())
        .await
        .expect("shutdown returned inside the job");
    tokio::time::timeout(Duration::from_secs(5), handle)
        .await
        .expect("the scheduled loop ended")
        .unwrap();
    tokio::time::timeout(Duration::from_secs(2), client.shutdown())
        .await
        .expect("a second shutdown returns")
        .unwrap();
}

/// `leftovers` across a deployment: keys from every master, permits read where the key
/// lives.
fn leftovers_on(deployment: &Deployment, name: &str) -> Vec<String> {
    let mut left: Vec<String> = deployment
        .masters()
        .into_iter()
        .flat_map(lock_keys)
        .filter(|k| k.contains(name))
        .filter(|k| !k.starts_with("distlock_acquire_latch:"))
        .filter(|k| !k.starts_with("distlock_semaphore_"))
        .filter(|k| !k.ends_with(":sem") && !k.ends_with(":leased"))
        .collect();
    for sem in [format!("{name}:sem"), format!("{name}:leased")] {
        let permits: Option<u64> = cmd(deployment.node_for(&sem), &["GET", &sem]);
        if permits.is_some_and(|p| p != 100) {
            left.push(format!("{sem} = {permits:?}"));
        }
    }
    left
}

/// Returning from `main` while holding, on a Sentinel set and a Cluster: the blocking
/// release at runtime end goes to the current master (Sentinel) or to the master of each
/// key's slot (Cluster), so nothing is left held — on a current-thread runtime too. The
/// names' lock and fair-lock keys (`c0:lock` … `c3:fair`) all hash to slots of the second and
/// third masters, so a release sent to the first (slot 0's: where a request that lost its
/// key would go) is caught.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn returning_from_main_while_holding_leaves_nothing_on_sentinel_and_cluster() {
    let bin = example_bin("return_while_holding");
    for topology in [Topology::Sentinel, Topology::Cluster] {
        let deployment = Deployment::start(topology);
        let url = deployment.url();
        run_returning_holders(&bin, &url, 0..4, "c").await;
        let mut left = Vec::new();
        for run in 0..4 {
            left.extend(leftovers_on(&deployment, &format!("c{run}:")));
        }
        assert_eq!(left, Vec::<String>::new(), "{topology:?}");
    }
}
