use std::time::Duration;

use crate::util::*;

/// Tokens strictly increase across 1,000 grants, with releases and expiries in between.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_strictly_increase_over_1000_grants() {
    let (_server, client) = setup().await;
    let lock = client.lock("fenced");
    let short = client.lock("fenced").lease(Duration::from_millis(15));
    let mut last = 0u64;
    for i in 0..1000 {
        let token = if i % 50 == 49 {
            // Let this one expire instead of releasing it.
            let g = short.acquire().await.unwrap();
            let t = g.fencing_token().get();
            let _ = g.forget();
            tokio::time::sleep(Duration::from_millis(25)).await;
            t
        } else {
            let g = lock.acquire().await.unwrap();
            let t = g.fencing_token().get();
            g.release().await.unwrap();
            t
        };
        assert!(token > last, "grant {i}: token {token} after {last}");
        last = token;
    }
}

/// Other names draw from the same counter, so tokens also rise across names, and no key is
/// left per name after release.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_key_is_left_per_lock_name() {
    let (server, client) = setup().await;
    let mut last = 0;
    for i in 0..100 {
        let g = client.lock(format!("name:{i}")).acquire().await.unwrap();
        assert!(g.fencing_token().get() > last);
        last = g.fencing_token().get();
        g.release().await.unwrap();
    }
    assert!(lock_keys(&server).is_empty(), "{:?}", lock_keys(&server));
    assert!(keys(&server).contains(&"distlock:fencing-counter".to_string()));
}

/// Hold, snapshot, grant more, kill the server, restart it from the older snapshot: the next
/// token is still larger than every token issued before, while a plain INCR counter kept
/// next to it went backwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_rise_across_a_restart_from_an_old_snapshot() {
    let mut server = RedisServer::options().persistent().start();
    let client = client_for(&server).await;
    let lock = client.lock("restart");
    for _ in 0..5 {
        lock.acquire().await.unwrap().release().await.unwrap();
        let _: i64 = cmd(&server, &["INCR", "plain-counter"]);
    }
    let _: () = cmd(&server, &["SAVE"]);
    let mut highest = 0;
    for _ in 0..50 {
        let g = lock.acquire().await.unwrap();
        highest = highest.max(g.fencing_token().get());
        g.release().await.unwrap();
        let _: i64 = cmd(&server, &["INCR", "plain-counter"]);
    }
    let held = lock.acquire().await.unwrap();
    highest = highest.max(held.fencing_token().get());
    let plain_before: i64 = cmd(&server, &["GET", "plain-counter"]);
    drop(client);
    let _ = held.forget();
    server.restart();
    let plain_after: i64 = cmd(&server, &["GET", "plain-counter"]);
    assert!(plain_after < plain_before, "the snapshot was not older");
    let client = client_for(&server).await;
    let g = client.lock("restart").acquire().await.unwrap();
    assert!(
        g.fencing_token().get() > highest,
        "token {} after restart, {} before",
        g.fencing_token(),
        highest
    );
    g.release().await.unwrap();
}

/// A holder paused past its lease (SIGSTOP of its process is modelled by not renewing) is
/// exposed by its token: the next holder's token is larger, so a resource that keeps the
/// highest token seen refuses the stale writer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_holder_is_exposed_by_its_token() {
    let (server, client) = setup().await;
    let stale = client
        .lock("resource")
        .lease(Duration::from_millis(100))
        .acquire()
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(150)).await;
    let fresh = client.lock("resource").acquire().await.unwrap();
    // The resource: accept a write only with a token ≥ the highest seen.
    let mut highest = 0u64;
    let mut write = |token: u64| {
        if token >= highest {
            highest = token;
            true
        } else {
            false
        }
    };
    assert!(write(fresh.fencing_token().get()));
    assert!(!write(stale.fencing_token().get()), "stale write accepted");
    let _ = stale.forget();
    fresh.release().await.unwrap();
    drop(server);
}
