//! [`Client`]: the connection to one Redis deployment, and the factory of every primitive.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::conn::pubsub::Hub;
pub use crate::conn::PubSubMode;
use crate::conn::{naming, redact_url, Backend, ConnectSettings, Target};
use crate::error::{Error, ErrorKind, Result};
use crate::holds::{Fallback, Holds};
use crate::keys;
use crate::watchdog::Leases;

/// Default lease of a lock acquired without an explicit one, kept alive by the watchdog:
/// 30 s, as Redisson's `lockWatchdogTimeout`.
pub const DEFAULT_WATCHDOG_LEASE: Duration = Duration::from_secs(30);
/// Default bound on how long [`Lock::acquire`](crate::Lock::acquire) waits: 60 s.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(60);
/// Default timeout of one command (and of the time a retried release stays idempotent): 3 s,
/// as Redisson's `timeout`.
pub const DEFAULT_COMMAND_TIMEOUT: Duration = Duration::from_secs(3);
/// Default timeout for establishing a connection: 5 s.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// A connection to one Redis (or Valkey) server: one multiplexed command connection, one
/// shared subscription connection, one watchdog task. Cheap to clone (an `Arc`); clones share
/// everything. Build one per process with [`Client::builder`] and hand out clones.
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
    pub(crate) id: uuid::Uuid,
    pub(crate) id_str: String,
    pub(crate) backend: Backend,
    pub(crate) hub: Hub,
    pub(crate) leases: Leases,
    /// The client's notice channel, subscribed for its life: force unlocks of its holds
    /// fire their lost signals at once (`notice.rs`).
    _notices: crate::conn::pubsub::Subscription,
    pub(crate) key_prefix: String,
    /// Floor of a fencing counter that does not exist yet: the legacy server-wide counter
    /// (`<prefix>distlock:fencing-counter`) as read at connect, a decimal string, `"0"` when
    /// absent. Passed to every granting script (see [`keys::legacy_fencing_counter`]).
    pub(crate) fencing_floor: String,
    pub(crate) watchdog_lease: Duration,
    pub(crate) default_wait: Duration,
    pub(crate) command_timeout: Duration,
    /// Label acquire metrics by lock name ([`ClientBuilder::metrics_lock_names`]).
    pub(crate) metrics_lock_names: bool,
    pub(crate) runtime: tokio::runtime::Handle,
    pub(crate) holds: Holds,
    /// What a grant records of its holder beside the owner (`distlock:holder`, see
    /// [`keys::HOLDER_FIELD`]): `<app>;<host>;<pid>`, app and host cut to 16 and 24
    /// characters.
    pub(crate) holder_meta: String,
    seq: AtomicU64,
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

    /// The application name this client reports ([`ClientBuilder::app_name`]; by default the
    /// executable's file name): part of its connection name and of the holder metadata of
    /// the plain and fair locks it is granted
    /// ([`LockStatus::holder`](crate::LockStatus::holder)).
    pub fn app_name(&self) -> &str {
        &self.inner.app_name
    }

    /// The name this client's connections give themselves with `CLIENT SETNAME`, as
    /// `CLIENT LIST` shows it: `distlock:<app>:<host>:<pid>` — the
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

    /// The next number of this client's sequence (owners, request ids): never repeats.
    pub(crate) fn next_seq(&self) -> u64 {
        self.inner.seq.fetch_add(1, Ordering::Relaxed) + 1
    }

    pub(crate) fn request_id(&self) -> String {
        let n = self.next_seq();
        format!("{}:r{n}", self.inner.id_str)
    }

    /// How long request latches live, in ms: the whole window in which a request may be
    /// resent (every send may wait the command timeout, plus the pauses between sends).
    pub(crate) fn latch_ttl_ms(&self) -> u64 {
        (self.inner.command_timeout.as_millis() as u64) * 4 + 1_000
    }

    /// Send a request whose latch makes it idempotent (a release, a count-down) until the
    /// server answers, within [`Client::resolve_window`]; after that the error says the
    /// outcome is unknown. Also says whether it was sent more than once.
    ///
    /// No resend goes out after the window: a send that reached the server after its latch
    /// expired would be applied a second time. A send still queued on a stalled server runs
    /// when the server resumes, and is then applied exactly once.
    ///
    /// Where the deployment confirms writes with replicas (Sentinel, Cluster), each send is
    /// confirmed by `WAIT` and resent (same request id) until it is
    /// ([`Backend::eval_confirmed`](crate::conn::Backend::eval_confirmed)); `key` routes it.
    pub(crate) async fn eval_latched<T: redis::FromRedisValue>(
        &self,
        key: &str,
        context: impl fmt::Display,
        inv: &crate::scripts::Invocation<'_>,
    ) -> Result<(T, bool)> {
        self.inner
            .backend
            .eval_confirmed(key, context, inv, self.resolve_window())
            .await
    }

    /// [`Client::eval_latched`] without waiting for replicas: the give-back of a grant that
    /// did not count (unconfirmed, cancelled, of unknown outcome), where the replicas may be
    /// what is missing.
    pub(crate) async fn eval_latched_unconfirmed<T: redis::FromRedisValue>(
        &self,
        context: impl fmt::Display,
        inv: &crate::scripts::Invocation<'_>,
    ) -> Result<(T, bool)> {
        self.inner
            .backend
            .eval_resolving(context, inv, self.resolve_window())
            .await
    }

    /// How long a latch-protected request is resent: until its last send, waiting its
    /// command timeout, still reaches the server well inside the latch's life
    /// (latch TTL − command timeout − 500 ms).
    pub(crate) fn resolve_window(&self) -> Duration {
        self.latch_ttl()
            .saturating_sub(self.inner.command_timeout + Duration::from_millis(500))
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

    /// The server's `maxmemory-policy` as read at connect (`INFO memory`), or `None` when the
    /// server did not say (e.g. an ACL user without `+info`). Anything but `noeviction` may
    /// evict held lock keys under memory pressure; see [`ClientBuilder::require_noeviction`].
    pub fn eviction_policy(&self) -> Option<&str> {
        self.inner.eviction_policy.as_deref()
    }

    /// The server's URL with any password replaced by `***`.
    pub fn redacted_url(&self) -> &str {
        &self.inner.redacted_url
    }

    /// A redis-rs connection over this client's deployment, for the application's own
    /// commands next to its locks (the data a lock guards): on Redis Sentinel it goes to the
    /// current master and follows failovers, on Redis Cluster it routes each command by its
    /// key. It shares the client's multiplexed connection (cheap to clone) and its timeouts.
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
        inner.holds.close(&inner.backend, limit).await;
        inner.leases.stop();
        inner.hub.stop();
        Ok(())
    }

    /// Refuse new grants after [`Client::shutdown`].
    pub(crate) fn check_open(&self) -> Result<()> {
        if self.inner.holds.is_closed() {
            return Err(Error::new(
                crate::error::ErrorKind::Closed,
                "the client was shut down (Client::shutdown): it makes no new grants",
            ));
        }
        Ok(())
    }

    /// Find keys matching `pattern` — a glob as `SCAN MATCH` takes it (`*`, `?`, `[…]`,
    /// `\` escapes); the key prefix is not added — on the server, or on every master of a
    /// Redis Cluster. For tools (`distlock list`, `distlock status`), not for a hot path.
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
    /// Whether every master was scanned to the end (`false`: the `examine` bound stopped it,
    /// and more keys may match).
    pub complete: bool,
}

/// Settings of a [`Client`]. Durations are [`std::time::Duration`]s.
#[derive(Clone)]
pub struct ClientBuilder {
    url: Option<String>,
    key_prefix: String,
    watchdog_lease: Duration,
    default_wait: Duration,
    command_timeout: Duration,
    connect_timeout: Duration,
    require_noeviction: bool,
    metrics_lock_names: bool,
    sentinel_auth: Option<String>,
    /// [`ClientBuilder::redis_client`], as given.
    redis_client: Option<redis::Client>,
    /// [`ClientBuilder::username`] and [`ClientBuilder::password`], as given.
    username: Option<String>,
    password: Option<String>,
    replica_acks: u32,
    replica_ack_timeout: Duration,
    pubsub: PubSubMode,
    app_name: Option<String>,
    tls_ca: Option<Arc<[u8]>>,
}

/// A configuration or authentication error of a URL with credentials, with the hint that a
/// password's reserved characters must be percent-encoded (the usual cause) or given apart.
fn credentials_hint(e: Error, url: &str) -> Error {
    let with_credentials = url
        .split_once("://")
        .is_some_and(|(_, rest)| rest.contains('@'));
    if with_credentials && matches!(e.kind(), ErrorKind::Config | ErrorKind::Auth) {
        return e.with_hint(
            "a password in the URL must have `@ : / ? # %` percent-encoded (%40 %3A %2F %3F \
             %23 %25), or be given apart with ClientBuilder::password",
        );
    }
    e
}

/// `s` percent-encoded for a URL's user information: every byte but `A-Z a-z 0-9 - . _ ~`.
fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `url` with `user` and `password` (raw, encoded here) in place of its own credentials
/// (each kept when not given): in the user information of a `scheme://` URL, where
/// everything up to the last `@` before the host is the URL's own; as `user` and `pass`
/// query values of a `unix://` / `redis+unix://` URL (redis-rs's form).
fn with_credentials(url: &str, user: Option<&str>, password: Option<&str>) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    if scheme.ends_with("unix") {
        let mut out = url.to_string();
        for (name, value) in [("user", user), ("pass", password)] {
            if let Some(v) = value {
                out.push(if out.contains('?') { '&' } else { '?' });
                out.push_str(&format!("{name}={}", percent_encode(v)));
            }
        }
        return out;
    }
    let (old_user, old_pass, hosts) = match rest.rsplit_once('@') {
        Some((info, hosts)) => match info.split_once(':') {
            Some((u, p)) => (u, Some(p), hosts),
            None => (info, None, hosts),
        },
        None => ("", None, rest),
    };
    let user = user.map_or_else(|| old_user.to_string(), percent_encode);
    let password = password
        .map(percent_encode)
        .or(old_pass.map(str::to_string));
    match password {
        Some(p) => format!("{scheme}://{user}:{p}@{hosts}"),
        None if user.is_empty() => format!("{scheme}://{hosts}"),
        None => format!("{scheme}://{user}@{hosts}"),
    }
}

/// Checks that `pem` holds at least one certificate and nothing unparsable, so that a bad
/// CA is a configuration error at build, not a TLS failure at every connect.
fn check_ca(pem: &[u8]) -> Result<()> {
    #[cfg(feature = "tls")]
    {
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::CertificateDer;
        let mut found = 0;
        for cert in CertificateDer::pem_slice_iter(pem) {
            cert.map_err(|e| Error::config(format!("TLS CA certificate: not valid PEM: {e}")))?;
            found += 1;
        }
        if found == 0 {
            return Err(Error::config(
                "TLS CA certificate: no PEM certificate (-----BEGIN CERTIFICATE-----) in it",
            ));
        }
    }
    #[cfg(not(feature = "tls"))]
    let _ = pem;
    Ok(())
}

/// A redis-rs connection over a [`Client`]'s deployment ([`Client::redis_connection`]):
/// use it with redis-rs's commands (`redis::AsyncCommands`, `redis::cmd(..).query_async`).
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

impl Default for ClientBuilder {
    fn default() -> Self {
        ClientBuilder {
            url: None,
            key_prefix: String::new(),
            watchdog_lease: DEFAULT_WATCHDOG_LEASE,
            default_wait: DEFAULT_WAIT,
            command_timeout: DEFAULT_COMMAND_TIMEOUT,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            require_noeviction: false,
            metrics_lock_names: false,
            sentinel_auth: None,
            redis_client: None,
            username: None,
            password: None,
            replica_acks: 1,
            replica_ack_timeout: Duration::from_secs(1),
            pubsub: PubSubMode::Auto,
            app_name: None,
            tls_ca: None,
        }
    }
}

impl fmt::Debug for ClientBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientBuilder")
            .field("url", &self.url.as_deref().map(redact_url))
            .field("key_prefix", &self.key_prefix)
            .field("watchdog_lease", &self.watchdog_lease)
            .field("default_wait", &self.default_wait)
            .field("command_timeout", &self.command_timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("require_noeviction", &self.require_noeviction)
            .field("metrics_lock_names", &self.metrics_lock_names)
            .field("replica_acks", &self.replica_acks)
            .field("replica_ack_timeout", &self.replica_ack_timeout)
            .field("pubsub", &self.pubsub)
            .field("app_name", &self.app_name)
            .finish()
    }
}

impl ClientBuilder {
    /// The deployment to connect to, by URL:
    ///
    /// - one server: `redis://[user][:password@]host[:port][/db]`, or `rediss://…` for TLS
    ///   (rustls, Mozilla's root certificates; `?insecure` skips verification, as on every
    ///   scheme below, and redis-rs's `#insecure` works too). TLS needs the `tls` feature (on by default); it uses rustls's `ring`
    ///   provider, which rustls picks by itself when it is the only one built. An application
    ///   whose build also enables another provider (aws-lc-rs) chooses one once, before
    ///   connecting — `rustls::crypto::ring::default_provider().install_default()` — as
    ///   rustls requires; distlock installs nothing process-wide;
    /// - a master behind Redis Sentinel, in lettuce's form:
    ///   `redis-sentinel://[user:password@]host1[:port1][,host2[:port2]…][/db]#master-name`
    ///   (`rediss-sentinel://` for TLS, `?insecure` to skip verification; sentinels without a
    ///   port listen on 26379). The credentials are the master's; set the sentinels' own with
    ///   [`ClientBuilder::sentinel_auth`]. distlock asks the sentinels for the master and
    ///   follows failovers: commands and wake-up subscriptions move to the new master within
    ///   about a second of the sentinels' switch;
    /// - a Redis Cluster, in lettuce's form:
    ///   `redis-cluster://[user:password@]host1[:port1][,host2[:port2]…]` (seed nodes;
    ///   `rediss-cluster://` for TLS, `?insecure` to skip verification; nodes without a port
    ///   listen on 6379). distlock routes each lock by its key's hash slot and follows
    ///   failovers and slot migrations;
    /// - one server over a Unix socket: `unix:///path/to/redis.sock[?db=N]` (or
    ///   `redis+unix://`; credentials as `?user=…&pass=…`, or apart with
    ///   [`ClientBuilder::password`]).
    ///
    /// A password with `@ : / ? # %` must be percent-encoded in the URL, or given apart
    /// ([`ClientBuilder::password`]).
    pub fn url(mut self, url: impl Into<String>) -> Self {
        self.url = Some(url.into());
        self
    }

    /// How many replicas must confirm a grant before it counts, where the deployment has
    /// replicas (Redis Sentinel): after the script that grants (an acquire or a re-entry of a
    /// lock of any kind), distlock sends `WAIT <n> <timeout>` on the connection that made the
    /// grant (one set aside for grants, since `WAIT` blocks its connection). When fewer
    /// replicas confirm within [`replica_ack_timeout`](ClientBuilder::replica_ack_timeout),
    /// the grant is given back and the call fails with
    /// [`ErrorKind::NotReplicated`](crate::ErrorKind::NotReplicated) (a waiting acquire
    /// retries until its deadline). This narrows the failover window in which a grant the old
    /// master never replicated is granted again by the promoted replica; it does not close it
    /// (replication stays asynchronous: see the README's Topologies section).
    ///
    /// Default 1 (Redisson's default for its synced writes); 0 turns it off. A standalone
    /// server has no replicas to ask: no `WAIT` is sent. The replica count is the sentinels'
    /// view, never the master's own (an isolated old master reports none).
    pub fn replica_acks(mut self, n: u32) -> Self {
        self.replica_acks = n;
        self
    }

    /// How long a grant waits for its replicas' confirmations
    /// ([`replica_acks`](ClientBuilder::replica_acks)). Default 1 s. At least 1 ms.
    pub fn replica_ack_timeout(mut self, timeout: Duration) -> Self {
        self.replica_ack_timeout = timeout;
        self
    }

    /// Which pub/sub carries wake-ups on a Redis Cluster: [`PubSubMode::Auto`] (the default:
    /// sharded on Redis 7, as Redisson 3.22+), classic, sharded, or both. Sharded
    /// subscriptions are held on one connection per master and follow their slots: when a
    /// node drops them (failover, slot migration), when its connection closes, and when a
    /// periodic read of the slot map (every 5 s) finds a slot on another master, the channel
    /// is subscribed again on its master and its waiters are woken to check at once.
    /// Ignored on other deployments (classic pub/sub).
    pub fn pubsub_mode(mut self, mode: PubSubMode) -> Self {
        self.pubsub = mode;
        self
    }

    /// Credentials for the sentinels of a `redis-sentinel://` URL, when they require auth:
    /// a password, and a user name for an ACL user (Redis Sentinel's `sentinel sentinel-user`
    /// / `requirepass`). Default: none. Never logged.
    pub fn sentinel_auth(mut self, user: Option<&str>, password: &str) -> Self {
        self.sentinel_auth = Some(format!(
            "{}:{}",
            user.map(percent_encode).unwrap_or_default(),
            percent_encode(password)
        ));
        self
    }

    /// One server, by a `redis::Client` the application already has (as rslock and
    /// redis-lock take one), instead of a [`url`](ClientBuilder::url): distlock opens its
    /// own connections from it — the command connection (a connection manager), the
    /// subscription connection for wake-ups, and, where grants are confirmed by replicas,
    /// connections set aside for them — so the client's settings (address, database,
    /// credentials, TLS) carry over, and the application's connections are left alone. A
    /// `redis::Client` names one server: Sentinel and Cluster deployments take a URL.
    pub fn redis_client(mut self, client: redis::Client) -> Self {
        self.redis_client = Some(client);
        self
    }

    /// The password of the data servers (the standalone server, the Sentinel deployment's
    /// master and replicas, every Cluster node), given apart from the URL as Redisson's
    /// `setPassword`: any characters, no percent-encoding (in a URL, `@ : / ? # %` must be
    /// written `%40 %3A %2F %3F %23 %25`). Replaces a password in the URL; the URL's user
    /// name stays unless [`username`](ClientBuilder::username) is set. Default: the URL's.
    /// Never logged.
    pub fn password(mut self, password: impl Into<String>) -> Self {
        self.password = Some(password.into());
        self
    }

    /// The ACL user name of the data servers, given apart from the URL as Redisson's
    /// `setUsername` (any characters). Replaces a user name in the URL. Default: the URL's
    /// (none: Redis's `default` user).
    pub fn username(mut self, user: impl Into<String>) -> Self {
        self.username = Some(user.into());
        self
    }

    /// The application name this client reports to the server and records with its grants:
    /// its connections are named `distlock:<app>:<host>:<pid>` (`CLIENT SETNAME`, see
    /// [`Client::connection_name`]) and every plain or fair lock it is granted records
    /// the app name (its first 16 characters) in its holder metadata
    /// ([`LockStatus::holder`](crate::LockStatus::holder)), so that `CLIENT LIST` and
    /// `distlock status` say who holds what.
    ///
    /// 1 to 64 characters of `A-Z`, `a-z`, `0-9`, `.`, `_` and `-` (checked by
    /// [`build`](ClientBuilder::build)). Default: the file name of the running executable
    /// without its extension (characters outside that set replaced by `_`, cut to 64), or
    /// `app` when it cannot be read.
    pub fn app_name(mut self, name: impl Into<String>) -> Self {
        self.app_name = Some(name.into());
        self
    }

    /// A prefix put before every name to form its key (e.g. `"myapp:"`). Default: none, so
    /// lock `orders` is key `orders`, as in Redisson.
    pub fn key_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.key_prefix = prefix.into();
        self
    }

    /// Lease of locks acquired without an explicit lease; the watchdog renews it every
    /// third. Default 30 s. At least 3 ms.
    pub fn watchdog_lease(mut self, lease: Duration) -> Self {
        self.watchdog_lease = lease;
        self
    }

    /// How long [`Lock::acquire`](crate::Lock::acquire) waits before failing with
    /// [`ErrorKind::NotAcquired`](crate::ErrorKind::NotAcquired). Default 60 s.
    pub fn default_wait(mut self, wait: Duration) -> Self {
        self.default_wait = wait;
        self
    }

    /// Timeout of one command. A request that fails by timeout or a broken connection is sent
    /// again up to three times; its latches live 4 × this + 1 s. Default 3 s.
    pub fn command_timeout(mut self, timeout: Duration) -> Self {
        self.command_timeout = timeout;
        self
    }

    /// Timeout for establishing a connection. Default 5 s. Through Sentinel it bounds the
    /// whole connect: a deployment in the middle of a failover is asked again until its
    /// sentinels name a live master, or this has passed.
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Check `rediss://` servers (and TLS sentinels and cluster nodes) against these CA
    /// certificates instead of Mozilla's roots: a private CA, one or more PEM certificates
    /// (the contents of a `ca.crt`, as `redis-cli --cacert` takes; the server's own
    /// certificate works for a self-signed one). The server's name is still checked. Plain
    /// `redis://` URLs ignore it. Needs the `tls` feature (a build without it refuses
    /// `rediss://` URLs anyway). An unparsable PEM fails [`build`](ClientBuilder::build) with
    /// [`ErrorKind::Config`](crate::ErrorKind::Config).
    pub fn tls_ca_cert(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.tls_ca = Some(pem.into().into());
        self
    }

    /// Refuse servers that may evict lock keys: with `true`, [`build`](ClientBuilder::build)
    /// fails unless the server's `maxmemory-policy` is `noeviction` (and can be read).
    /// Default `false`: other policies are logged as a warning at connect.
    ///
    /// Why: under memory pressure an `allkeys-*` policy evicts any key, a `volatile-*`
    /// policy any key with a TTL — and every lock key has one. An evicted lock is free for
    /// the next caller while its holder still believes it holds it (until its next
    /// renewal). With `noeviction` a full server refuses writes instead: acquires fail with
    /// [`ErrorKind::OutOfMemory`](crate::ErrorKind::OutOfMemory) and nothing is written.
    pub fn require_noeviction(mut self, require: bool) -> Self {
        self.require_noeviction = require;
        self
    }

    /// Label the acquire metrics (feature `metrics`) with the lock's name too, not only its
    /// kind. Default `false`: each distinct name is a new time series, and an unbounded
    /// label set (e.g. one lock per user) overwhelms Prometheus; turn it on only when the
    /// names are few and fixed. Without the feature it has no effect.
    pub fn metrics_lock_names(mut self, by_name: bool) -> Self {
        self.metrics_lock_names = by_name;
        self
    }

    /// Connect, authenticate and start the background tasks on the current tokio runtime.
    ///
    /// # Errors
    /// - [`ErrorKind::Config`](crate::ErrorKind::Config): no URL, an unparsable URL, a
    ///   duration out of range, an [app name](ClientBuilder::app_name) that is empty, longer
    ///   than 64 characters or has a character outside `[A-Za-z0-9._-]` (nothing is
    ///   connected then);
    /// - [`ErrorKind::Connection`](crate::ErrorKind::Connection): the server cannot be
    ///   reached within the connect timeout;
    /// - [`ErrorKind::Auth`](crate::ErrorKind::Auth): the server refused the credentials;
    /// - [`ErrorKind::Config`](crate::ErrorKind::Config) also when
    ///   [`require_noeviction`](ClientBuilder::require_noeviction) is set and the server's
    ///   `maxmemory-policy` is not `noeviction` or cannot be read.
    ///
    /// Messages show the URL with its password masked.
    ///
    /// # Cancel safety
    /// Cancel safe.
    ///
    /// # Panics
    /// Panics when called outside a tokio runtime.
    pub async fn build(self) -> Result<Client> {
        let connect_started = tokio::time::Instant::now();
        let given = self.redis_client.clone();
        let url = match (&self.url, &given) {
            (Some(url), None) => url.clone(),
            // The server as its connection info names it (no credentials).
            (None, Some(client)) => {
                let info = client.get_connection_info();
                format!("redis://{}/{}", info.addr(), info.redis_settings().db())
            }
            (None, None) => {
                return Err(Error::config(
                    "no server given (ClientBuilder::url or ClientBuilder::redis_client)",
                ))
            }
            (Some(_), Some(_)) => {
                return Err(Error::config(
                    "a URL and a redis::Client were both given: give one (ClientBuilder::url \
                     or ClientBuilder::redis_client)",
                ))
            }
        };
        let redacted = redact_url(&url);
        for (what, d) in [
            ("watchdog lease", self.watchdog_lease),
            ("command timeout", self.command_timeout),
            ("connect timeout", self.connect_timeout),
            ("replica ack timeout", self.replica_ack_timeout),
        ] {
            keys::lease_ms(what, d).map_err(|e| Error::config(e.to_string()))?;
        }
        if self.watchdog_lease < Duration::from_millis(3) {
            return Err(Error::config("watchdog lease must be at least 3 ms"));
        }
        keys::check_wait(self.default_wait).map_err(|e| Error::config(e.to_string()))?;
        if let Some(ca) = &self.tls_ca {
            check_ca(ca)?;
        }
        let app_name = match self.app_name.clone() {
            Some(name) => check_app_name(&name).map(|()| name)?,
            None => default_app_name(),
        };
        let host = naming::host_name();
        let pid = std::process::id();
        let connection_name: Arc<str> = naming::connection_name(&app_name, &host, pid).into();
        let url = if self.username.is_some() || self.password.is_some() {
            with_credentials(&url, self.username.as_deref(), self.password.as_deref())
        } else {
            url
        };
        let target = match given {
            Some(client) => Target::Standalone(client),
            None => Target::parse(&url, self.sentinel_auth.as_deref(), self.tls_ca.as_deref())
                .map_err(|e| credentials_hint(e, &url))?,
        };
        let standalone = match &target {
            Target::Standalone(client) => Some(client.clone()),
            Target::Sentinel(_) | Target::Cluster(_) => None,
        };
        let settings = ConnectSettings {
            connect_timeout: self.connect_timeout,
            command_timeout: self.command_timeout,
            replica_acks: self.replica_acks,
            replica_ack_timeout: self.replica_ack_timeout,
            pubsub: self.pubsub,
            client_name: connection_name.clone(),
            tls_ca: self.tls_ca.clone(),
        };
        let (backend, subscriber) = Backend::connect(target, &settings, &redacted)
            .await
            .map_err(|e| credentials_hint(e, &url))?;
        // One round trip for all three: the requests share the multiplexed connection.
        let legacy_counter = keys::legacy_fencing_counter(&self.key_prefix);
        let (eviction_policy, fencing_floor, ()) = tokio::join!(
            check_eviction_policy(&backend, self.require_noeviction),
            read_fencing_floor(
                &backend,
                &legacy_counter,
                connect_started + self.connect_timeout
            ),
            preload_scripts(&backend),
        );
        let (eviction_policy, fencing_floor) = (eviction_policy?, fencing_floor?);
        let id = uuid::Uuid::new_v4();
        // Signalled by the subscription hub when it reconnects: the watchdog then checks
        // every held lease at once.
        let reconnected = Arc::new(tokio::sync::Notify::new());
        let hub = Hub::start(subscriber, self.connect_timeout, reconnected.clone());
        let leases = Leases::start(backend.clone(), self.watchdog_lease, reconnected);
        let notices = hub.listen(
            &keys::client_notice_channel(&id.to_string()),
            leases.notice_handler(),
        );
        let inner = ClientInner {
            id,
            id_str: id.to_string(),
            holds: Holds::new(
                Fallback {
                    client: standalone,
                    backend: backend.clone(),
                    connect_timeout: self.connect_timeout,
                    command_timeout: self.command_timeout,
                    deadline: Default::default(),
                },
                tokio::runtime::Handle::current(),
            ),
            hub,
            leases,
            _notices: notices,
            backend,
            fencing_floor,
            key_prefix: self.key_prefix,
            watchdog_lease: self.watchdog_lease,
            default_wait: self.default_wait,
            command_timeout: self.command_timeout,
            metrics_lock_names: self.metrics_lock_names,
            runtime: tokio::runtime::Handle::current(),
            seq: AtomicU64::new(0),
            redacted_url: redacted,
            eviction_policy,
            holder_meta: format!(
                "{};{};{pid}",
                keys::first_chars(&app_name, 16),
                keys::first_chars(&host, 24)
            ),
            app_name,
            connection_name,
        };
        Ok(Client {
            inner: Arc::new(inner),
        })
    }
}

/// Longest application name accepted ([`ClientBuilder::app_name`]), in characters.
const MAX_APP_NAME_LEN: usize = 64;

/// Whether `c` may appear in an application name: `[A-Za-z0-9._-]`.
fn app_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')
}

/// Check an application name given to [`ClientBuilder::app_name`].
fn check_app_name(name: &str) -> Result<()> {
    if name.is_empty()
        || name.chars().count() > MAX_APP_NAME_LEN
        || !name.chars().all(app_name_char)
    {
        return Err(Error::config(format!(
            "app name {name:?} is not 1 to {MAX_APP_NAME_LEN} characters of A-Z, a-z, 0-9, '.', \
             '_' and '-' (it names the client's connections and its locks' holders)"
        )));
    }
    Ok(())
}

/// The default application name: the executable's file name without its extension, with
/// characters outside `[A-Za-z0-9._-]` replaced by `_` and cut to 64; `app` when unknown.
fn default_app_name() -> String {
    let stem = std::env::current_exe()
        .ok()
        .and_then(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .unwrap_or_default();
    app_name_from(&stem)
}

/// [`default_app_name`] for the file stem `stem`.
fn app_name_from(stem: &str) -> String {
    let name: String = stem
        .chars()
        .take(MAX_APP_NAME_LEN)
        .map(|c| if app_name_char(c) { c } else { '_' })
        .collect();
    if name.is_empty() {
        "app".to_string()
    } else {
        name
    }
}

/// The text of an `INFO` reply: one server's, or each node's (a cluster answers per node).
fn info_texts(v: redis::Value) -> Vec<String> {
    match v {
        redis::Value::BulkString(b) => vec![String::from_utf8_lossy(&b).into_owned()],
        redis::Value::VerbatimString { text, .. } => vec![text],
        redis::Value::SimpleString(s) => vec![s],
        redis::Value::Map(pairs) => pairs.into_iter().flat_map(|(_, v)| info_texts(v)).collect(),
        redis::Value::Array(items) => items.into_iter().flat_map(info_texts).collect(),
        _ => Vec::new(),
    }
}

/// Read the server's `maxmemory-policy` (`INFO memory`); warn about policies that may evict
/// lock keys, or refuse them when `require_noeviction`.
async fn check_eviction_policy(
    backend: &Backend,
    require_noeviction: bool,
) -> Result<Option<String>> {
    let info: Result<redis::Value> = backend
        .query("read maxmemory-policy", redis::cmd("INFO").arg("memory"))
        .await;
    let (policy, limited) = match info {
        Ok(info) => {
            // One server's text, or (Redis Cluster) one per node: judge by the first node
            // whose policy may evict, else by any.
            let texts = info_texts(info);
            let field = |info: &str, name: &str| {
                info.lines()
                    .find_map(|l| l.strip_prefix(name))
                    .map(|v| v.trim().to_string())
            };
            let info = texts
                .iter()
                .find(|t| field(t, "maxmemory_policy:").as_deref() != Some("noeviction"))
                .or(texts.first())
                .cloned()
                .unwrap_or_default();
            // Without a maxmemory limit nothing is evicted (until an operator sets one).
            let limited = field(&info, "maxmemory:").is_none_or(|m| m != "0");
            (field(&info, "maxmemory_policy:"), limited)
        }
        Err(e) if e.kind() == crate::error::ErrorKind::NoPermission => (None, true),
        Err(e) => return Err(e),
    };
    match policy.as_deref() {
        Some("noeviction") => {}
        Some(p) if !limited && !require_noeviction => {
            tracing::debug!(policy = p, "no maxmemory limit: nothing is evicted for now");
        }
        Some(p) if require_noeviction => {
            return Err(Error::config(format!(
                "the server's maxmemory-policy is {p}: it may evict held lock keys (set it to \
                 noeviction, or do not require it)"
            )));
        }
        None if require_noeviction => {
            return Err(Error::config(
                "cannot read the server's maxmemory-policy (INFO memory); noeviction was required",
            ));
        }
        Some(p) if p.starts_with("allkeys-") => {
            tracing::warn!(
                policy = p,
                "the server's maxmemory-policy evicts ANY key under memory pressure, held locks \
                 included: another client can then acquire a lock that is still held; use \
                 noeviction on lock servers"
            );
        }
        Some(p) => {
            tracing::warn!(
                policy = p,
                "the server's maxmemory-policy evicts keys with a TTL under memory pressure, and \
                 every lock key has one: held locks may be evicted; use noeviction on lock servers"
            );
        }
        None => {
            tracing::debug!("maxmemory-policy unknown (INFO denied); eviction not checked");
        }
    }
    Ok(policy)
}

/// Read the legacy server-wide fencing counter (`GET`), the floor of every per-slot counter
/// created by this client: tokens keep rising for a deployment upgraded from one counter per
/// server. Absent (or unreadable: an ACL without rights on it, another type) → `"0"`; a value
/// that is not a decimal integer is ignored with a warning (no token could be issued from it,
/// so none lies above it); a decimal beyond 2^63 - 1 is kept, and grants in new slots then
/// fail as the old counter's did. The key's node not serving it yet (a Cluster whose slot
/// owner is down until its replica is promoted: `CLUSTERDOWN`, a stale `MOVED`) is asked
/// again every 200 ms until `deadline` (the connect timeout).
async fn read_fencing_floor(
    backend: &Backend,
    legacy_counter: &str,
    deadline: tokio::time::Instant,
) -> Result<String> {
    let value: Result<Option<Vec<u8>>> = loop {
        let read = backend
            .query(
                "read the legacy fencing counter",
                redis::cmd("GET").arg(legacy_counter),
            )
            .await;
        let retry = Duration::from_millis(200);
        match read {
            Err(e)
                if e.kind() == crate::error::ErrorKind::Connection
                    && tokio::time::Instant::now() + retry < deadline =>
            {
                tokio::time::sleep(retry).await;
            }
            read => break read,
        }
    };
    let value = match value {
        Ok(v) => v,
        Err(e)
            if matches!(
                e.kind(),
                crate::error::ErrorKind::NoPermission | crate::error::ErrorKind::WrongType
            ) =>
        {
            tracing::debug!(
                key = legacy_counter,
                error = format_args!("{e:#}"),
                "legacy fencing counter not read"
            );
            None
        }
        Err(e) => return Err(e),
    };
    Ok(match value {
        None => "0".to_string(),
        Some(v) if !v.is_empty() && v.iter().all(u8::is_ascii_digit) => {
            let digits = String::from_utf8_lossy(&v);
            let digits = digits.trim_start_matches('0');
            if digits.is_empty() {
                "0".to_string()
            } else {
                digits.to_string()
            }
        }
        Some(v) => {
            tracing::warn!(
                key = legacy_counter,
                value = %String::from_utf8_lossy(&v[..v.len().min(40)]),
                "the legacy fencing counter is not a decimal integer; ignored as a token floor"
            );
            "0".to_string()
        }
    })
}

/// Load every script into the server's script cache (one pipelined round trip), so that no
/// first use of a script needs a `NOSCRIPT` round trip — in particular none whose send is
/// queued on a stalled server, where a `NOSCRIPT` answer would come back to nobody and the
/// request would silently not run. Failures are left to the per-call fallback.
async fn preload_scripts(backend: &Backend) {
    let mut pipe = redis::pipe();
    for script in crate::scripts::ALL {
        pipe.cmd("SCRIPT")
            .arg("LOAD")
            .arg(script.text(backend.publish()))
            .ignore();
    }
    if let Err(e) = backend.pipeline::<()>("load scripts", &pipe).await {
        tracing::debug!(
            error = format_args!("{e:#}"),
            "preloading scripts failed; each loads on first use"
        );
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn credentials_given_apart_replace_the_urls_encoded() {
        use super::with_credentials as w;
        assert_eq!(
            w("redis://h:1/0", None, Some("p@:/?#%")),
            "redis://:p%40%3A%2F%3F%23%25@h:1/0"
        );
        assert_eq!(w("redis://u:old@h/", None, Some("n")), "redis://u:n@h/");
        assert_eq!(w("redis://u:old@h/", Some("v"), None), "redis://v:old@h/");
        assert_eq!(w("redis://u@h/", None, None), "redis://u@h/");
        assert_eq!(
            w("redis-sentinel://:x@s1,s2/0#m", Some("a b"), Some("y")),
            "redis-sentinel://a%20b:y@s1,s2/0#m"
        );
        assert_eq!(
            w("unix:///tmp/r.sock?db=1", Some("u"), Some("p&q")),
            "unix:///tmp/r.sock?db=1&user=u&pass=p%26q"
        );
        assert_eq!(
            w("redis+unix:///s", None, Some("p")),
            "redis+unix:///s?pass=p"
        );
    }

    use super::{app_name_from, check_app_name};

    #[test]
    fn app_names_are_checked() {
        for good in ["orders", "a", "my-app_2.0", &"x".repeat(64)] {
            assert!(check_app_name(good).is_ok(), "{good:?}");
        }
        for bad in ["", "my app", "a:b", "café", &"x".repeat(65)] {
            let e = check_app_name(bad).unwrap_err();
            assert_eq!(e.kind(), crate::ErrorKind::Config, "{bad:?}");
        }
    }

    #[test]
    fn default_app_names_are_made_valid() {
        assert_eq!(app_name_from("orders-service"), "orders-service");
        assert_eq!(app_name_from("my app"), "my_app");
        assert_eq!(app_name_from(""), "app");
        assert_eq!(app_name_from(&"y".repeat(100)), "y".repeat(64));
        assert!(check_app_name(&app_name_from("ünïcode name")).is_ok());
    }
}
