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

const COUNTER: &str = "distlock:fencing-counter";

/// 2^53: the first integer a Lua number (a double) cannot count past by one.
const TWO_POW_53: u64 = 1 << 53;

fn counter(server: &RedisServer) -> String {
    cmd(server, &["GET", COUNTER])
}

/// Past 2^53, tokens computed with Lua numbers repeated (three grants all got
/// 9007199254740992 rounded to 10000000000000000). Now they are exact: +1 each, for plain,
/// fair, read and write grants alike, and as re-entry, adoption and status report them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_are_exact_and_strictly_increasing_past_2_pow_53() {
    let (server, client) = setup().await;
    let _: () = cmd(&server, &["SET", COUNTER, &TWO_POW_53.to_string()]);
    let lock = client.lock("exact");
    for i in 1..=3 {
        let g = lock.acquire().await.unwrap();
        assert_eq!(g.fencing_token().get(), TWO_POW_53 + i, "grant {i}");
        g.release().await.unwrap();
    }
    let g = lock.acquire().await.unwrap();
    assert_eq!(g.fencing_token().get(), TWO_POW_53 + 4);
    // Re-entry and adoption return the holder's token, exactly.
    let nested = g.reenter().await.unwrap();
    assert_eq!(nested.fencing_token(), g.fencing_token());
    let adopted = client.lock("exact").adopt(g.owner().clone()).await.unwrap();
    assert_eq!(adopted.fencing_token(), g.fencing_token());
    let status = lock.status().await.unwrap();
    assert_eq!(status.fencing_token, Some(g.fencing_token()));
    assert_eq!(status.fencing_counter, TWO_POW_53 + 4);
    nested.release().await.unwrap();
    let _ = adopted.forget();
    g.release().await.unwrap();

    let fair = client.fair_lock("exact-fair").acquire().await.unwrap();
    assert_eq!(fair.fencing_token().get(), TWO_POW_53 + 5);
    fair.release().await.unwrap();
    let rw = client.rw_lock("exact-rw");
    let w = rw.write().await.unwrap();
    assert_eq!(w.fencing_token().get(), TWO_POW_53 + 6);
    w.release().await.unwrap();
    let r = rw.read().await.unwrap();
    assert_eq!(r.fencing_token().get(), TWO_POW_53 + 7);
    r.release().await.unwrap();
    assert_eq!(counter(&server), (TWO_POW_53 + 7).to_string());
}

/// Asserts that a grant refused by the counter left nothing behind: no lock key (so no hold
/// and no TTL-less hash), no queue or waiting-writer entry, and the counter as it was.
fn assert_nothing_written(server: &RedisServer, name: &str, counter_value: &str) {
    let exists: i64 = cmd(server, &["EXISTS", name]);
    assert_eq!(exists, 0, "{name}: the lock key was left behind");
    let holds: i64 = cmd(server, &["HLEN", name]);
    assert_eq!(holds, 0, "{name}: a hold was left behind");
    assert_eq!(
        keys(server),
        vec![COUNTER.to_string()],
        "{name}: keys written by a refused grant"
    );
    assert_eq!(counter(server), counter_value, "{name}: counter changed");
}

fn assert_counter_error(e: &distlock::Error, what: &str) {
    let text = e.to_string();
    assert!(
        text.contains("distlock: fencing counter distlock:fencing-counter"),
        "{what}: {text}"
    );
}

/// The last token is 2^63 - 1 (fits i64 and u64; a Redisson-style INCR stays valid). After
/// it every grant fails with a clear error and leaves nothing: no key, no hold, no queue
/// entry, the counter unchanged. Before, at 2^63, grants got negative tokens and a failed
/// acquire left its hold for 30 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_last_token_is_2_pow_63_minus_1_then_grants_fail_leaving_nothing() {
    let (server, client) = setup().await;
    let _: () = cmd(&server, &["SET", COUNTER, "9223372036854775806"]);
    let g = client.lock("last").acquire().await.unwrap();
    assert_eq!(g.fencing_token().get(), i64::MAX as u64);
    g.release().await.unwrap();
    let max = i64::MAX.to_string();
    assert_eq!(counter(&server), max);

    let e = client.lock("last").try_acquire().await.unwrap_err();
    assert_counter_error(&e, "plain");
    assert!(e.to_string().contains("9223372036854775807"), "{e}");
    assert_nothing_written(&server, "last", &max);

    let e = client
        .fair_lock("last-fair")
        .try_acquire_for(Duration::from_millis(200))
        .await
        .unwrap_err();
    assert_counter_error(&e, "fair");
    assert_nothing_written(&server, "last-fair", &max);

    let e = client.rw_lock("last-rw").try_write().await.unwrap_err();
    assert_counter_error(&e, "write");
    assert_nothing_written(&server, "last-rw", &max);

    let e = client.rw_lock("last-rw").try_read().await.unwrap_err();
    assert_counter_error(&e, "read");
    assert_nothing_written(&server, "last-rw", &max);
}

/// A counter that is not a decimal integer is refused with a clear error before anything is
/// written (before, `tonumber` turned it into nil and the script failed half-way).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_counter_holding_garbage_is_refused_before_anything_is_written() {
    let (server, client) = setup().await;
    for garbage in ["abc", "-5", "1e3", " 12", "0x10", ""] {
        let _: () = cmd(&server, &["SET", COUNTER, garbage]);
        let e = client.lock("garbage").try_acquire().await.unwrap_err();
        assert_counter_error(&e, garbage);
        assert!(e.to_string().contains("not a decimal integer"), "{e}");
        assert_nothing_written(&server, "garbage", garbage);
    }
    let _: () = cmd(&server, &["SET", COUNTER, "abc"]);
    let e = client.fair_lock("garbage").try_acquire().await.unwrap_err();
    assert_counter_error(&e, "fair");
    assert_nothing_written(&server, "garbage", "abc");
    let e = client.rw_lock("garbage").try_write().await.unwrap_err();
    assert_counter_error(&e, "write");
    assert_nothing_written(&server, "garbage", "abc");
    let e = client.rw_lock("garbage").try_read().await.unwrap_err();
    assert_counter_error(&e, "read");
    assert_nothing_written(&server, "garbage", "abc");
    // status() names the problem instead of failing to decode.
    let e = client.lock("garbage").status().await.unwrap_err();
    assert!(e.to_string().contains("not a decimal integer"), "{e}");

    // Leading zeros are a decimal integer all the same; a counter ahead of the clock is
    // counted on from exactly.
    let _: () = cmd(&server, &["SET", COUNTER, "000123456789012345678"]);
    let g = client.lock("garbage").acquire().await.unwrap();
    assert_eq!(g.fencing_token().get(), 123_456_789_012_345_679);
    g.release().await.unwrap();
}
