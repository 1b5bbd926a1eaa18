//! [`ClientBuilder`]: the settings of a [`Client`] and their checks.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use super::{
    PubSubMode, DEFAULT_COMMAND_TIMEOUT, DEFAULT_CONNECT_TIMEOUT, DEFAULT_WAIT,
    DEFAULT_WATCHDOG_LEASE,
};
use crate::conn::redact_url;
use crate::error::{Error, ErrorKind, Fix, Result};
#[cfg(doc)]
use crate::Client;

/// Settings of a [`Client`]. Durations are [`std::time::Duration`]s.
#[derive(Clone)]
pub struct ClientBuilder {
    pub(super) url: Option<String>,
    pub(super) key_prefix: String,
    pub(super) watchdog_lease: Duration,
    pub(super) default_wait: Duration,
    pub(super) command_timeout: Duration,
    pub(super) connect_timeout: Duration,
    pub(super) require_noeviction: bool,
    pub(super) redis_functions: bool,
    pub(super) metrics_lock_names: bool,
    pub(super) sentinel_auth: Option<String>,
    /// [`ClientBuilder::redis_client`], as given.
    pub(super) redis_client: Option<redis::Client>,
    /// [`ClientBuilder::username`] and [`ClientBuilder::password`], as given.
    pub(super) username: Option<String>,
    pub(super) password: Option<String>,
    pub(super) replica_acks: u32,
    pub(super) replica_ack_timeout: Duration,
    pub(super) pubsub: PubSubMode,
    pub(super) app_name: Option<String>,
    pub(super) tls_ca: Option<Arc<[u8]>>,
}

/// The password of `url`'s user information (`scheme://user:password@…`, up to the last
/// `@`), still percent-encoded; `None` without one.
pub(super) fn url_password(url: &str) -> Option<&str> {
    let (_, rest) = url.split_once("://")?;
    let (info, _) = rest.rsplit_once('@')?;
    info.split_once(':').map(|(_, p)| p)
}

/// An authentication error of a URL whose own password holds a `%`: the fix is to encode it
/// (`%` starts an escape) or give the password apart, not to check its value.
pub(super) fn credentials_hint(e: Error, given_url: Option<&str>) -> Error {
    if e.kind() == ErrorKind::Auth
        && given_url
            .and_then(url_password)
            .is_some_and(|p| p.contains('%'))
    {
        return e.with_fix(Fix::EncodePassword);
    }
    e
}

/// `s` percent-encoded for a URL's user information: every byte but `A-Z a-z 0-9 - . _ ~`.
pub(super) fn percent_encode(s: &str) -> String {
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
pub(super) fn with_credentials(url: &str, user: Option<&str>, password: Option<&str>) -> String {
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
pub(super) fn check_ca(pem: &[u8]) -> Result<()> {
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
            redis_functions: true,
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
            .field("redis_functions", &self.redis_functions)
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

    /// Sets how many replicas must confirm a grant before it counts, where the deployment has
    /// replicas (Redis Sentinel, Redis Cluster).
    ///
    /// After the script that grants (an acquire or a re-entry of a lock of any kind), distlock
    /// sends `WAIT <n> <timeout>` on the connection that made the grant (one set aside for
    /// grants, since `WAIT` blocks its connection). When fewer replicas confirm within
    /// [`replica_ack_timeout`](ClientBuilder::replica_ack_timeout), the grant is given back and
    /// the call fails with [`ErrorKind::NotReplicated`] (a waiting acquire retries until its
    /// deadline). This narrows the failover window in which a grant the old master never
    /// replicated is granted again by the promoted replica; it does not close it (replication
    /// stays asynchronous: see the README's Topologies section).
    ///
    /// Default 1 (Redisson's default for its synced writes); 0 turns it off. A standalone
    /// server has no replicas to ask: no `WAIT` is sent. The replica count is the sentinels'
    /// view on Sentinel and the cluster's slot map on a Cluster (at most the master's healthy
    /// replicas there), never the master's own (an isolated old master reports none).
    pub fn replica_acks(mut self, n: u32) -> Self {
        self.replica_acks = n;
        self
    }

    /// Sets how long a grant waits for its replicas' confirmations
    /// ([`replica_acks`](ClientBuilder::replica_acks)).
    ///
    /// Default 1 s. At least 1 ms.
    pub fn replica_ack_timeout(mut self, timeout: Duration) -> Self {
        self.replica_ack_timeout = timeout;
        self
    }

    /// Sets which pub/sub carries wake-ups on a Redis Cluster.
    ///
    /// [`PubSubMode::Auto`] (the default: sharded on Redis 7, as Redisson 3.22+), classic, sharded,
    /// or both. Sharded subscriptions are held on one connection per master and follow their slots:
    /// when a node drops them (failover, slot migration), when its connection closes, and when a
    /// periodic read of the slot map (every 5 s) finds a slot on another master, the channel is
    /// subscribed again on its master and its waiters are woken to check at once. Ignored on other
    /// deployments (classic pub/sub).
    pub fn pubsub_mode(mut self, mode: PubSubMode) -> Self {
        self.pubsub = mode;
        self
    }

    /// Sets credentials for the sentinels of a `redis-sentinel://` URL, when they require auth.
    ///
    /// A password, and a user name for an ACL user (Redis Sentinel's `sentinel sentinel-user` /
    /// `requirepass`). Default: none. Never logged.
    pub fn sentinel_auth(mut self, user: Option<&str>, password: &str) -> Self {
        self.sentinel_auth = Some(format!(
            "{}:{}",
            user.map(percent_encode).unwrap_or_default(),
            percent_encode(password)
        ));
        self
    }

    /// Sets the server by a `redis::Client` the application already has.
    ///
    /// It takes the place of a [`url`](ClientBuilder::url), as rslock and redis-lock take one.
    /// distlock opens its own connections from it — the command connection (a connection
    /// manager), the subscription connection for wake-ups, and, where grants are confirmed by
    /// replicas, connections set aside for them — so the client's settings (address, database,
    /// credentials, TLS) carry over, and the application's connections are left alone. A
    /// `redis::Client` names one server: Sentinel and Cluster deployments take a URL.
    pub fn redis_client(mut self, client: redis::Client) -> Self {
        self.redis_client = Some(client);
        self
    }

    /// Sets the password of the data servers.
    ///
    /// The data servers are the standalone server, the Sentinel deployment's master and
    /// replicas, and every Cluster node. The password is given apart from the URL, as
    /// Redisson's `setPassword`: any characters, no percent-encoding (in a URL, `@ : / ? # %`
    /// must be written `%40 %3A %2F %3F %23 %25`). Replaces a password in the URL; the URL's
    /// user name stays unless [`username`](ClientBuilder::username) is set. Default: the URL's.
    /// Never logged.
    pub fn password(mut self, password: impl Into<String>) -> Self {
        self.password = Some(password.into());
        self
    }

    /// Sets the ACL user name of the data servers, given apart from the URL as Redisson's
    /// `setUsername`.
    ///
    /// Any characters. Replaces a user name in the URL. Default: the URL's (none: Redis's
    /// `default` user).
    pub fn username(mut self, user: impl Into<String>) -> Self {
        self.username = Some(user.into());
        self
    }

    /// Sets the application name this client reports to the server and records with its grants.
    ///
    /// Its connections are named `distlock:<app>:<host>:<pid>` (`CLIENT SETNAME`, see
    /// [`Client::connection_name`]) and every plain or fair lock it is granted records the app name
    /// (its first 16 characters) in its holder metadata
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

    /// Sets a prefix put before every name to form its key (e.g. `"myapp:"`).
    ///
    /// Default: none, so lock `orders` is key `orders`, as in Redisson.
    pub fn key_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.key_prefix = prefix.into();
        self
    }

    /// Sets the lease of locks acquired without an explicit lease; the watchdog renews it every
    /// third.
    ///
    /// Default 30 s. At least 3 ms.
    pub fn watchdog_lease(mut self, lease: Duration) -> Self {
        self.watchdog_lease = lease;
        self
    }

    /// Sets how long [`Lock::acquire`](crate::Lock::acquire) waits before failing with
    /// [`ErrorKind::NotAcquired`].
    ///
    /// Default 60 s.
    pub fn default_wait(mut self, wait: Duration) -> Self {
        self.default_wait = wait;
        self
    }

    /// Sets the timeout of one command.
    ///
    /// A request that fails by timeout or a broken connection is sent again up to three times; its
    /// latches live 4 × this + 1 s. Default 3 s.
    pub fn command_timeout(mut self, timeout: Duration) -> Self {
        self.command_timeout = timeout;
        self
    }

    /// Sets the timeout for establishing a connection.
    ///
    /// Default 5 s. Through Sentinel it bounds the whole connect: a deployment in the middle of a
    /// failover is asked again until its sentinels name a live master, or this has passed.
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Checks `rediss://` servers against these CA certificates instead of Mozilla's roots.
    ///
    /// TLS sentinels and cluster nodes are checked too. `pem` is a private CA: one or more PEM
    /// certificates (the contents of a `ca.crt`, as `redis-cli --cacert` takes; the server's
    /// own certificate works for a self-signed one). The server's name is still checked. Plain
    /// `redis://` URLs ignore it. Needs the `tls` feature (a build without it refuses
    /// `rediss://` URLs anyway). An unparsable PEM fails [`build`](ClientBuilder::build) with
    /// [`ErrorKind::Config`].
    ///
    /// Default: the file named by `$SSL_CERT_FILE` when that variable is set (the trust
    /// store OpenSSL and the `distlock` command read; read by [`build`](ClientBuilder::build)
    /// for a TLS URL only, and an unreadable or unparsable file is a
    /// [`Config`](crate::ErrorKind::Config) error), else Mozilla's roots. A
    /// [`redis_client`](ClientBuilder::redis_client) keeps its own TLS settings.
    pub fn tls_ca_cert(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.tls_ca = Some(pem.into().into());
        self
    }

    /// Refuses servers that may evict lock keys.
    ///
    /// With `true`, [`build`](ClientBuilder::build) fails unless the server's `maxmemory-policy` is
    /// `noeviction` (and can be read). Default `false`: other policies are logged as a warning at
    /// connect.
    ///
    /// Why: under memory pressure an `allkeys-*` policy evicts any key, a `volatile-*`
    /// policy any key with a TTL — and every lock key has one. An evicted lock is free for
    /// the next caller while its holder still believes it holds it (until its next
    /// renewal). With `noeviction` a full server refuses writes instead: acquires fail with
    /// [`ErrorKind::OutOfMemory`] and nothing is written.
    pub fn require_noeviction(mut self, require: bool) -> Self {
        self.require_noeviction = require;
        self
    }

    /// Lets the client run its scripts as Redis Functions where it can.
    ///
    /// Default `true`: at connect, a server with Redis Functions (Redis 7+, Valkey) whose
    /// user may run `FUNCTION LOAD` and `FCALL` gets one library of distlock's scripts
    /// (`distlock_<hash>`, one per distlock version and pub/sub variant; it stays in the
    /// server's data, replicated and persisted like a key, until `FUNCTION DELETE`), and every
    /// script is called with `FCALL`, which costs the server less per call than `EVALSHA`.
    /// `false` keeps the server's function libraries untouched and calls every script with
    /// `EVALSHA`, as Redisson does. Either way the scripts are the same. A Redis Cluster
    /// always uses `EVALSHA`. [`Client::script_calls`] says which was chosen and why.
    pub fn redis_functions(mut self, allow: bool) -> Self {
        self.redis_functions = allow;
        self
    }

    /// Labels the acquire metrics (feature `metrics`) with the lock's name too, not only its kind.
    ///
    /// Default `false`: each distinct name is a new time series, and an unbounded label set (e.g.
    /// one lock per user) overwhelms Prometheus; turn it on only when the names are few and fixed.
    /// Without the feature it has no effect.
    pub fn metrics_lock_names(mut self, by_name: bool) -> Self {
        self.metrics_lock_names = by_name;
        self
    }
}

/// Longest application name accepted ([`ClientBuilder::app_name`]), in characters.
pub(super) const MAX_APP_NAME_LEN: usize = 64;

/// Whether `c` may appear in an application name: `[A-Za-z0-9._-]`.
pub(super) fn app_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')
}

/// Check an application name given to [`ClientBuilder::app_name`].
pub(super) fn check_app_name(name: &str) -> Result<()> {
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
pub(super) fn default_app_name() -> String {
    let stem = std::env::current_exe()
        .ok()
        .and_then(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .unwrap_or_default();
    app_name_from(&stem)
}

/// [`default_app_name`] for the file stem `stem`.
pub(super) fn app_name_from(stem: &str) -> String {
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
