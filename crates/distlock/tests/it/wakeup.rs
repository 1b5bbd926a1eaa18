use std::time::Duration;

use tokio::time::Instant;

use crate::util::*;

/// A waiter blocked on a held lock gets it within a few milliseconds of the release, far
/// below the 30 s TTL it would otherwise wait out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiter_wakes_on_release() {
    let (server, client) = setup().await;
    let holder = client.lock("wake").acquire().await.unwrap();
    let other = client_for(&server).await;
    let waiter = tokio::spawn(async move {
        let g = other.lock("wake").acquire().await.unwrap();
        let at = Instant::now();
        g.release().await.unwrap();
        at
    });
    assert!(
        eventually(Duration::from_secs(2), || numsub(
            &server,
            "redisson_lock__channel:{wake}"
        ) == 1)
        .await,
        "the waiter did not start waiting"
    );
    assert!(!waiter.is_finished());
    let released = Instant::now();
    holder.release().await.unwrap();
    let acquired = waiter.await.unwrap();
    let latency = acquired.duration_since(released);
    assert!(
        latency < Duration::from_millis(500),
        "hand-off took {latency:?}"
    );
}

/// Many local waiters on one name share one server subscription to the wake channel, and one
/// to their client's grant channel (direct hand-off), and all get the lock in turn; the
/// subscriptions are gone when the last waiter leaves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_waiters_share_one_subscription() {
    let (server, client) = setup().await;
    let holder = client.lock("shared").acquire().await.unwrap();
    let mut tasks = Vec::new();
    for _ in 0..50 {
        let lock = client.lock("shared");
        tasks.push(tokio::spawn(async move {
            let g = lock.acquire().await.unwrap();
            g.release().await.unwrap();
        }));
    }
    // The wake and grant channels are subscribed one after the other: wait for both.
    let subscribed = eventually(Duration::from_secs(2), || {
        numsub(&server, "redisson_lock__channel:{shared}") == 1
            && waiter_channels(&server).len() >= 2
    })
    .await;
    assert!(subscribed, "the waiters did not subscribe");
    let channels = waiter_channels(&server);
    assert_eq!(channels.len(), 2, "{channels:?}");
    assert!(
        channels[0].starts_with("distlock_lock_grant:{shared}:"),
        "{channels:?}"
    );
    assert_eq!(channels[1], "redisson_lock__channel:{shared}");
    assert_eq!(numsub(&server, &channels[0]), 1);
    holder.release().await.unwrap();
    for t in tasks {
        tokio::time::timeout(Duration::from_secs(10), t)
            .await
            .expect("every waiter got the lock in turn")
            .unwrap();
    }
    assert!(
        eventually(Duration::from_secs(2), || {
            numsub(&server, "redisson_lock__channel:{shared}") == 0
                && waiter_channels(&server).is_empty()
        })
        .await,
        "the subscriptions outlived the last waiter"
    );
}

// Redisson's own scripts, verbatim from seeds 002/004 (tryLockInnerAsync) and 000
// (unlockInnerAsync without the latch), as a Java service would run them.
const REDISSON_LOCK: &str = "if ((redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1)) then redis.call('hincrby', KEYS[1], ARGV[2], 1); redis.call('pexpire', KEYS[1], ARGV[1]); return nil; end; return redis.call('pttl', KEYS[1]);";
const REDISSON_UNLOCK: &str = "if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then return nil;end; local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); if (counter > 0) then redis.call('pexpire', KEYS[1], ARGV[2]); return 0; else redis.call('del', KEYS[1]); redis.call('publish', KEYS[2], ARGV[1]); return 1; end; return nil;";

/// A Redisson holder excludes distlock, and its unlock wakes distlock's waiters; a distlock
/// holder excludes Redisson.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redisson_holder_is_respected_and_its_unlock_wakes_us() {
    let (server, client) = setup().await;
    let java_field = "8743c9c0-0795-4907-87fd-6c719a6b4586:1";
    let mut con = server.connection();
    let granted: Option<i64> = redis::cmd("EVAL")
        .arg(REDISSON_LOCK)
        .arg(1)
        .arg("shared-with-java")
        .arg(30000)
        .arg(java_field)
        .query(&mut con)
        .unwrap();
    assert_eq!(granted, None, "Redisson got the free lock");
    assert!(client
        .lock("shared-with-java")
        .try_acquire()
        .await
        .unwrap()
        .is_none());
    let lock = client.lock("shared-with-java");
    let waiter = tokio::spawn(async move { lock.acquire().await.map(|g| (Instant::now(), g)) });
    assert!(
        eventually(Duration::from_secs(2), || numsub(
            &server,
            "redisson_lock__channel:{shared-with-java}"
        ) == 1)
        .await,
        "the waiter did not start waiting"
    );
    let released = Instant::now();
    let r: i64 = redis::cmd("EVAL")
        .arg(REDISSON_UNLOCK)
        .arg(2)
        .arg("shared-with-java")
        .arg("redisson_lock__channel:{shared-with-java}")
        .arg(0)
        .arg(30000)
        .arg(java_field)
        .query(&mut con)
        .unwrap();
    assert_eq!(r, 1);
    let (at, guard) = waiter.await.unwrap().unwrap();
    assert!(at.duration_since(released) < Duration::from_millis(500));
    // Now we hold it: Redisson's script is refused with our PTTL.
    let pttl: Option<i64> = redis::cmd("EVAL")
        .arg(REDISSON_LOCK)
        .arg(1)
        .arg("shared-with-java")
        .arg(30000)
        .arg(java_field)
        .query(&mut con)
        .unwrap();
    assert!(pttl.unwrap() > 0);
    guard.release().await.unwrap();
}
