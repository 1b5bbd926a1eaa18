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
        2,
        "only the holder's field and token: {fields:?}"
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
