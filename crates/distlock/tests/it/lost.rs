use std::time::Duration;

use crate::util::*;

/// Deleting the key behind the holder's back fires `lost()` at the next renewal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_fires_when_the_key_is_deleted() {
    let server = RedisServer::start();
    let client = client_with_watchdog(&server, Duration::from_millis(600)).await;
    let guard = client.lock("victim").acquire().await.unwrap();
    let deleted: i64 = cmd(&server, &["DEL", "victim"]);
    assert_eq!(deleted, 1, "the lock key was not there");
    tokio::time::timeout(Duration::from_secs(2), guard.lost())
        .await
        .expect("lost() fired within a renewal period");
    assert!(guard.is_lost());
    assert!(!guard.is_held().await.unwrap());
    assert_eq!(
        guard.release().await.unwrap_err().kind(),
        distlock::ErrorKind::NotHeld
    );
}

/// With an explicit lease and no extension, `lost()` fires when the lease ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_fires_at_the_end_of_an_explicit_lease() {
    let (_server, client) = setup().await;
    let guard = client
        .lock("leased")
        .lease(Duration::from_millis(300))
        .acquire()
        .await
        .unwrap();
    let start = std::time::Instant::now();
    let valid_until = guard.valid_until();
    assert!(valid_until <= start + Duration::from_millis(300));
    assert!(!guard.is_lost());
    tokio::time::timeout(Duration::from_secs(2), guard.lost())
        .await
        .expect("lost() fired");
    // Not before the lease's local end, and then at once (a timer may wake late on a loaded
    // machine: a second is far more than that and far less than a renewal would give).
    let fired = std::time::Instant::now();
    assert!(fired >= valid_until, "lost() fired before the lease ended");
    assert!(
        fired - start <= Duration::from_millis(1300),
        "lost() fired {:?} after the acquire",
        fired - start
    );
    let _ = guard.forget();
}

/// While the lease is kept, `lost()` stays pending.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_stays_pending_while_renewed() {
    let server = RedisServer::start();
    let client = client_with_watchdog(&server, Duration::from_millis(300)).await;
    let guard = client.lock("kept").acquire().await.unwrap();
    assert!(
        tokio::time::timeout(Duration::from_millis(1000), guard.lost())
            .await
            .is_err()
    );
    guard.release().await.unwrap();
}
