//! FairLock: FIFO grants, crashed and cancelled waiters.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::util::*;

fn queue_len(server: &RedisServer, name: &str) -> i64 {
    cmd(
        server,
        &["LLEN", &format!("redisson_lock_queue:{{{name}}}")],
    )
}

/// 20 waiters queued in a known order are granted in exactly that order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_waiters_are_granted_in_arrival_order() {
    let (server, client) = setup().await;
    let lock = client.fair_lock("fifo");
    let holder = lock.acquire().await.unwrap();
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for i in 0..20 {
        let lock = lock.clone();
        let order = order.clone();
        tasks.push(tokio::spawn(async move {
            let g = lock.acquire().await.unwrap();
            order.lock().unwrap().push(i);
            g.release().await.unwrap();
        }));
        assert!(
            eventually(Duration::from_secs(2), || queue_len(&server, "fifo")
                == i + 1)
            .await,
            "waiter {i} did not queue"
        );
    }
    holder.release().await.unwrap();
    for t in tasks {
        tokio::time::timeout(Duration::from_secs(10), t)
            .await
            .unwrap()
            .unwrap();
    }
    assert_eq!(*order.lock().unwrap(), (0..20).collect::<Vec<_>>());
    assert_eq!(queue_len(&server, "fifo"), 0);
}

/// A waiter process killed in the middle of the queue does not stall the ones behind it for
/// longer than its liveness timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_waiter_process_does_not_stall_the_queue() {
    let (server, client) = setup().await;
    let liveness = Duration::from_millis(900);
    let lock = client.fair_lock("stall").liveness_timeout(liveness);
    let holder = lock.acquire().await.unwrap();
    let first = {
        let lock = lock.clone();
        tokio::spawn(async move { lock.acquire().await.unwrap() })
    };
    assert!(eventually(Duration::from_secs(2), || queue_len(&server, "stall") == 1).await);
    let mut victim = family(&["fair-wait", &server.url(), "stall", "900"]);
    assert!(eventually(Duration::from_secs(5), || queue_len(&server, "stall") == 2).await);
    let last = {
        let lock = lock.clone();
        tokio::spawn(async move { lock.acquire().await.unwrap() })
    };
    assert!(eventually(Duration::from_secs(2), || queue_len(&server, "stall") == 3).await);
    victim.kill().unwrap();
    victim.wait().unwrap();
    holder.release().await.unwrap();
    let g1 = tokio::time::timeout(Duration::from_secs(2), first)
        .await
        .unwrap()
        .unwrap();
    let released = tokio::time::Instant::now();
    g1.release().await.unwrap();
    let g3 = tokio::time::timeout(Duration::from_secs(5), last)
        .await
        .expect("the queue stalled behind the dead waiter")
        .unwrap();
    let waited = released.elapsed();
    assert!(waited < liveness * 2, "waited {waited:?}");
    g3.release().await.unwrap();
    assert_eq!(
        first_line(&mut victim),
        "",
        "the killed waiter never got the lock"
    );
}

/// A cancelled waiter leaves the queue at once; a timed-out one too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelled_and_timed_out_waiters_leave_the_queue() {
    let (server, client) = setup().await;
    let lock = client.fair_lock("leave");
    let holder = lock.acquire().await.unwrap();
    let waiter = {
        let lock = lock.clone();
        tokio::spawn(async move { lock.acquire().await })
    };
    assert!(eventually(Duration::from_secs(2), || queue_len(&server, "leave") == 1).await);
    waiter.abort();
    assert!(waiter.await.unwrap_err().is_cancelled());
    assert!(
        eventually(Duration::from_millis(500), || queue_len(&server, "leave")
            == 0)
        .await,
        "the cancelled waiter stayed queued"
    );
    let zcard: i64 = cmd(&server, &["ZCARD", "redisson_lock_timeout:{leave}"]);
    assert_eq!(zcard, 0);
    assert!(lock
        .try_acquire_for(Duration::from_millis(100))
        .await
        .unwrap()
        .is_none());
    assert_eq!(
        queue_len(&server, "leave"),
        0,
        "the timed-out waiter stayed queued"
    );
    let status = lock.status().await.unwrap();
    assert!(status.queue.is_empty());
    holder.release().await.unwrap();
}

/// The fair lock is reentrant, has fencing tokens and a watchdog like Lock; try_acquire does
/// not jump the queue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fair_lock_shares_the_lock_guard_semantics() {
    let (server, client) = setup().await;
    let lock = client.fair_lock("fair-basic");
    let g = lock.acquire().await.unwrap();
    let first_token = g.fencing_token();
    let inner = g.reenter().await.unwrap();
    assert_eq!(inner.hold_count(), 2);
    assert_eq!(inner.fencing_token(), first_token);
    let waiter = {
        let lock = lock.clone();
        tokio::spawn(async move { lock.acquire().await.unwrap() })
    };
    assert!(
        eventually(Duration::from_secs(2), || queue_len(&server, "fair-basic")
            == 1)
        .await
    );
    inner.release().await.unwrap();
    g.release().await.unwrap();
    // The queued waiter is first: a newcomer's single attempt does not overtake it.
    let w = tokio::time::timeout(Duration::from_secs(2), waiter)
        .await
        .unwrap()
        .unwrap();
    assert!(lock.try_acquire().await.unwrap().is_none());
    // A new grant, so a new token, above the first holder's.
    assert!(
        w.fencing_token() > first_token,
        "token {} after {first_token}",
        w.fencing_token()
    );
    w.release().await.unwrap();
}
