use std::time::Duration;

use crate::util::*;

/// Aborting an acquire mid-wait leaves no hold, no subscription and no keys.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aborted_acquire_leaves_nothing_behind() {
    let (server, client) = setup().await;
    let holder = client.lock("busy").acquire().await.unwrap();
    let keys_before = lock_keys(&server);
    let lock = client.lock("busy");
    let task = tokio::spawn(async move { lock.acquire().await });
    assert!(
        eventually(Duration::from_secs(2), || {
            numsub(&server, "redisson_lock__channel:{busy}") == 1
        })
        .await,
        "the waiter did not subscribe"
    );
    task.abort();
    assert!(task.await.unwrap_err().is_cancelled());
    assert!(
        eventually(Duration::from_secs(2), || {
            numsub(&server, "redisson_lock__channel:{busy}") == 0
        })
        .await,
        "the subscription was not dropped"
    );
    let fields: Vec<String> = cmd(&server, &["HKEYS", "busy"]);
    assert_eq!(
        fields.len(),
        3,
        "only the holder's field, token and holder record: {fields:?}"
    );
    assert!(fields.contains(&holder.owner().to_string()));
    assert_eq!(lock_keys(&server), keys_before);
    holder.release().await.unwrap();
    assert!(lock_keys(&server).is_empty());
}

/// Dropping acquire futures at random points under contention never leaves a stray hold:
/// afterwards the lock is free and acquirable at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquires_cancelled_at_random_points_leave_the_lock_free() {
    let (server, client) = setup().await;
    for i in 0..60u64 {
        let lock = client.lock("flaky");
        let holder = lock.try_acquire().await.unwrap();
        let fut = lock.acquire();
        // Cancelled by the timeout, or done first: then it must have succeeded (its guard
        // is dropped at once, like the holder's).
        if let Ok(done) =
            tokio::time::timeout(Duration::from_micros(50 + (i * 137) % 3000), fut).await
        {
            drop(
                done.unwrap_or_else(|e| panic!("round {i}: an acquire that completed failed: {e}")),
            );
        }
        drop(holder);
    }
    // Background releases of dropped guards and raced grants settle quickly.
    assert!(
        eventually(Duration::from_secs(3), || !cmd::<bool>(
            &server,
            &["EXISTS", "flaky"]
        ))
        .await,
        "a cancelled acquire left a hold: {:?}",
        cmd::<Vec<String>>(&server, &["HKEYS", "flaky"])
    );
    let g = client.lock("flaky").try_acquire().await.unwrap();
    assert!(g.is_some());
}

/// An acquire dropped while its attempt waits on a paused server: when the server resumes it
/// runs the attempt (a grant nobody will use) and then the give-back, so nothing stays taken —
/// a job lock, a leased permit and plain permits alike.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grants_that_raced_a_dropped_acquire_are_given_back_for_every_kind() {
    let (server, client) = setup().await;
    let sem = client.semaphore("s");
    sem.try_set_permits(1).await.unwrap();
    let leased = client.leased_semaphore("ls");
    leased.try_set_permits(1).await.unwrap();
    let job = client.job_lock("j").at_most_for(Duration::from_secs(60));

    // 3 s: far longer than the three 200 ms cuts below, however late they run.
    let _: () = cmd(&server, &["CLIENT", "PAUSE", "3000", "ALL"]);
    let cut = Duration::from_millis(200);
    assert!(tokio::time::timeout(cut, job.try_acquire()).await.is_err());
    assert!(tokio::time::timeout(cut, sem.try_acquire()).await.is_err());
    let lease = Duration::from_secs(60);
    assert!(tokio::time::timeout(cut, leased.lease(lease).try_acquire())
        .await
        .is_err());

    let settled = eventually(Duration::from_secs(10), || {
        !cmd::<bool>(&server, &["EXISTS", "job-lock:default:j"])
            && cmd::<Option<u64>>(&server, &["GET", "s"]) == Some(1)
            && cmd::<Option<u64>>(&server, &["GET", "ls"]) == Some(1)
    })
    .await;
    assert!(
        settled,
        "job lock {:?}, permits {:?} and leased permits {:?} after the pause",
        cmd::<Option<String>>(&server, &["GET", "job-lock:default:j"]),
        cmd::<Option<u64>>(&server, &["GET", "s"]),
        cmd::<Option<u64>>(&server, &["GET", "ls"]),
    );
    // Nothing is left in the way of the next acquire.
    assert!(job.try_acquire().await.unwrap().is_some());
}
