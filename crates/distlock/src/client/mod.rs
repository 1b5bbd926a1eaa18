//! [`Client`]: the connection to one Redis deployment, and the factory of every primitive.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::conn::pubsub::Hub;
pub use crate::conn::PubSubMode;
use crate::conn::{Backend, Resend};
use crate::error::{Error, Result};
use crate::registry::HoldRegistry;
use crate::watchdog::Leases;

mod builder;
mod connect;
#[cfg(test)]
mod tests;

pub use builder::ClientBuilder;

/// Default lease of a lock acquired without an explicit one, kept alive by the watchdog.
///
/// 30 s, as Redisson's `lockWatchdogTimeout`.
pub const DEFAULT_WATCHDOG_LEASE: Duration = Duration::from_secs(30);
/// Default bound on how long [`Lock::acquire`](crate::Lock::acquire) waits: 60 s.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(60);
/// Default timeout of one command (and of the time a retried release stays idempotent).
///
/// 3 s, as Redisson's `timeout`.
pub const DEFAULT_COMMAND_TIMEOUT: Duration = Duration::from_secs(3);
/// Default timeout for establishing a connection: 5 s.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// A connection to one Redis (or Valkey) server.
///
/// One multiplexed command connection, one shared subscription connection, one watchdog task. Cheap
/// to clone (an `Arc`); clones share everything. Build one per process with [`Client::builder`] and
/// hand out clones.
///
/// The client has a random UUID (v4); lock owners it mints are `<uuid>:<n>`, the shape of
/// Redisson's `<uuid>:<threadId>` hash fields.
///
/// Dropping the last clone (and every [`Lock`](crate::Lock) and guard made from it) stops its background
/// tasks; locks it still held are released by their guards' drops or expire at their lease.
#[derive(Clone)]
pub struct Client {
    pub(crate) inner: Arc<ClientInner>,
}

pub(crate) struct ClientInner {
    id: uuid::Uuid,
    /// Shared with the releases that name their unlock latch only when a send needs it.
    id_str: Arc<str>,
    backend: Backend,
    hub: Hub,
    leases: Leases,
    /// The client's notice channel, subscribed for its life: force unlocks of its holds
    /// fire their lost signals at once (`notice.rs`).
    _notices: crate::conn::pubsub::Subscription,
    key_prefix: String,
    /// Floor of a fencing counter that does not exist yet: the legacy server-wide counter
    /// (`<prefix>distlock:fencing-counter`) as read at connect, a decimal string, `"0"` when
    /// absent. Passed to every granting script (see `keys::legacy_fencing_counter`).
    fencing_floor: Arc<str>,
    watchdog_lease: Duration,
    default_wait: Duration,
    command_timeout: Duration,
    /// Label acquire metrics by lock name ([`ClientBuilder::metrics_lock_names`]).
    metrics_lock_names: bool,
    runtime: tokio::runtime::Handle,
    registry: HoldRegistry,
    /// What a grant records of its holder beside the owner (`distlock:holder`, see
    /// `keys::HOLDER_FIELD`): `<app>;<host>;<pid>`, app and host cut to 16 and 24
    /// characters.
    holder_meta: String,
    seq: AtomicU64,
    /// The request sequences of the semaphore's and the latch's records, one per
    /// [`crate::keys::RecordKind`] (a record set holds a block of one kind's numbers: dense
    /// whatever else the client sends).
    record_seqs: [AtomicU64; crate::keys::RecordKind::COUNT],
    /// The latest job-lock value time this client wrote, in ms since the epoch
    /// ([`Client::job_stamp`]).
    job_stamp: AtomicU64,
    redacted_url: String,
    eviction_policy: Option<String>,
    app_name: String,
    connection_name: Arc<str>,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("id", &self.inner.id)
            .field("connection_name", &self.inner.connection_name)
            .field("url", &self.inner.redacted_url)
            .field("key_prefix", &self.inner.key_prefix)
            .field("watchdog_lease", &self.inner.watchdog_lease)
            .finish()
    }
}

impl Client {
    /// A builder; set at least [`ClientBuilder::url`].
    pub fn builder() -> ClientBuilder {
        ClientBuilder::default()
    }

    /// Connect with default settings: `Client::builder().url(url).build()`.
    ///
    /// # Errors
    /// As [`ClientBuilder::build`].
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future drops the half-made connection.
    pub async fn connect(url: &str) -> Result<Client> {
        Client::builder().url(url).build().await
    }

    /// The client's UUID, the first part of every owner it mints.
    pub fn id(&self) -> uuid::Uuid {
        self.inner.id
    }

    /// Returns the application name this client reports.
    ///
    /// Set by [`ClientBuilder::app_name`]; by default the executable's file name. It is part of
    /// this client's connection name and of the holder metadata of the plain and fair locks it
    /// is granted ([`LockStatus::holder`](crate::LockStatus::holder)).
    pub fn app_name(&self) -> &str {
        &self.inner.app_name
    }

    /// Returns the name this client's connections give themselves with `CLIENT SETNAME`.
    ///
    /// `CLIENT LIST` shows it as `distlock:<app>:<host>:<pid>`: the
    /// [application name](Client::app_name), this machine's host name (characters outside
    /// `[A-Za-z0-9._-]` replaced by `_`) and this process's id.
    ///
    /// The command connection, the subscription connections and the connections set aside
    /// for replica-confirmed grants are named; on Redis Cluster, node connections that
    /// redis-rs's cluster client opens after connect may stay unnamed (see the README's
    /// Observability section). An ACL user without `+client|setname` leaves every connection
    /// unnamed (nothing fails).
    pub fn connection_name(&self) -> &str {
        &self.inner.connection_name
    }

    /// The command side: connection, deployment and resend rules.
    pub(crate) fn backend(&self) -> &Backend {
        &self.inner.backend
    }

    /// The subscriptions (wake channels, grant channels, notices) this client shares.
    pub(crate) fn hub(&self) -> &Hub {
        &self.inner.hub
    }

    /// The watchdog's leases of this client's holds.
    pub(crate) fn leases(&self) -> &Leases {
        &self.inner.leases
    }

    /// The registry of this client's live holds (for `Drop` releases, lost signals and
    /// notices).
    pub(crate) fn registry(&self) -> &HoldRegistry {
        &self.inner.registry
    }

    /// The client's UUID as text, the first part of its owners and request ids.
    pub(crate) fn id_str(&self) -> &str {
        &self.inner.id_str
    }

    /// [`Client::id_str`], shared.
    pub(crate) fn id_shared(&self) -> Arc<str> {
        self.inner.id_str.clone()
    }

    /// The floor of a fencing counter that does not exist yet: the legacy server-wide
    /// counter as read at connect, a decimal string, `"0"` when absent (see
    /// `keys::legacy_fencing_counter`).
    pub(crate) fn fencing_floor(&self) -> &Arc<str> {
        &self.inner.fencing_floor
    }

    /// How long one command may take before it counts as failed.
    pub(crate) fn command_timeout(&self) -> Duration {
        self.inner.command_timeout
    }

    /// Whether acquire metrics carry the lock's name ([`ClientBuilder::metrics_lock_names`]).
    pub(crate) fn metrics_lock_names(&self) -> bool {
        self.inner.metrics_lock_names
    }

    /// The runtime the client's background tasks run on.
    pub(crate) fn runtime(&self) -> &tokio::runtime::Handle {
        &self.inner.runtime
    }

    /// What a grant records of its holder beside the owner: `<app>;<host>;<pid>`.
    pub(crate) fn holder_meta(&self) -> &str {
        &self.inner.holder_meta
    }

    /// The next number of this client's sequence (owners, request ids): never repeats.
    pub(crate) fn next_seq(&self) -> u64 {
        self.inner.seq.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// A fresh owner `<client-uuid>:<n>`, never returned before by this client.
    pub fn new_owner(&self) -> crate::Owner {
        crate::Owner::from_parts(self.id_str(), self.next_seq())
    }

    /// The time to write into a fresh job-lock value: now by the wall clock, in whole
    /// milliseconds, but later than every value time this client wrote before, so that no
    /// two values this client writes are equal (a job lock's value names its client, and a
    /// release deletes only the value its guard wrote).
    pub(crate) fn job_stamp(&self) -> std::time::SystemTime {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let mut last = self.inner.job_stamp.load(Ordering::Relaxed);
        loop {
            let next = now.max(last + 1);
            match self.inner.job_stamp.compare_exchange_weak(
                last,
                next,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return std::time::UNIX_EPOCH + Duration::from_millis(next),
                Err(seen) => last = seen,
            }
        }
    }

    /// A fresh request's record of kind `kind` (see [`crate::keys::Record`]) over `key`,
    /// living at least `lifetime_ms` ms: the next number of the kind's own sequence, in the
    /// epoch of now (call it when the request is first sent).
    pub(crate) fn record(
        &self,
        kind: crate::keys::RecordKind,
        key: &str,
        lifetime_ms: u64,
    ) -> crate::keys::Record {
        let seq = self.inner.record_seqs[kind.index()].fetch_add(1, Ordering::Relaxed);
        crate::keys::Record::new(
            kind,
            key,
            &self.inner.id_str,
            seq,
            process_ms(),
            self.latch_ttl_ms(),
            lifetime_ms,
        )
    }

    pub(crate) fn request_id(&self) -> String {
        let n = self.next_seq();
        format!("{}:r{n}", self.inner.id_str)
    }

    /// How long request latches live, in ms: the whole window in which a request may be
    /// resent (every send may wait the command timeout, plus the pauses between sends).
    pub(crate) fn latch_ttl_ms(&self) -> u64 {
        latch_ttl_ms_for(self.inner.command_timeout.as_millis() as u64)
    }

    /// The rule ([`Backend::eval`]) of a request whose latch makes it idempotent (a release,
    /// a count-down): resent until the server answers, within [`Client::resolve_window`];
    /// after that the error says the outcome is unknown.
    ///
    /// No resend goes out after the window: a send that reached the server after its latch
    /// expired would be applied a second time. A send still queued on a stalled server runs
    /// when the server resumes, and is then applied exactly once.
    ///
    /// Where the deployment confirms writes with replicas (Sentinel, Cluster), each send is
    /// confirmed by `WAIT` and resent (same request id) until it is
    /// ([`Resend::Confirmed`]); `key` routes it.
    pub(crate) fn latched<'k>(&self, key: &'k str) -> Resend<'k> {
        Resend::Confirmed {
            key,
            left: self.resolve_window(),
        }
    }

    /// [`Client::latched`] without waiting for replicas: the give-back of a grant that did not
    /// count (unconfirmed, cancelled, of unknown outcome), where the replicas may be what is
    /// missing.
    pub(crate) fn latched_unconfirmed(&self) -> Resend<'static> {
        Resend::Within {
            left: self.resolve_window(),
        }
    }

    /// How long a latch-protected request is resent: until its last send, waiting its
    /// command timeout, still reaches the server well inside the latch's life
    /// (latch TTL − command timeout − 500 ms).
    pub(crate) fn resolve_window(&self) -> Duration {
        resolve_window_for(self.latch_ttl(), self.inner.command_timeout)
    }

    /// [`Client::latch_ttl_ms`] as a duration.
    pub(crate) fn latch_ttl(&self) -> Duration {
        Duration::from_millis(self.latch_ttl_ms())
    }

    /// The prefix put before every lock name to form its key (empty by default).
    pub fn key_prefix(&self) -> &str {
        &self.inner.key_prefix
    }

    /// The lease of locks acquired without one, renewed by the watchdog every third of it.
    pub fn watchdog_lease(&self) -> Duration {
        self.inner.watchdog_lease
    }

    /// The wait bound of [`Lock::acquire`](crate::Lock::acquire).
    pub fn default_wait(&self) -> Duration {
        self.inner.default_wait
    }

    /// Returns the server's `maxmemory-policy` as read at connect (`INFO memory`).
    ///
    /// `None` when the server did not say (e.g. an ACL user without `+info`). Anything but
    /// `noeviction` may evict held lock keys under memory pressure; see
    /// [`ClientBuilder::require_noeviction`].
    pub fn eviction_policy(&self) -> Option<&str> {
        self.inner.eviction_policy.as_deref()
    }

    /// How this client calls its scripts — Redis Functions (`FCALL`) or `EVALSHA` — and
    /// why, as chosen at connect (see [`ScriptCalls`](crate::ScriptCalls) and
    /// [`ClientBuilder::redis_functions`]).
    pub fn script_calls(&self) -> crate::ScriptCalls {
        self.inner.backend.script_calls()
    }

    /// The server's URL with any password replaced by `***`.
    pub fn redacted_url(&self) -> &str {
        &self.inner.redacted_url
    }

    /// Returns a redis-rs connection over this client's deployment.
    ///
    /// Use it for the application's own commands next to its locks (the data a lock guards). On
    /// Redis Sentinel it goes to the current master and follows failovers, on Redis Cluster it
    /// routes each command by its key. It shares the client's multiplexed connection (cheap to
    /// clone) and its timeouts.
    ///
    /// A request that fails is not sent again, except by the standalone and Sentinel
    /// connections' own reconnection; on a Cluster not at all (redis-rs's cluster client is
    /// built without retries, so a command that is not idempotent never runs twice).
    pub fn redis_connection(&self) -> RedisConnection {
        RedisConnection(self.inner.backend.connection())
    }

    /// Release everything this client holds and stop its background tasks.
    ///
    /// In order: scheduled jobs ([`spawn_every`](crate::spawn_every)) finish their
    /// current run (releasing its job lock) and stop; every live guard, permit and job lock
    /// of this client is released (concurrently, each bounded by twice the command timeout);
    /// releases of dropped guards still under way are awaited (same bound); then the
    /// watchdog and the subscription task stop. Afterwards the client makes no new grants:
    /// acquires fail with [`ErrorKind::Closed`](crate::ErrorKind::Closed); guards that are
    /// still around release nothing more when dropped (their `release` reports
    /// [`ErrorKind::NotHeld`](crate::ErrorKind::NotHeld)). Calling it again does nothing new.
    ///
    /// Without it, a guard dropped as the runtime shuts down (at the end of
    /// `#[tokio::main]`) is still released: its release is sent over a fresh synchronous
    /// connection while the runtime drops it, bounded by the connect and command timeouts.
    ///
    /// # Errors
    /// None today: failures to release are logged (the leases end them). The `Result` leaves
    /// room for reporting them.
    ///
    /// # Cancel safety
    /// Not cancel safe: dropping the future part-way leaves the client closed, with some
    /// holds released and others not (those end with their leases, or when their guards are
    /// dropped).
    ///
    /// # Examples
    /// ```no_run
    /// # async fn f() -> distlock::Result<()> {
    /// let client = distlock::Client::connect("redis://127.0.0.1/").await?;
    /// let _guard = client.lock("nightly-report").acquire().await?;
    /// // … on SIGTERM:
    /// client.shutdown().await?; // the lock is free for the next instance now
    /// # Ok(()) }
    /// ```
    pub async fn shutdown(&self) -> Result<()> {
        let inner = &self.inner;
        let limit = inner.command_timeout * 2;
        inner.registry.close(&inner.backend, limit).await;
        inner.leases.stop();
        inner.hub.stop();
        Ok(())
    }

    /// Refuse new grants after [`Client::shutdown`].
    pub(crate) fn check_open(&self) -> Result<()> {
        if self.inner.registry.is_closed() {
            return Err(Error::new(
                crate::error::ErrorKind::Closed,
                "the client was shut down (Client::shutdown): it makes no new grants",
            ));
        }
        Ok(())
    }

    /// Finds keys matching `pattern`.
    ///
    /// A glob as `SCAN MATCH` takes it (`*`, `?`, `[…]`, `\` escapes); the key prefix is not added
    /// — on the server, or on every master of a Redis Cluster. For tools (`distlock list`,
    /// `distlock status`), not for a hot path.
    ///
    /// Bounded so that it is safe on a production server: `SCAN` in calls of `COUNT 1000`,
    /// looking at about `examine` keys per master (at least one call), so it never blocks the
    /// server as `KEYS` would; [`KeyScan::complete`] says whether every master was scanned
    /// to the end. The keys come back sorted, each once (a key may be seen twice by `SCAN`).
    ///
    /// # Errors
    /// [`ErrorKind::Connection`](crate::ErrorKind::Connection) when a server (a master of a
    /// Cluster) cannot be reached; an ACL refusal of `SCAN`.
    ///
    /// # Cancel safety
    /// Cancel safe: read-only.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn f(client: distlock::Client) -> distlock::Result<()> {
    /// let found = client.scan("job-lock:*", 100_000).await?;
    /// for key in &found.keys {
    ///     println!("{key}");
    /// }
    /// if !found.complete {
    ///     println!("(more keys than were looked at)");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn scan(&self, pattern: &str, examine: usize) -> Result<KeyScan> {
        let (keys, complete) = self.inner.backend.scan(pattern, examine).await?;
        Ok(KeyScan { keys, complete })
    }

    /// Locks this client's watchdog is renewing now.
    pub fn watchdog_locks(&self) -> usize {
        self.inner.leases.renewing()
    }
}

/// What [`Client::scan`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct KeyScan {
    /// The matching keys, sorted, each once.
    pub keys: Vec<String>,
    /// Whether every master was scanned to the end.
    ///
    /// `false` when the `examine` bound stopped the scan: more keys may match.
    pub complete: bool,
}

/// A redis-rs connection over a [`Client`]'s deployment ([`Client::redis_connection`]).
///
/// Use it with redis-rs's commands (`redis::AsyncCommands`, `redis::cmd(..).query_async`).
#[derive(Clone)]
pub struct RedisConnection(crate::conn::Connection);

impl fmt::Debug for RedisConnection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisConnection").finish_non_exhaustive()
    }
}

impl redis::aio::ConnectionLike for RedisConnection {
    fn req_packed_command<'a>(
        &'a mut self,
        cmd: &'a redis::Cmd,
    ) -> redis::RedisFuture<'a, redis::Value> {
        self.0.req_packed_command(cmd)
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a redis::Pipeline,
        offset: usize,
        count: usize,
    ) -> redis::RedisFuture<'a, Vec<redis::Value>> {
        self.0.req_packed_commands(pipeline, offset, count)
    }

    fn get_db(&self) -> i64 {
        self.0.get_db()
    }
}

/// Milliseconds since this process's first reading, monotonic: the clock request records'
/// epochs are counted on (a client's records are named by its id, fresh in every process)
/// and a lock handle's contention is remembered by.
pub(crate) fn process_ms() -> u64 {
    static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    START
        .get_or_init(std::time::Instant::now)
        .elapsed()
        .as_millis() as u64
}

/// [`Client::latch_ttl_ms`] for a command timeout of `command_timeout_ms` ms: every send may
/// wait the command timeout, plus the pauses between sends.
pub(crate) const fn latch_ttl_ms_for(command_timeout_ms: u64) -> u64 {
    command_timeout_ms * 4 + 1_000
}

/// [`Client::resolve_window`] for a latch TTL and a command timeout: latch TTL − command
/// timeout − 500 ms.
pub(crate) const fn resolve_window_for(latch_ttl: Duration, command_timeout: Duration) -> Duration {
    latch_ttl.saturating_sub(command_timeout.saturating_add(Duration::from_millis(500)))
}
