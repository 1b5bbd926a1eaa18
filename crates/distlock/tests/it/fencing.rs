use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use distlock::layout::{fencing_counter, key_slot, legacy_fencing_counter, slot_tag, SLOTS};
use rand::RngExt;

use crate::util::*;
use distlock::Lease;

/// Tokens strictly increase across 1,000 grants, with releases and expiries in between.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_strictly_increase_over_1000_grants() {
    let (_server, client) = setup().await;
    let lock = client.lock("fenced");
    let short = client.lock("fenced").lease(Duration::from_millis(15));
    let mut last = 0u128;
    for i in 0..1000 {
        let token = if i % 50 == 49 {
            // Let this one expire instead of releasing it.
            let g = short.acquire().await.unwrap();
            let t = g.fencing_token().get();
            let _ = g.forget();
            // The scenario: the 15 ms lease runs out.
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

/// Names draw from the counter of their hash slot: no key is left per name after release,
/// only one counter per slot the names fall in, each in its names' slot; names of one hash
/// tag share a counter, and tokens rise across them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_key_is_left_per_lock_name() {
    let (server, client) = setup().await;
    let mut counters = BTreeSet::new();
    for i in 0..100 {
        let lock = client.lock(format!("name:{i}"));
        let counter = lock.fencing_counter_key();
        assert_eq!(key_slot(&counter), key_slot(lock.key()), "{counter}");
        counters.insert(counter);
        let g = lock.acquire().await.unwrap();
        g.release().await.unwrap();
    }
    assert!(lock_keys(&server).is_empty(), "{:?}", lock_keys(&server));
    assert_eq!(keys(&server), counters.into_iter().collect::<Vec<_>>());

    let mut last = 0;
    for i in 0..20 {
        let lock = client.lock(format!("{{user:7}}:item:{i}"));
        assert_eq!(lock.fencing_counter_key(), fencing_counter("", "user:7"));
        let g = lock.acquire().await.unwrap();
        assert!(g.fencing_token().get() > last);
        last = g.fencing_token().get();
        g.release().await.unwrap();
    }
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

/// The same across a restart for a client that stays connected, whose grants take the server's
/// clock from its last reading rather than reading `TIME` (one server): its tokens before the
/// restart were never ahead of the server's clock, and the restart's broken connection has it
/// read the clock again, so its first token after the restart is above every token before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connected_clients_tokens_rise_across_a_restart_from_an_old_snapshot() {
    let mut server = RedisServer::options().persistent().start();
    let client = client_for(&server).await;
    for i in 0..5 {
        let name = format!("r{i}");
        client
            .lock(name)
            .acquire()
            .await
            .unwrap()
            .release()
            .await
            .unwrap();
    }
    let _: () = cmd(&server, &["SAVE"]);
    let mut highest = 0;
    // Grants in quick succession, each within the life of the one before's clock reading.
    for i in 0..200 {
        let g = client.lock(format!("r{}", i % 5)).acquire().await.unwrap();
        highest = highest.max(g.fencing_token().get());
        g.release().await.unwrap();
    }
    server.restart();
    let g = client.lock("r0").acquire().await.unwrap();
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
    // The scenario: the holder stalls past its 100 ms lease.
    tokio::time::sleep(Duration::from_millis(150)).await;
    let fresh = client.lock("resource").acquire().await.unwrap();
    // The resource: accept a write only with a token ≥ the highest seen.
    let mut highest = 0u128;
    let mut write = |token: u128| {
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

/// The tests below name their locks `{exact}`, `{exact}-fair`… so that the names of one test
/// share a hash slot, hence one fencing counter: this one, or `counter_of(tag)`.
fn counter_of(tag: &str) -> String {
    fencing_counter("", tag)
}

/// 2^53: the first integer a Lua number (a double) cannot count past by one.
const TWO_POW_53: u128 = 1 << 53;

fn counter(server: &RedisServer, tag: &str) -> String {
    cmd(server, &["GET", &counter_of(tag)])
}

/// Past 2^53, tokens computed with Lua numbers repeated (three grants all got
/// 9007199254740992 rounded to 10000000000000000). Now they are exact: +1 each, for plain,
/// fair, read and write grants alike, and as re-entry, adoption and status report them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_are_exact_and_strictly_increasing_past_2_pow_53() {
    let (server, client) = setup().await;
    let _: () = cmd(
        &server,
        &["SET", &counter_of("exact"), &TWO_POW_53.to_string()],
    );
    let lock = client.lock("{exact}");
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
    let adopted = client
        .lock("{exact}")
        .adopt(g.owner().clone())
        .await
        .unwrap();
    assert_eq!(adopted.fencing_token(), g.fencing_token());
    let status = lock.status().await.unwrap();
    assert_eq!(status.fencing_token, Some(g.fencing_token()));
    assert_eq!(status.fencing_counter, TWO_POW_53 + 4);
    nested.release().await.unwrap();
    let _ = adopted.forget();
    g.release().await.unwrap();

    let fair = client.fair_lock("{exact}-fair").acquire().await.unwrap();
    assert_eq!(fair.fencing_token().get(), TWO_POW_53 + 5);
    fair.release().await.unwrap();
    let rw = client.rw_lock("{exact}-rw");
    let w = rw.write().await.unwrap();
    assert_eq!(w.fencing_token().get(), TWO_POW_53 + 6);
    w.release().await.unwrap();
    let r = rw.read().await.unwrap();
    assert_eq!(r.fencing_token().get(), TWO_POW_53 + 7);
    r.release().await.unwrap();
    assert_eq!(counter(&server, "exact"), (TWO_POW_53 + 7).to_string());
}

/// Asserts that a grant refused by the counter left nothing behind: no lock key (so no hold
/// and no TTL-less hash), no queue or waiting-writer entry, and the counter as it was.
fn assert_nothing_written(server: &RedisServer, name: &str, tag: &str, counter_value: &str) {
    let exists: i64 = cmd(server, &["EXISTS", name]);
    assert_eq!(exists, 0, "{name}: the lock key was left behind");
    let holds: i64 = cmd(server, &["HLEN", name]);
    assert_eq!(holds, 0, "{name}: a hold was left behind");
    assert_eq!(
        keys(server),
        vec![counter_of(tag)],
        "{name}: keys written by a refused grant"
    );
    assert_eq!(
        counter(server, tag),
        counter_value,
        "{name}: counter changed"
    );
}

/// The server's message is the error's source: `{:#}` shows it.
fn assert_counter_error(e: &distlock::Error, tag: &str, what: &str) {
    let text = format!("{e:#}");
    assert!(
        text.contains(&format!("distlock: fencing counter {}", counter_of(tag))),
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
    let _: () = cmd(
        &server,
        &["SET", &counter_of("last"), "9223372036854775806"],
    );
    let g = client.lock("{last}").acquire().await.unwrap();
    assert_eq!(g.fencing_token().get(), i64::MAX as u128);
    g.release().await.unwrap();
    let max = i64::MAX.to_string();
    assert_eq!(counter(&server, "last"), max);

    let e = client.lock("{last}").try_acquire().await.unwrap_err();
    assert_counter_error(&e, "last", "plain");
    assert!(format!("{e:#}").contains("9223372036854775807"), "{e:#}");
    assert_nothing_written(&server, "{last}", "last", &max);

    let e = client
        .fair_lock("{last}-fair")
        .try_acquire_for(Duration::from_millis(200))
        .await
        .unwrap_err();
    assert_counter_error(&e, "last", "fair");
    assert_nothing_written(&server, "{last}-fair", "last", &max);

    let e = client.rw_lock("{last}-rw").try_write().await.unwrap_err();
    assert_counter_error(&e, "last", "write");
    assert_nothing_written(&server, "{last}-rw", "last", &max);

    let e = client.rw_lock("{last}-rw").try_read().await.unwrap_err();
    assert_counter_error(&e, "last", "read");
    assert_nothing_written(&server, "{last}-rw", "last", &max);
}

/// A counter that is not a decimal integer is refused with a clear error before anything is
/// written (before, `tonumber` turned it into nil and the script failed half-way).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_counter_holding_garbage_is_refused_before_anything_is_written() {
    let (server, client) = setup().await;
    let counter_key = counter_of("garbage");
    for garbage in ["abc", "-5", "1e3", " 12", "0x10", ""] {
        let _: () = cmd(&server, &["SET", &counter_key, garbage]);
        let e = client.lock("garbage").try_acquire().await.unwrap_err();
        assert_counter_error(&e, "garbage", garbage);
        assert!(format!("{e:#}").contains("not a decimal integer"), "{e:#}");
        assert_nothing_written(&server, "garbage", "garbage", garbage);
    }
    let _: () = cmd(&server, &["SET", &counter_key, "abc"]);
    let e = client.fair_lock("garbage").try_acquire().await.unwrap_err();
    assert_counter_error(&e, "garbage", "fair");
    assert_nothing_written(&server, "garbage", "garbage", "abc");
    let e = client.rw_lock("garbage").try_write().await.unwrap_err();
    assert_counter_error(&e, "garbage", "write");
    assert_nothing_written(&server, "garbage", "garbage", "abc");
    let e = client.rw_lock("garbage").try_read().await.unwrap_err();
    assert_counter_error(&e, "garbage", "read");
    assert_nothing_written(&server, "garbage", "garbage", "abc");
    // status() names the problem instead of failing to decode.
    let e = client.lock("garbage").status().await.unwrap_err();
    assert!(e.to_string().contains("not a decimal integer"), "{e}");

    // Leading zeros are a decimal integer all the same; a counter ahead of the clock is
    // counted on from exactly.
    let _: () = cmd(&server, &["SET", &counter_key, "000123456789012345678"]);
    let g = client.lock("garbage").acquire().await.unwrap();
    assert_eq!(g.fencing_token().get(), 123_456_789_012_345_679);
    g.release().await.unwrap();
}

/// A redis-server started with `--cluster-enabled yes` (no slots assigned: CLUSTER KEYSLOT
/// works without them).
fn cluster_node() -> RedisServer {
    RedisServer::options()
        .arg("--cluster-enabled")
        .arg("yes")
        .start()
}

/// Every slot to `server`.
fn add_every_slot(server: &RedisServer) {
    let args = distlock_test::testing::add_slots_command(0, 16383);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let _: () = cmd(server, &args);
}

/// `keys::key_slot` answers as the server's `CLUSTER KEYSLOT` for random keys full of hash
/// tags, empty tags `{}` and unmatched braces (and arbitrary bytes), and every slot tag puts
/// the fencing counter key in its slot.
#[test]
fn key_slot_matches_cluster_keyslot_of_a_real_server() {
    let server = cluster_node();
    let mut con = server.connection();
    let mut keys: Vec<Vec<u8>> = [
        "",
        "{",
        "}",
        "{}",
        "{}{a}",
        "{a}{b}",
        "a{}b{c}",
        "}{",
        "{{}}",
        "{{a}}",
        "a{b",
        "a}b{c}",
        "{user:1}:orders",
        "user:1",
        "foo{hash_tag}",
        "somekey",
        "λ{ü}",
    ]
    .iter()
    .map(|k| k.as_bytes().to_vec())
    .collect();
    let mut rng = rand::rng();
    let alphabet = b"{}{}{}ab:1x";
    for _ in 0..500 {
        let len = rng.random_range(0..24);
        keys.push(
            (0..len)
                .map(|_| {
                    if rng.random_range(0..8) == 0 {
                        rng.random::<u8>()
                    } else {
                        alphabet[rng.random_range(0..alphabet.len())]
                    }
                })
                .collect(),
        );
    }
    let mut pipe = redis::pipe();
    for k in &keys {
        pipe.cmd("CLUSTER").arg("KEYSLOT").arg(k.as_slice());
    }
    let slots: Vec<u16> = pipe.query(&mut con).unwrap();
    for (k, slot) in keys.iter().zip(slots) {
        assert_eq!(key_slot(k), slot, "key {:?}", String::from_utf8_lossy(k));
    }

    let mut pipe = redis::pipe();
    for slot in 0..SLOTS {
        pipe.cmd("CLUSTER").arg("KEYSLOT").arg(format!(
            "app:distlock:fencing-counter:{{{}}}",
            slot_tag(slot)
        ));
    }
    let slots: Vec<u16> = pipe.query(&mut con).unwrap();
    assert_eq!(slots, (0..SLOTS).collect::<Vec<_>>());
}

/// On a cluster node serving every slot, Redis refuses a script whose declared keys span
/// slots (`CROSSSLOT`; before per-slot counters, every grant was refused so). Every kind of
/// grant, re-entry, release and status runs there, with plain and hash-tagged names and a key
/// prefix, and each lock's counter is in its lock's slot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquire_scripts_touch_one_slot_on_a_cluster_node() {
    let server = cluster_node();
    add_every_slot(&server);
    let ok = eventually(Duration::from_secs(10), || {
        cmd::<String>(&server, &["CLUSTER", "INFO"]).contains("cluster_state:ok")
    })
    .await;
    assert!(ok, "the one-node cluster did not come up");
    for prefix in ["", "app:"] {
        let client = distlock::Client::builder()
            .url(server.url())
            .key_prefix(prefix)
            .build()
            .await
            .unwrap();
        for name in ["orders", "{user:1}:orders", "{user:1}:carts"] {
            let lock = client.lock(name).lease(Duration::from_secs(10));
            let counter = lock.fencing_counter_key();
            let g = lock.acquire().await.unwrap();
            let nested = g.reenter().await.unwrap();
            assert!(lock.try_acquire().await.unwrap().is_none(), "{name}");
            let status = lock.status().await.unwrap();
            assert_eq!(status.fencing_counter, g.fencing_token().get());
            nested.release().await.unwrap();
            g.release().await.unwrap();
            let slot: u16 = cmd(&server, &["CLUSTER", "KEYSLOT", lock.key()]);
            let counter_slot: u16 = cmd(&server, &["CLUSTER", "KEYSLOT", &counter]);
            assert_eq!(counter_slot, slot, "{counter}");

            let fair = client.fair_lock(name);
            let g = fair.acquire().await.unwrap();
            assert!(fair.try_acquire().await.unwrap().is_none());
            g.release().await.unwrap();

            let rw = client.rw_lock(format!("{name}:rw"));
            let w = rw.write().await.unwrap();
            assert!(rw.try_read().await.unwrap().is_none());
            w.release().await.unwrap();
            let r = rw.read().await.unwrap();
            assert!(rw.try_write().await.unwrap().is_none());
            r.release().await.unwrap();

            let leased = client.leased_semaphore(format!("{name}:sem"));
            leased.try_set_permits(1).await.unwrap();
            let p = leased
                .lease(Duration::from_secs(5))
                .acquire()
                .await
                .unwrap();
            p.extend(Duration::from_secs(5)).await.unwrap();
            assert_eq!(leased.permits().await.unwrap(), (0, 1));
            p.release().await.unwrap();
        }
    }
}

/// On a Cluster, a grant's token generation is the node's config epoch, read with `CLUSTER
/// INFO` only when the slot's counter was written under another replication ID (a promoted
/// replica or a migrated slot has one): the counter keeps the writer's `master_replid` after
/// the token, and `status` reads past it. A user without `+info` reads `CLUSTER INFO` on
/// every grant.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_grant_reads_the_config_epoch_once_per_replication_id() {
    let server = cluster_node();
    add_every_slot(&server);
    let bumped: String = cmd(&server, &["CLUSTER", "BUMPEPOCH"]);
    assert_eq!(bumped, "BUMPED 1");
    let ok = eventually(Duration::from_secs(10), || {
        cmd::<String>(&server, &["CLUSTER", "INFO"]).contains("cluster_state:ok")
    })
    .await;
    assert!(ok, "the one-node cluster did not come up");
    let info: String = cmd(&server, &["INFO", "replication"]);
    let replid = info
        .lines()
        .find_map(|l| l.strip_prefix("master_replid:"))
        .expect("master_replid")
        .trim()
        .to_string();
    let client = distlock::Client::builder()
        .url(format!("redis-cluster://127.0.0.1:{}", server.port()))
        .build()
        .await
        .unwrap();
    let lock = client.lock("epoch");
    let counter = lock.fencing_counter_key();

    let _: () = cmd(&server, &["CONFIG", "RESETSTAT"]);
    let mut last = grants_of_generation_1(&lock, 5, 0).await;
    let written: String = cmd(&server, &["GET", &counter]);
    assert_eq!(written, format!("1:{}@{replid}", last as u64), "{written}");
    assert_eq!(
        command_calls(&server, "cluster|info"),
        1,
        "one read for five grants"
    );
    assert_eq!(lock.status().await.unwrap().fencing_counter, last);

    // A counter written under another ID (by the master before a failover) does not spare the
    // read: its generation 0 is older than this node's epoch.
    let _: () = cmd(&server, &["SET", &counter, "0:5@0123456789abcdef"]);
    last = grants_of_generation_1(&lock, 1, last).await;
    assert_eq!(command_calls(&server, "cluster|info"), 2);

    // Without +info: CLUSTER INFO on every grant, and the counter without an ID.
    let _: () = cmd(
        &server,
        &[
            "ACL", "SETUSER", "noinfo", "on", ">pw", "~*", "&*", "+@all", "-info",
        ],
    );
    let limited = distlock::Client::builder()
        .url(format!(
            "redis-cluster://noinfo:pw@127.0.0.1:{}",
            server.port()
        ))
        .build()
        .await
        .unwrap();
    // Counted from after the connect (Redis 6.2 counts its CLUSTER SLOTS as `cluster` too).
    let before = command_calls(&server, "cluster|info");
    last = grants_of_generation_1(&limited.lock("epoch"), 3, last).await;
    let written: String = cmd(&server, &["GET", &counter]);
    assert_eq!(written, format!("1:{}", last as u64));
    assert_eq!(command_calls(&server, "cluster|info") - before, 3);
}

/// `n` grants and releases of `lock`, each with a token of generation 1 above `last` and the
/// one before; returns the last token.
async fn grants_of_generation_1(lock: &distlock::Lock, n: usize, mut last: u128) -> u128 {
    for _ in 0..n {
        let g = lock.acquire().await.unwrap();
        assert_eq!(g.fencing_token().generation(), 1);
        assert!(g.fencing_token().get() > last);
        last = g.fencing_token().get();
        g.release().await.unwrap();
    }
    last
}

/// Upgrading a deployment whose server-wide counter (the layout before per-slot counters)
/// ran far ahead of the clock: new slot counters start above it, so every name's next token
/// is larger than any token the old counter issued, and tokens keep rising per name in every
/// slot. The old counter is read, never written; a slot counter that exists already counts
/// on from itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_keep_rising_across_the_upgrade_from_one_counter_per_server() {
    const OLD: u128 = 1 << 60;
    let server = RedisServer::start();
    let legacy = legacy_fencing_counter("");
    let _: () = cmd(&server, &["SET", &legacy, &OLD.to_string()]);
    let client = client_for(&server).await;

    let names: Vec<String> = (0..8).map(|i| format!("upgrade:{i}")).collect();
    let slots: BTreeSet<u16> = names.iter().map(key_slot).collect();
    assert_eq!(slots.len(), names.len(), "the names share slots");
    // Before the slot's first grant, status reports the floor its counter starts above.
    assert_eq!(
        client
            .lock(&names[0])
            .status()
            .await
            .unwrap()
            .fencing_counter,
        OLD
    );

    let mut last: HashMap<&str, u128> = HashMap::new();
    for round in 0..5 {
        for name in &names {
            let token = if round % 2 == 0 {
                let g = client.lock(name).acquire().await.unwrap();
                let token = g.fencing_token().get();
                g.release().await.unwrap();
                token
            } else {
                let g = client.fair_lock(name.as_str()).acquire().await.unwrap();
                let token = g.fencing_token().get();
                g.release().await.unwrap();
                token
            };
            assert!(
                token > OLD,
                "{name}: token {token} not above the old counter"
            );
            let prev = last.insert(name, token).unwrap_or(0);
            assert!(token > prev, "{name}: token {token} after {prev}");
        }
    }
    for name in &names {
        let w = client
            .rw_lock(format!("{{{name}}}:rw"))
            .write()
            .await
            .unwrap();
        assert!(w.fencing_token().get() > last[name.as_str()], "{name}: rw");
        w.release().await.unwrap();
    }
    let old: u64 = cmd(&server, &["GET", &legacy]);
    assert_eq!(u128::from(old), OLD, "the old counter was written");

    // A client connected later starts new slots above the old counter too, and counts on in
    // the slots that exist.
    let later = client_for(&server).await;
    let g = later.lock("upgrade:other").acquire().await.unwrap();
    assert!(g.fencing_token().get() > OLD);
    g.release().await.unwrap();
    let g = later.lock(&names[0]).acquire().await.unwrap();
    assert!(g.fencing_token().get() > last[names[0].as_str()]);
    g.release().await.unwrap();

    // A slot counter that exists counts on from itself (it started above the floor when it
    // was created): the floor is for new counters only.
    let lock = client.lock("upgrade:existing");
    let _: () = cmd(&server, &["SET", &lock.fencing_counter_key(), "5"]);
    let g = lock.acquire().await.unwrap();
    assert!(
        g.fencing_token().get() < OLD,
        "the floor was applied to an existing counter"
    );
    g.release().await.unwrap();

    // A legacy counter at the last token makes grants in new slots fail as it did, leaving
    // nothing behind; one that is not a number is ignored.
    let _: () = cmd(&server, &["SET", &legacy, &i64::MAX.to_string()]);
    let at_end = client_for(&server).await;
    let lock = at_end.lock("upgrade:at-end");
    let e = lock.try_acquire().await.unwrap_err();
    assert!(
        format!("{e:#}").contains(&format!(
            "distlock: fencing counter {} is new",
            lock.fencing_counter_key()
        )),
        "{e:#}"
    );
    let exists: i64 = cmd(
        &server,
        &["EXISTS", lock.key(), &lock.fencing_counter_key()],
    );
    assert_eq!(exists, 0, "a refused grant left keys");
    let _: () = cmd(&server, &["SET", &legacy, "garbage"]);
    let ignoring = client_for(&server).await;
    let g = ignoring.lock("upgrade:at-end").acquire().await.unwrap();
    g.release().await.unwrap();
}

/// Tokens carry a generation (on Sentinel: the master's config epoch) ahead of the sequence:
/// a promoted master's first token is above every token of the old one even when the old
/// master's counter ran far ahead of the clock, and a client with an older view of the
/// generation counts on in the newer one.
#[test]
fn a_newer_generation_orders_above_any_older_token() {
    let server = RedisServer::start();
    let counter = fencing_counter("", "gen");
    let grant = |floor: &str, owner: &str| -> Vec<String> {
        let r: Vec<String> = redis::cmd("EVAL")
            .arg(source("lock_acquire.lua"))
            .arg(6)
            .arg("gen")
            .arg(&counter)
            .arg("gen")
            .arg(distlock::layout::redisson_fenced_token("gen"))
            .arg(distlock::layout::lock_queue("gen"))
            .arg(distlock::layout::lock_waiters("gen"))
            .arg(30000)
            .arg(owner)
            .arg("new")
            .arg(3000)
            .arg(floor)
            .arg("fencing;h;1")
            .arg("fifo")
            .arg("")
            .query(&mut server.connection())
            .unwrap();
        let _: () = cmd(&server, &["DEL", "gen"]);
        r
    };
    let value = |token: &str| -> u128 {
        match token.split_once(':') {
            Some((g, s)) => (g.parse::<u128>().unwrap() << 64) | s.parse::<u128>().unwrap(),
            None => token.parse().unwrap(),
        }
    };
    // The old master's counter, far ahead of the clock, in generation 1.
    let old = "1:9000000000000000000";
    let _: () = cmd(&server, &["SET", &counter, old]);
    let first = grant("2:0", "a:1");
    assert_eq!(first[0], "1");
    let token = &first[2];
    assert!(token.starts_with("2:"), "{token}");
    assert!(value(token) > value(old), "{token} not above {old}");
    assert_eq!(cmd::<String>(&server, &["GET", &counter]), *token);
    // A client that still believes in generation 1 gets a generation-2 token, above the last.
    let next = grant("1:0", "b:1");
    assert!(next[2].starts_with("2:"), "{}", next[2]);
    assert!(value(&next[2]) > value(token));
    // Generation 0 (one server) after generation 2: still above, in generation 2.
    let plain = grant("0", "c:1");
    assert!(value(&plain[2]) > value(&next[2]), "{}", plain[2]);
}
