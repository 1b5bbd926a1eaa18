//! [`Client`]: the connection to one Redis deployment, and the factory of every primitive.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::conn::pubsub::Hub;
use crate::conn::{redact_url, Backend, ConnectSettings};
use crate::error::{Error, Result};
use crate::keys;
use crate::lock::{Lock, Owner};
use crate::watchdog::Leases;

/// Default lease of a lock acquired without an explicit one, kept alive by the watchdog:
/// 30 s, as Redisson's `lockWatchdogTimeout`.
pub const DEFAULT_WATCHDOG_LEASE: Duration = Duration::from_secs(30);
/// Default bound on how long [`Lock::acquire`] waits: 60 s.
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
/// Dropping the last clone (and every [`Lock`] and guard made from it) stops its background
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
    pub(crate) key_prefix: String,
    pub(crate) fencing_counter: String,
    pub(crate) watchdog_lease: Duration,
    pub(crate) default_wait: Duration,
    pub(crate) command_timeout: Duration,
    pub(crate) runtime: tokio::runtime::Handle,
    seq: AtomicU64,
    redacted_url: String,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("id", &self.inner.id)
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

    /// A fresh owner `<client-uuid>:<n>`, never returned before by this client.
    pub fn new_owner(&self) -> Owner {
        let n = self.inner.seq.fetch_add(1, Ordering::Relaxed) + 1;
        Owner::from_parts(&self.inner.id_str, n)
    }

    pub(crate) fn request_id(&self) -> String {
        let n = self.inner.seq.fetch_add(1, Ordering::Relaxed) + 1;
        format!("{}:r{n}", self.inner.id_str)
    }

    /// The reentrant lock called `name` (the Redis key is the key prefix followed by
    /// `name`). No I/O; the name is checked when the lock is first used.
    pub fn lock(&self, name: impl Into<String>) -> Lock {
        Lock::new(self.clone(), name.into())
    }

    /// How long request latches live, in ms: the whole window in which a request may be
    /// resent (every send may wait the command timeout, plus the pauses between sends).
    pub(crate) fn latch_ttl_ms(&self) -> u64 {
        (self.inner.command_timeout.as_millis() as u64) * 4 + 1_000
    }

    /// The prefix put before every lock name to form its key (empty by default).
    pub fn key_prefix(&self) -> &str {
        &self.inner.key_prefix
    }

    /// The lease of locks acquired without one, renewed by the watchdog every third of it.
    pub fn watchdog_lease(&self) -> Duration {
        self.inner.watchdog_lease
    }

    /// The wait bound of [`Lock::acquire`].
    pub fn default_wait(&self) -> Duration {
        self.inner.default_wait
    }

    /// The key of the fencing counter this client's locks draw tokens from.
    pub fn fencing_counter_key(&self) -> &str {
        &self.inner.fencing_counter
    }

    /// The server's URL with any password replaced by `***`.
    pub fn redacted_url(&self) -> &str {
        &self.inner.redacted_url
    }

    /// Locks this client's watchdog is renewing now.
    pub fn watchdog_locks(&self) -> usize {
        self.inner.leases.renewing()
    }
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
            .finish()
    }
}

impl ClientBuilder {
    /// The server: `redis://[user][:password@]host[:port][/db]`, or `rediss://…` for TLS
    /// (rustls, Mozilla's root certificates; append `#insecure` to skip verification, as
    /// redis-rs does).
    pub fn url(mut self, url: impl Into<String>) -> Self {
        self.url = Some(url.into());
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

    /// How long [`Lock::acquire`] waits before failing with
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

    /// Timeout for establishing a connection. Default 5 s.
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Connect, authenticate and start the background tasks on the current tokio runtime.
    ///
    /// # Errors
    /// - [`ErrorKind::Config`](crate::ErrorKind::Config): no URL, an unparsable URL, a
    ///   duration out of range;
    /// - [`ErrorKind::Connection`](crate::ErrorKind::Connection): the server cannot be
    ///   reached within the connect timeout;
    /// - [`ErrorKind::Auth`](crate::ErrorKind::Auth): the server refused the credentials.
    ///
    /// Messages show the URL with its password masked.
    ///
    /// # Cancel safety
    /// Cancel safe.
    ///
    /// # Panics
    /// Panics when called outside a tokio runtime.
    pub async fn build(self) -> Result<Client> {
        let url = self
            .url
            .clone()
            .ok_or_else(|| Error::config("no server URL given (ClientBuilder::url)"))?;
        let redacted = redact_url(&url);
        for (what, d) in [
            ("watchdog lease", self.watchdog_lease),
            ("command timeout", self.command_timeout),
            ("connect timeout", self.connect_timeout),
        ] {
            keys::lease_ms(what, d).map_err(|e| Error::config(e.to_string()))?;
        }
        if self.watchdog_lease < Duration::from_millis(3) {
            return Err(Error::config("watchdog lease must be at least 3 ms"));
        }
        keys::check_wait(self.default_wait).map_err(|e| Error::config(e.to_string()))?;
        // TLS needs a process-wide crypto provider; installing twice is harmless.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = redis::Client::open(url.as_str()).map_err(|e| {
            // The driver's message may quote the URL: report only its category.
            Error::config(format!(
                "cannot use server URL {redacted}: {}",
                e.category()
            ))
        })?;
        let settings = ConnectSettings {
            connect_timeout: self.connect_timeout,
            command_timeout: self.command_timeout,
        };
        let backend = Backend::connect(&client, &settings, &redacted).await?;
        let id = uuid::Uuid::new_v4();
        let inner = ClientInner {
            id,
            id_str: id.to_string(),
            hub: Hub::start(client, self.connect_timeout),
            leases: Leases::start(backend.clone(), self.watchdog_lease),
            backend,
            fencing_counter: keys::fencing_counter(&self.key_prefix),
            key_prefix: self.key_prefix,
            watchdog_lease: self.watchdog_lease,
            default_wait: self.default_wait,
            command_timeout: self.command_timeout,
            runtime: tokio::runtime::Handle::current(),
            seq: AtomicU64::new(0),
            redacted_url: redacted,
        };
        Ok(Client {
            inner: Arc::new(inner),
        })
    }
}
