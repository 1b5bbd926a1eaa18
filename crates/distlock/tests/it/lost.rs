use std::time::Duration;

use crate::util::*;
use distlock::Lease;

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

/// A holder whose lock was taken over (force-unlocked, then granted to another owner) while
/// its own deadline is still ahead learns it at its next renewal: `lost()` fires, and its
/// renewal does not extend the new holder's lease. A renewal that succeeded whenever the key
/// existed would keep both "holding" — the new holder's lease extended by the old holder's
/// watchdog, the old holder never told.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewal_after_a_takeover_fires_lost_and_extends_nothing() {
    let server = RedisServer::start();
    let old = client_with_watchdog(&server, Duration::from_millis(1500)).await;
    let new = client_for(&server).await;
    for kind in ["lock", "read"] {
        let name = format!("taken-{kind}");
        let lost: Box<dyn std::any::Any + Send> = match kind {
            "lock" => Box::new(old.lock(name.as_str()).acquire().await.unwrap()),
            _ => Box::new(old.rw_lock(name.as_str()).read().await.unwrap()),
        };
        // Taken over: deleted by an operator, granted to another owner with a long lease.
        let _: i64 = cmd(&server, &["DEL", &name]);
        let lease = Duration::from_secs(20);
        let _holder: Box<dyn std::any::Any + Send> = match kind {
            "lock" => Box::new(
                new.lock(name.as_str())
                    .lease(lease)
                    .acquire()
                    .await
                    .unwrap(),
            ),
            _ => Box::new(
                new.rw_lock(name.as_str())
                    .lease(lease)
                    .write()
                    .await
                    .unwrap(),
            ),
        };
        let fired = match kind {
            "lock" => {
                let g = lost.downcast_ref::<distlock::LockGuard>().unwrap();
                assert!(!g.is_lost(), "its own deadline is still ahead");
                tokio::time::timeout(Duration::from_secs(3), g.lost()).await
            }
            _ => {
                let g = lost.downcast_ref::<distlock::RwLockReadGuard>().unwrap();
                assert!(!g.is_lost(), "its own deadline is still ahead");
                tokio::time::timeout(Duration::from_secs(3), g.lost()).await
            }
        };
        assert!(
            fired.is_ok(),
            "{kind}: the old holder's lost() did not fire within two renewal periods"
        );
        let pttl: i64 = cmd(&server, &["PTTL", &name]);
        assert!(
            pttl > 15_000,
            "{kind}: the new holder's 20 s lease was cut to {pttl} ms by the old holder's renewal"
        );
    }
}

/// Whether `client`'s notice channel is subscribed on some node of `deployment`, within 5 s
/// (the client subscribes in the background after it connects).
async fn listening(deployment: &Deployment, client: &distlock::Client) -> bool {
    let channel = distlock::layout::client_notice_channel(&client.id().to_string());
    eventually(Duration::from_secs(5), || {
        deployment.nodes().iter().any(|n| numsub(n, &channel) >= 1)
    })
    .await
}

/// A force unlock by another client fires the holder's lost signal at once, not at its
/// next renewal (10 s with the default 30 s watchdog lease) or the end of an explicit
/// lease: the plain, fair and read-write locks (a writer and a reader) and the job lock, on
/// every topology.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_force_unlock_fires_the_holders_lost_signal_at_once() {
    // Well under the first renewal (10 s) and the explicit lease (60 s), so only the notice
    // can fire it in time; slack for a loaded machine.
    let limit = Duration::from_secs(4);
    for topology in topologies() {
        let (deployment, holder) = setup_on(topology).await;
        let operator = deployment.client().await;
        assert!(
            listening(&deployment, &holder).await,
            "no notice subscription"
        );

        let guard = holder.lock("plain").acquire().await.unwrap();
        assert!(operator.lock("plain").force_unlock().await.unwrap());
        tokio::time::timeout(limit, guard.lost())
            .await
            .expect("plain lock: lost() did not fire after the force unlock");

        let guard = holder
            .lock("leased")
            .lease(Duration::from_secs(60))
            .acquire()
            .await
            .unwrap();
        assert!(operator.lock("leased").force_unlock().await.unwrap());
        tokio::time::timeout(limit, guard.lost())
            .await
            .expect("explicit lease: lost() did not fire after the force unlock");

        let guard = holder.fair_lock("fair").acquire().await.unwrap();
        assert!(operator.fair_lock("fair").force_unlock().await.unwrap());
        tokio::time::timeout(limit, guard.lost())
            .await
            .expect("fair lock: lost() did not fire after the force unlock");

        let guard = holder.rw_lock("rw").write().await.unwrap();
        assert!(operator.rw_lock("rw").force_unlock().await.unwrap());
        tokio::time::timeout(limit, guard.lost())
            .await
            .expect("write lock: lost() did not fire after the force unlock");

        let guard = holder.rw_lock("rw").read().await.unwrap();
        let other = holder.rw_lock("rw").read().await.unwrap();
        assert!(operator.rw_lock("rw").force_unlock().await.unwrap());
        tokio::time::timeout(limit, async { tokio::join!(guard.lost(), other.lost()) })
            .await
            .expect("read lock: lost() did not fire for both readers after the force unlock");

        let job = holder
            .job_lock("job")
            .at_most_for(Duration::from_secs(60))
            .try_acquire()
            .await
            .unwrap()
            .expect("job lock");
        // The guard hears on its client's notice channel (the value names the client),
        // which the client listens on already.
        let other = operator.job_lock("job");
        assert!(other.force_unlock().await.unwrap());
        assert!(!other.force_unlock().await.unwrap(), "deleted once");
        tokio::time::timeout(limit, job.lost())
            .await
            .expect("job lock: lost() did not fire after the force unlock");
        assert_eq!(
            job.release().await.unwrap_err().kind(),
            distlock::ErrorKind::NotHeld
        );

        // A notice names one hold: a lock of the same client on another name stays held.
        let kept = holder.lock("kept").acquire().await.unwrap();
        let gone = holder.lock("gone").acquire().await.unwrap();
        assert!(operator.lock("gone").force_unlock().await.unwrap());
        tokio::time::timeout(limit, gone.lost())
            .await
            .expect("gone");
        assert!(!kept.is_lost());
        kept.release().await.unwrap();
    }
}

/// A lost-lease notice is a claim, not proof: a well-formed `l;<len>;<field>;<key>` that no
/// force unlock sent (any client allowed to `PUBLISH` on the notice channels can send one),
/// with its length written plainly, as `+N` or as `0N`, does not fire the holder's `lost()`
/// while the server still has the hold, and the watchdog keeps renewing it. Nor does the
/// job lock's notice (`j;<len>;<the value the guard wrote>;<key>`) while the job lock still
/// holds that value.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_notice_the_server_does_not_confirm_fires_no_lost() {
    let server = RedisServer::start();
    let holder = client_with_watchdog(&server, Duration::from_secs(3)).await;
    let deployment = Deployment::Standalone(server);
    assert!(
        listening(&deployment, &holder).await,
        "no notice subscription"
    );
    let Deployment::Standalone(server) = &deployment else {
        unreachable!()
    };
    let guard = holder.lock("kept").acquire().await.unwrap();
    let field = guard.owner().as_str().to_string();
    let channel = distlock::layout::client_notice_channel(&holder.id().to_string());
    let len = field.len();
    for notice in [
        format!("l;{len};{field};kept"),
        format!("l;+{len};{field};kept"),
        format!("l;0{len};{field};kept"),
    ] {
        let _: i64 = cmd(server, &["PUBLISH", &channel, &notice]);
    }
    let job = holder
        .job_lock("job")
        .at_most_for(Duration::from_secs(60))
        .try_acquire()
        .await
        .unwrap()
        .expect("job lock");
    let value = job.value();
    let job_notice = format!("j;{};{value};{}", value.len(), job.key());
    let _: i64 = cmd(server, &["PUBLISH", &channel, &job_notice]);
    // Longer than a renewal period (1 s): the hold is renewed meanwhile.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(
        !guard.is_lost(),
        "a notice fired lost() while the server kept the hold"
    );
    assert!(guard.is_held().await.unwrap());
    assert!(
        !job.is_lost(),
        "a job notice fired lost() while the job lock held"
    );
    let pttl: i64 = cmd(server, &["PTTL", "kept"]);
    assert!(pttl > 1000, "the watchdog stopped renewing: pttl {pttl}");
    // The real thing still works: a force unlock's notice fires it.
    assert!(holder.lock("kept").force_unlock().await.unwrap());
    tokio::time::timeout(Duration::from_secs(4), guard.lost())
        .await
        .expect("lost() did not fire after the force unlock");
    job.release().await.unwrap();
}

/// An owner with non-ASCII characters is told of a force unlock at once too: the notice's
/// length counts bytes on both sides.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_non_ascii_owner_is_told_of_a_force_unlock() {
    let server = RedisServer::start();
    let holder = client_for(&server).await;
    let deployment = Deployment::Standalone(server);
    assert!(
        listening(&deployment, &holder).await,
        "no notice subscription"
    );
    let owner = distlock::Owner::parse(&format!("{}:zwölf-Jobs", holder.id())).unwrap();
    let guard = holder
        .lock("umlaut")
        .lease(Duration::from_secs(60))
        .acquire_as(&owner)
        .await
        .unwrap();
    let operator = deployment.client().await;
    assert!(operator.lock("umlaut").force_unlock().await.unwrap());
    tokio::time::timeout(Duration::from_secs(4), guard.lost())
        .await
        .expect("lost() did not fire for a non-ASCII owner after the force unlock");
}

/// Whatever verb learns that a hold is gone fires `lost()`: here `remaining`, after the key
/// was deleted by hand (no notice, an explicit lease that no watchdog renews).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remaining_that_finds_the_hold_gone_fires_lost() {
    let (server, client) = setup().await;
    let guard = client
        .lock("by-hand")
        .lease(Duration::from_secs(60))
        .acquire()
        .await
        .unwrap();
    let _: i64 = cmd(&server, &["DEL", "by-hand"]);
    assert_eq!(
        guard.remaining().await.unwrap_err().kind(),
        distlock::ErrorKind::NotHeld
    );
    assert!(
        guard.is_lost(),
        "remaining() found the hold gone but lost() did not fire"
    );
}
