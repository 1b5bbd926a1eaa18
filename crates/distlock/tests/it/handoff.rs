//! Direct hand-off of the plain lock: a release grants the lock to the first live queued
//! waiter itself; dead, cancelled and timed-out waiters never keep it.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use distlock::layout::{lock_queue, lock_waiters};
use distlock::{Handoff, Lock, LockGuard};

use crate::util::*;
use distlock::{Lease, Release};

fn queued(server: &RedisServer, name: &str) -> Vec<String> {
    cmd(server, &["ZRANGE", &lock_queue(name), "0", "-1"])
}

/// Whether `name`'s hand-off queue holds `n` waiters within `limit`.
async fn queued_within(server: &RedisServer, name: &str, n: usize, limit: Duration) -> bool {
    eventually(limit, || queued(server, name).len() == n).await
}

/// A task that acquires `lock` (waiting the default wait) and returns the guard.
fn spawn_acquire(lock: &Lock) -> tokio::task::JoinHandle<LockGuard> {
    let lock = lock.clone();
    tokio::spawn(async move { lock.acquire().await.unwrap() })
}

/// Send `sig` (`-STOP`, `-CONT`) to `child` with kill(1).
fn signal(child: &std::process::Child, sig: &str) {
    let pid = child.id().to_string();
    let status = std::process::Command::new("kill")
        .args([sig, &pid])
        .status()
        .unwrap();
    assert!(status.success(), "kill {sig} {pid}");
}

/// The release grants the lock to the waiter: the waiter's acquire returns on the grant
/// message and one confirming attempt, with a token above the releaser's, and the lock hash
/// names it as the holder.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_hands_the_lock_to_the_first_waiter() {
    let (server, client) = setup().await;
    // The waiter's lease is its initial lease, and its lease and
    // liveness are long (it re-attempts every third of the shorter), so no heartbeat attempt
    // falls inside the measured window.
    let holder_lock = client.lock("direct").lease(Duration::from_secs(60));
    let waiter_lock = client
        .lock("direct")
        .lease(Duration::from_secs(20))
        .liveness_timeout(Duration::from_secs(30));
    let held = holder_lock.acquire().await.unwrap();
    let got = handed_to_the_first_waiter(
        &server,
        held,
        &waiter_lock,
        || queued(&server, "direct").len(),
        &[],
        &[&lock_waiters("direct")],
        // The holder's handle met no contention: its release tries the fast path, which
        // leaves a queued lock to the full release.
        2,
    )
    .await;
    got.release().await.unwrap();
    assert!(!exists(&server, "direct"));
}

/// The body of the plain and fair "release hands the lock to the first waiter" tests. A
/// waiter of `waiter_lock` queues behind `held` (`queued` counts the queue; the keys
/// `while_queued` exist then), and `held` is released. The waiter's acquire returns on the
/// grant message and one confirming attempt (only the release's `release_scripts` scripts
/// and that attempt ran after `CONFIG RESETSTAT`: a plain lock's fast path, which leaves a
/// queued lock to the full release, and the full release), with
/// a token above the releaser's, its hold in the lock hash, a PTTL of at most 20 s (the
/// waiter's lease must be 20 s, with a liveness longer still, so that no heartbeat attempt
/// falls inside the measured window), an empty queue and the keys `gone_after` gone.
/// Returns the waiter's guard.
pub(crate) async fn handed_to_the_first_waiter<L: Queued>(
    server: &RedisServer,
    held: L::Guard,
    waiter_lock: &L,
    queued: impl Fn() -> usize,
    while_queued: &[&str],
    gone_after: &[&str],
    release_scripts: u64,
) -> L::Guard {
    let key = waiter_lock.key().to_string();
    let before = script_calls(server);
    let waiter = {
        let lock = waiter_lock.clone();
        tokio::spawn(async move { lock.take().await })
    };
    assert!(
        eventually(Duration::from_secs(2), || queued() == 1).await,
        "the waiter did not queue"
    );
    for k in while_queued {
        assert!(exists(server, k), "{k} missing while queued");
    }
    waiter_settled(server, before).await;
    let _: () = cmd(server, &["CONFIG", "RESETSTAT"]);
    let released_token = held.token();
    held.release().await.unwrap();
    let got = tokio::time::timeout(Duration::from_secs(2), waiter)
        .await
        .expect("the waiter was not handed the lock")
        .unwrap();
    // The hand-off message is only a claim: the waiter has the server confirm it with one
    // attempt of its own (which finds the hold and sets the full lease).
    assert_eq!(
        script_calls(server),
        release_scripts + 1,
        "the release's scripts and one confirming attempt of the waiter's"
    );
    assert!(got.token() > released_token);
    let count: Option<i64> = cmd(server, &["HGET", &key, got.owner_field()]);
    assert_eq!(count, Some(1));
    let pttl: i64 = cmd(server, &["PTTL", &key]);
    assert!(pttl > 0 && pttl <= 20_000, "initial lease {pttl} ms");
    assert_eq!(queued(), 0);
    for k in gone_after {
        assert!(!exists(server, k), "{k} left behind");
    }
    got
}

/// The releasing script names the waiter's grant channel itself, from the lock key: a name
/// with a hash tag of its own (no braces added) and a key prefix reach the waiter's
/// subscription as well; the waiter's only script is its confirming attempt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hash_tagged_name_is_handed_off_on_its_own_channel() {
    let server = RedisServer::start();
    let client = distlock::Client::builder()
        .url(server.url())
        .key_prefix("app:")
        .build()
        .await
        .unwrap();
    let name = "{user:42}:orders";
    let key = format!("app:{name}");
    let lock = client
        .lock(name)
        .lease(Duration::from_secs(20))
        .liveness_timeout(Duration::from_secs(30));
    let held = lock.acquire().await.unwrap();
    let before = script_calls(&server);
    let waiter = spawn_acquire(&lock);
    assert!(
        queued_within(&server, &key, 1, Duration::from_secs(2)).await,
        "the waiter did not queue"
    );
    waiter_settled(&server, before).await;
    let _: () = cmd(&server, &["CONFIG", "RESETSTAT"]);
    held.release().await.unwrap();
    let got = tokio::time::timeout(Duration::from_secs(2), waiter)
        .await
        .expect("the waiter was not handed the lock")
        .unwrap();
    // The holder's handle met its waiter (they share it), so the release goes to the full
    // script at once, without trying the fast path (which would answer nil: queued).
    // (And the waiter's one confirming attempt.)
    assert_eq!(
        script_calls(&server),
        2,
        "the release and one confirming attempt of the waiter's"
    );
    let count: Option<i64> = cmd(&server, &["HGET", &key, got.owner().as_str()]);
    assert_eq!(count, Some(1));
    got.release().await.unwrap();
}

/// A handle whose request has waited longer than the contention memory (2 s) still sends
/// its release to the full script at once: a waiting request counts as contention for as
/// long as it waits, not only when it was refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_skips_the_fast_path_while_a_waiter_of_its_handle_waits() {
    let (server, client) = setup().await;
    // A waiter refreshes its queue entry (an attempt) every third of its liveness timeout:
    // not within this test's wait.
    let lock = client
        .lock("long-wait")
        .liveness_timeout(Duration::from_secs(30));
    let held = lock.acquire().await.unwrap();
    let before = script_calls(&server);
    let waiter = spawn_acquire(&lock);
    assert!(queued_within(&server, "long-wait", 1, Duration::from_secs(2)).await);
    waiter_settled(&server, before).await;
    tokio::time::sleep(Duration::from_millis(2_300)).await;
    let _: () = cmd(&server, &["CONFIG", "RESETSTAT"]);
    held.release().await.unwrap();
    let got = tokio::time::timeout(Duration::from_secs(2), waiter)
        .await
        .expect("the waiter was not handed the lock")
        .unwrap();
    // The full release at once, and the waiter's confirming attempt.
    assert_eq!(script_calls(&server), 2, "a fast path was tried first");
    got.release().await.unwrap();
}

/// A hand-off's short initial lease is replaced by the full lease at once (the watchdog's
/// lease here), and the guard's validity follows it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_new_holder_takes_over_with_its_full_lease() {
    let (server, client) = setup().await;
    let lock = client
        .lock("takeover")
        .liveness_timeout(Duration::from_millis(1500));
    let held = lock.acquire().await.unwrap();
    let waiter = spawn_acquire(&lock);
    assert!(queued_within(&server, "takeover", 1, Duration::from_secs(2)).await);
    held.release().await.unwrap();
    let got = tokio::time::timeout(Duration::from_secs(2), waiter)
        .await
        .unwrap()
        .unwrap();
    // The watchdog lease is 30 s: the take-over sets it within a round trip or two.
    assert!(
        eventually(Duration::from_secs(2), || cmd::<i64>(
            &server,
            &["PTTL", "takeover"]
        ) > 20_000)
        .await,
        "the full lease was not set"
    );
    assert!(
        eventually(Duration::from_secs(1), || got.valid_until()
            > std::time::Instant::now() + Duration::from_secs(20))
        .await,
        "the guard's validity did not follow the full lease"
    );
    // Still held after the initial lease would have run out.
    tokio::time::sleep(Duration::from_millis(1700)).await;
    assert!(got.is_held().await.unwrap());
    got.release().await.unwrap();
}

/// Waiters queued in a known order are granted in exactly that order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_waiters_are_granted_in_arrival_order() {
    let (server, client) = setup().await;
    let lock = client.lock("order");
    let holder = lock.acquire().await.unwrap();
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for i in 0..20 {
        let lock = lock.clone();
        let order = order.clone();
        tasks.push(tokio::spawn(async move {
            let g = lock.acquire().await.unwrap();
            order.lock().unwrap().push((i, g.fencing_token()));
            g.release().await.unwrap();
        }));
        assert!(
            queued_within(&server, "order", i + 1, Duration::from_secs(2)).await,
            "waiter {i} did not queue"
        );
    }
    holder.release().await.unwrap();
    for t in tasks {
        tokio::time::timeout(Duration::from_secs(10), t)
            .await
            .unwrap()
            .unwrap();
    }
    let order = order.lock().unwrap().clone();
    assert_eq!(
        order.iter().map(|(i, _)| *i).collect::<Vec<_>>(),
        (0..20).collect::<Vec<_>>()
    );
    assert!(order.windows(2).all(|w| w[0].1 < w[1].1), "tokens rise");
    assert!(!exists(&server, &lock_queue("order")));
    assert!(!exists(&server, &lock_waiters("order")));
}

/// A releasing client that acquires again queues behind the waiter already there: no
/// barging under FIFO hand-off; `try_acquire` of a free lock with a live waiter hands it
/// to that waiter and returns `None`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_releasing_client_cannot_barge_past_a_waiter() {
    let (server, client) = setup().await;
    let other = client_for(&server).await;
    let lock = client.lock("nobarge");
    let held = lock.acquire().await.unwrap();
    let waiter = spawn_acquire(&other.lock("nobarge"));
    assert!(queued_within(&server, "nobarge", 1, Duration::from_secs(2)).await);
    held.release().await.unwrap();
    // Our next acquire, sent right after the release, does not get it.
    assert!(lock.try_acquire().await.unwrap().is_none());
    let got = tokio::time::timeout(Duration::from_secs(2), waiter)
        .await
        .unwrap()
        .unwrap();
    // A free lock with a live waiter queued (its holder's key deleted behind the queue's
    // back): a newcomer's try hands it to the waiter, also from a new handle (which met no
    // contention yet, so it tries the fast path first).
    let waiter2 = spawn_acquire(&other.lock("nobarge"));
    assert!(queued_within(&server, "nobarge", 1, Duration::from_secs(2)).await);
    let _: () = cmd(&server, &["DEL", "nobarge"]);
    assert!(client
        .lock("nobarge")
        .try_acquire()
        .await
        .unwrap()
        .is_none());
    let got2 = tokio::time::timeout(Duration::from_secs(2), waiter2)
        .await
        .expect("the waiter was not handed the free lock")
        .unwrap();
    assert!(got2.fencing_token() > got.fencing_token());
    got2.release().await.unwrap();
    drop(got);
}

/// With hand-off off, a handle neither queues nor respects the queue: Redisson's behaviour
/// (a release frees the lock and publishes the unlock message).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handoff_off_keeps_redissons_behaviour() {
    let (server, client) = setup().await;
    let lock = client.lock("off").handoff(Handoff::Off);
    assert_eq!(lock.handoff_setting(), Handoff::Off);
    let held = lock.acquire().await.unwrap();
    let waiter = spawn_acquire(&lock);
    assert!(
        eventually(Duration::from_secs(2), || numsub(
            &server,
            "redisson_lock__channel:{off}"
        ) == 1)
        .await
    );
    assert!(!exists(&server, &lock_queue("off")), "an Off waiter queued");
    let channels = waiter_channels(&server);
    assert_eq!(channels, vec!["redisson_lock__channel:{off}".to_string()]);
    held.release().await.unwrap();
    let got = tokio::time::timeout(Duration::from_secs(2), waiter)
        .await
        .unwrap()
        .unwrap();
    got.release().await.unwrap();
}

/// A waiter process killed while queued is passed over once its liveness deadline is past:
/// the waiter behind it is handed the lock within about one liveness timeout, and the dead
/// entry is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_waiter_is_skipped_within_its_liveness() {
    let (server, client) = setup().await;
    let liveness = Duration::from_millis(900);
    let lock = client.lock("dead").liveness_timeout(liveness);
    let holder = lock.acquire().await.unwrap();
    let first = spawn_acquire(&lock);
    assert!(queued_within(&server, "dead", 1, Duration::from_secs(2)).await);
    let mut victim = family(&["lock-wait", &server.url(), "dead", "900"]);
    assert!(queued_within(&server, "dead", 2, Duration::from_secs(5)).await);
    let last = spawn_acquire(&lock);
    assert!(queued_within(&server, "dead", 3, Duration::from_secs(2)).await);
    let victim_owner = queued(&server, "dead")[1].clone();
    victim.kill().unwrap();
    victim.wait().unwrap();
    holder.release().await.unwrap();
    let g1 = tokio::time::timeout(Duration::from_secs(2), first)
        .await
        .unwrap()
        .unwrap();
    // Hold past the victim's liveness deadline, so the release passes it over.
    tokio::time::sleep(liveness + Duration::from_millis(200)).await;
    let released = tokio::time::Instant::now();
    g1.release().await.unwrap();
    let g3 = tokio::time::timeout(Duration::from_secs(5), last)
        .await
        .expect("the queue stalled behind the dead waiter")
        .unwrap();
    assert!(
        released.elapsed() < liveness,
        "waited {:?}",
        released.elapsed()
    );
    let entry: Option<String> = cmd(&server, &["HGET", &lock_waiters("dead"), &victim_owner]);
    assert_eq!(entry, None, "the dead waiter's entry stayed");
    g3.release().await.unwrap();
    assert_eq!(
        first_line(&mut victim),
        "",
        "the killed waiter never got the lock"
    );
}

/// A waiter that died right after its last attempt (its deadline still ahead) may be
/// handed the lock; it then blocks the lock at most until its liveness deadline (the
/// hand-off's initial lease ends there), after which the next waiter gets it. Never two
/// holders.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_dead_before_its_deadline_blocks_the_lock_at_most_until_that_deadline() {
    let (server, client) = setup().await;
    // 3 s: the victim renews its place every second, so its deadline is ahead by seconds
    // when it is killed, however late a loaded machine runs the steps below.
    let liveness = Duration::from_secs(3);
    let lock = client.lock("stopped").liveness_timeout(liveness);
    let holder = lock.acquire().await.unwrap();
    let mut victim = family(&["lock-wait", &server.url(), "stopped", "3000"]);
    assert!(queued_within(&server, "stopped", 1, Duration::from_secs(5)).await);
    let victim_owner = queued(&server, "stopped")[0].clone();
    let next = spawn_acquire(&lock);
    assert!(queued_within(&server, "stopped", 2, Duration::from_secs(2)).await);
    victim.kill().unwrap();
    victim.wait().unwrap();
    // Half a second on, what is left of its liveness is clearly less than a whole one (which
    // a hand-off that ignored the deadline would grant).
    tokio::time::sleep(Duration::from_millis(500)).await;
    // Its liveness deadline, as its last attempt set it in its entry (`<deadline ms>;…`).
    let entry: Vec<u8> = cmd(&server, &["HGET", &lock_waiters("stopped"), &victim_owner]);
    let (deadline, now) = deadline_ahead(&server, entry_deadline(&entry));
    let released = tokio::time::Instant::now();
    holder.release().await.unwrap();
    // The release handed it to the dead process (its deadline was still ahead).
    let count: Option<i64> = cmd(&server, &["HGET", "stopped", &victim_owner]);
    assert_eq!(
        count,
        Some(1),
        "the hand-off went to the first queued waiter"
    );
    let pttl: i64 = cmd(&server, &["PTTL", "stopped"]);
    assert!(
        pttl > 0 && pttl as u64 <= deadline - now,
        "initial lease {pttl} ms: longer than what was left of the dead waiter's liveness \
         ({} ms)",
        deadline - now
    );
    let got = tokio::time::timeout(Duration::from_secs(10), next)
        .await
        .expect("the next waiter never got the lock")
        .unwrap();
    // The dead waiter's lease (at most what was left of its liveness), then the next
    // waiter's recheck (a third of its liveness): about 3 s at most, bounded loosely.
    let waited = released.elapsed();
    assert!(waited < liveness * 2, "waited {waited:?}");
    let count: Option<i64> = cmd(&server, &["HGET", "stopped", &victim_owner]);
    assert_eq!(count, None);
    got.release().await.unwrap();
}

/// A waiter whose acquire is cancelled around the release never keeps the lock: the leave
/// gives a racing hand-off back to the next waiter (or frees it), whatever the timing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_waiter_leaves_no_lock() {
    let (server, client) = setup().await;
    cancelled_waiters_leave_no_lock(
        &server,
        &client.lock("cancel"),
        150,
        || queued(&server, "cancel").len(),
        || !exists(&server, &lock_queue("cancel")) && !exists(&server, &lock_waiters("cancel")),
    )
    .await;
}

/// A waiter whose wait ends while the lock is being handed to it either returns the grant
/// or gives it back: the lock is never left held by nobody.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timed_out_waiter_takes_or_gives_back_a_racing_hand_off() {
    let (server, client) = setup().await;
    timed_out_waiters_leave_no_lock(&server, &client.lock("deadline"), || {
        queued(&server, "deadline").len()
    })
    .await;
}

/// What the shared hand-off test bodies need of a guard: its lease verbs, token and owner.
pub(crate) trait Granted: distlock::Lease + distlock::Release<Released = ()> {
    fn token(&self) -> distlock::FencingToken;
    fn owner_field(&self) -> &str;
    fn held(&self) -> impl std::future::Future<Output = distlock::Result<bool>> + Send;
}

macro_rules! granted {
    ($($guard:ty),*) => {$(
        impl Granted for $guard {
            fn token(&self) -> distlock::FencingToken {
                self.fencing_token()
            }
            fn owner_field(&self) -> &str {
                self.owner().as_str()
            }
            async fn held(&self) -> distlock::Result<bool> {
                self.is_held().await
            }
        }
    )*};
}

granted!(
    LockGuard,
    distlock::FairLockGuard,
    distlock::RwLockWriteGuard
);

/// What the shared hand-off test bodies need of a plain, fair or read-write lock.
pub(crate) trait Queued: Clone + Send + Sync + 'static {
    type Guard: Granted;
    fn key(&self) -> &str;
    fn take(&self) -> impl std::future::Future<Output = Self::Guard> + Send;
    fn take_within(
        &self,
        wait: Duration,
    ) -> impl std::future::Future<Output = Option<Self::Guard>> + Send;
}

impl Queued for Lock {
    type Guard = LockGuard;
    fn key(&self) -> &str {
        Lock::key(self)
    }
    async fn take(&self) -> LockGuard {
        self.acquire().await.unwrap()
    }
    async fn take_within(&self, wait: Duration) -> Option<LockGuard> {
        self.try_acquire_for(wait).await.unwrap()
    }
}

impl Queued for distlock::FairLock {
    type Guard = distlock::FairLockGuard;
    fn key(&self) -> &str {
        distlock::FairLock::key(self)
    }
    async fn take(&self) -> distlock::FairLockGuard {
        self.acquire().await.unwrap()
    }
    async fn take_within(&self, wait: Duration) -> Option<distlock::FairLockGuard> {
        self.try_acquire_for(wait).await.unwrap()
    }
}

/// `rounds` times: a waiter of `lock` queues (`queued` counts the queue), the holder
/// releases and the waiter is cancelled up to 2 ms before (even rounds) or after (odd
/// rounds) the release starts. After each round neither
/// the lock nor, by `queue_gone`, its queue is left.
pub(crate) async fn cancelled_waiters_leave_no_lock<L: Queued>(
    server: &RedisServer,
    lock: &L,
    rounds: u64,
    queued: impl Fn() -> usize,
    queue_gone: impl Fn() -> bool,
) {
    let key = lock.key().to_string();
    for round in 0..rounds {
        let holder = lock.take().await;
        let waiter = {
            let lock = lock.clone();
            tokio::spawn(async move { lock.take().await })
        };
        assert!(
            eventually(Duration::from_secs(2), || queued() == 1).await,
            "round {round}: the waiter did not queue"
        );
        let release = async move { holder.release().await.unwrap() };
        cancel_around_release(round, &waiter, release)
            .await
            .await
            .unwrap();
        match waiter.await {
            // It finished first: a guard, dropped here (released in the background).
            Ok(guard) => drop(guard),
            Err(e) => assert!(e.is_cancelled()),
        }
        assert!(
            eventually(Duration::from_secs(2), || !exists(server, &key)
                && queued() == 0
                && queue_gone())
            .await,
            "round {round}: a lock or queue entry was left: {:?}",
            cmd::<Vec<String>>(server, &["HGETALL", &key])
        );
    }
}

/// 40 times: a waiter of `lock` with a 150 ms wait queues (`queued` counts the queue) and the
/// holder releases close to the waiter's deadline. The waiter returns the grant or gives it
/// back: the lock is never left held by nobody, nor anyone queued.
pub(crate) async fn timed_out_waiters_leave_no_lock<L: Queued>(
    server: &RedisServer,
    lock: &L,
    queued: impl Fn() -> usize,
) {
    let key = lock.key().to_string();
    for round in 0..40u64 {
        let holder = lock.take().await;
        let waiter = {
            let lock = lock.clone();
            tokio::spawn(async move { lock.take_within(Duration::from_millis(150)).await })
        };
        assert!(eventually(Duration::from_secs(2), || queued() == 1).await);
        // Release close to the waiter's deadline.
        tokio::time::sleep(Duration::from_millis(100 + (round * 7) % 60)).await;
        holder.release().await.unwrap();
        if let Some(g) = waiter.await.unwrap() {
            assert!(g.held().await.unwrap(), "round {round}");
            g.release().await.unwrap();
        }
        assert!(
            eventually(Duration::from_secs(2), || !exists(server, &key)
                && queued() == 0)
            .await,
            "round {round}: the lock stayed held or queued"
        );
    }
}

/// A hand-off message that never arrives (the waiter's client may not read its grant
/// channel: its ACL refuses it, so it polls) is made good by the waiter's next attempt, which finds the lock held
/// for it, well before the initial lease runs out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hand_off_message_that_never_arrives_is_found_by_the_next_attempt() {
    let server = RedisServer::start();
    // A user who may use the wake channel but not the grant channels.
    acl_user(
        &server,
        "nogrant",
        &["~*", "&redisson_lock__channel:*", "+@all"],
    );
    let client = client_for(&server).await;
    let deaf = distlock::Client::connect(&server.url().replace("redis://", "redis://nogrant:pw@"))
        .await
        .unwrap();
    let liveness = Duration::from_millis(1500);
    let held = client.lock("lost").acquire().await.unwrap();
    let waiter = spawn_acquire(&deaf.lock("lost").liveness_timeout(liveness));
    assert!(queued_within(&server, "lost", 1, Duration::from_secs(2)).await);
    tokio::time::sleep(Duration::from_millis(100)).await;
    let released = tokio::time::Instant::now();
    held.release().await.unwrap();
    let got = tokio::time::timeout(Duration::from_secs(3), waiter)
        .await
        .expect("the waiter never found its hand-off")
        .unwrap();
    assert!(
        released.elapsed() < liveness,
        "found after {:?}",
        released.elapsed()
    );
    assert!(got.is_held().await.unwrap());
    got.release().await.unwrap();
}

/// A hand-off read late — the waiter's process was stopped past the hand-off's initial
/// lease, and the lock went on to another waiter meanwhile — is not taken as a grant: the
/// waiter asks the server, waits its turn, and gets a newer token than the holder after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hand_off_read_after_its_lease_ran_out_is_not_a_grant() {
    let (server, client) = setup().await;
    let lock = client
        .lock("late")
        .liveness_timeout(Duration::from_millis(900));
    let holder = lock.acquire().await.unwrap();
    a_late_hand_off_is_no_grant(
        &server,
        "lock-wait",
        "late",
        holder,
        || spawn_acquire(&lock),
        || queued(&server, "late").len(),
    )
    .await;
}

/// The body of the plain and fair "hand-off read after its lease ran out" tests. `holder`
/// holds lock `name`; a `family <kind>` process (liveness 900 ms) queues behind it, then
/// `spawn_next`'s waiter (`queued` counts the queue). The process is stopped and the holder
/// releases: the lock is handed to the stopped process, runs out and goes to the next
/// waiter. Once resumed, the process must report a grant newer than that waiter's.
pub(crate) async fn a_late_hand_off_is_no_grant<G: Granted>(
    server: &RedisServer,
    kind: &str,
    name: &str,
    holder: G,
    spawn_next: impl FnOnce() -> tokio::task::JoinHandle<G>,
    queued: impl Fn() -> usize,
) {
    let mut victim = family(&[kind, &server.url(), name, "900"]);
    assert!(eventually(Duration::from_secs(5), || queued() == 1).await);
    let next = spawn_next();
    assert!(eventually(Duration::from_secs(2), || queued() == 2).await);
    let signal = |sig: &str| signal(&victim, sig);
    signal("-STOP");
    // Handed to the stopped process (its deadline is still ahead), then passed on when its
    // initial lease runs out.
    holder.release().await.unwrap();
    let got = tokio::time::timeout(Duration::from_secs(5), next)
        .await
        .expect("the next waiter never got the lock")
        .unwrap();
    signal("-CONT");
    // The resumed waiter reads its old hand-off; it must not report that grant.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let later = got.token();
    got.release().await.unwrap();
    let line = first_line(&mut victim);
    let token: u128 = line
        .strip_prefix("granted ")
        .and_then(|t| t.trim().parse().ok())
        .unwrap_or_else(|| panic!("the resumed waiter printed {line:?}"));
    assert!(
        token > later.get(),
        "the resumed waiter reported token {token}, below the {} granted after its hand-off",
        later.get()
    );
    victim.wait().unwrap();
}

/// With `Handoff::Retakes(2)` the releasing client re-takes the lock past a queued waiter
/// twice in a row; the release after that hands the lock to the waiter, whose grant ends the
/// run. The waiter is a process of its own, stopped once queued (its liveness deadline stays
/// ahead), so that only the releasing client attempts meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retakes_pass_a_queued_waiter_at_most_n_times_in_a_row() {
    let (server, client) = setup().await;
    let lock = client.lock("retake").handoff(Handoff::Retakes(2));
    assert_eq!(lock.handoff_setting(), Handoff::Retakes(2));
    let fifo = client.lock("retake").handoff(Handoff::Retakes(0));
    assert_eq!(fifo.handoff_setting(), Handoff::Fifo);
    let mut held = lock.acquire().await.unwrap();
    let mut waiter = family(&["lock-wait", &server.url(), "retake", "5000"]);
    assert!(queued_within(&server, "retake", 1, Duration::from_secs(5)).await);
    let signal = |sig: &str| signal(&waiter, sig);
    signal("-STOP");
    let run = || {
        cmd::<Option<String>>(
            &server,
            &["HGET", &lock_waiters("retake"), "distlock:retakes"],
        )
    };
    for n in 1..=2 {
        held.release().await.unwrap();
        held = lock
            .try_acquire()
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("re-take {n} of 2 refused"));
        assert_eq!(run(), Some(n.to_string()));
    }
    held.release().await.unwrap();
    assert!(
        lock.try_acquire().await.unwrap().is_none(),
        "a third re-take in a row"
    );
    assert_eq!(queued(&server, "retake"), Vec::<String>::new());
    assert_eq!(run(), None, "the grant to the waiter did not end the run");
    signal("-CONT");
    let line = first_line(&mut waiter);
    assert!(line.starts_with("granted "), "the waiter printed {line:?}");
    assert!(waiter.wait().unwrap().success());
    // Free again, nobody queued: an ordinary grant.
    lock.try_acquire()
        .await
        .unwrap()
        .expect("free")
        .release()
        .await
        .unwrap();
}

/// A hand-off message that no release published — any client allowed to `PUBLISH` on the
/// grant channels can send one, with the waiter's owner read from the queue — is no grant:
/// the waiter asks the server, is refused, and waits on while the holder keeps the lock.
/// When the holder releases, the waiter gets the lock with the token the server issued,
/// not the forged one (far above any real token: a fenced resource would refuse every real
/// holder after it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_hand_off_message_is_no_grant() {
    let (server, client) = setup().await;
    let lock = client.lock("forged").lease(Duration::from_secs(60));
    let holder = lock.acquire().await.unwrap();
    a_forged_hand_off_is_no_grant(
        &server,
        "distlock_lock_grant:*",
        holder,
        || {
            let lock = lock.clone();
            tokio::spawn(async move { lock.take_within(Duration::from_secs(20)).await })
        },
        || queued(&server, "forged").first().cloned(),
        || cmd::<Option<String>>(&server, &["HGET", "forged", "distlock:fencing-token"]),
    )
    .await;
}

/// The body of the "forged hand-off message" tests of the plain, fair and write locks:
/// `holder` holds the lock; `spawn_waiter`'s waiter queues (`queued_owner` reads its owner
/// from the queue) and subscribes to its grant channel (the only one matching
/// `grant_pattern`); a message claiming a hand-off to it, with a token 10^12 above the
/// holder's, is published there. The waiter must not return while the holder holds the
/// lock; after the holder's release it gets the lock with a token below the forged one and,
/// where the lock hash keeps one (`server_token`), the server's.
pub(crate) async fn a_forged_hand_off_is_no_grant<G: Granted>(
    server: &RedisServer,
    grant_pattern: &str,
    holder: G,
    spawn_waiter: impl FnOnce() -> tokio::task::JoinHandle<Option<G>>,
    queued_owner: impl Fn() -> Option<String>,
    server_token: impl Fn() -> Option<String>,
) {
    let waiter = spawn_waiter();
    assert!(
        eventually(Duration::from_secs(2), || queued_owner().is_some()).await,
        "the waiter did not queue"
    );
    let owner = queued_owner().unwrap();
    let channel = || -> Option<String> {
        cmd::<Vec<String>>(server, &["PUBSUB", "CHANNELS", grant_pattern])
            .into_iter()
            .next()
    };
    assert!(
        eventually(Duration::from_secs(2), || channel().is_some()).await,
        "the waiter did not subscribe to its grant channel"
    );
    let forged = holder.token().get() + 1_000_000_000_000;
    let receivers: i64 = cmd(
        server,
        &[
            "PUBLISH",
            &channel().unwrap(),
            &format!("h;{forged};600000;{owner}"),
        ],
    );
    assert_eq!(
        receivers, 1,
        "the forged message reached the waiter's client"
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        !waiter.is_finished(),
        "the waiter took a forged hand-off message for a grant"
    );
    assert!(holder.held().await.unwrap(), "the holder lost the lock");
    let released = holder.token().get();
    holder.release().await.unwrap();
    let got = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .expect("the waiter never got the lock after the release")
        .unwrap()
        .expect("the waiter got the lock within its wait");
    let token = got.token().get();
    assert!(
        token > released && token < forged,
        "token {token}: not the server's (released {released}, forged {forged})"
    );
    if let Some(t) = server_token() {
        assert_eq!(
            token.to_string(),
            t,
            "the guard's token is not the lock hash's"
        );
    }
    assert!(got.held().await.unwrap());
    got.release().await.unwrap();
}
