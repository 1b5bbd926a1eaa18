//! [`ClientBuilder::build`]: connect, check the server, read the fencing floor, start the
//! background tasks.

use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use super::builder::{
    check_app_name, check_ca, credentials_hint, default_app_name, with_credentials,
};
use super::{Client, ClientBuilder, ClientInner};
use crate::conn::pubsub::Hub;
use crate::conn::{naming, redact_url, Backend, ConnectSettings, Target};
use crate::error::{Error, ErrorKind, Fix, Result};
use crate::keys;
use crate::registry::{Fallback, HoldRegistry};
use crate::watchdog::Leases;

impl ClientBuilder {
    /// Connect, authenticate and start the background tasks on the current tokio runtime.
    ///
    /// # Errors
    /// - [`ErrorKind::Config`]: no URL, an unparsable URL, a
    ///   duration out of range, an [app name](ClientBuilder::app_name) that is empty, longer
    ///   than 64 characters or has a character outside `[A-Za-z0-9._-]` (nothing is
    ///   connected then);
    /// - [`ErrorKind::Connection`]: the server cannot be
    ///   reached within the connect timeout;
    /// - [`ErrorKind::Auth`]: the server refused the credentials;
    /// - [`ErrorKind::Config`] also when
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
        let url = self.server_url()?;
        let redacted = redact_url(&url);
        self.check_durations()?;
        let given = self.redis_client.clone();
        let tls_ca = match &self.tls_ca {
            Some(ca) => {
                check_ca(ca)?;
                Some(ca.clone())
            }
            // A redis::Client carries its own TLS settings.
            None if given.is_none() && uses_tls(&url) => ca_from_env()?,
            None => None,
        };
        let me = Identity::of(&self)?;
        let target = match given {
            Some(client) => Target::Standalone(client),
            None => Target::parse(
                &self.with_credentials(url),
                self.sentinel_auth.as_deref(),
                tls_ca.as_deref(),
            )
            .map_err(|e| credentials_hint(e, self.url.as_deref()))?,
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
            client_name: me.connection_name.clone(),
            tls_ca,
            functions: self.redis_functions,
        };
        let (backend, subscriber) = match Backend::connect(target, &settings, &redacted).await {
            Ok(c) => c,
            Err(e) => return Err(self.refused(e, standalone.as_ref(), &redacted).await),
        };
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
            leases.notice_handler(backend.clone()),
        );
        let inner = ClientInner {
            id,
            id_str: id.to_string().into(),
            registry: HoldRegistry::new(
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
            fencing_floor: fencing_floor.into(),
            key_prefix: self.key_prefix,
            watchdog_lease: self.watchdog_lease,
            default_wait: self.default_wait,
            command_timeout: self.command_timeout,
            metrics_lock_names: self.metrics_lock_names,
            runtime: tokio::runtime::Handle::current(),
            seq: AtomicU64::new(0),
            record_seqs: Default::default(),
            job_stamp: AtomicU64::new(0),
            redacted_url: redacted,
            eviction_policy,
            holder_meta: me.holder_meta,
            app_name: me.app_name,
            connection_name: me.connection_name,
        };
        Ok(Client {
            inner: Arc::new(inner),
        })
    }

    /// The server's URL: the one given, or a [`redis::Client`]'s as its connection info
    /// names it (no credentials).
    fn server_url(&self) -> Result<String> {
        match (&self.url, &self.redis_client) {
            (Some(url), None) => Ok(url.clone()),
            (None, Some(client)) => {
                let info = client.get_connection_info();
                Ok(format!(
                    "redis://{}/{}",
                    info.addr(),
                    info.redis_settings().db()
                ))
            }
            (None, None) => Err(Error::config(
                "no server given (ClientBuilder::url or ClientBuilder::redis_client)",
            )),
            (Some(_), Some(_)) => Err(Error::config(
                "a URL and a redis::Client were both given: give one (ClientBuilder::url or \
                 ClientBuilder::redis_client)",
            )),
        }
    }

    /// Every duration within its range (a lease's: 1 ms to 365 days; the watchdog lease at
    /// least 3 ms; the default wait at most 365 days).
    fn check_durations(&self) -> Result<()> {
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
        keys::check_wait(self.default_wait).map_err(|e| Error::config(e.to_string()))
    }

    /// `url` with the builder's user name and password, when either was given.
    fn with_credentials(&self, url: String) -> String {
        if self.username.is_some() || self.password.is_some() {
            with_credentials(&url, self.username.as_deref(), self.password.as_deref())
        } else {
            url
        }
    }

    /// The error of a connect that failed with `e`: where the server refused the credentials
    /// of a standalone server, its own reason (a password given to a server without one is
    /// [`Fix::RemovePassword`]), and the hint for a URL whose password looks cut.
    async fn refused(&self, e: Error, standalone: Option<&redis::Client>, redacted: &str) -> Error {
        let e = match standalone {
            Some(client) if e.fix() == Some(Fix::CheckCredentials) => {
                match auth_refusal(client, self.connect_timeout).await {
                    Some(reason) if reason.contains("without any password configured") => {
                        Error::new(
                            ErrorKind::Auth,
                            format!(
                                "connect to {redacted}: the server has no password set, but \
                                 one was given ({reason})"
                            ),
                        )
                        .with_fix(Fix::RemovePassword)
                    }
                    Some(reason) => Error::new(
                        ErrorKind::Auth,
                        format!(
                            "connect to {redacted}: the server refused the user name or \
                             password ({reason})"
                        ),
                    )
                    .with_fix(Fix::CheckCredentials),
                    None => e,
                }
            }
            _ => e,
        };
        credentials_hint(e, self.url.as_deref())
    }
}

/// Who this client says it is: in its connection name and in the holder metadata of its
/// grants.
struct Identity {
    app_name: String,
    /// `distlock:<app>:<host>:<pid>` (see [`naming::connection_name`]).
    connection_name: Arc<str>,
    /// `<app>;<host>;<pid>`, app and host cut to 16 and 24 characters.
    holder_meta: String,
}

impl Identity {
    /// The builder's app name (checked), or the executable's; this host and process.
    fn of(builder: &ClientBuilder) -> Result<Identity> {
        let app_name = match builder.app_name.clone() {
            Some(name) => check_app_name(&name).map(|()| name)?,
            None => default_app_name(),
        };
        let host = naming::host_name();
        let pid = std::process::id();
        Ok(Identity {
            connection_name: naming::connection_name(&app_name, &host, pid).into(),
            holder_meta: format!(
                "{};{};{pid}",
                keys::first_chars(&app_name, 16),
                keys::first_chars(&host, 24)
            ),
            app_name,
        })
    }
}

/// The server's own reason for refusing `client`'s credentials, which redis-rs reduces to
/// "Password authentication failed": one connection without credentials sends `AUTH`
/// itself and returns the error reply (`WRONGPASS …`, or `ERR AUTH <password> called without
/// any password configured …`, which never holds the password). `None` when it cannot tell.
async fn auth_refusal(client: &redis::Client, timeout: Duration) -> Option<String> {
    let info = client.get_connection_info().clone();
    let given = info.redis_settings().clone();
    let password = given.password()?.to_string();
    let bare = info.set_redis_settings(redis::RedisConnectionInfo::default().set_db(given.db()));
    let probe = async {
        let mut con = redis::Client::open(bare)
            .ok()?
            .get_multiplexed_async_connection()
            .await
            .ok()?;
        let mut auth = redis::cmd("AUTH");
        if let Some(user) = given.username() {
            auth.arg(user);
        }
        auth.arg(password);
        match auth.query_async::<redis::Value>(&mut con).await {
            Ok(_) => None,
            Err(e) => crate::error::server_reply(&e),
        }
    };
    tokio::time::timeout(timeout, probe).await.ok().flatten()
}

/// Whether `url`'s scheme is one of TLS (`rediss`, `rediss-sentinel`, `rediss-cluster`,
/// `valkeys`).
fn uses_tls(url: &str) -> bool {
    url.split_once("://").is_some_and(|(scheme, _)| {
        matches!(
            scheme.to_ascii_lowercase().as_str(),
            "rediss" | "rediss-sentinel" | "rediss-cluster" | "valkeys"
        )
    })
}

/// The CA certificates of `$SSL_CERT_FILE`, when it is set (and not empty): the trust store
/// OpenSSL, rustls-native-certs and the `distlock` command read, used for a TLS URL when no
/// [`ClientBuilder::tls_ca_cert`] was given.
fn ca_from_env() -> Result<Option<Arc<[u8]>>> {
    let Some(path) = std::env::var_os("SSL_CERT_FILE").filter(|p| !p.is_empty()) else {
        return Ok(None);
    };
    let path = std::path::PathBuf::from(path);
    let pem = std::fs::read(&path).map_err(|e| {
        Error::config(format!(
            "cannot read the TLS CA certificates of $SSL_CERT_FILE ({}): {e}",
            path.display()
        ))
    })?;
    check_ca(&pem)
        .map_err(|e| Error::config(format!("$SSL_CERT_FILE ({}): {e}", path.display())))?;
    Ok(Some(pem.into()))
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
    if backend.via().functions {
        // The library holds them all.
        return;
    }
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
