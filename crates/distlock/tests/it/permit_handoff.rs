//! Direct hand-off of the leased semaphore: a release grants the permit to the first live
//! queued waiter itself; permits go to queued waiters in arrival order; dead, cancelled and
//! timed-out waiters never keep one.

use std::time::Duration;

use distlock::layout::{permit_queue, permit_waiters};
use distlock::{LeasedPermit, LeasedSemaphore};

use crate::redisson::{permit_member, query, zscore};
use crate::util::*;
use distlock::Lease;

fn queued(server: &RedisServer, name: &str) -> u64 {
    cmd(server, &["ZCARD", &permit_queue(name)])
}

/// Whether `name`'s hand-off queue holds `n` waiters within `limit`.
async fn queued_within(server: &RedisServer, name: &str, n: u64, limit: Duration) -> bool {
    eventually(limit, || queued(server, name) == n).await
}

/// `{<name>}:timeout`, the leases zset.
fn leases(name: &str) -> String {
    format!("{{{name}}}:timeout")
}

/// Give `sem` one permit and take it with `lease`.
async fn hold_the_only_permit(sem: &LeasedSemaphore, lease: Duration) -> LeasedPermit {
    assert!(sem.try_set_permits(1).await.unwrap());
    sem.lease(lease).acquire().await.unwrap()
}

/// A task that takes a permit of `sem` with a 20 s lease, waiting the default wait.
fn spawn_acquire(sem: &LeasedSemaphore) -> tokio::task::JoinHandle<LeasedPermit> {
    let sem = sem.clone();
    tokio::spawn(async move { sem.lease(Duration::from_secs(20)).acquire().await.unwrap() })
}

/// The release grants the permit to the waiter: the waiter's acquire returns on the grant
/// message and one confirming extension (the only scripts that ran), its permit is in the leases zset
/// under its id with the lease it asked for, and the queue is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_hands_the_permit_to_the_first_waiter() {
    let (server, client) = setup().await;
    // The lease (20 s) is shorter than the liveness (30 s): the hand-off's lease is not cut,
    // and no heartbeat attempt falls inside the measured window.
    let sem = client
        .leased_semaphore("direct")
        .liveness_timeout(Duration::from_secs(30));
    let held = hold_the_only_permit(&sem, Duration::from_secs(60)).await;
    let before = script_calls(&server);
    let waiter = spawn_acquire(&sem);
    assert!(queued_within(&server, "direct", 1, Duration::from_secs(2)).await);
    assert!(exists(&server, &permit_waiters("direct")));
    waiter_settled(&server, before).await;
    let _: () = cmd(&server, &["CONFIG", "RESETSTAT"]);
    let before = server_time_ms(&server);
    held.release().await.unwrap();
    let got = tokio::time::timeout(Duration::from_secs(2), waiter)
        .await
        .expect("the waiter was not handed the permit")
        .unwrap();
    // The hand-off message is only a claim: the waiter has the server confirm it (the
    // extension to its full lease).
    assert_eq!(
        script_calls(&server),
        2,
        "the release and the waiter's one confirming extension"
    );
    let expiry = zscore(&server, &leases("direct"), &permit_member(got.id()))
        .expect("the waiter's permit is not in the leases zset under its id");
    assert!(
        expiry >= before + 19_000 && expiry <= server_time_ms(&server) + 20_000,
        "the handed-off lease ends at {expiry}, not 20 s after the release ({before})"
    );
    assert_eq!(sem.permits().await.unwrap(), (0, 1));
    assert!(!exists(&server, &permit_queue("direct")));
    assert!(!exists(&server, &permit_waiters("direct")));
    got.release().await.unwrap();
    assert_eq!(sem.permits().await.unwrap(), (1, 0));
}

/// Permits go to queued waiters in arrival order: releases serve the waiters one after the
/// other, and a permit added some other way (`add_permits`, which hands nothing off itself)
/// goes to the queue's head, not to a one-attempt caller that came later.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permits_go_to_waiters_in_arrival_order() {
    let (server, client) = setup().await;
    let sem = client.leased_semaphore("order");
    let held = hold_the_only_permit(&sem, Duration::from_secs(20)).await;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    for i in 0..3u64 {
        let (sem, tx) = (sem.clone(), tx.clone());
        tokio::spawn(async move {
            let permit = sem.lease(Duration::from_secs(20)).acquire().await.unwrap();
            tx.send((i, permit)).unwrap();
        });
        assert!(queued_within(&server, "order", i + 1, Duration::from_secs(2)).await);
    }
    // A permit added while all three wait: the head gets it, not a later single attempt.
    sem.add_permits(1).await.unwrap();
    assert!(
        sem.lease(Duration::from_secs(20))
            .try_acquire()
            .await
            .unwrap()
            .is_none(),
        "a one-attempt caller took the permit ahead of the queue"
    );
    let (first, p0) = tokio::time::timeout(Duration::from_secs(2), rx.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(first, 0, "the added permit went past the queue's head");
    held.release().await.unwrap();
    let (second, p1) = tokio::time::timeout(Duration::from_secs(2), rx.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(second, 1);
    p0.release().await.unwrap();
    let (third, p2) = tokio::time::timeout(Duration::from_secs(2), rx.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(third, 2);
    assert_eq!(sem.permits().await.unwrap(), (0, 2));
    p1.release().await.unwrap();
    p2.release().await.unwrap();
    assert_eq!(sem.permits().await.unwrap(), (2, 0));
    assert!(!exists(&server, &permit_queue("order")));
}

/// With hand-off off, waiters neither queue nor let a queue go first (Redisson's behaviour).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_handoff_off_waiters_do_not_queue() {
    let (server, client) = setup().await;
    let sem = client.leased_semaphore("off").handoff(false);
    let held = hold_the_only_permit(&sem, Duration::from_secs(20)).await;
    let waiter = spawn_acquire(&sem);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !exists(&server, &permit_queue("off")),
        "an Off waiter queued"
    );
    held.release().await.unwrap();
    let got = tokio::time::timeout(Duration::from_secs(2), waiter)
        .await
        .unwrap()
        .unwrap();
    got.release().await.unwrap();
}

/// A waiter process killed while queued is passed over once its liveness deadline is past:
/// the waiter behind it is handed the permit at the release, and the dead entry is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_waiter_is_skipped_within_its_liveness() {
    let (server, client) = setup().await;
    let liveness = Duration::from_millis(900);
    let sem = client.leased_semaphore("dead").liveness_timeout(liveness);
    let held = hold_the_only_permit(&sem, Duration::from_secs(20)).await;
    let mut victim = family(&["leased-wait", &server.url(), "dead", "900"]);
    assert!(queued_within(&server, "dead", 1, Duration::from_secs(5)).await);
    let victim_id: Vec<Vec<u8>> = cmd(&server, &["ZRANGE", &permit_queue("dead"), "0", "0"]);
    let victim_id = victim_id[0].clone();
    let next = spawn_acquire(&sem);
    assert!(queued_within(&server, "dead", 2, Duration::from_secs(2)).await);
    victim.kill().unwrap();
    victim.wait().unwrap();
    // Past the victim's liveness deadline: the release passes it over.
    tokio::time::sleep(liveness + Duration::from_millis(200)).await;
    let released = tokio::time::Instant::now();
    held.release().await.unwrap();
    // The release passed the dead waiter over and handed the permit to the live one.
    assert_eq!(zscore(&server, &leases("dead"), &victim_id), None);
    let leased: u64 = cmd(&server, &["ZCARD", &leases("dead")]);
    assert_eq!(leased, 1, "the release handed the permit to nobody");
    let got = tokio::time::timeout(Duration::from_secs(5), next)
        .await
        .expect("the queue stalled behind the dead waiter")
        .unwrap();
    assert!(
        released.elapsed() < liveness,
        "waited {:?}",
        released.elapsed()
    );
    assert!(
        !exists(&server, &permit_waiters("dead")),
        "the dead waiter's entry stayed"
    );
    assert_eq!(
        sem.permits().await.unwrap(),
        (0, 1),
        "the dead waiter got a permit"
    );
    got.release().await.unwrap();
    assert_eq!(
        first_line(&mut victim),
        "",
        "the killed waiter never got a permit"
    );
}

/// A waiter that died right after its last attempt (its deadline still ahead) may be handed
/// the permit; the permit's lease then ends no later than that deadline, not 30 s on (the
/// lease it asked for), and the next waiter gets it then.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_permit_handed_to_a_dead_waiter_returns_by_its_liveness_deadline() {
    let (server, client) = setup().await;
    // 3 s: the victim renews its place every second, so its deadline is ahead by seconds
    // when it is killed, however late a loaded machine runs the steps below.
    let liveness = Duration::from_secs(3);
    let sem = client
        .leased_semaphore("stopped")
        .liveness_timeout(liveness);
    let held = hold_the_only_permit(&sem, Duration::from_secs(20)).await;
    let mut victim = family(&["leased-wait", &server.url(), "stopped", "3000"]);
    assert!(queued_within(&server, "stopped", 1, Duration::from_secs(5)).await);
    let victim_id: Vec<Vec<u8>> = cmd(&server, &["ZRANGE", &permit_queue("stopped"), "0", "0"]);
    let victim_id = victim_id[0].clone();
    let next = spawn_acquire(&sem);
    assert!(queued_within(&server, "stopped", 2, Duration::from_secs(2)).await);
    victim.kill().unwrap();
    victim.wait().unwrap();
    // Half a second on, what is left of its liveness is clearly less than a whole one (which
    // a hand-off that ignored the deadline would grant).
    tokio::time::sleep(Duration::from_millis(500)).await;
    // Its liveness deadline, as its last attempt set it in its entry (`<deadline ms>;…`).
    let waiters = permit_waiters("stopped");
    let entry: Vec<u8> = query(
        &server,
        "HGET the victim's entry",
        &[b"HGET", waiters.as_bytes(), &victim_id],
    );
    let (deadline, now) = deadline_ahead(&server, entry_deadline(&entry));
    let released = tokio::time::Instant::now();
    held.release().await.unwrap();
    let expiry = zscore(&server, &leases("stopped"), &victim_id)
        .expect("the release did not hand the permit to the first queued waiter");
    assert!(
        expiry > now && expiry <= deadline,
        "the dead waiter's lease ends {} ms on: past its liveness deadline ({} ms on)",
        expiry.saturating_sub(now),
        deadline - now
    );
    let got = tokio::time::timeout(Duration::from_secs(10), next)
        .await
        .expect("the next waiter never got the permit")
        .unwrap();
    // The dead waiter's lease (at most what was left of its liveness), then the next
    // waiter's recheck (a third of its liveness): about 3 s at most, bounded loosely.
    let waited = released.elapsed();
    assert!(waited < liveness * 2, "waited {waited:?}");
    assert_eq!(zscore(&server, &leases("stopped"), &victim_id), None);
    got.release().await.unwrap();
}

/// A waiter whose acquire is cancelled around the release never keeps a permit: whatever the
/// timing, the permit is available again afterwards and the queue is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_waiter_leaves_no_permit() {
    let (server, client) = setup().await;
    let sem = client.leased_semaphore("cancel");
    assert!(sem.try_set_permits(1).await.unwrap());
    for round in 0..100u64 {
        let held = sem.lease(Duration::from_secs(20)).acquire().await.unwrap();
        let waiter = spawn_acquire(&sem);
        assert!(
            queued_within(&server, "cancel", 1, Duration::from_secs(2)).await,
            "round {round}: the waiter did not queue"
        );
        let release = async move { held.release().await.unwrap() };
        cancel_around_release(round, &waiter, release)
            .await
            .await
            .unwrap();
        if let Ok(permit) = waiter.await {
            permit.release().await.unwrap();
        }
        assert!(
            eventually(Duration::from_secs(2), || {
                let available: Option<i64> = cmd(&server, &["GET", "cancel"]);
                available == Some(1) && !exists(&server, &leases("cancel"))
            })
            .await,
            "round {round}: a permit stayed with a cancelled waiter"
        );
        assert!(!exists(&server, &permit_queue("cancel")), "round {round}");
    }
}

/// A waiter whose wait ends while the permit is being handed to it either returns the permit
/// or gives it back: the permit never stays with nobody.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timed_out_waiter_takes_or_gives_back_a_racing_hand_off() {
    let (server, client) = setup().await;
    let sem = client.leased_semaphore("deadline");
    assert!(sem.try_set_permits(1).await.unwrap());
    let mut taken = 0;
    for round in 0..60u64 {
        let held = sem.lease(Duration::from_secs(20)).acquire().await.unwrap();
        let wait = Duration::from_millis(150);
        let waiter = {
            let sem = sem.clone();
            tokio::spawn(async move {
                sem.lease(Duration::from_secs(20))
                    .try_acquire_for(wait)
                    .await
                    .unwrap()
            })
        };
        assert!(queued_within(&server, "deadline", 1, Duration::from_secs(2)).await);
        // Release within a few ms of the waiter's deadline.
        tokio::time::sleep(wait - Duration::from_millis(20) + Duration::from_micros(round * 600))
            .await;
        held.release().await.unwrap();
        if let Some(permit) = waiter.await.unwrap() {
            taken += 1;
            permit.release().await.unwrap();
        }
        assert!(
            eventually(Duration::from_secs(2), || {
                let available: Option<i64> = cmd(&server, &["GET", "deadline"]);
                available == Some(1)
            })
            .await,
            "round {round}: the permit stayed with a waiter that timed out"
        );
    }
    assert!(
        taken > 0,
        "no round raced the hand-off with the deadline's end"
    );
}

/// A hand-off whose lease the release cut to the waiter's liveness deadline (the lease asked
/// for is longer than what was left of it) is extended to the lease asked for before the
/// waiter's acquire returns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handed_off_lease_cut_to_the_liveness_is_extended_to_the_one_asked_for() {
    let (server, client) = setup().await;
    let sem = client
        .leased_semaphore("cut")
        .liveness_timeout(Duration::from_millis(600));
    let held = hold_the_only_permit(&sem, Duration::from_secs(20)).await;
    let waiter = spawn_acquire(&sem);
    assert!(queued_within(&server, "cut", 1, Duration::from_secs(2)).await);
    held.release().await.unwrap();
    let got = tokio::time::timeout(Duration::from_secs(2), waiter)
        .await
        .expect("the waiter was not handed the permit")
        .unwrap();
    let now = server_time_ms(&server);
    let expiry = zscore(&server, &leases("cut"), &permit_member(got.id())).unwrap();
    assert!(
        expiry >= now + 19_000,
        "the permit's lease ends {} ms on, not the 20 s asked for",
        expiry.saturating_sub(now)
    );
    let valid = got
        .valid_until()
        .saturating_duration_since(std::time::Instant::now());
    assert!(valid > Duration::from_secs(18), "valid for {valid:?} only");
    got.release().await.unwrap();
}

/// A hand-off message that no release published — any client allowed to `PUBLISH` on the
/// grant channels can send one, with the waiter's permit id read from the queue — is no
/// grant: the waiter asks the server (its confirming extension answers that the permit is
/// not held) and waits on; the only permit stays with its holder. After the holder's
/// release the waiter gets the permit for real.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_hand_off_message_is_no_permit() {
    let (server, client) = setup().await;
    let sem = client.leased_semaphore("forged");
    let held = hold_the_only_permit(&sem, Duration::from_secs(60)).await;
    let waiter = {
        let sem = sem.clone();
        tokio::spawn(async move { sem.try_acquire_for(Duration::from_secs(20)).await.unwrap() })
    };
    assert!(queued_within(&server, "forged", 1, Duration::from_secs(2)).await);
    // The queue's members are the 16-byte permit ids; the message names them in hex.
    let id: String = cmd::<Vec<Vec<u8>>>(&server, &["ZRANGE", &permit_queue("forged"), "0", "0"])
        .into_iter()
        .next()
        .expect("the waiter's entry")
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let channel = || -> Option<String> {
        cmd::<Vec<String>>(&server, &["PUBSUB", "CHANNELS", "distlock_permit_grant:*"])
            .into_iter()
            .next()
    };
    assert!(eventually(Duration::from_secs(2), || channel().is_some()).await);
    let receivers: i64 = cmd(
        &server,
        &[
            "PUBLISH",
            &channel().unwrap(),
            &format!("h;{};600000;{id}", server_time_ms(&server) + 600_000),
        ],
    );
    assert_eq!(
        receivers, 1,
        "the forged message reached the waiter's client"
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        !waiter.is_finished(),
        "the waiter took a forged hand-off message for a permit"
    );
    assert_eq!(
        sem.permits().await.unwrap(),
        (0, 1),
        "one permit, still held"
    );
    assert!(zscore(&server, &leases("forged"), &permit_member(held.id())).is_some());
    held.release().await.unwrap();
    let got = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .expect("the waiter never got the permit after the release")
        .unwrap()
        .expect("the waiter got the permit within its wait");
    assert!(zscore(&server, &leases("forged"), &permit_member(got.id())).is_some());
    got.release().await.unwrap();
}
