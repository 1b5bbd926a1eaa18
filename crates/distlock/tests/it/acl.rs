//! Users restricted by the server's ACL (Redis 7): a script that cannot set the TTL must not
//! leave the grant behind, and a user without channel rights still gets its release done.

use std::time::Duration;

use distlock::{Client, ErrorKind};

use crate::util::*;
use distlock::Lease;

/// Make `user` an ACL user with password `pw` and the given rules ([`acl_user`]); a client
/// logged in as it.
async fn client_as(server: &RedisServer, user: &str, rules: &[&str]) -> Client {
    acl_user(server, user, rules);
    Client::builder()
        .url(format!("redis://{user}:pw@127.0.0.1:{}/", server.port()))
        .build()
        .await
        .expect("connect as the restricted user")
}

fn exists(server: &RedisServer, key: &str) -> i64 {
    cmd(server, &["EXISTS", key])
}

/// A user allowed everything but PEXPIRE: before, HSET ran, PEXPIRE raised NOPERM, and the
/// lock stayed with no expiry forever. Now the grant is refused with `NoPermission` and no
/// lock key is left, for every kind of lock; a re-entry refused the same way adds no hold.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquire_without_pexpire_is_refused_and_leaves_no_key() {
    let server = RedisServer::start();
    let restricted = client_as(&server, "nopexpire", &["~*", "&*", "+@all", "-pexpire"]).await;

    let e = restricted.lock("acl").try_acquire().await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NoPermission, "{e}");
    assert_eq!(exists(&server, "acl"), 0, "plain: the lock key was left");

    let e = restricted
        .fair_lock("acl-fair")
        .try_acquire()
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NoPermission, "{e}");
    assert_eq!(
        exists(&server, "acl-fair"),
        0,
        "fair: the lock key was left"
    );

    let e = restricted.rw_lock("acl-rw").try_write().await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NoPermission, "{e}");
    assert_eq!(exists(&server, "acl-rw"), 0, "write: the lock key was left");
    let e = restricted.rw_lock("acl-rw").try_read().await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NoPermission, "{e}");
    assert_eq!(exists(&server, "acl-rw"), 0, "read: the lock key was left");

    // Re-entry into a lock taken by an unrestricted user: PEXPIRE runs before the hold is
    // counted, so the refusal adds none.
    let full = client_for(&server).await;
    let lease = Duration::from_secs(30);
    let g = full.lock("acl-held").lease(lease).acquire().await.unwrap();
    let adopted = restricted
        .lock("acl-held")
        .lease(lease)
        .adopt(g.owner().clone())
        .await
        .unwrap();
    let e = adopted.reenter().await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NoPermission, "{e}");
    let holds: i64 = cmd(&server, &["HGET", "acl-held", g.owner().as_str()]);
    assert_eq!(holds, 1, "a refused re-entry added a hold");
    let _ = adopted.forget();
    g.release().await.unwrap();
    assert_eq!(exists(&server, "acl-held"), 0);
}

/// Every record set left on the server has a TTL (none for good).
fn record_sets_have_ttls(server: &RedisServer) -> usize {
    let sets: Vec<String> = cmd(server, &["KEYS", "distlock_*"]);
    for set in &sets {
        let ttl: i64 = cmd(server, &["PTTL", set]);
        assert!(ttl > 0, "{set} has no TTL ({ttl})");
    }
    sets.len()
}

/// Users on the rules older versions documented for the semaphore and the latch (no set
/// commands: their request records were string keys), and users allowed the set commands but
/// not PEXPIRE: a semaphore acquire, a release and a count-down are refused with
/// `NoPermission` and change nothing (the count stays, no record set is left without TTL).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn semaphore_and_latch_users_without_the_record_rights_change_nothing() {
    let server = RedisServer::start();
    let admin = client_for(&server).await;
    let users: [(&str, &str, &str); 4] = [
        (
            "old_semaphore",
            "semaphore",
            "+exists +get +set +decrby +incrby +publish",
        ),
        (
            "old_latch",
            "latch",
            "+exists +get +set +del +decr +publish",
        ),
        (
            "nopexpire_semaphore",
            "semaphore",
            "+exists +get +set +decrby +incrby +publish +sadd +srem +sismember +pttl",
        ),
        (
            "nopexpire_latch",
            "latch",
            "+exists +get +set +del +decr +publish +sadd +srem +sismember +smembers",
        ),
    ];
    for (user, kind, rules) in users {
        let mut all: Vec<&str> = COMMON_ACL.to_vec();
        all.push("&*");
        all.extend(rules.split_whitespace());
        let c = client_as(&server, user, &all).await;
        let name = format!("old-acl-{user}");
        let count = |server: &RedisServer| -> Option<String> { cmd(server, &["GET", &name]) };
        if kind == "semaphore" {
            assert!(admin
                .semaphore(name.as_str())
                .try_set_permits(2)
                .await
                .unwrap());
            let sem = c.semaphore(name.as_str());
            let e = sem.try_acquire().await.unwrap_err();
            assert_eq!(e.kind(), ErrorKind::NoPermission, "{user}: acquire: {e}");
            assert_eq!(count(&server).as_deref(), Some("2"), "{user}: acquire");
            let e = sem.add_permits(1).await.unwrap_err();
            assert_eq!(e.kind(), ErrorKind::NoPermission, "{user}: release: {e}");
            assert_eq!(count(&server).as_deref(), Some("2"), "{user}: release");
        } else {
            assert!(admin
                .count_down_latch(name.as_str())
                .try_set_count(2)
                .await
                .unwrap());
            let e = c
                .count_down_latch(name.as_str())
                .count_down()
                .await
                .unwrap_err();
            assert_eq!(e.kind(), ErrorKind::NoPermission, "{user}: count down: {e}");
            assert_eq!(count(&server).as_deref(), Some("2"), "{user}: count down");
        }
        assert_eq!(
            record_sets_have_ttls(&server),
            0,
            "{user}: a record set was left"
        );
    }
}

/// A user without channel rights (Redis 7 grants none by default: no `&*`) can still take
/// and release locks: the release's wake-up is best effort, and the release is reported
/// done instead of failing after the key was deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_without_channel_rights_is_reported_done() {
    let server = RedisServer::start();
    let restricted = client_as(&server, "nochannels", &["~*", "+@all"]).await;

    let g = restricted.lock("acl").acquire().await.unwrap();
    g.release().await.expect("plain release");
    assert_eq!(exists(&server, "acl"), 0);

    let rw = restricted.rw_lock("acl-rw");
    let w = rw.write().await.unwrap();
    w.release().await.expect("write release");
    let r = rw.read().await.unwrap();
    r.release().await.expect("read release");
    assert_eq!(exists(&server, "acl-rw"), 0);

    // A fair release publishes only to a queued waiter: queue one (an unrestricted client),
    // so the release has someone to wake. It still gets the lock, by re-checking.
    let fair = restricted.fair_lock("acl-fair");
    let g = fair.acquire().await.unwrap();
    let full = client_for(&server).await;
    let waiter = full.fair_lock("acl-fair");
    let waiting =
        tokio::spawn(async move { waiter.try_acquire_for(Duration::from_secs(20)).await });
    assert!(
        eventually(Duration::from_secs(5), || {
            cmd::<i64>(&server, &["LLEN", "redisson_lock_queue:{acl-fair}"]) == 1
        })
        .await,
        "the waiter did not queue"
    );
    g.release().await.expect("fair release");
    let next = waiting
        .await
        .unwrap()
        .unwrap()
        .expect("the waiter got the lock");
    next.release().await.unwrap();
    assert_eq!(exists(&server, "acl-fair"), 0);
}

/// Connections the server has accepted so far.
fn connections_received(server: &RedisServer) -> u64 {
    let info: String = cmd(server, &["INFO", "stats"]);
    info.lines()
        .find_map(|l| l.strip_prefix("total_connections_received:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("total_connections_received in INFO stats")
}

/// A Redis 7 user made the usual way (`~* +@all`, no channel rights): its waiter cannot
/// subscribe, so it polls — it acquires promptly after the release (not at the holder's
/// lease end) — and the subscription connection does not reconnect in a loop.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_without_channel_rights_poll_and_do_not_reconnect_in_a_loop() {
    let server = RedisServer::start();
    let holder_client = client_as(&server, "nochan", &["~*", "+@all"]).await;
    let waiter_client = client_as(&server, "nochan", &["~*", "+@all"]).await;
    let holder = holder_client.lock("poll").acquire().await.unwrap();
    let before = connections_received(&server);
    let waiter = tokio::spawn(async move {
        let g = waiter_client
            .lock("poll")
            .try_acquire_for(Duration::from_secs(20))
            .await;
        (tokio::time::Instant::now(), g)
    });
    // Observation window: the waiter polls for 2 s; a reconnect loop would show in it.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let during = connections_received(&server) - before;
    let released = tokio::time::Instant::now();
    holder
        .release()
        .await
        .expect("a release without channel rights is done");
    let (at, g) = waiter.await.unwrap();
    let g = g.unwrap().expect("the waiter acquired");
    let after = at.duration_since(released);
    eprintln!("no channel rights: waiter acquired {after:?} after the release; {during} new connections while waiting 2 s");
    assert!(after < Duration::from_millis(600), "{after:?}");
    assert!(during <= 1, "{during} connections in 2 s: reconnect loop");
    g.release().await.unwrap();
}

/// The minimal ACL of each primitive, as the README documents it: every user below can run
/// its primitive's full cycle (contend, wait with wake-ups, release) and nothing more is
/// needed. Common to all: `+ping +evalsha +script|load +subscribe +unsubscribe ~*` and the
/// README's channel patterns (`documented_channels`).
pub const MINIMAL_ACL: &[(&str, &str)] = &[
    (
        "lock",
        "+exists +get +set +del +hexists +hget +hmget +hset +hincrby +hdel +pexpire +pttl +publish \
         +time +zadd +zrem +zscore +zrange",
    ),
    (
        "fair_lock",
        "+exists +get +set +del +hexists +hget +hmget +hset +hincrby +hdel +pexpire +pttl \
         +publish +time +lindex +lpop +rpush +lrem +lrange +zadd +zrem +zscore +zrange +zincrby",
    ),
    (
        "rw_lock",
        "+exists +get +set +del +hexists +hget +hmget +hset +hincrby +hdel +hkeys +hlen +pexpire \
         +pttl +publish +time +zadd +zrem +zscore +zrange +zcard +zremrangebyscore",
    ),
    ("semaphore", "+exists +get +set +decrby +incrby +publish +sadd +srem +sismember +pexpire +pttl"),
    (
        "leased_semaphore",
        "+exists +get +set +del +decrby +incrby +publish +time +pttl +pexpire +zadd +zrem \
         +zscore +zcard +zrange +zremrangebyscore +hget +hset +hdel +sadd +srem",
    ),
    ("count_down_latch", "+exists +get +set +del +decr +publish +sadd +srem +sismember +smembers +pexpire"),
    ("job_lock", "+get +set +del +type +pexpire +pttl"),
];

/// Acquire, re-enter, extend, check, wait on the other side (until `$waiting()` says the
/// waiter waits), release (plain and fair locks).
macro_rules! lock_cycle {
    ($la:expr, $lb:expr, $wait:expr, $waiting:expr, $released:expr) => {{
        let (la, lb) = ($la, $lb);
        let g = la.acquire().await.expect(&$released("acquire"));
        let inner = g.reenter().await.expect(&$released("reenter"));
        g.extend(Duration::from_secs(20)).await.unwrap();
        assert!(g.is_held().await.unwrap());
        let wait = $wait;
        let waiter = tokio::spawn(async move {
            let r = lb.try_acquire_for(wait).await;
            (tokio::time::Instant::now(), r)
        });
        assert!(
            eventually(Duration::from_secs(2), $waiting).await,
            "{}",
            $released("the waiter did not start waiting")
        );
        inner.release().await.expect(&$released("inner release"));
        let released_at = tokio::time::Instant::now();
        g.release().await.expect(&$released("release"));
        let (at, w) = waiter.await.unwrap();
        let w = w.expect(&$released("wait"));
        // Woken by the release's message: the waiter is subscribed (`$waiting`), so it
        // attempts again only on a message or at its recheck (a third of its 5 s liveness),
        // or at the lease's end (20 s); a second leaves slack for a loaded machine.
        let took = at.duration_since(released_at);
        assert!(
            took < Duration::from_secs(1),
            "{}: {took:?}",
            $released("wake-up")
        );
        w.expect(&$released("waiter acquired"))
            .release()
            .await
            .unwrap();
    }};
}

/// Wait until the waiter waits (`$waiting` polls it), release permit `p`, and check that
/// the waiter got one and can give it back (plain and leased semaphores).
macro_rules! permit_handoff {
    ($p:expr, $waiter:expr, $waiting:expr, $released:expr) => {{
        assert!(
            eventually(Duration::from_secs(2), $waiting).await,
            "{}",
            $released("the waiter did not start waiting")
        );
        $p.release().await.expect(&$released("release"));
        let w = $waiter.await.unwrap().expect(&$released("wait"));
        w.expect(&$released("waiter acquired"))
            .release()
            .await
            .unwrap();
    }};
}

const COMMON_ACL: &[&str] = &[
    "~*",
    "+ping",
    "+evalsha",
    "+script|load",
    "+subscribe",
    "+unsubscribe",
];

/// The channel patterns the README's "Minimal ACL" section lists (every backticked `&…`
/// but `&*`), so that the users below have exactly the documented channel rights.
fn documented_channels() -> Vec<String> {
    let readme = include_str!("../../../../README.md");
    let start = readme
        .find("### Minimal ACL")
        .expect("README: Minimal ACL section");
    let section = &readme[start..];
    let section = &section[..section.find("\n## ").unwrap_or(section.len())];
    let channels: Vec<String> = section
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|t| t.starts_with('&') && *t != "&*" && !t.contains(' ') && !t.contains('{'))
        .map(str::to_string)
        .collect();
    for wanted in [
        "&distlock_client:*",
        "&distlock_job:*",
        "&distlock_lock_grant:*",
    ] {
        assert!(
            channels.iter().any(|c| c == wanted),
            "README lacks {wanted}: {channels:?}"
        );
    }
    channels
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(clippy::expect_fun_call)] // each message names the primitive and the step
async fn the_documented_minimal_acl_suffices_for_every_primitive() {
    let server = RedisServer::start();
    let channels = documented_channels();
    // A force unlock is an operator's (the CLI's `unlock --force` rights): the holder with
    // the minimal ACL must hear of it at once, not at its next renewal (10 s) or check.
    let operator = client_for(&server).await;
    let told = Duration::from_secs(3);
    for (primitive, rules) in MINIMAL_ACL {
        let user = format!("min_{primitive}");
        let mut all: Vec<&str> = COMMON_ACL.to_vec();
        all.extend(channels.iter().map(String::as_str));
        all.extend(rules.split_whitespace());
        let a = client_as(&server, &user, &all).await;
        let b = client_as(&server, &user, &all).await;
        let name = format!("acl:{primitive}");
        let wait = Duration::from_secs(5);
        let released = |what: &str| format!("{primitive}: {what}");
        // A waiter waits once it is subscribed to the primitive's wake channel.
        let subscribed = |channel: String| {
            let server = &server;
            move || numsub(server, &channel) == 1
        };
        match *primitive {
            "lock" => {
                lock_cycle!(
                    a.lock(name.as_str()),
                    b.lock(name.as_str()),
                    wait,
                    subscribed(format!("redisson_lock__channel:{{{name}}}")),
                    released
                );
                let g = a.lock(name.as_str()).acquire().await.unwrap();
                assert!(operator.lock(name.as_str()).force_unlock().await.unwrap());
                tokio::time::timeout(told, g.lost())
                    .await
                    .expect(&released("the force-unlocked holder was not told"));
            }
            "fair_lock" => {
                // Queued, and subscribed to its own channel `…:{name}:<owner>`.
                let queued = || {
                    let queue = format!("redisson_lock_queue:{{{name}}}");
                    let pattern = format!("redisson_lock__channel:{{{name}}}:*");
                    cmd::<i64>(&server, &["LLEN", &queue]) == 1
                        && cmd::<Vec<String>>(&server, &["PUBSUB", "CHANNELS", &pattern]).len() == 1
                };
                lock_cycle!(
                    a.fair_lock(name.as_str()),
                    b.fair_lock(name.as_str()),
                    wait,
                    queued,
                    released
                );
                let g = a.fair_lock(name.as_str()).acquire().await.unwrap();
                assert!(operator
                    .fair_lock(name.as_str())
                    .force_unlock()
                    .await
                    .unwrap());
                tokio::time::timeout(told, g.lost())
                    .await
                    .expect(&released("the force-unlocked holder was not told"));
            }
            "rw_lock" => {
                let (ra, rb) = (a.rw_lock(name.as_str()), b.rw_lock(name.as_str()));
                let r = ra.read().await.expect(&released("read"));
                let writer = tokio::spawn(async move { rb.try_write_for(wait).await });
                let waiting = subscribed(format!("redisson_rwlock:{{{name}}}"));
                assert!(
                    eventually(Duration::from_secs(2), waiting).await,
                    "{}",
                    released("the writer did not start waiting")
                );
                r.release().await.expect(&released("read release"));
                let w = writer.await.unwrap().expect(&released("write wait"));
                w.expect(&released("writer acquired"))
                    .release()
                    .await
                    .unwrap();
                let g = a.rw_lock(name.as_str()).write().await.unwrap();
                assert!(operator
                    .rw_lock(name.as_str())
                    .force_unlock()
                    .await
                    .unwrap());
                tokio::time::timeout(told, g.lost())
                    .await
                    .expect(&released("the force-unlocked writer was not told"));
            }
            "semaphore" => {
                let (sa, sb) = (a.semaphore(name.as_str()), b.semaphore(name.as_str()));
                assert!(sa.try_set_permits(1).await.unwrap());
                let p = sa.acquire().await.expect(&released("acquire"));
                let waiter = tokio::spawn(async move { sb.try_acquire_for(wait).await });
                permit_handoff!(
                    p,
                    waiter,
                    subscribed(format!("redisson_sc:{{{name}}}")),
                    released
                );
            }
            "leased_semaphore" => {
                let (sa, sb) = (
                    a.leased_semaphore(name.as_str()),
                    b.leased_semaphore(name.as_str()),
                );
                assert!(sa.try_set_permits(1).await.unwrap());
                let lease = Duration::from_secs(20);
                let p = sa.lease(lease).acquire().await.expect(&released("acquire"));
                p.extend(lease).await.expect(&released("extend"));
                let waiter =
                    tokio::spawn(async move { sb.lease(lease).try_acquire_for(wait).await });
                permit_handoff!(
                    p,
                    waiter,
                    subscribed(format!("redisson_sc:{{{name}}}")),
                    released
                );
                // add_permits gives permits through the semaphore's release script, whose
                // request record is a set member (+sadd, +srem).
                let sc = a.leased_semaphore(name.as_str());
                let before = sc.available_permits().await.unwrap();
                let after = sc.add_permits(1).await.expect(&released("add permits"));
                assert_eq!(after, before + 1, "{}", released("add permits"));
            }
            "count_down_latch" => {
                let (la, lb) = (
                    a.count_down_latch(name.as_str()),
                    b.count_down_latch(name.as_str()),
                );
                assert!(la.try_set_count(2).await.unwrap());
                let waiter = tokio::spawn(async move { lb.wait_for(wait).await });
                let waiting = subscribed(format!("redisson_countdownlatch__channel__{{{name}}}"));
                assert!(
                    eventually(Duration::from_secs(2), waiting).await,
                    "{}",
                    released("the waiter did not start waiting")
                );
                la.count_down().await.expect(&released("count down"));
                la.count_down().await.expect(&released("count down"));
                assert!(waiter.await.unwrap().expect(&released("wait")));
            }
            "job_lock" => {
                let ja = a
                    .job_lock(name.as_str())
                    .at_most_for(Duration::from_secs(20));
                let jb = b
                    .job_lock(name.as_str())
                    .at_most_for(Duration::from_secs(20));
                let g = ja
                    .try_acquire()
                    .await
                    .expect(&released("lock"))
                    .expect("free");
                assert!(jb.try_acquire().await.expect(&released("second")).is_none());
                g.extend(Duration::from_secs(20))
                    .await
                    .expect(&released("extend"));
                g.release().await.expect(&released("release"));
                jb.try_acquire()
                    .await
                    .expect(&released("relock"))
                    .expect("free again")
                    .release()
                    .await
                    .unwrap();
                let g = ja.try_acquire().await.unwrap().expect("free");
                // A job lock's holder hears a force unlock on its client's notice channel.
                let channel = distlock::layout::client_notice_channel(&a.id().to_string());
                assert!(
                    eventually(Duration::from_secs(2), || numsub(&server, &channel) == 1).await,
                    "{}",
                    released("the job holder does not listen for notices")
                );
                assert!(operator
                    .job_lock(name.as_str())
                    .force_unlock()
                    .await
                    .unwrap());
                tokio::time::timeout(told, g.lost())
                    .await
                    .expect(&released("the force-unlocked job holder was not told"));
            }
            other => panic!("no scenario for {other}"),
        }
    }
}

/// A job holder whose ACL denies its client's notice channel still learns of a force unlock
/// within a third of `at_most_for` (its watchdog check finds the value gone), where before it
/// ran to the end of its job never told; another instance could run the job meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_holder_without_its_notice_channel_learns_of_a_force_unlock() {
    let server = RedisServer::start();
    let rules = ["~*", "&redisson_lock__channel:*", "+@all"];
    let holder = client_as(&server, "nonotice", &rules).await;
    let at_most = Duration::from_secs(3);
    let guard = holder
        .job_lock("deaf-job")
        .at_most_for(at_most)
        .try_acquire()
        .await
        .unwrap()
        .expect("free");
    let operator = client_for(&server).await;
    let started = tokio::time::Instant::now();
    assert!(operator.job_lock("deaf-job").force_unlock().await.unwrap());
    tokio::time::timeout(at_most / 3 + Duration::from_millis(700), guard.lost())
        .await
        .expect("the job holder was not told within a third of at_most_for");
    eprintln!("told after {:?}", started.elapsed());
}
