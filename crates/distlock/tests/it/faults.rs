//! Faults with real processes: a killed subscription connection, a server restart.

use std::time::Duration;

use tokio::time::Instant;

use crate::util::*;

/// The server drops the subscription connection: the hub reconnects, subscribes again, and a
/// waiter still gets the lock within milliseconds of the release.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_survive_a_killed_subscription_connection() {
    let (server, client) = setup().await;
    let holder = client.lock("resub").acquire().await.unwrap();
    let other = client_for(&server).await;
    let waiter = tokio::spawn(async move {
        let g = other.lock("resub").acquire().await.unwrap();
        let at = Instant::now();
        g.release().await.unwrap();
        at
    });
    let channel = "redisson_lock__channel:{resub}";
    assert!(eventually(Duration::from_secs(2), || numsub(&server, channel) == 1).await);
    let killed: i64 = cmd(&server, &["CLIENT", "KILL", "TYPE", "pubsub"]);
    assert!(killed >= 1);
    assert!(
        eventually(Duration::from_secs(5), || numsub(&server, channel) == 1).await,
        "the subscription was not restored"
    );
    let released = Instant::now();
    holder.release().await.unwrap();
    let acquired = waiter.await.unwrap();
    assert!(acquired.duration_since(released) < Duration::from_millis(500));
}

/// The server is killed and restarted (without persistence): the same client reconnects
/// and locks again, and the watchdog reports the lost lease of the lock held across it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_survives_a_server_restart_and_reports_the_lost_lease() {
    let mut server = RedisServer::start();
    let client = client_with_watchdog(&server, Duration::from_millis(900)).await;
    let held = client.lock("across-restart").acquire().await.unwrap();
    server.restart();
    tokio::time::timeout(Duration::from_secs(5), held.lost())
        .await
        .expect("lost() fired after the restart wiped the lock");
    let g = client
        .lock("after-restart")
        .acquire()
        .await
        .expect("the client reconnected");
    assert!(g.fencing_token().get() > held.fencing_token().get());
    g.release().await.unwrap();
    let _ = held.forget();
}

/// A holder whose server answers slowly (`DEBUG SLEEP`) keeps its lock: requests wait, none
/// is lost or doubled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_server_delays_but_does_not_break_the_lock() {
    let (server, client) = setup().await;
    let g = client.lock("sleepy").acquire().await.unwrap();
    let url = server.url();
    let sleeper = tokio::task::spawn_blocking(move || {
        let mut con = redis::Client::open(url).unwrap().get_connection().unwrap();
        let _: () = redis::cmd("DEBUG")
            .arg("SLEEP")
            .arg("1.5")
            .query(&mut con)
            .unwrap();
    });
    assert!(
        // 150 ms: far beyond a busy server's answer to PING, so a slow answer is the sleep.
        eventually(Duration::from_secs(2), || !responds_within(
            &server,
            Duration::from_millis(150)
        ))
        .await,
        "the server did not start sleeping"
    );
    let asked = Instant::now();
    let other = client.lock("sleepy").try_acquire().await.unwrap();
    let waited = asked.elapsed();
    assert!(other.is_none());
    // Asked during the 1.5 s sleep (about 0.2 s into it; within the 3 s command timeout):
    // answered only when it ended.
    assert!(
        waited >= Duration::from_millis(800),
        "the request was not held up by the sleeping server: {waited:?}"
    );
    sleeper.await.unwrap();
    let count: u64 = cmd(&server, &["HGET", "sleepy", g.owner().as_str()]);
    assert_eq!(count, 1);
    g.release().await.unwrap();
}
