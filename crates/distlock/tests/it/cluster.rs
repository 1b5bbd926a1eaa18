//! Redis Cluster: three masters with a replica each, all real processes.

use std::time::{Duration, Instant};

use distlock::Client;
use distlock_test::testing::wait_until;
use distlock_test::ClusterSet;

use crate::util::*;
use distlock::Lease;

/// Whether a waiter on `name` is subscribed to its wake channel on the master now serving
/// its slot, within 5 s (its client follows the slot after a failover).
async fn resubscribed(set: &ClusterSet, name: &str) -> bool {
    let channel = format!("redisson_lock__channel:{{{name}}}");
    if distlock_test::server_major_version() < 7 {
        // Classic pub/sub (Redis 6.2): the subscription lives on any node, and a cluster
        // forwards every PUBLISH to all of them; wait until a running master has it.
        return eventually(Duration::from_secs(5), || {
            set.masters().iter().any(|m| numsub(m, &channel) >= 1)
        })
        .await;
    }
    eventually(Duration::from_secs(5), || {
        numsub(set.node_for_key(name), &channel) >= 1
    })
    .await
}

async fn client_on(set: &ClusterSet) -> Client {
    Client::builder()
        .url(set.url())
        .build()
        .await
        .expect("connect to the cluster")
}

/// `status` and `force_unlock` route by key on a cluster.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_and_force_unlock_route_by_key() {
    let set = ClusterSet::start();
    let client = client_on(&set).await;
    for name in ["s-1", "s-2", "s-3"] {
        let lock = client.lock(name);
        let guard = lock.acquire().await.unwrap();
        let status = lock.status().await.unwrap();
        assert_eq!(status.holders.len(), 1, "{name}: {status:?}");
        assert_eq!(status.fencing_token, Some(guard.fencing_token()), "{name}");
        assert!(lock.force_unlock().await.unwrap(), "{name}");
        assert_eq!(cmd::<i64>(set.node_for_key(name), &["EXISTS", name]), 0);
        drop(guard);
    }
}

/// On a Cluster an uncontended lock runs the fast scripts alone, from its slot's first
/// grant (a new counter takes the node's config epoch) on: the fast acquire counts on in the
/// generation its node wrote, with tokens rising.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_uncontended_lock_sends_only_the_fast_scripts() {
    let set = ClusterSet::start();
    let client = client_on(&set).await;
    let name = "fast-cluster";
    let node = set.node_for_key(name);
    cmd::<()>(node, &["SCRIPT", "FLUSH"]);
    let mut last = 0;
    for _ in 0..3 {
        let guard = client.lock(name).acquire().await.unwrap();
        assert!(guard.fencing_token().get() > last);
        last = guard.fencing_token().get();
        guard.release().await.unwrap();
    }
    let files = [
        "lock_acquire_fast.lua",
        "lock_release_fast.lua",
        "lock_acquire.lua",
        "lock_release.lua",
    ];
    assert_eq!(cached(node, &files), [1, 1, 0, 0], "{files:?}");
}

/// The master serving the lock's slot is killed while the lock is held and another client
/// waits. After the cluster's failover the holder's release goes to the promoted replica,
/// the waiter is woken by it (not by the lease), and its token is above the holder's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_gets_the_lock_after_the_slots_master_fails() {
    let mut set = ClusterSet::start();
    let holder_client = client_on(&set).await;
    let waiter_client = client_on(&set).await;
    let name = "cluster-failover";
    let held = holder_client
        .lock(name)
        .lease(Duration::from_secs(30))
        .acquire()
        .await
        .unwrap();
    let token = held.fencing_token();
    let master_port = set.node_for_key(name).port();
    let replica = set.replica_of(master_port).expect("a replica");
    // A cluster replica answers reads only after READONLY (else it redirects).
    let mut on_replica = replica.connection();
    let _: () = redis::cmd("READONLY").query(&mut on_replica).unwrap();
    assert!(
        wait_until(Duration::from_secs(5), || redis::cmd("EXISTS")
            .arg(name)
            .query::<i64>(&mut on_replica)
            .unwrap()
            == 1),
        "the grant did not reach the replica"
    );
    let waiter = {
        let lock = waiter_client.lock(name);
        tokio::spawn(async move {
            let r = lock.try_acquire_for(Duration::from_secs(25)).await;
            (r, Instant::now())
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiter.is_finished());

    let killed_at = Instant::now();
    let old = set.kill_master_of_key(name);
    let new = tokio::task::block_in_place(|| set.wait_for_failover(old, Duration::from_secs(20)));
    let failed_over = killed_at.elapsed();
    assert_ne!(new, old);
    // The waiter's client follows the slot to the promoted replica and subscribes there.
    assert!(
        resubscribed(&set, name).await,
        "the waiter did not resubscribe on the promoted replica"
    );
    assert!(!waiter.is_finished(), "the waiter got a lock that is held");

    let releasing = Instant::now();
    held.release()
        .await
        .expect("release through the promoted replica");
    let released_at = Instant::now();
    let (got, granted_at) = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .expect("the waiter was not woken by the release")
        .unwrap();
    let got = got.unwrap().expect("the waiter got the lock");
    let woken = granted_at.saturating_duration_since(released_at);
    eprintln!(
        "cluster failover: kill -> new master {failed_over:?}; release took {:?} (its first \
         send meets the dead master); release -> waiter granted {woken:?}",
        released_at - releasing
    );
    // A wake-up, not the 30 s lease: typically 0.2-0.3 s here, bounded loosely for loaded
    // machines.
    assert!(
        woken < Duration::from_millis(1_500),
        "woken {woken:?} after the release"
    );
    assert!(
        got.fencing_token() > token,
        "tokens not ordered across the failover"
    );
    // The promoted replica's config epoch is above every epoch before it.
    assert!(
        got.fencing_token().generation() > token.generation(),
        "{} not of a newer generation than {}",
        got.fencing_token(),
        token
    );
    assert!(
        got.fencing_token().as_i64().unwrap() > token.as_i64().unwrap(),
        "64-bit tokens not ordered across the failover"
    );
    assert_eq!(cmd::<i64>(set.node_for_key(name), &["EXISTS", name]), 1);
    got.release().await.unwrap();
}

/// The slot of a held lock migrates to another master: the watchdog's renewals, an
/// extension and the release follow it (MOVED/ASK are resent after the slot map is rebuilt),
/// and the lock is never lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_lock_follows_its_slot_to_another_master() {
    let set = ClusterSet::start();
    // A 1.5 s lease renewed every 0.5 s: a renewal that does not follow the slot lets it lapse
    // within the 3.2 s watched below, and a loaded machine's slow slot-map refresh does not
    // (a 600 ms lease once lapsed on a loaded CI machine while the refresh ran).
    let client = Client::builder()
        .url(set.url())
        .watchdog_lease(Duration::from_millis(1_500))
        .build()
        .await
        .unwrap();
    let name = "migrating";
    let guard = client.lock(name).acquire().await.unwrap();
    let slot = set.key_slot(name);
    let from = set.node_for_key(name).port();
    let to = set
        .masters()
        .into_iter()
        .map(|m| m.port())
        .find(|p| *p != from)
        .expect("another master");
    // Move the slot, the fencing counter of that slot with it.
    tokio::task::block_in_place(|| set.migrate_slot(slot, to));
    assert_eq!(set.node_for_key(name).port(), to);
    tokio::time::sleep(Duration::from_millis(3_200)).await;
    assert!(!guard.is_lost(), "renewals did not follow the slot");
    assert!(cmd::<i64>(set.node_for_key(name), &["PTTL", name]) > 0);
    guard
        .extend(Duration::from_secs(5))
        .await
        .expect("extend on the new master");
    let token = guard.fencing_token();
    guard.release().await.expect("release on the new master");
    assert_eq!(cmd::<i64>(set.node_for_key(name), &["EXISTS", name]), 0);
    let next = client
        .lock(name)
        .try_acquire()
        .await
        .unwrap()
        .expect("free");
    assert!(
        next.fencing_token() > token,
        "the slot's counter moved with it"
    );
    next.release().await.unwrap();
}

/// A raw sharded subscriber on one node (RESP2: replies and messages are arrays).
fn sharded_listener(node: &distlock_test::RedisServer, channel: &str) -> redis::Connection {
    let mut con = node.connection();
    con.send_packed_command(&redis::cmd("SSUBSCRIBE").arg(channel).get_packed_command())
        .unwrap();
    let confirm: Vec<redis::Value> = redis::from_redis_value(con.recv_response().unwrap()).unwrap();
    assert_eq!(confirm.len(), 3, "SSUBSCRIBE confirmation {confirm:?}");
    con.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    con
}

/// On a Redis 7 cluster Redisson 3.22+ wakes waiters with `SPUBLISH` (sharded pub/sub): a
/// distlock waiter is woken by a Java client's unlock (its script, `SPUBLISH` as its publish
/// command), and a Java client's `SSUBSCRIBE` hears distlock's release.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sharded_wake_ups_reach_redisson_and_back() {
    let set = ClusterSet::start();
    let client = client_on(&set).await;
    let name = "interop-sharded";
    let channel = format!("redisson_lock__channel:{{{name}}}");
    let node = set.node_for_key(name);
    let java = "8c1b2f0e-1111-4222-8333-944455556666:1";
    let lock_src = include_str!("redisson/lock_lock.lua");
    let unlock_src = include_str!("redisson/lock_unlock.lua");
    let held: Option<i64> = redis::cmd("EVAL")
        .arg(lock_src)
        .arg(1)
        .arg(name)
        .arg(30_000)
        .arg(java)
        .query(&mut node.connection())
        .unwrap();
    assert_eq!(held, None, "the Java client took the lock");

    let waiter = {
        let lock = client.lock(name);
        tokio::spawn(async move { lock.try_acquire_for(Duration::from_secs(20)).await })
    };
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(!waiter.is_finished(), "granted while Java holds it");
    let released_at = Instant::now();
    let r: Option<i64> = redis::cmd("EVAL")
        .arg(unlock_src)
        .arg(3)
        .arg(name)
        .arg(&channel)
        .arg(format!(
            "redisson_unlock_latch:{{{name}}}:0123456789abcdef0123456789abcdef"
        ))
        .arg("0")
        .arg(30_000)
        .arg(java)
        .arg("SPUBLISH")
        .arg(16_000)
        .query(&mut node.connection())
        .unwrap();
    assert_eq!(r, Some(1), "the Java unlock released");
    let guard = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .expect("the distlock waiter was not woken by Redisson's SPUBLISH")
        .unwrap()
        .unwrap()
        .expect("granted");
    let woken = released_at.elapsed();
    assert!(woken < Duration::from_secs(1), "woken after {woken:?}");

    let mut java_waiter = tokio::task::block_in_place(|| sharded_listener(node, &channel));
    guard.release().await.unwrap();
    let message = tokio::task::block_in_place(|| java_waiter.recv_response())
        .expect("the Java subscriber heard no sharded message");
    let parts: Vec<Vec<u8>> = redis::from_redis_value(message).unwrap();
    assert_eq!(parts[0], b"smessage");
    assert_eq!(parts[1], channel.as_bytes());
    assert_eq!(parts[2], b"0", "Redisson's unlock message");
}

/// `CLUSTER FAILOVER` on the replica of the lock's slot: the old master, now a replica, drops
/// its sharded subscriptions itself (a server-sent `sunsubscribe`, which redis-rs's cluster
/// client would take for its own and never renew). The waiter's subscription moves to the
/// new master, so the holder's release wakes it at once, not after the 30 s lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_follows_a_manual_failover_of_its_slot() {
    let set = ClusterSet::start();
    let holder = client_on(&set).await;
    let waiting = client_on(&set).await;
    let name = "manual-failover";
    let held = holder
        .lock(name)
        .lease(Duration::from_secs(30))
        .acquire()
        .await
        .unwrap();
    let waiter = {
        let lock = waiting.lock(name);
        tokio::spawn(async move { lock.try_acquire_for(Duration::from_secs(25)).await })
    };
    tokio::time::sleep(Duration::from_millis(400)).await;
    let old = set.node_for_key(name).port();
    let replica = set.replica_of(old).expect("a replica").port();
    tokio::task::block_in_place(|| set.failover_replica(replica));
    assert_eq!(set.node_for_key(name).port(), replica);
    // The waiter's client sees the dropped subscription and subscribes on the new master.
    assert!(
        resubscribed(&set, name).await,
        "the waiter did not resubscribe on the new master"
    );
    assert!(!waiter.is_finished(), "the waiter got a lock that is held");
    let released_at = Instant::now();
    held.release().await.expect("release on the new master");
    let got = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .expect("the waiter was not woken: its subscription did not follow the failover")
        .unwrap()
        .unwrap()
        .expect("granted");
    let woken = released_at.elapsed();
    eprintln!("manual failover: release -> waiter granted {woken:?}");
    assert!(
        woken < Duration::from_millis(1_500),
        "woken after {woken:?}"
    );
    got.release().await.unwrap();
}

/// The scripts are flushed from the lock's master while another master is stopped (for
/// less than the node timeout, so the cluster still serves every slot). The `NOSCRIPT`
/// answer is followed by an `EVAL` on the lock's own master; redis-rs's recovery would send
/// `SCRIPT LOAD` to every node and wait for the stopped one until the command timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn noscript_is_recovered_while_another_master_is_down() {
    let set = ClusterSet::start();
    let client = Client::builder()
        .url(set.url())
        .command_timeout(Duration::from_secs(2))
        .build()
        .await
        .unwrap();
    let name = "noscript";
    let master = set.node_for_key(name);
    let stopped = set
        .masters()
        .into_iter()
        .find(|m| m.port() != master.port())
        .unwrap();
    let mut on_master = master.connection();
    stopped.pause();
    let _: () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query(&mut on_master)
        .unwrap();
    let started = Instant::now();
    let r = client.lock(name).try_acquire().await;
    let took = started.elapsed();
    stopped.resume();
    let guard = r.expect("acquire after SCRIPT FLUSH").expect("free");
    assert!(took < Duration::from_millis(500), "took {took:?}");
    guard.release().await.unwrap();
}

/// Grants on a Cluster are confirmed by a replica of the slot's master (`WAIT 1` on a
/// connection to that master set aside for grants): with the replica stopped, a grant is
/// given back and the call fails with `NotReplicated`; with `replica_acks(0)` it is granted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grants_wait_for_a_replica_of_the_slots_master() {
    let set = ClusterSet::start();
    let confirmed = Client::builder()
        .url(set.url())
        .replica_ack_timeout(Duration::from_millis(200))
        .build()
        .await
        .unwrap();
    let unconfirmed = Client::builder()
        .url(set.url())
        .replica_acks(0)
        .build()
        .await
        .unwrap();
    let name = "confirmed";
    // Warm both clients' slot maps and grant connections.
    confirmed
        .lock(name)
        .acquire()
        .await
        .unwrap()
        .release()
        .await
        .unwrap();
    unconfirmed
        .lock(name)
        .acquire()
        .await
        .unwrap()
        .release()
        .await
        .unwrap();

    let master = set.node_for_key(name).port();
    let replica = set.replica_of(master).expect("a replica");
    replica.pause();
    let started = Instant::now();
    let refused = confirmed.lock(name).try_acquire().await;
    let took = started.elapsed();
    let exists: i64 = cmd(set.node_for_key(name), &["EXISTS", name]);
    let granted = unconfirmed.lock(name).try_acquire().await;
    replica.resume();

    let e = refused.expect_err("granted without a replica's confirmation");
    assert_eq!(e.replication(), Some((0, 1)), "{e:#}");
    assert!(took < Duration::from_secs(2), "took {took:?}");
    assert_eq!(exists, 0, "the unconfirmed grant was not given back");
    let guard = granted
        .unwrap()
        .expect("replica_acks(0) grants unconfirmed");
    guard.release().await.unwrap();
}

/// Mid-migration: the lock's slot is `MIGRATING` on its master and `IMPORTING` on another,
/// and the lock key has already moved. The source answers `ASK`; the extension is sent to
/// the importing node after `ASKING` and succeeds at once (without following `ASK`, it would
/// be resent to the source until the migration ends). After the migration the release
/// succeeds on the new master.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_extension_follows_ask_during_a_slot_migration() {
    let set = ClusterSet::start();
    let client = client_on(&set).await;
    let name = "asked";
    let guard = client
        .lock(name)
        .lease(Duration::from_secs(30))
        .acquire()
        .await
        .unwrap();
    let slot = set.key_slot(name).to_string();
    let source = set.node_for_key(name);
    let target = set
        .masters()
        .into_iter()
        .find(|m| m.port() != source.port())
        .unwrap();
    let id = |n: &distlock_test::RedisServer| cmd::<String>(n, &["CLUSTER", "MYID"]);
    let (source_id, target_id) = (id(source), id(target));
    let _: () = cmd(
        target,
        &["CLUSTER", "SETSLOT", &slot, "IMPORTING", &source_id],
    );
    let _: () = cmd(
        source,
        &["CLUSTER", "SETSLOT", &slot, "MIGRATING", &target_id],
    );
    let port = target.port().to_string();
    let _: () = cmd(source, &["MIGRATE", "127.0.0.1", &port, name, "0", "5000"]);
    // The source redirects requests for the moved key.
    let asked = redis::cmd("EXISTS")
        .arg(name)
        .query::<i64>(&mut source.connection())
        .unwrap_err();
    assert_eq!(asked.code(), Some("ASK"), "{asked}");

    let started = Instant::now();
    guard
        .extend(Duration::from_secs(20))
        .await
        .expect("extend through ASK");
    let took = started.elapsed();
    assert!(took < Duration::from_millis(500), "took {took:?}");
    let mut on_target = target.connection();
    let _: () = redis::cmd("ASKING").query(&mut on_target).unwrap();
    let pttl: i64 = redis::cmd("PTTL").arg(name).query(&mut on_target).unwrap();
    assert!(
        pttl > 15_000,
        "the extension did not reach the importing node: {pttl}"
    );

    // Finish the migration: the slot's other keys (its fencing counter), then the owner.
    let rest: Vec<String> = cmd(source, &["CLUSTER", "GETKEYSINSLOT", &slot, "100"]);
    for key in &rest {
        let _: () = cmd(source, &["MIGRATE", "127.0.0.1", &port, key, "0", "5000"]);
    }
    let _: () = cmd(target, &["CLUSTER", "SETSLOT", &slot, "NODE", &target_id]);
    for master in set.masters() {
        let _: () = cmd(master, &["CLUSTER", "SETSLOT", &slot, "NODE", &target_id]);
    }
    guard.release().await.expect("release after the migration");
    assert_eq!(cmd::<i64>(set.node_for_key(name), &["EXISTS", name]), 0);
}

/// One master fails while waiters are subscribed on two masters: until the cluster promotes
/// its replica, the failed master's channels cannot be subscribed again — but the healthy
/// master's subscriptions stay, so a release there wakes its waiter at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_master_does_not_hold_up_wake_ups_on_the_others() {
    let mut set = ClusterSet::start();
    let holder = client_on(&set).await;
    let waiting = client_on(&set).await;
    let failing = "on-failing-master";
    let healthy_port = set
        .masters()
        .into_iter()
        .map(|m| m.port())
        .find(|p| *p != set.node_for_key(failing).port())
        .unwrap();
    let healthy = (0..)
        .map(|i| format!("on-healthy-master-{i}"))
        .find(|n| set.node_for_key(n).port() == healthy_port)
        .unwrap();
    let mut guards = Vec::new();
    let mut waiters = Vec::new();
    for name in [failing, healthy.as_str()] {
        guards.push(
            holder
                .lock(name)
                .lease(Duration::from_secs(30))
                .acquire()
                .await
                .unwrap(),
        );
        let lock = waiting.lock(name);
        waiters.push(tokio::spawn(async move {
            let r = lock.try_acquire_for(Duration::from_secs(20)).await;
            (r, Instant::now())
        }));
    }
    tokio::time::sleep(Duration::from_millis(400)).await;
    let killed = set.kill_master_of_key(failing);
    // Let the waiters' client see the closed connection and fail to resubscribe there.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let healthy_guard = guards.pop().unwrap();
    healthy_guard.release().await.unwrap();
    let released_at = Instant::now();
    assert!(
        set.node_for_key(failing).port() == killed,
        "the failover finished before the release: the test proves nothing"
    );
    let (got, granted_at) = tokio::time::timeout(Duration::from_secs(5), waiters.pop().unwrap())
        .await
        .expect("the healthy master's waiter was not woken")
        .unwrap();
    let woken = granted_at.saturating_duration_since(released_at);
    let got = got.unwrap().expect("granted");
    assert!(
        woken < Duration::from_millis(1_500),
        "woken after {woken:?}"
    );
    got.release().await.unwrap();
    drop(guards);
}

/// After `CLUSTER FAILOVER` the old master, now a replica, answers `MOVED` on the grant
/// connection set aside for it: nothing ran, so a waiting acquire rides it out and is granted
/// by the new master (it is not an outcome unknown).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_refused_by_a_demoted_master_is_sent_to_the_new_one() {
    let set = ClusterSet::start();
    let client = client_on(&set).await;
    let name = "demoted";
    let sem = client.semaphore(name);
    assert!(sem.try_set_permits(1).await.unwrap());
    // Warm the slot map and the grant connection to the master.
    sem.try_acquire()
        .await
        .unwrap()
        .expect("a permit")
        .release()
        .await
        .unwrap();
    let old = set.node_for_key(name).port();
    let replica = set.replica_of(old).expect("a replica").port();
    tokio::task::block_in_place(|| set.failover_replica(replica));
    let permit = sem
        .try_acquire_for(Duration::from_secs(5))
        .await
        .expect("ridden out")
        .expect("granted by the new master");
    assert_eq!(cmd::<String>(set.node_for_key(name), &["GET", name]), "0");
    permit.release().await.unwrap();
}

/// A process that starts while a master is down — the first seed of its URL, and the owner of
/// its lock's slot — connects through the other seeds and gets the lock once the slot's
/// replica is promoted, within its wait.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_started_while_a_seed_and_slot_owner_is_down_gets_the_lock() {
    let mut set = ClusterSet::start();
    // A name whose slot the first seed (node 0) serves.
    let first = set.nodes()[0].port();
    let name = (0..)
        .map(|i| format!("seed-down-{i}"))
        .find(|n| set.node_for_key(n).port() == first)
        .unwrap();
    let killed = set.kill_master_of_key(&name);
    assert_eq!(killed, first);
    let client = Client::builder()
        .url(set.url())
        .connect_timeout(Duration::from_secs(10))
        .build()
        .await
        .expect("connects through the other seeds");
    let guard = client
        .lock(name.as_str())
        .try_acquire_for(Duration::from_secs(20))
        .await
        .expect("the acquire waits through the failover")
        .expect("granted once the replica is promoted");
    let promoted = set.wait_for_failover(killed, Duration::from_secs(20));
    assert_ne!(promoted, killed);
    guard.release().await.unwrap();
}

/// A CA given for TLS servers (as `$SSL_CERT_FILE` gives the CLI one) does not turn a plain
/// `redis-cluster://` deployment's connections into TLS ones.
#[cfg(feature = "tls")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tls_ca_leaves_a_plain_cluster_plain() {
    let set = ClusterSet::start();
    // A CA certificate made here (the servers of the version matrix are built without TLS).
    let dir = std::env::temp_dir().join(format!("distlock-ca-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let status = std::process::Command::new("openssl")
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
        ])
        .args(["-subj", "/CN=distlock test CA", "-keyout"])
        .arg(dir.join("ca-key.pem"))
        .arg("-out")
        .arg(dir.join("ca.pem"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .expect("openssl is needed (sudo apt-get install openssl)");
    assert!(status.success(), "openssl req: {status}");
    let ca = std::fs::read(dir.join("ca.pem")).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let client = Client::builder()
        .url(set.url())
        .tls_ca_cert(ca)
        .connect_timeout(Duration::from_secs(5))
        .build()
        .await
        .expect("connects in plain TCP");
    client
        .lock("plain")
        .acquire()
        .await
        .unwrap()
        .release()
        .await
        .unwrap();
}
