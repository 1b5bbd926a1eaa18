//! Interop with Redisson, the Java client, on the same keys.
//!
//! The fixtures act as a Redisson client does: each runs one of Redisson's scripts
//! (`redisson/*.lua`, written from the behaviour of Redisson's source, not its code;
//! Redisson 4.7, scripts unchanged since 3.52) by `EVAL` on the test's server, with the KEYS
//! and ARGV Redisson passes: numbers as decimal strings, permit ids as 16 raw bytes, the
//! publish command as an argument, and "now" read from the Java host's clock, i.e.
//! `System.currentTimeMillis()`, modelled as the server's `TIME` plus a skew (a Java host
//! whose clock runs ahead). Between script calls the test does what the Java client does
//! (delete an unlock latch, retry an acquire), polling every 20 ms where a Redisson client
//! would wait on its channel or for the returned TTL.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use distlock::{FencingToken, Owner};
use futures_util::StreamExt;
use tokio::time::Instant;

use crate::util::*;

/// One of Redisson's scripts, as a fixture file.
#[derive(Clone, Copy)]
struct Fixture {
    file: &'static str,
    source: &'static str,
}

macro_rules! fixture {
    ($file:literal) => {
        Fixture {
            file: $file,
            source: include_str!(concat!("redisson/", $file)),
        }
    };
}

const SEM_TRY_ACQUIRE: Fixture = fixture!("semaphore_try_acquire.lua");
const SEM_RELEASE: Fixture = fixture!("semaphore_release.lua");
const SEM_AVAILABLE: Fixture = fixture!("semaphore_available_permits.lua");
const SEM_GET_PERMITS: Fixture = fixture!("semaphore_get_permits.lua");
const SEM_ACQUIRED: Fixture = fixture!("semaphore_acquired_permits.lua");
const SEM_SET_PERMITS: Fixture = fixture!("semaphore_set_permits.lua");
const LOCK_LOCK: Fixture = fixture!("lock_lock.lua");
const LOCK_UNLOCK: Fixture = fixture!("lock_unlock.lua");
const FENCED_LOCK: Fixture = fixture!("fenced_lock.lua");
const FAIR_LOCK: Fixture = fixture!("fair_lock.lua");
const FAIR_UNLOCK: Fixture = fixture!("fair_unlock.lua");
const RW_WRITE_LOCK: Fixture = fixture!("rw_write_lock.lua");
const RW_WRITE_UNLOCK: Fixture = fixture!("rw_write_unlock.lua");
const RW_READ_LOCK: Fixture = fixture!("rw_read_lock.lua");
const RW_READ_UNLOCK: Fixture = fixture!("rw_read_unlock.lua");

/// `getSubscribeService().getPublishCommand()` on a standalone server.
const PUBLISH: &[u8] = b"PUBLISH";
/// `nonExpirableTimeout`: the score of a permit without a lease.
const NON_EXPIRABLE: &[u8] = b"922337203685477";
/// `lockWatchdogTimeout`: the lease of `lock()` without a lease time.
const WATCHDOG_MS: u64 = 30_000;
/// `fairLockWaitTimeout`: a fair `lock()`'s wait.
const FAIR_WAIT_MS: u64 = 300_000;
/// The unlock latch's TTL with the default retry settings (about 16–20 s).
const LATCH_TIMEOUT_MS: u64 = 16_000;
/// How often an emulated Redisson client retries.
const RETRY: Duration = Duration::from_millis(20);

/// Redisson's `prefixName(prefix, name)`.
fn prefix_name(prefix: &str, name: &str) -> String {
    if name.contains('{') {
        format!("{prefix}:{name}")
    } else {
        format!("{prefix}:{{{name}}}")
    }
}

/// Redisson's `suffixName(name, suffix)`.
fn suffix_name(name: &str, suffix: &str) -> String {
    if name.contains('{') {
        format!("{name}:{suffix}")
    } else {
        format!("{{{name}}}:{suffix}")
    }
}

/// Run one command whose arguments are raw bytes on `server` (a fresh sync connection), and
/// convert the reply; panics naming `what` on any error.
pub(crate) fn query<T: redis::FromRedisValue>(
    server: &RedisServer,
    what: &str,
    args: &[&[u8]],
) -> T {
    let (name, rest) = args.split_first().expect("query: no command given");
    let mut con = redis::Client::open(server.url())
        .and_then(|c| c.get_connection())
        .unwrap_or_else(|e| panic!("connect to port {}: {e}", server.port()));
    let mut c = redis::cmd(std::str::from_utf8(name).expect("command name"));
    for a in rest {
        c.arg(*a);
    }
    c.query(&mut con)
        .unwrap_or_else(|e| panic!("{what} on port {}: {e}", server.port()))
}

/// `EVAL` a Redisson fixture with byte-string KEYS and ARGV.
fn eval<T: redis::FromRedisValue>(
    server: &RedisServer,
    fixture: Fixture,
    keys: &[&[u8]],
    args: &[&[u8]],
) -> T {
    let numkeys = keys.len().to_string();
    let mut all: Vec<&[u8]> = vec![b"EVAL", fixture.source.as_bytes(), numkeys.as_bytes()];
    all.extend_from_slice(keys);
    all.extend_from_slice(args);
    query(
        server,
        &format!("EVAL of Redisson fixture {}", fixture.file),
        &all,
    )
}

/// `ServiceManager.generateId()` as bytes: 16 random bytes.
fn random_id() -> [u8; 16] {
    rand::random()
}

/// `bytes` as lowercase hex (`ByteBufUtil.hexDump`): 32 characters for a 16-byte id.
fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A permit id as the zset member: `ByteBufUtil.decodeHexDump` of its 32 lowercase hex
/// characters. Panics when the id is not of that form.
pub(crate) fn permit_member(id: &str) -> Vec<u8> {
    assert!(
        id.len() == 32
            && id
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)),
        "permit id {id:?} is not 32 lowercase hex characters (Redisson's generateId)"
    );
    (0..16)
        .map(|i| u8::from_str_radix(&id[2 * i..2 * i + 2], 16).unwrap())
        .collect()
}

/// The score of `member` in `zset` (a lease's expiry, ms), if it is there.
pub(crate) fn zscore(server: &RedisServer, zset: &str, member: &[u8]) -> Option<u64> {
    let s: Option<f64> = query(
        server,
        &format!("ZSCORE {zset}"),
        &[b"ZSCORE", zset.as_bytes(), member],
    );
    s.map(|s| s as u64)
}

/// A Java host running one Redisson client instance: its `ServiceManager.id` and its clock.
struct Java<'a> {
    server: &'a RedisServer,
    id: String,
    skew_ms: i64,
}

impl<'a> Java<'a> {
    /// A Redisson client whose clock is `skew_ms` ahead of the server's.
    fn new(server: &'a RedisServer, skew_ms: i64) -> Java<'a> {
        Java {
            server,
            id: uuid::Uuid::new_v4().to_string(),
            skew_ms,
        }
    }

    /// `System.currentTimeMillis()` on the Java host.
    fn now(&self) -> u64 {
        (server_time_ms(self.server) as i64 + self.skew_ms) as u64
    }

    /// `getLockName(threadId)`: `<uuid>:<threadId>`.
    fn lock_name(&self, thread: u64) -> String {
        format!("{}:{thread}", self.id)
    }

    fn semaphore(&'a self, name: &str) -> JavaSemaphore<'a> {
        JavaSemaphore {
            java: self,
            name: name.to_string(),
            timeout: suffix_name(name, "timeout"),
            channel: prefix_name("redisson_sc", name),
        }
    }

    fn read_lock(&'a self, name: &str) -> JavaReadLock<'a> {
        JavaReadLock {
            java: self,
            name: name.to_string(),
        }
    }

    fn write_lock(&'a self, name: &str) -> JavaWriteLock<'a> {
        JavaWriteLock {
            java: self,
            name: name.to_string(),
        }
    }

    fn lock(&'a self, name: &str) -> JavaLock<'a> {
        JavaLock {
            java: self,
            name: name.to_string(),
        }
    }

    fn fair_lock(&'a self, name: &str) -> JavaFairLock<'a> {
        JavaFairLock {
            java: self,
            name: name.to_string(),
            queue: prefix_name("redisson_lock_queue", name),
            timeout: prefix_name("redisson_lock_timeout", name),
            channel: prefix_name("redisson_lock__channel", name),
        }
    }

    /// An unlock request's latch key: `redisson_unlock_latch:{name}:<32 hex request id>`.
    fn unlock_latch(&self, name: &str) -> String {
        format!(
            "{}:{}",
            prefix_name("redisson_unlock_latch", name),
            hex(&random_id())
        )
    }
}

/// What Redisson's semaphore `tryAcquire` script answered.
#[derive(Debug, PartialEq, Eq)]
enum SemAcquire {
    /// `'OK'`: taken.
    Acquired,
    /// `':<score>'`: none available; the lowest lease ends at this time (ms).
    RetryAt(u64),
    /// nil: none available and no lease will end.
    Nothing,
}

/// `RPermitExpirableSemaphore` on one name.
struct JavaSemaphore<'a> {
    java: &'a Java<'a>,
    name: String,
    timeout: String,
    channel: String,
}

impl JavaSemaphore<'_> {
    /// `tryAcquire(leaseTime)` of one permit with id `id`, once, at the Java clock's now.
    fn try_acquire(&self, id: &[u8], lease_ms: u64) -> SemAcquire {
        self.try_acquire_at(id, lease_ms, self.java.now())
    }

    /// `tryAcquire` of one permit with id `id`, once, with `now` as the Java clock's reading.
    fn try_acquire_at(&self, id: &[u8], lease_ms: u64, now: u64) -> SemAcquire {
        let (timeout_date, now) = ((now + lease_ms).to_string(), now.to_string());
        let r: Option<String> = eval(
            self.java.server,
            SEM_TRY_ACQUIRE,
            &[
                self.name.as_bytes(),
                self.timeout.as_bytes(),
                self.channel.as_bytes(),
            ],
            &[
                b"1",
                timeout_date.as_bytes(),
                now.as_bytes(),
                NON_EXPIRABLE,
                PUBLISH,
                id,
            ],
        );
        match r.as_deref() {
            None => SemAcquire::Nothing,
            Some("OK") => SemAcquire::Acquired,
            Some(s) => {
                let at = s
                    .strip_prefix(':')
                    .and_then(|n| n.parse::<f64>().ok())
                    .unwrap_or_else(|| panic!("tryAcquire answered {s:?}"));
                SemAcquire::RetryAt(at as u64)
            }
        }
    }

    /// `tryRelease(id)`: 1 given back in time, 0 unknown or expired.
    fn release(&self, id: &[u8]) -> i64 {
        let now = self.java.now().to_string();
        eval(
            self.java.server,
            SEM_RELEASE,
            &[
                self.name.as_bytes(),
                self.channel.as_bytes(),
                self.timeout.as_bytes(),
            ],
            &[id, b"1", now.as_bytes(), PUBLISH],
        )
    }

    fn counting(&self, fixture: Fixture) -> i64 {
        let now = self.java.now().to_string();
        eval(
            self.java.server,
            fixture,
            &[
                self.name.as_bytes(),
                self.timeout.as_bytes(),
                self.channel.as_bytes(),
            ],
            &[now.as_bytes(), PUBLISH],
        )
    }

    /// `availablePermits()`.
    fn available_permits(&self) -> i64 {
        self.counting(SEM_AVAILABLE)
    }

    /// `getPermits()`: available + leased.
    fn get_permits(&self) -> i64 {
        self.counting(SEM_GET_PERMITS)
    }

    /// `acquiredPermits()`: leased.
    fn acquired_permits(&self) -> i64 {
        self.counting(SEM_ACQUIRED)
    }

    /// `setPermits(n)`.
    fn set_permits(&self, n: u64) {
        let n = n.to_string();
        let () = eval(
            self.java.server,
            SEM_SET_PERMITS,
            &[
                self.name.as_bytes(),
                self.channel.as_bytes(),
                self.timeout.as_bytes(),
            ],
            &[n.as_bytes(), PUBLISH],
        );
    }
}

/// `RLock` / `RFencedLock` on one name (watchdog lease, 30 s).
/// Redisson's `RReadWriteLock.writeLock()` on `name`.
struct JavaWriteLock<'a> {
    java: &'a Java<'a>,
    name: String,
}

impl JavaWriteLock<'_> {
    /// `<uuid>:<thread>:write`, the write lock's hash field.
    fn field(&self, thread: u64) -> String {
        format!("{}:write", self.java.lock_name(thread))
    }

    /// One `lock()` attempt of thread `thread`: nil acquired, else the lock's PTTL.
    fn lock(&self, thread: u64) -> Option<i64> {
        let (lease, field) = (WATCHDOG_MS.to_string(), self.field(thread));
        eval(
            self.java.server,
            RW_WRITE_LOCK,
            &[self.name.as_bytes()],
            &[lease.as_bytes(), field.as_bytes()],
        )
    }

    /// `unlock()` of thread `thread`: 1 released, 0 holds left, nil not its lock.
    fn unlock(&self, thread: u64) -> Option<i64> {
        let latch = self.java.unlock_latch(&self.name);
        let channel = prefix_name("redisson_rwlock", &self.name);
        let (lease, latch_ms, field) = (
            WATCHDOG_MS.to_string(),
            LATCH_TIMEOUT_MS.to_string(),
            self.field(thread),
        );
        eval(
            self.java.server,
            RW_WRITE_UNLOCK,
            &[self.name.as_bytes(), channel.as_bytes(), latch.as_bytes()],
            &[
                b"1",
                lease.as_bytes(),
                field.as_bytes(),
                PUBLISH,
                latch_ms.as_bytes(),
            ],
        )
    }
}

/// Redisson's `RReadWriteLock.readLock()` on `name`.
struct JavaReadLock<'a> {
    java: &'a Java<'a>,
    name: String,
}

impl JavaReadLock<'_> {
    /// `{name}:<uuid>:<thread>:rwlock_timeout`, the prefix of the thread's hold timeouts.
    fn timeout_prefix(&self, thread: u64) -> String {
        suffix_name(
            &self.name,
            &format!("{}:rwlock_timeout", self.java.lock_name(thread)),
        )
    }

    /// One `lock()` attempt of thread `thread`: nil acquired, else the lock's PTTL.
    fn lock(&self, thread: u64) -> Option<i64> {
        let (lease, field) = (WATCHDOG_MS.to_string(), self.java.lock_name(thread));
        let (prefix, write) = (self.timeout_prefix(thread), format!("{field}:write"));
        eval(
            self.java.server,
            RW_READ_LOCK,
            &[self.name.as_bytes(), prefix.as_bytes()],
            &[lease.as_bytes(), field.as_bytes(), write.as_bytes()],
        )
    }

    /// `unlock()` of thread `thread`: 1 the lock deleted, 0 holds left, nil not its lock.
    fn unlock(&self, thread: u64) -> Option<i64> {
        let latch = self.java.unlock_latch(&self.name);
        let channel = prefix_name("redisson_rwlock", &self.name);
        let (prefix, tag) = (self.timeout_prefix(thread), suffix_name(&self.name, ""));
        let tag = tag.trim_end_matches(':');
        let (field, latch_ms) = (self.java.lock_name(thread), LATCH_TIMEOUT_MS.to_string());
        eval(
            self.java.server,
            RW_READ_UNLOCK,
            &[
                self.name.as_bytes(),
                channel.as_bytes(),
                prefix.as_bytes(),
                tag.as_bytes(),
                latch.as_bytes(),
            ],
            &[b"0", field.as_bytes(), PUBLISH, latch_ms.as_bytes()],
        )
    }
}

struct JavaLock<'a> {
    java: &'a Java<'a>,
    name: String,
}

impl JavaLock<'_> {
    /// One `lock()` attempt of thread `thread`: nil acquired, else the holder's PTTL.
    fn lock(&self, thread: u64) -> Option<i64> {
        let (lease, field) = (WATCHDOG_MS.to_string(), self.java.lock_name(thread));
        eval(
            self.java.server,
            LOCK_LOCK,
            &[self.name.as_bytes()],
            &[lease.as_bytes(), field.as_bytes()],
        )
    }

    /// One `RFencedLock.tryLockAndGetToken()` attempt: `Ok(token)`, or `Err(pttl)`.
    fn lock_and_get_token(&self, thread: u64) -> Result<i64, i64> {
        let (lease, field) = (WATCHDOG_MS.to_string(), self.java.lock_name(thread));
        let token_key = prefix_name("redisson_lock_token", &self.name);
        let r: (i64, i64) = eval(
            self.java.server,
            FENCED_LOCK,
            &[self.name.as_bytes(), token_key.as_bytes()],
            &[lease.as_bytes(), field.as_bytes()],
        );
        match r {
            (-1, token) => Ok(token),
            (pttl, _) => Err(pttl),
        }
    }

    /// `unlock()` of thread `thread` (then the client deletes the latch): 1 freed, 0 holds
    /// remain, nil not held.
    fn unlock(&self, thread: u64) -> Option<i64> {
        self.unlock_field(&self.java.lock_name(thread))
    }

    /// Redisson's unlock script for the hash field `field` (any client's owner).
    fn unlock_field(&self, field: &str) -> Option<i64> {
        let latch = self.java.unlock_latch(&self.name);
        let channel = prefix_name("redisson_lock__channel", &self.name);
        let (lease, latch_ms) = (WATCHDOG_MS.to_string(), LATCH_TIMEOUT_MS.to_string());
        let r = eval(
            self.java.server,
            LOCK_UNLOCK,
            &[self.name.as_bytes(), channel.as_bytes(), latch.as_bytes()],
            &[
                b"0",
                lease.as_bytes(),
                field.as_bytes(),
                PUBLISH,
                latch_ms.as_bytes(),
            ],
        );
        let _: i64 = cmd(self.java.server, &["DEL", &latch]);
        r
    }
}

/// `RFairLock` on one name (watchdog lease, 30 s).
struct JavaFairLock<'a> {
    java: &'a Java<'a>,
    name: String,
    queue: String,
    timeout: String,
    channel: String,
}

impl JavaFairLock<'_> {
    /// One `lock()` attempt of thread `thread` (the "with wait" script, wait = the default
    /// 300000 ms): nil acquired, else the TTL to wait before retrying (queued at the tail
    /// the first time).
    fn try_lock(&self, thread: u64) -> Option<i64> {
        let (lease, field, wait, now) = (
            WATCHDOG_MS.to_string(),
            self.java.lock_name(thread),
            FAIR_WAIT_MS.to_string(),
            self.java.now().to_string(),
        );
        eval(
            self.java.server,
            FAIR_LOCK,
            &[
                self.name.as_bytes(),
                self.queue.as_bytes(),
                self.timeout.as_bytes(),
            ],
            &[
                lease.as_bytes(),
                field.as_bytes(),
                wait.as_bytes(),
                now.as_bytes(),
            ],
        )
    }

    /// `unlock()` of thread `thread` (then the client deletes the latch).
    fn unlock(&self, thread: u64) -> Option<i64> {
        self.unlock_field(&self.java.lock_name(thread))
    }

    /// Redisson's fair unlock script for the hash field `field` (any client's owner).
    fn unlock_field(&self, field: &str) -> Option<i64> {
        let latch = self.java.unlock_latch(&self.name);
        let (lease, now, latch_ms) = (
            WATCHDOG_MS.to_string(),
            self.java.now().to_string(),
            LATCH_TIMEOUT_MS.to_string(),
        );
        let r = eval(
            self.java.server,
            FAIR_UNLOCK,
            &[
                self.name.as_bytes(),
                self.queue.as_bytes(),
                self.timeout.as_bytes(),
                self.channel.as_bytes(),
                latch.as_bytes(),
            ],
            &[
                b"0",
                lease.as_bytes(),
                field.as_bytes(),
                now.as_bytes(),
                PUBLISH,
                latch_ms.as_bytes(),
            ],
        );
        let _: i64 = cmd(self.java.server, &["DEL", &latch]);
        r
    }

    /// The wait queue, head first.
    fn queue(&self) -> Vec<String> {
        cmd(self.java.server, &["LRANGE", &self.queue, "0", "-1"])
    }

    /// A waiter's own wake channel: `redisson_lock__channel:{name}:<lockName>`.
    fn waiter_channel(&self, thread: u64) -> String {
        format!("{}:{}", self.channel, self.java.lock_name(thread))
    }
}

/// The lease of the crashing holder's permit, ms.
const HOLDER_LEASE_MS: u64 = 1_500;

/// Start a distlock holder of one leased permit (lease [`HOLDER_LEASE_MS`]) in a child
/// process: the `family` example's `leased-hold`, which prints `held <id>` and then holds the
/// permit until it is killed, never releasing.
fn spawn_crashing_holder(server: &RedisServer, name: &str) -> KillOnDrop {
    let child = Command::new(example_bin("family"))
        .args([
            "leased-hold",
            &server.url(),
            name,
            &HOLDER_LEASE_MS.to_string(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn the crashing holder");
    KillOnDrop(child)
}

/// A child process killed (SIGKILL) and reaped when dropped, so a failing test leaves none.
struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

// ---------------------------------------------------------------------------------------
// LeasedSemaphore = RPermitExpirableSemaphore
// ---------------------------------------------------------------------------------------

/// Both sides count a leased semaphore's permits alike: a distlock lease is in Redisson's
/// zset `{name}:timeout` under the permit id's 16 raw bytes with an epoch-ms expiry, so
/// Redisson's getPermits/acquiredPermits/availablePermits count it, and a Redisson lease is
/// counted by distlock's `permits()` and refuses distlock's `try_acquire` when none is left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leased_permits_are_counted_alike_by_both_sides() {
    let (server, client) = setup().await;
    let java = Java::new(&server, 0);
    let sem = client.leased_semaphore("sem-count");
    let jsem = java.semaphore("sem-count");
    assert!(sem.try_set_permits(2).await.unwrap());
    let permit = sem
        .lease(Duration::from_secs(30))
        .try_acquire()
        .await
        .unwrap()
        .expect("distlock takes one of two free permits");
    let taken_at = server_time_ms(&server);

    assert_eq!(
        jsem.get_permits(),
        2,
        "Redisson getPermits (available + leased)"
    );
    assert_eq!(jsem.acquired_permits(), 1, "Redisson acquiredPermits");
    assert_eq!(jsem.available_permits(), 1, "Redisson availablePermits");
    let member = permit_member(permit.id());
    let expiry = zscore(&server, "{sem-count}:timeout", &member).unwrap_or_else(|| {
        panic!(
            "distlock's permit {} is not in {{sem-count}}:timeout under its 16 raw bytes; keys: {:?}",
            permit.id(),
            keys(&server)
        )
    });
    assert!(
        expiry > taken_at && expiry <= taken_at + 30_000 + 1_000,
        "the lease's score {expiry} is not its expiry in ms (taken at {taken_at}, lease 30 s)"
    );

    let jid = random_id();
    assert_eq!(
        jsem.try_acquire(&jid, 30_000),
        SemAcquire::Acquired,
        "Redisson takes the second permit"
    );
    assert_eq!(
        sem.permits().await.unwrap(),
        (0, 2),
        "distlock's (available, leased) with one lease on each side"
    );
    assert!(
        sem.lease(Duration::from_secs(30))
            .try_acquire()
            .await
            .unwrap()
            .is_none(),
        "distlock took a third permit of two"
    );

    permit.release().await.unwrap();
    assert_eq!(jsem.release(&jid), 1, "Redisson gives its permit back");
    assert_eq!(jsem.available_permits(), 2);
    assert_eq!(sem.permits().await.unwrap(), (2, 0));
}

/// Redisson's `setPermits(2)` on a 2-permit semaphore with one distlock and one Redisson
/// lease changes nothing (it counts distlock's lease as taken): no third holder on either
/// side; after distlock's release the total is still 2.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redisson_set_permits_counts_distlock_leases() {
    let (server, client) = setup().await;
    let java = Java::new(&server, 0);
    let sem = client.leased_semaphore("sem-set");
    let jsem = java.semaphore("sem-set");
    assert!(sem.try_set_permits(2).await.unwrap());
    let permit = sem
        .lease(Duration::from_secs(30))
        .try_acquire()
        .await
        .unwrap()
        .expect("distlock takes a permit");
    let jid = random_id();
    assert_eq!(jsem.try_acquire(&jid, 30_000), SemAcquire::Acquired);

    jsem.set_permits(2);
    let available: i64 = cmd(&server, &["GET", "sem-set"]);
    assert_eq!(
        available, 0,
        "setPermits(2) with both permits leased left permits available"
    );
    assert!(
        sem.lease(Duration::from_secs(30))
            .try_acquire()
            .await
            .unwrap()
            .is_none(),
        "a third holder (distlock) got a permit of two"
    );
    let third = jsem.try_acquire(&random_id(), 30_000);
    assert!(
        matches!(third, SemAcquire::RetryAt(_)),
        "a third holder (Redisson) got {third:?}, not a retry time"
    );
    assert_eq!(sem.permits().await.unwrap(), (0, 2));

    permit.release().await.unwrap();
    assert_eq!(jsem.get_permits(), 2, "the total after distlock's release");
    assert_eq!(jsem.available_permits(), 1);
    assert_eq!(jsem.release(&jid), 1);
}

/// A Redisson holder that never releases (its 300 ms lease ends) does not block distlock: a
/// distlock waiter on the 1-permit semaphore reclaims the permit when that lease ends,
/// bounded by the lease (no wake message is ever sent), not by its 3 s wait.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn distlock_waiter_reclaims_a_crashed_redisson_permit() {
    let (server, client) = setup().await;
    let java = Java::new(&server, 0);
    let sem = client.leased_semaphore("crash-java");
    let jsem = java.semaphore("crash-java");
    assert!(sem.try_set_permits(1).await.unwrap());
    let jid = random_id();
    assert_eq!(jsem.try_acquire(&jid, 300), SemAcquire::Acquired);

    let start = Instant::now();
    let got = sem
        .lease(Duration::from_secs(30))
        .try_acquire_for(Duration::from_secs(3))
        .await
        .unwrap();
    let waited = start.elapsed();
    let permit = got.unwrap_or_else(|| {
        panic!(
            "no permit within 3 s although the Redisson lease ended after 300 ms; keys: {:?}",
            keys(&server)
        )
    });
    assert!(
        waited >= Duration::from_millis(250),
        "got the permit after {waited:?}, before the Redisson lease ended"
    );
    assert!(
        waited < Duration::from_secs(2),
        "got the permit only after {waited:?}: not woken by the end of the lease"
    );
    assert_eq!(
        zscore(&server, "{crash-java}:timeout", &jid),
        None,
        "the Redisson lease is still there"
    );
    let leases: u64 = cmd(&server, &["ZCARD", "{crash-java}:timeout"]);
    assert_eq!(leases, 1, "distlock's own lease is the only one");
    permit.release().await.unwrap();
    assert_eq!(jsem.available_permits(), 1);
}

/// A distlock holder that crashed (a child process holding a leased permit with a 1.5 s
/// lease, killed with SIGKILL) leaves its lease in Redisson's zset: Redisson's tryAcquire is told
/// to retry at exactly that lease's end while it runs, and succeeds once it has ended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redisson_reclaims_a_crashed_distlock_permit() {
    let (server, client) = setup().await;
    let java = Java::new(&server, 0);
    let sem = client.leased_semaphore("crash-rust");
    let jsem = java.semaphore("crash-rust");
    assert!(sem.try_set_permits(1).await.unwrap());
    let mut child = spawn_crashing_holder(&server, "crash-rust");
    let stdout = child.0.stdout.take().unwrap();
    // The first line of the child's own output (libtest prints its own lines around it).
    let line = tokio::task::spawn_blocking(move || {
        BufReader::new(stdout)
            .lines()
            .map_while(|l| l.ok())
            .find(|l| l.starts_with("held ") || l.starts_with("none"))
    })
    .await
    .unwrap()
    .expect("the holder exited without taking a permit");
    let held_at = server_time_ms(&server);
    let id = line
        .trim()
        .strip_prefix("held ")
        .unwrap_or_else(|| panic!("the holder got no permit: {line:?}"));
    let member = permit_member(id);
    let expiry = zscore(&server, "{crash-rust}:timeout", &member).unwrap_or_else(|| {
        panic!(
            "the distlock holder's permit {id} is not in {{crash-rust}}:timeout under its 16 raw \
             bytes; keys: {:?}",
            keys(&server)
        )
    });
    assert!(
        expiry > held_at && expiry <= held_at + HOLDER_LEASE_MS + 250,
        "the lease's score {expiry} is not its expiry in ms (held at {held_at}, lease \
         {HOLDER_LEASE_MS} ms)"
    );
    drop(child); // SIGKILL: the permit is never released

    let jid = random_id();
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut refused = 0;
    loop {
        let now = java.now();
        match jsem.try_acquire_at(&jid, 30_000, now) {
            SemAcquire::Acquired => {
                assert!(
                    now >= expiry,
                    "Redisson took the permit at {now}, before the distlock lease ended at {expiry}"
                );
                break;
            }
            SemAcquire::RetryAt(at) => {
                assert!(
                    now < expiry,
                    "at {now}, after the distlock lease ended at {expiry}, Redisson got no permit"
                );
                assert_eq!(at, expiry, "Redisson is told to retry when the lease ends");
                refused += 1;
            }
            SemAcquire::Nothing => panic!("Redisson found no permit and no lease to wait for"),
        }
        assert!(Instant::now() < deadline, "Redisson never got the permit");
        tokio::time::sleep(RETRY).await;
    }
    assert!(
        refused > 0,
        "Redisson's first try came after the lease ended: nothing was tested before it"
    );
    assert_eq!(
        zscore(&server, "{crash-rust}:timeout", &member),
        None,
        "the dead holder's lease was not reclaimed"
    );
    assert_eq!(sem.permits().await.unwrap(), (0, 1));
    assert_eq!(jsem.release(&jid), 1);
}

/// Migration from distlock's old lease layout: a lease of a running old-version holder (a
/// 32-hex-character member of `redisson__timeout__set:{name}`, counter 0) is moved by the
/// next distlock call to `{name}:timeout` under its 16 raw bytes with the same expiry, the
/// old key is gone, and the permit is still counted as leased by both sides.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn old_layout_leases_move_to_redissons_zset() {
    let (server, client) = setup().await;
    let java = Java::new(&server, 0);
    let raw = random_id();
    let old_id = hex(&raw);
    let expiry = (server_time_ms(&server) + 60_000).to_string();
    let _: () = cmd(&server, &["SET", "migrate", "0"]);
    let _: i64 = cmd(
        &server,
        &["ZADD", "redisson__timeout__set:{migrate}", &expiry, &old_id],
    );

    let sem = client.leased_semaphore("migrate");
    assert_eq!(
        sem.permits().await.unwrap(),
        (0, 1),
        "(available, leased) with the old holder's lease"
    );
    assert_eq!(
        zscore(&server, "{migrate}:timeout", &raw),
        Some(expiry.parse().unwrap()),
        "the old lease is not in {{migrate}}:timeout under its raw bytes with its expiry; keys: {:?}",
        keys(&server)
    );
    let leases: u64 = cmd(&server, &["ZCARD", "{migrate}:timeout"]);
    assert_eq!(
        leases, 1,
        "the old lease was copied under another member too"
    );
    let old: bool = cmd(&server, &["EXISTS", "redisson__timeout__set:{migrate}"]);
    assert!(!old, "the old leases key is still there");
    let jsem = java.semaphore("migrate");
    assert_eq!(jsem.acquired_permits(), 1);
    assert_eq!(jsem.get_permits(), 1);
}

// ---------------------------------------------------------------------------------------
// Fencing tokens = RFencedLock
// ---------------------------------------------------------------------------------------

/// Fencing tokens interleave with `RFencedLock`'s `INCR redisson_lock_token:{name}`: each
/// grant, on either side, gets a token above every earlier one (Redisson → distlock →
/// Redisson → distlock → Redisson), and a distlock grant leaves its token in Redisson's
/// counter. A distlock holder refuses Redisson without drawing a token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fencing_tokens_interleave_with_rfencedlock() {
    let (server, client) = setup().await;
    let java = Java::new(&server, 0);
    let jlock = java.lock("fenced");
    let lock = client.lock("fenced");
    let token_key = "redisson_lock_token:{fenced}";
    let stored = || -> Option<String> { cmd(&server, &["GET", token_key]) };

    let r1 = jlock
        .lock_and_get_token(1)
        .expect("Redisson locks a free lock");
    assert_eq!(r1, 1, "Redisson's first token");
    assert_eq!(jlock.unlock(1), Some(1));

    let g = lock.acquire().await.unwrap();
    let d1 = g.fencing_token().get();
    assert!(
        d1 > r1 as u128,
        "distlock's token {d1} after Redisson's {r1}"
    );
    assert_eq!(
        stored(),
        Some(d1.to_string()),
        "{token_key} after distlock's grant of token {d1}"
    );
    let refused = jlock.lock_and_get_token(2);
    assert!(
        matches!(refused, Err(pttl) if pttl > 0),
        "Redisson's attempt while distlock holds: {refused:?}"
    );
    assert_eq!(
        stored(),
        Some(d1.to_string()),
        "a refused attempt drew a token"
    );
    g.release().await.unwrap();

    let r2 = jlock.lock_and_get_token(1).expect("Redisson locks again");
    assert!(
        r2 as u128 > d1,
        "Redisson's token {r2} after distlock's {d1}"
    );
    assert_eq!(jlock.unlock(1), Some(1));

    let g = lock.acquire().await.unwrap();
    let d2 = g.fencing_token().get();
    assert!(
        d2 > r2 as u128,
        "distlock's token {d2} after Redisson's {r2}"
    );
    assert_eq!(stored(), Some(d2.to_string()));
    g.release().await.unwrap();

    let r3 = jlock
        .lock_and_get_token(1)
        .expect("Redisson locks a third time");
    assert!(
        r3 as u128 > d2,
        "Redisson's token {r3} after distlock's {d2}"
    );
    assert_eq!(jlock.unlock(1), Some(1));
}

/// While an `RFencedLock` holder holds, distlock's `Lock::status()` reports the Redisson
/// holder and its token (the value of `redisson_lock_token:{name}`) as the holder's fencing
/// token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_status_shows_the_rfencedlock_holders_token() {
    let (server, client) = setup().await;
    let java = Java::new(&server, 0);
    let jlock = java.lock("fenced-status");
    assert_eq!(jlock.lock_and_get_token(1), Ok(1));
    assert_eq!(jlock.unlock(1), Some(1));
    let token = jlock.lock_and_get_token(1).expect("Redisson locks again");
    assert_eq!(token, 2);
    let stored: u64 = cmd(&server, &["GET", "redisson_lock_token:{fenced-status}"]);
    assert_eq!(stored, 2);

    let status = client.lock("fenced-status").status().await.unwrap();
    assert_eq!(status.holders, vec![(java.lock_name(1), 1)]);
    assert_eq!(
        status.fencing_token,
        Some(FencingToken(u128::from(stored))),
        "the Redisson holder's token in {status:?}"
    );
    assert_eq!(jlock.unlock(1), Some(1));
}

/// distlock never creates Redisson's token counter: grants, re-entries, status and releases
/// of a plain and a fair lock leave no `redisson_lock_token:*` key when none existed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn distlock_does_not_create_redissons_token_counter() {
    let (server, client) = setup().await;
    let token_keys = || -> Vec<String> {
        keys(&server)
            .into_iter()
            .filter(|k| k.starts_with("redisson_lock_token"))
            .collect()
    };
    let lock = client.lock("no-counter");
    let g = lock.acquire().await.unwrap();
    let inner = g.reenter().await.unwrap();
    let _ = lock.status().await.unwrap();
    assert_eq!(token_keys(), Vec::<String>::new(), "while held");
    inner.release().await.unwrap();
    g.release().await.unwrap();
    let fair = client.fair_lock("no-counter-fair");
    let g = fair.acquire().await.unwrap();
    assert_eq!(
        token_keys(),
        Vec::<String>::new(),
        "while the fair lock is held"
    );
    g.release().await.unwrap();
    assert_eq!(token_keys(), Vec::<String>::new(), "after the releases");
}

// ---------------------------------------------------------------------------------------
// The holder field under Redisson's scripts
// ---------------------------------------------------------------------------------------

/// A distlock-held plain lock carries the holder field; Redisson's `unlock` script,
/// releasing the distlock owner's holds, takes one hold away (the field stays with the
/// remaining hold) and then deletes the key, field and all, as it does its own; a Redisson
/// waiter then locks the free lock. The same for a fair lock and Redisson's fair `unlock`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redissons_unlock_removes_a_distlock_hold_with_its_holder_field() {
    let (server, client) = setup().await;
    let java = Java::new(&server, 0);
    let holder_field = |key: &str| -> Option<String> {
        cmd(&server, &["HGET", key, distlock::layout::HOLDER_FIELD])
    };

    let guard = client.lock("interop-holder").acquire().await.unwrap();
    let inner = guard.reenter().await.unwrap();
    let recorded = holder_field("interop-holder").expect("the grant recorded its holder");
    let jlock = java.lock("interop-holder");
    assert!(jlock.lock(1).is_some(), "Redisson is refused while held");
    let owner = guard.owner().as_str().to_string();
    assert_eq!(jlock.unlock_field(&owner), Some(0), "one of two holds");
    assert_eq!(
        holder_field("interop-holder").as_deref(),
        Some(recorded.as_str()),
        "the field stays with the remaining hold"
    );
    assert_eq!(jlock.unlock_field(&owner), Some(1), "the last hold");
    assert_eq!(
        keys(&server)
            .into_iter()
            .filter(|k| k.starts_with("interop-holder"))
            .collect::<Vec<_>>(),
        Vec::<String>::new(),
        "Redisson's unlock left the key behind"
    );
    assert_eq!(jlock.lock(1), None, "Redisson locks the free lock");
    assert_eq!(jlock.unlock(1), Some(1));
    let _ = (inner.forget(), guard.forget());

    let fair = client
        .fair_lock("interop-fair-holder")
        .acquire()
        .await
        .unwrap();
    assert!(holder_field("interop-fair-holder").is_some());
    let jfair = java.fair_lock("interop-fair-holder");
    assert_eq!(jfair.unlock_field(fair.owner().as_str()), Some(1));
    let exists: bool = cmd(&server, &["EXISTS", "interop-fair-holder"]);
    assert!(!exists, "Redisson's fair unlock left the key behind");
    let _ = fair.forget();
}

// ---------------------------------------------------------------------------------------
// acquire_as on a Redisson hold
// ---------------------------------------------------------------------------------------

/// `acquire_as` with a Redisson `RLock` holder's lockName re-enters its hold (hold count 2)
/// with a real fencing token: not 0, above the token of the lock's earlier distlock grant,
/// and reported again by the next re-entry. Redisson's own hold survives both releases.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquire_as_on_a_redisson_hold_reports_a_real_token() {
    let (server, client) = setup().await;
    let lock = client.lock("adopt-java");
    let earlier = lock.acquire().await.unwrap();
    let earlier_token = earlier.fencing_token();
    earlier.release().await.unwrap();

    let java = Java::new(&server, 0);
    let jlock = java.lock("adopt-java");
    assert_eq!(jlock.lock(1), None, "Redisson locks the free lock");
    let owner = Owner::parse(&java.lock_name(1)).unwrap();

    let g1 = lock.acquire_as(&owner).await.unwrap();
    assert_eq!(g1.hold_count(), 2, "re-entered Redisson's hold");
    let token = g1.fencing_token();
    assert!(
        token.get() > 0,
        "acquire_as on a Redisson hold reported token {token}"
    );
    assert!(
        token > earlier_token,
        "token {token} not above the earlier grant's {earlier_token}"
    );
    let g2 = lock.acquire_as(&owner).await.unwrap();
    assert_eq!(g2.hold_count(), 3);
    assert_eq!(g2.fencing_token(), token, "the second re-entry's token");

    g2.release().await.unwrap();
    g1.release().await.unwrap();
    let holds: Option<String> = cmd(&server, &["HGET", "adopt-java", &java.lock_name(1)]);
    assert_eq!(holds.as_deref(), Some("1"), "Redisson's own hold");
    assert_eq!(jlock.unlock(1), Some(1), "Redisson unlocks its last hold");
    let exists: bool = cmd(&server, &["EXISTS", "adopt-java"]);
    assert!(!exists);
}

// ---------------------------------------------------------------------------------------
// FairLock = RFairLock, mixed queues
// ---------------------------------------------------------------------------------------

/// The mixed fair-lock scenario, with the Java clock `skew_ms` ahead of the server's:
/// Redisson R0 holds; R1 (Redisson), D (distlock) and R2 (Redisson) queue in that order;
/// after R0's unlock the lock goes R1 → D → R2, and never to two at once.
async fn mixed_fair_queue(skew_ms: i64) {
    let (server, client) = setup().await;
    let java = Java::new(&server, skew_ms);
    let name = "mixed-fair";
    let jfair = java.fair_lock(name);
    let (r0, r1, r2) = (1, 2, 3);
    let holders = || -> Vec<String> {
        let mut h: Vec<String> = cmd(&server, &["HKEYS", name]);
        h.retain(|f| f.contains(':') && !f.starts_with("distlock:"));
        h
    };

    assert_eq!(jfair.try_lock(r0), None, "R0 locks the free fair lock");
    let ttl = jfair.try_lock(r1);
    assert!(matches!(ttl, Some(t) if t > 0), "R1 is queued: {ttl:?}");
    let lock = client.fair_lock(name);
    let mut d = tokio::spawn(async move { lock.acquire().await });
    assert!(
        eventually(Duration::from_secs(2), || jfair.queue().len() == 2).await,
        "D did not queue behind R1: {:?}",
        jfair.queue()
    );
    assert!(jfair.try_lock(r2).is_some(), "R2 is queued");
    let queue = jfair.queue();
    assert_eq!(queue.len(), 3, "{queue:?}");
    assert_eq!(queue[0], java.lock_name(r1), "{queue:?}");
    assert_eq!(queue[2], java.lock_name(r2), "{queue:?}");
    let d_owner = queue[1].clone();

    assert_eq!(jfair.unlock(r0), Some(1), "R0 unlocks");

    // R1 is first: it gets the lock; D and R2 do not, while R1 holds it either.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        assert!(jfair.try_lock(r2).is_some(), "R2 got the lock before R1");
        assert!(!d.is_finished(), "D got the lock before R1");
        if jfair.try_lock(r1).is_none() {
            break;
        }
        assert!(Instant::now() < deadline, "R1 never got the lock");
        tokio::time::sleep(RETRY).await;
    }
    for _ in 0..5 {
        tokio::time::sleep(RETRY).await;
        assert!(jfair.try_lock(r2).is_some(), "R2 got the lock R1 holds");
        assert!(!d.is_finished(), "D got the lock R1 holds");
    }
    assert_eq!(holders(), vec![java.lock_name(r1)]);
    assert_eq!(jfair.unlock(r1), Some(1), "R1 unlocks");

    // D is next: R2's tries keep failing until D holds, and while it holds.
    let deadline = Instant::now() + Duration::from_secs(5);
    while !d.is_finished() {
        assert!(
            jfair.try_lock(r2).is_some(),
            "R2 got the lock before D; queue {:?}",
            jfair.queue()
        );
        assert!(
            Instant::now() < deadline,
            "D never got the lock after R1; queue {:?}",
            jfair.queue()
        );
        tokio::time::sleep(RETRY).await;
    }
    let guard = (&mut d)
        .await
        .unwrap()
        .expect("D got the fair lock after R1");
    assert_eq!(guard.owner().as_str(), d_owner, "D's queue entry");
    assert_eq!(holders(), vec![d_owner.clone()]);
    for _ in 0..3 {
        assert!(jfair.try_lock(r2).is_some(), "R2 got the lock D holds");
        tokio::time::sleep(RETRY).await;
    }

    // D's release wakes R2 on its own channel (a Redisson waiter otherwise sleeps for the
    // TTL it was given, up to the 30 s lease), and R2 gets the lock.
    let mut wake = redis::Client::open(server.url())
        .unwrap()
        .get_async_pubsub()
        .await
        .unwrap();
    wake.subscribe(jfair.waiter_channel(r2)).await.unwrap();
    guard.release().await.unwrap();
    let msg = tokio::time::timeout(Duration::from_secs(2), wake.on_message().next())
        .await
        .expect("D's release did not wake R2 on its channel")
        .expect("wake subscription ended");
    assert_eq!(
        msg.get_payload::<String>().unwrap(),
        "0",
        "the unlock message"
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    while jfair.try_lock(r2).is_some() {
        assert!(
            Instant::now() < deadline,
            "R2 never got the lock after D; queue {:?}",
            jfair.queue()
        );
        tokio::time::sleep(RETRY).await;
    }
    assert_eq!(holders(), vec![java.lock_name(r2)]);
    assert_eq!(jfair.unlock(r2), Some(1), "R2 unlocks");
    assert_eq!(jfair.queue(), Vec::<String>::new(), "everyone was served");
    let waiting: u64 = cmd(&server, &["ZCARD", &jfair.timeout]);
    assert_eq!(waiting, 0, "deadlines left behind");
}

/// A fair-lock queue mixing Redisson and distlock waiters grants in arrival order (R1, D,
/// R2) with mutual exclusion, when the Java host's clock agrees with the server's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mixed_fair_queue_keeps_fifo_and_exclusion() {
    mixed_fair_queue(0).await;
}

/// A distlock fair release with a distlock waiter at the head and a Redisson waiter behind
/// it: the release hands the lock to the distlock waiter (no attempt of its own), moves the
/// Redisson waiter's score up by the grantee's wait (Redisson's grant arithmetic) and leaves
/// it queued and refused; the next release, with the Redisson waiter at the head, wakes it
/// on its own channel, and it gets the lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fair_hand_off_keeps_a_redisson_waiters_place_and_score() {
    let (server, client) = setup().await;
    let java = Java::new(&server, 0);
    let name = "mixed-fair-handoff";
    let jfair = java.fair_lock(name);
    let r = 4;
    let lock = client.fair_lock(name);
    let held = lock.acquire().await.unwrap();
    let wait = Duration::from_secs(30);
    let d = {
        let lock = lock.clone();
        tokio::spawn(async move { lock.try_acquire_for(wait).await.unwrap() })
    };
    assert!(eventually(Duration::from_secs(2), || jfair.queue().len() == 1).await);
    assert!(jfair.try_lock(r).is_some(), "R is queued behind D");
    let score = |who: &str| -> Option<i64> { cmd(&server, &["ZSCORE", &jfair.timeout, who]) };
    let r_name = java.lock_name(r);
    let before = score(&r_name).expect("R has a score");
    held.release().await.unwrap();
    let got = tokio::time::timeout(Duration::from_secs(2), d)
        .await
        .expect("D was not handed the lock")
        .unwrap()
        .expect("D got the lock");
    assert_eq!(jfair.queue(), vec![r_name.clone()], "R stays queued");
    assert_eq!(
        score(&r_name),
        Some(before - wait.as_millis() as i64),
        "Redisson's grant arithmetic: R's score moves up by D's wait"
    );
    assert!(jfair.try_lock(r).is_some(), "R got the lock D holds");
    let mut wake = redis::Client::open(server.url())
        .unwrap()
        .get_async_pubsub()
        .await
        .unwrap();
    wake.subscribe(jfair.waiter_channel(r)).await.unwrap();
    got.release().await.unwrap();
    let msg = tokio::time::timeout(Duration::from_secs(2), wake.on_message().next())
        .await
        .expect("D's release did not wake R on its channel")
        .expect("wake subscription ended");
    assert_eq!(msg.get_payload::<String>().unwrap(), "0");
    assert_eq!(jfair.try_lock(r), None, "R locks the lock it was woken for");
    assert_eq!(jfair.unlock(r), Some(1));
    assert_eq!(jfair.queue(), Vec::<String>::new());
}

/// FIFO while the lock is free: a Redisson waiter at the head, woken on its own channel but
/// not yet back, keeps its place; a distlock waiter second in line (hand-off off, so it
/// attempts by itself) is refused until then, however often it tries. A fair lock that let
/// the second waiter take a free lock would pass the head.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_waiter_does_not_pass_a_redisson_head_while_the_lock_is_free() {
    let (_server, client) = setup().await;
    let server = &_server;
    let java = Java::new(server, 0);
    let name = "fifo-free";
    let jfair = java.fair_lock(name);
    let lock = client.fair_lock(name).handoff(false);
    let held = lock.acquire().await.unwrap();
    let r = 7;
    assert!(
        jfair.try_lock(r).is_some(),
        "R queues first, behind the holder"
    );
    let second = {
        let lock = lock.clone();
        tokio::spawn(async move { lock.try_acquire_for(Duration::from_secs(4)).await })
    };
    assert!(eventually(Duration::from_secs(2), || jfair.queue().len() == 2).await);
    held.release().await.unwrap();
    let got = second.await.unwrap().unwrap();
    assert!(
        got.is_none(),
        "the second waiter took the free lock while the head R was queued"
    );
    assert_eq!(jfair.try_lock(r), None, "R, first in line, gets the lock");
    assert_eq!(jfair.unlock(r), Some(1));
}

/// The same mixed fair-lock queue, with the Java host's clock 10 s ahead of the server's:
/// Redisson's stale-waiter check (on the Java clock) never drops the live distlock waiter.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mixed_fair_queue_keeps_fifo_with_java_clock_10s_ahead() {
    mixed_fair_queue(10_000).await;
}

// ---------------------------------------------------------------------------------------
// Direct hand-off beside Redisson clients
// ---------------------------------------------------------------------------------------

/// The owner fields of a lock hash (what holds it), leaving out distlock's token, holder and
/// queued fields: at most one owner at any time.
fn lock_owners(server: &RedisServer, key: &str) -> Vec<String> {
    use distlock::layout::{HOLDER_FIELD, QUEUED_FIELD, TOKEN_FIELD};
    let fields: Vec<String> = cmd(server, &["HKEYS", key]);
    fields
        .into_iter()
        .filter(|f| f != TOKEN_FIELD && f != HOLDER_FIELD && f != QUEUED_FIELD)
        .collect()
}

/// A Redisson holder with distlock waiters queued: Redisson's unlock frees the lock and
/// publishes its unlock message as always; the woken distlock waiter's attempt hands the lock
/// to the first queued waiter, so queue order survives a Redisson release.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redisson_release_reaches_queued_distlock_waiters_in_order() {
    let (server, client) = setup().await;
    let java = Java::new(&server, 0);
    let jlock = java.lock("mixed-rd");
    assert_eq!(jlock.lock(1), None, "Redisson locks the free lock");
    let lock = client.lock("mixed-rd");
    let order = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for i in 0..3 {
        let (lock, order) = (lock.clone(), order.clone());
        tasks.push(tokio::spawn(async move {
            let g = lock.acquire().await.unwrap();
            order.lock().unwrap().push(i);
            tokio::time::sleep(Duration::from_millis(20)).await;
            g.release().await.unwrap();
        }));
        let queue = distlock::layout::lock_queue("mixed-rd");
        assert!(
            eventually(Duration::from_secs(2), || cmd::<i64>(
                &server,
                &["ZCARD", &queue]
            ) == i + 1)
            .await,
            "distlock waiter {i} did not queue"
        );
    }
    assert_eq!(lock_owners(&server, "mixed-rd"), vec![java.lock_name(1)]);
    assert_eq!(
        jlock.unlock(1),
        Some(1),
        "Redisson's unlock deletes the key"
    );
    for t in tasks {
        tokio::time::timeout(Duration::from_secs(5), t)
            .await
            .expect("a distlock waiter was not reached after Redisson's release")
            .unwrap();
    }
    assert_eq!(*order.lock().unwrap(), vec![0, 1, 2]);
    assert_eq!(jlock.lock(1), None, "Redisson locks it again once free");
    assert_eq!(jlock.unlock(1), Some(1));
}

/// A distlock holder with a distlock waiter and a Redisson waiter: the release hands the lock
/// to the distlock waiter without publishing the unlock message (Redisson sees it held);
/// the distlock waiter's release, with no distlock waiter left, frees it with the unlock
/// message and Redisson gets it. One owner at a time throughout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn distlock_hands_off_past_a_redisson_waiter_then_wakes_it() {
    let (server, client) = setup().await;
    let java = Java::new(&server, 0);
    let jlock = java.lock("mixed-dr");
    let lock = client.lock("mixed-dr");
    let held = lock.acquire().await.unwrap();
    assert!(
        jlock.lock(7).is_some(),
        "Redisson is refused while distlock holds"
    );
    let waiter = {
        let lock = lock.clone();
        tokio::spawn(async move { lock.acquire().await.unwrap() })
    };
    let queue = distlock::layout::lock_queue("mixed-dr");
    assert!(
        eventually(Duration::from_secs(2), || cmd::<i64>(
            &server,
            &["ZCARD", &queue]
        ) == 1)
        .await
    );
    // What a Redisson waiter listens to.
    let mut wake = redis::Client::open(server.url())
        .unwrap()
        .get_async_pubsub()
        .await
        .unwrap();
    wake.subscribe("redisson_lock__channel:{mixed-dr}")
        .await
        .unwrap();
    held.release().await.unwrap();
    let got = tokio::time::timeout(Duration::from_secs(2), waiter)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        lock_owners(&server, "mixed-dr"),
        vec![got.owner().as_str().to_string()]
    );
    assert!(
        jlock.lock(7).is_some(),
        "Redisson sees the handed-off lock held"
    );
    {
        let mut messages = wake.on_message();
        assert!(
            tokio::time::timeout(Duration::from_millis(200), messages.next())
                .await
                .is_err(),
            "a hand-off published the unlock message"
        );
    }
    got.release().await.unwrap();
    let msg = tokio::time::timeout(Duration::from_secs(2), wake.on_message().next())
        .await
        .expect("the last release did not publish the unlock message")
        .unwrap();
    assert_eq!(msg.get_payload::<String>().unwrap(), "0");
    assert_eq!(jlock.lock(7), None, "Redisson acquires once woken");
    assert_eq!(lock_owners(&server, "mixed-dr"), vec![java.lock_name(7)]);
    assert_eq!(jlock.unlock(7), Some(1));
}

/// distlock's direct hand-off and Redisson share one leased semaphore. A Redisson release
/// (which hands nothing off) wakes a queued distlock waiter, which takes the permit; a permit
/// distlock hands to its next waiter is never free for Redisson's tryAcquire, and such a
/// release publishes nothing (no permit is left to wake anyone for); a distlock release with
/// nobody queued publishes the count on Redisson's channel, and Redisson takes the permit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn distlock_hand_off_and_redisson_share_a_leased_semaphore() {
    let (server, client) = setup().await;
    let java = Java::new(&server, 0);
    let sem = client.leased_semaphore("mixed");
    let jsem = java.semaphore("mixed");
    assert!(sem.try_set_permits(1).await.unwrap());
    let jid = random_id();
    assert_eq!(jsem.try_acquire(&jid, 30_000), SemAcquire::Acquired);
    let queued = || {
        cmd::<u64>(
            &server,
            &["ZCARD", &distlock::layout::permit_queue("mixed")],
        )
    };
    let spawn_waiter = || {
        let sem = sem.clone();
        tokio::spawn(async move { sem.lease(Duration::from_secs(20)).acquire().await.unwrap() })
    };
    let first = spawn_waiter();
    assert!(eventually(Duration::from_secs(2), || queued() == 1).await);
    assert_eq!(jsem.release(&jid), 1);
    let permit = tokio::time::timeout(Duration::from_secs(2), first)
        .await
        .expect("Redisson's release did not wake the queued distlock waiter")
        .unwrap();
    assert!(matches!(
        jsem.try_acquire(&random_id(), 30_000),
        SemAcquire::RetryAt(_)
    ));

    let second = spawn_waiter();
    assert!(eventually(Duration::from_secs(2), || queued() == 1).await);
    let mut con = redis::Client::open(server.url())
        .and_then(|c| c.get_connection())
        .unwrap();
    let mut messages = con.as_pubsub();
    messages.subscribe(&jsem.channel).unwrap();
    messages
        .set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    permit.release().await.unwrap();
    let permit = tokio::time::timeout(Duration::from_secs(2), second)
        .await
        .expect("the second distlock waiter was not handed the permit")
        .unwrap();
    assert!(
        messages.get_message().is_err(),
        "a release that handed its permit off woke Redisson's waiters"
    );
    assert!(matches!(
        jsem.try_acquire(&random_id(), 30_000),
        SemAcquire::RetryAt(_)
    ));

    permit.release().await.unwrap();
    let message = messages
        .get_message()
        .expect("a release with nobody queued published nothing for Redisson's waiters");
    assert_eq!(message.get_payload::<i64>().unwrap(), 1);
    assert_eq!(jsem.try_acquire(&random_id(), 30_000), SemAcquire::Acquired);
}

/// A Redisson writer and distlock writers on one read-write lock. Redisson's write unlock
/// frees the lock and publishes its message as always; the woken distlock writers' attempts
/// hand the lock to the first queued one, so queue order survives a Redisson release. A
/// distlock release that hands the write lock to the next distlock writer publishes nothing,
/// and Redisson sees the lock held; the last distlock release, with nobody queued, publishes
/// Redisson's message and Redisson gets the lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn distlock_writer_hand_off_and_redisson_share_a_read_write_lock() {
    let (server, client) = setup().await;
    let java = Java::new(&server, 0);
    let jwrite = java.write_lock("mixed-rw");
    assert_eq!(jwrite.lock(1), None, "Redisson write-locks the free lock");
    let rw = client.rw_lock("mixed-rw");
    let order = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let (go, _) = tokio::sync::broadcast::channel::<()>(1);
    let mut tasks = Vec::new();
    for i in 0..2 {
        let (rw, order, mut go) = (rw.clone(), order.clone(), go.subscribe());
        tasks.push(tokio::spawn(async move {
            let g = rw.write().await.unwrap();
            order.lock().unwrap().push(i);
            // The first holds until told to go, so the test can look at a hand-off.
            if i == 0 {
                let _ = go.recv().await;
            }
            g.release().await.unwrap();
        }));
        let queue = distlock::layout::rwlock_queue("mixed-rw");
        assert!(
            eventually(Duration::from_secs(2), || cmd::<i64>(
                &server,
                &["ZCARD", &queue]
            ) == i + 1)
            .await,
            "distlock writer {i} did not queue"
        );
    }
    assert_eq!(
        jwrite.unlock(1),
        Some(1),
        "Redisson's unlock frees the lock"
    );
    assert!(
        eventually(Duration::from_secs(5), || order.lock().unwrap().len() == 1).await,
        "no distlock writer was reached after Redisson's release"
    );
    assert!(
        jwrite.lock(2).is_some(),
        "Redisson is refused while distlock writes"
    );
    // What a Redisson waiter listens to.
    let mut wake = redis::Client::open(server.url())
        .unwrap()
        .get_async_pubsub()
        .await
        .unwrap();
    wake.subscribe("redisson_rwlock:{mixed-rw}").await.unwrap();
    go.send(()).unwrap();
    assert!(
        eventually(Duration::from_secs(5), || order.lock().unwrap().len() == 2).await,
        "the second distlock writer was not handed the lock"
    );
    for t in tasks {
        tokio::time::timeout(Duration::from_secs(5), t)
            .await
            .expect("a distlock writer did not finish")
            .unwrap();
    }
    assert_eq!(*order.lock().unwrap(), vec![0, 1], "arrival order");
    // One message: the last release's; the hand-off between the two published nothing.
    let msg = tokio::time::timeout(Duration::from_secs(2), wake.on_message().next())
        .await
        .expect("the last release did not publish Redisson's message")
        .unwrap();
    assert_eq!(msg.get_payload::<String>().unwrap(), "1");
    assert!(
        tokio::time::timeout(Duration::from_millis(200), wake.on_message().next())
            .await
            .is_err(),
        "the hand-off published Redisson's message too"
    );
    assert_eq!(jwrite.lock(2), None, "Redisson write-locks it once free");
    assert_eq!(jwrite.unlock(2), Some(1));
    for key in [
        distlock::layout::rwlock_queue("mixed-rw"),
        distlock::layout::rwlock_waiters("mixed-rw"),
    ] {
        assert!(!exists(&server, &key), "{key} left");
    }
}

/// Redisson readers and distlock readers share one read lock, either first: each side's
/// holds keep Redisson's timeout keys, so Redisson's read unlock keeps the lock while a
/// distlock read hold lives, and distlock's last read release (its fast path) deletes the
/// lock and its hold's timeout key and publishes Redisson's message, after which a Redisson
/// writer gets the lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn distlock_and_redisson_readers_share_a_read_lock() {
    let (server, client) = setup().await;
    let java = Java::new(&server, 0);
    let (jread, jwrite) = (java.read_lock("shared-r"), java.write_lock("shared-r"));
    let rw = client.rw_lock("shared-r");
    let mut wake = redis::Client::open(server.url())
        .unwrap()
        .get_async_pubsub()
        .await
        .unwrap();
    wake.subscribe("redisson_rwlock:{shared-r}").await.unwrap();
    let mut wake = wake.into_on_message();
    for distlock_first in [true, false] {
        let (ours, theirs) = if distlock_first {
            let g = rw.read().await.unwrap();
            (g, jread.lock(1))
        } else {
            let theirs = jread.lock(1);
            (rw.read().await.unwrap(), theirs)
        };
        assert_eq!(theirs, None, "Redisson shares the read lock");
        assert!(jwrite.lock(2).is_some(), "a Redisson writer is refused");
        assert_eq!(
            jread.unlock(1),
            Some(0),
            "a distlock read hold keeps the lock"
        );
        assert!(exists(&server, "shared-r"));
        let timeout = format!("{{shared-r}}:{}:rwlock_timeout:1", ours.owner().as_str());
        assert!(
            exists(&server, &timeout),
            "distlock's hold has Redisson's timeout key"
        );
        ours.release().await.unwrap();
        assert!(!exists(&server, "shared-r") && !exists(&server, &timeout));
        let msg = tokio::time::timeout(Duration::from_secs(2), wake.next())
            .await
            .expect("the last read release did not publish Redisson's message")
            .unwrap();
        assert_eq!(msg.get_payload::<String>().unwrap(), "0");
        assert_eq!(
            jwrite.lock(2),
            None,
            "Redisson writes after the last reader"
        );
        assert_eq!(jwrite.unlock(2), Some(1));
        while let Ok(Some(_)) = tokio::time::timeout(Duration::from_millis(50), wake.next()).await {
        }
    }
}
