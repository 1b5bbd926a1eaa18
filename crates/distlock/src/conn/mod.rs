//! The connection layer, and the seam between distlock and a Redis deployment.
//!
//! Every command, script and pipeline of a client goes through its [`Backend`], which owns
//! the resend rules (what may be sent again after a broken connection or a timeout, and for
//! how long) and sends over a [`Connection`]; every subscription goes through the
//! [`pubsub::Hub`], which opens its connections through a [`Subscriber`]. A deployment is one
//! variant of each: `standalone.rs` (one server), `sentinel.rs` (a master found and followed
//! through Redis Sentinel) and `cluster.rs` (Redis Cluster). Scripts route by their first key
//! (redis-rs's cluster client does so), and every script's keys share the lock's hash slot.

mod cluster;
pub(crate) mod naming;
pub(crate) mod pubsub;
pub(crate) mod sentinel;
mod shards;
mod standalone;
mod url;

use std::sync::Arc;

use std::fmt;
use std::time::Duration;

use redis::aio::{ConnectionLike, ConnectionManager};
use redis::{Cmd, FromRedisValue, Pipeline, RedisFuture, Value};

use crate::scripts::{Invocation as ScriptInvocation, Publish};

use crate::error::{Error, ErrorKind, Result};

/// How often a call is sent again after a connection failure, and the pauses between.
const RETRY_DELAYS: [Duration; 3] = [
    Duration::from_millis(10),
    Duration::from_millis(100),
    Duration::from_millis(400),
];

/// `redis://user:secret@host/` → `redis://user:***@host/`, for messages and `Debug`; a lone
/// user name (`redis://secret@host/`, which some clients take for the password) is masked
/// whole: `redis://***@host/`. The credentials end at the last `@` of the URL, so a password
/// holding `/`, `?` or `#` (which should be percent-encoded, but may not be) is masked whole
/// too: such a URL, or one the URL parser refuses (a Sentinel or Cluster URL with several
/// `host:port`), is masked from `://` to that `@`. A password in the query
/// (`redis+unix:///run/redis.sock?pass=secret`, redis-rs's form for Unix sockets) is masked
/// as `pass=***`.
///
/// What distlock shows wherever it names a server ([`Client::redacted_url`](crate::Client::redacted_url),
/// errors, logs); public so that applications and tools mask URLs the same way.
///
/// # Examples
/// ```
/// assert_eq!(
///     distlock::redact_url("redis://app:secret@cache-1:6379/0"),
///     "redis://app:***@cache-1:6379/0"
/// );
/// assert_eq!(distlock::redact_url("app:secret@cache-1:6379"), "app:***@cache-1:6379");
/// ```
pub fn redact_url(url: &str) -> String {
    mask_query_password(&redact_userinfo(url))
}

/// Mask the values of `pass` and `password` query parameters.
fn mask_query_password(url: &str) -> String {
    let Some((base, rest)) = url.split_once('?') else {
        return url.to_string();
    };
    let (query, fragment) = match rest.split_once('#') {
        Some((q, f)) => (q, Some(f)),
        None => (rest, None),
    };
    let masked: Vec<String> = query
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some((k, _))
                if k.eq_ignore_ascii_case("pass") || k.eq_ignore_ascii_case("password") =>
            {
                format!("{k}=***")
            }
            _ => pair.to_string(),
        })
        .collect();
    let mut out = format!("{base}?{}", masked.join("&"));
    if let Some(f) = fragment {
        out.push('#');
        out.push_str(f);
    }
    out
}

/// The userinfo part of [`redact_url`]. Text without `://` (a URL whose scheme was left out,
/// `app:secret@host:6379`) is masked up to its last `@` all the same.
fn redact_userinfo(url: &str) -> String {
    let scheme_end = url.find("://").map(|i| i + 3);
    let Some(scheme_end) = scheme_end.or_else(|| url.rfind('@').map(|_| 0)) else {
        return url.to_string();
    };
    let rest = &url[scheme_end..];
    let Some(at) = rest.rfind('@') else {
        return url.to_string();
    };
    let userinfo = &rest[..at];
    // Without `/`, `?` or `#` before it, the last `@` ends the parser's authority too, so the
    // parser's credentials are everything before it.
    if scheme_end > 0 && !userinfo.contains(['/', '?', '#']) {
        if let Ok(mut parsed) = ::url::Url::parse(url) {
            let masked = if parsed.password().is_none() {
                parsed.set_username("***")
            } else {
                parsed.set_password(Some("***"))
            };
            if masked.is_ok() {
                return parsed.into();
            }
        }
    }
    let user = userinfo.split(':').next().unwrap_or("");
    let masked = if userinfo.contains(':') && !user.contains(['/', '?', '#']) {
        format!("{user}:***")
    } else {
        "***".to_string()
    };
    format!("{}{}@{}", &url[..scheme_end], masked, &rest[at + 1..])
}

/// The command connection of a client: one variant per kind of deployment.
#[derive(Clone)]
pub(crate) enum Connection {
    /// One server: a multiplexed connection that reconnects with backoff.
    Standalone(ConnectionManager),
    /// A connection set aside for grants confirmed by `WAIT` (which blocks its connection),
    /// held exclusively for one grant.
    Pinned(redis::aio::MultiplexedConnection),
    /// The master Redis Sentinel names now (a request goes to the master current when it is
    /// sent; a switch of master takes effect for the next request).
    Sentinel(Arc<sentinel::Master>),
    /// Redis Cluster: each request routed by its first key, never resent by the driver.
    Cluster(redis::cluster_async::ClusterConnection),
    /// One request redirected by `ASK` (a slot being migrated): sent to the importing node
    /// right after `ASKING`. Single commands only.
    Asking(redis::aio::MultiplexedConnection),
}

impl ConnectionLike for Connection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Connection::Standalone(c) => c.req_packed_command(cmd),
            Connection::Pinned(c) => c.req_packed_command(cmd),
            Connection::Asking(c) => Box::pin(async move {
                let mut pipe = redis::pipe();
                pipe.cmd("ASKING").ignore().add_command(cmd.clone());
                let mut replies = c.req_packed_commands(&pipe, 1, 1).await?;
                replies
                    .pop()
                    .ok_or_else(|| cluster::io_error("no answer after ASKING".into()))
            }),
            Connection::Cluster(c) => c.req_packed_command(cmd),
            Connection::Sentinel(m) => {
                let mut c = m.manager();
                Box::pin(async move { c.req_packed_command(cmd).await })
            }
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Connection::Standalone(c) => c.req_packed_commands(pipeline, offset, count),
            Connection::Pinned(c) => c.req_packed_commands(pipeline, offset, count),
            // Never built for pipelines (ASKING covers only the command after it).
            Connection::Asking(_) => {
                Box::pin(async { Err(cluster::io_error("a pipeline cannot follow ASK".into())) })
            }
            Connection::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
            Connection::Sentinel(m) => {
                let mut c = m.manager();
                Box::pin(async move { c.req_packed_commands(pipeline, offset, count).await })
            }
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Connection::Standalone(c) => c.get_db(),
            Connection::Pinned(c) | Connection::Asking(c) => c.get_db(),
            Connection::Cluster(c) => c.get_db(),
            Connection::Sentinel(m) => m.manager().get_db(),
        }
    }
}

/// Where the subscription hub opens its connections, and how it names them.
#[derive(Clone)]
pub(crate) struct Subscriber {
    source: Source,
    /// The client's connection name ([`naming::connection_name`]).
    name: Arc<str>,
    /// The command side, named again after each reconnection of the hub (the restart or
    /// failover that broke the subscription connection broke the command connection too,
    /// and a reconnected connection has no name).
    command: Backend,
}

/// Where the subscription connections go: one variant per kind of deployment.
#[derive(Clone)]
enum Source {
    /// One server: plain pub/sub connections to it.
    Standalone(Box<redis::Client>),
    /// Plain pub/sub connections to the master Redis Sentinel names now.
    Sentinel(Arc<sentinel::Master>),
    /// Redis Cluster: classic pub/sub on any node (the cluster forwards every `PUBLISH` to
    /// all nodes), the seed nodes tried in turn; or sharded pub/sub on each channel's master;
    /// or both, as the client's [`Publish`] mode says.
    Cluster(Arc<Vec<redis::Client>>, Publish),
}

/// The subscription connection(s) of the hub: classic, sharded, or both.
pub(crate) struct Links {
    pub(crate) classic: Option<pubsub::ClassicLink>,
    pub(crate) sharded: Option<shards::Shards>,
}

impl Subscriber {
    /// Open the subscription connections (each named).
    pub(crate) async fn connect(&self, timeout: Duration) -> redis::RedisResult<Links> {
        let classic = |link| Links {
            classic: Some(link),
            sharded: None,
        };
        let name = &self.name;
        match &self.source {
            Source::Standalone(client) => pubsub::ClassicLink::open(client, name, timeout)
                .await
                .map(classic),
            Source::Sentinel(m) => pubsub::ClassicLink::open(&m.client(), name, timeout)
                .await
                .map(classic),
            Source::Cluster(seeds, publish) => {
                let sharded = match publish {
                    Publish::Classic => None,
                    Publish::Sharded | Publish::Both => {
                        Some(shards::Shards::open(seeds.clone(), timeout, name.clone()).await?)
                    }
                };
                let classic = match publish {
                    Publish::Sharded => None,
                    Publish::Classic | Publish::Both => {
                        Some(cluster::subscribe_any(seeds, timeout, name).await?)
                    }
                };
                Ok(Links { classic, sharded })
            }
        }
    }

    /// Changes whenever the server behind the subscriptions changes (a Sentinel failover):
    /// the hub then reconnects and wakes every waiter. `None` when it never changes.
    pub(crate) fn switches(&self) -> Option<tokio::sync::watch::Receiver<u64>> {
        match &self.source {
            Source::Standalone(_) | Source::Cluster(..) => None,
            Source::Sentinel(m) => Some(m.switches()),
        }
    }

    /// Name the command connection again (`CLIENT SETNAME`, resent over a reconnecting
    /// connection by the usual rules): after the hub reconnected, the command connection has
    /// most likely reconnected too, without its name. Failures are logged at debug level.
    pub(crate) async fn rename_command_connection(&self) {
        let named = self
            .command
            .query::<()>(
                "name the command connection",
                redis::cmd("CLIENT").arg("SETNAME").arg(&*self.name),
            )
            .await;
        if let Err(e) = named {
            tracing::debug!(
                error = format_args!("{e:#}"),
                "CLIENT SETNAME failed; the command connection stays unnamed"
            );
        }
    }
}

/// Where a client connects: a standalone server, or a master behind Redis Sentinel.
#[derive(Debug)]
pub(crate) enum Target {
    /// `redis://`, `rediss://`, `unix://`.
    Standalone(redis::Client),
    /// `redis-sentinel://`, `rediss-sentinel://`.
    Sentinel(sentinel::Config),
    /// `redis-cluster://`, `rediss-cluster://`.
    Cluster(cluster::Config),
}

impl Target {
    /// Parse a server URL; `sentinel_auth` (`user:password` or `:password`) is for the
    /// sentinels of a Sentinel URL. Errors never quote the URL (it may hold a password).
    pub(crate) fn parse(
        url: &str,
        sentinel_auth: Option<&str>,
        tls_ca: Option<&[u8]>,
    ) -> Result<Target> {
        let redacted = redact_url(url);
        if cluster::is_cluster_url(url) {
            return cluster::Config::parse(url)
                .map(Target::Cluster)
                .map_err(|e| Error::config(format!("cannot use server URL {redacted}: {e}")));
        }
        if sentinel::is_sentinel_url(url) {
            return sentinel::Config::parse(url, sentinel_auth)
                .map(Target::Sentinel)
                .map_err(|e| Error::config(format!("cannot use server URL {redacted}: {e}")));
        }
        naming::client_with_ca(url::insecure_as_fragment(url).as_ref(), tls_ca)
            .map(Target::Standalone)
            .map_err(|e| {
                // The driver's message may quote the URL: report only its category.
                Error::config(format!(
                    "cannot use server URL {redacted}: {}",
                    e.category()
                ))
            })
    }
}

/// Connections set aside for grants confirmed by `WAIT` (which blocks its connection until
/// the replicas answer or the timeout passes), per master.
const GRANT_CONNECTIONS: usize = 4;

/// One set-aside connection for grants; opened on first use.
pub(crate) type GrantSlot = Arc<tokio::sync::Mutex<Option<redis::aio::MultiplexedConnection>>>;

/// Exclusive use of one grant connection; set it to `None` to have it reopened.
pub(crate) type GrantSlotGuard =
    tokio::sync::OwnedMutexGuard<Option<redis::aio::MultiplexedConnection>>;

/// The grant connections of one master, none opened yet.
pub(crate) fn grant_slots() -> Vec<GrantSlot> {
    (0..GRANT_CONNECTIONS)
        .map(|_| Arc::new(tokio::sync::Mutex::new(None)))
        .collect()
}

/// Take `slot` exclusively, opening its connection first when it has none, to the server
/// `client()` names (called only then; its response timeout leaves room for the `WAIT`).
/// Returns the connection and the guard that keeps the slot exclusive; the connection stays
/// for the next grant.
pub(crate) async fn open_grant_slot(
    slot: GrantSlot,
    client: impl FnOnce() -> std::result::Result<redis::Client, String>,
    settings: &ConnectSettings,
) -> std::result::Result<(redis::aio::MultiplexedConnection, GrantSlotGuard), String> {
    let mut conn = slot.lock_owned().await;
    if conn.is_none() {
        let client = client()?;
        let config = redis::AsyncConnectionConfig::new()
            .set_connection_timeout(Some(settings.connect_timeout))
            .set_response_timeout(Some(
                settings.command_timeout + settings.replica_ack_timeout,
            ));
        let mut opened = client
            .get_multiplexed_async_connection_with_config(&config)
            .await
            .map_err(|e| format!("a connection for grants: {e}"))?;
        naming::set_name(&mut opened, &settings.client_name).await;
        *conn = Some(opened);
    }
    let c = conn.as_ref().expect("opened above").clone();
    Ok((c, conn))
}

/// The command side of a client: resend rules over a [`Connection`].
#[derive(Clone)]
pub(crate) struct Backend {
    conn: Connection,
    /// Redis Cluster: the slot map and the connections set aside per master (grants
    /// confirmed by `WAIT`, `ASK` redirects, the blocking release). Also on the backends of a
    /// cluster's grant channels.
    nodes: Option<Arc<cluster::Nodes>>,
    /// Which variant of the scripts runs: how they publish wake-ups.
    publish: Publish,
}

/// The connection one grant is sent on ([`Backend::for_grant`]).
pub(crate) struct GrantChannel {
    /// Send the grant's script through this.
    pub(crate) backend: Backend,
    /// The generation of the tokens granted through it: the Sentinel master's config epoch,
    /// 0 elsewhere (on a Cluster — `backend.nodes` set — the script reads its node's own).
    pub(crate) generation: u64,
    /// Replicas to wait for, and how long, after the grant.
    wait: Option<(u32, Duration)>,
    /// Holds the set-aside connection exclusively (WAIT covers this connection's writes).
    slot: Option<GrantSlotGuard>,
}

impl GrantChannel {
    /// A channel over `conn` that sends no `WAIT`, for tokens of `generation`; `nodes` on a
    /// Cluster.
    fn unconfirmed(
        conn: Connection,
        publish: Publish,
        generation: u64,
        nodes: Option<Arc<cluster::Nodes>>,
    ) -> GrantChannel {
        GrantChannel {
            backend: Backend {
                conn,
                publish,
                nodes,
            },
            generation,
            wait: None,
            slot: None,
        }
    }

    /// The fencing floor argument of a grant's script for the client's `floor` (see
    /// `prelude.lua`'s `next_token`): `floor` itself, `<generation>:<floor>` on Sentinel,
    /// `cluster:<floor>` on a Cluster.
    pub(crate) fn floor<'a>(&self, floor: &'a str) -> std::borrow::Cow<'a, str> {
        floor_arg(floor, self.backend.nodes.is_some(), self.generation)
    }

    /// A send on this channel failed with `e`: a broken set-aside connection is reopened
    /// for the next grant; on a Cluster the slot map is read again (the slot may have moved,
    /// or its replicas changed).
    pub(crate) fn failed(&mut self, e: &Error) {
        if e.kind() == ErrorKind::Connection {
            if let Some(slot) = self.slot.as_mut() {
                **slot = None;
            }
        }
        if let Some(nodes) = &self.backend.nodes {
            nodes.mark_stale();
        }
    }

    /// Send `invocation` over this channel (resent by the usual rules); when `applied` says
    /// the reply made a write to confirm (an extension that found its hold), `WAIT` for the
    /// replicas. Any failure marks the channel failed ([`GrantChannel::failed`]);
    /// [`ErrorKind::NotReplicated`] when too few replicas confirmed.
    pub(crate) async fn eval_then_confirm<T: FromRedisValue>(
        &mut self,
        context: impl fmt::Display,
        invocation: &ScriptInvocation<'_>,
        applied: impl FnOnce(&T) -> bool,
    ) -> Result<T> {
        let sent = self.backend.eval::<T>(&context, invocation).await;
        let r = sent.inspect_err(|e| self.failed(e))?;
        if applied(&r) {
            let confirmed = self.confirm(&context).await;
            confirmed.inspect_err(|e| self.failed(e))?;
        }
        Ok(r)
    }

    /// After a grant: `WAIT` for the replicas on the connection that made it. `Ok` when no
    /// confirmation is asked for or enough replicas confirmed; [`ErrorKind::NotReplicated`]
    /// otherwise (the caller gives the grant back).
    pub(crate) async fn confirm(&self, context: impl fmt::Display) -> Result<()> {
        let Some((wanted, timeout)) = self.wait else {
            return Ok(());
        };
        let acked: i64 = self
            .backend
            .query(
                &context,
                redis::cmd("WAIT")
                    .arg(wanted)
                    .arg(timeout.as_millis() as u64),
            )
            .await?;
        let acked = acked.max(0) as u32;
        if acked < wanted {
            return Err(Error::not_replicated(&context.to_string(), acked, wanted));
        }
        Ok(())
    }
}

/// Connection settings a [`Backend`] and the subscription hub share.
#[derive(Clone, Debug)]
pub(crate) struct ConnectSettings {
    pub connect_timeout: Duration,
    pub command_timeout: Duration,
    /// Replicas that must confirm a grant (`WAIT`) where the deployment has replicas; 0: off.
    pub replica_acks: u32,
    /// How long a grant waits for those confirmations.
    pub replica_ack_timeout: Duration,
    /// Classic or sharded pub/sub (Cluster only).
    pub pubsub: crate::PubSubMode,
    /// The name every connection distlock opens gives itself (`CLIENT SETNAME`):
    /// `distlock:<app>:<host>:<pid>`.
    pub client_name: Arc<str>,
    /// The CA certificates (PEM) that `rediss://` servers are checked against, instead of
    /// Mozilla's roots ([`crate::ClientBuilder::tls_ca_cert`]).
    pub tls_ca: Option<Arc<[u8]>>,
}

/// `SCAN` one server for keys matching `pattern`, `COUNT` [`SCAN_COUNT`] per call, for at most
/// `calls` calls; the keys found, and whether the scan went through the whole keyspace.
async fn scan_on<C: ConnectionLike>(
    mut conn: C,
    pattern: &str,
    calls: usize,
) -> redis::RedisResult<(Vec<String>, bool)> {
    let (mut keys, mut cursor) = (Vec::new(), 0u64);
    for _ in 0..calls {
        let (next, found): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(pattern)
            .arg("COUNT")
            .arg(SCAN_COUNT)
            .query_async(&mut conn)
            .await?;
        keys.extend(found);
        if next == 0 {
            return Ok((keys, true));
        }
        cursor = next;
    }
    Ok((keys, false))
}

/// Keys each `SCAN` call of [`Backend::scan`] asks the server to look at.
pub(crate) const SCAN_COUNT: usize = 1000;

impl Backend {
    /// `SCAN` every master — the server, or each master of a Cluster — for keys matching
    /// `pattern` (a glob, as `SCAN MATCH`), looking at about `examine` keys per master (in
    /// calls of [`SCAN_COUNT`]); the keys found (sorted, without duplicates) and whether every
    /// master was scanned to the end.
    pub(crate) async fn scan(&self, pattern: &str, examine: usize) -> Result<(Vec<String>, bool)> {
        let calls = examine.div_ceil(SCAN_COUNT).max(1);
        let context = format!("SCAN MATCH {pattern:?}");
        let (mut keys, complete) = match &self.nodes {
            None => scan_on(self.conn.clone(), pattern, calls)
                .await
                .map_err(|e| Error::from_redis(&context, e))?,
            Some(nodes) => {
                let map = nodes.slot_map().await.map_err(|e| {
                    Error::new(
                        crate::error::ErrorKind::Connection,
                        format!("{context}: {e}"),
                    )
                })?;
                let (mut keys, mut complete) = (Vec::new(), true);
                for master in map.masters() {
                    let conn = nodes
                        .connection_to(&master)
                        .await
                        .map_err(|e| Error::from_redis(&context, e))?;
                    let (found, done) = scan_on(conn, pattern, calls)
                        .await
                        .map_err(|e| Error::from_redis(&context, e))?;
                    keys.extend(found);
                    complete &= done;
                }
                (keys, complete)
            }
        };
        keys.sort();
        keys.dedup();
        Ok((keys, complete))
    }

    /// Connect and authenticate; fails fast on an unreachable server or a refused password.
    /// Returns the backend and where the subscription hub connects.
    pub(crate) async fn connect(
        target: Target,
        settings: &ConnectSettings,
        redacted_url: &str,
    ) -> Result<(Backend, Subscriber)> {
        // One budget for the whole connect (TCP, TLS, AUTH, the first PING): redis-rs's
        // manager retries a failed first connection on its own, which must not stretch it.
        let context = format!("connect to {redacted_url}");
        let connect = async {
            let (conn, source, publish, nodes) = match target {
                Target::Standalone(client) => {
                    let conn = standalone::connect(&client, settings)
                        .await
                        .map_err(|e| Error::from_redis(&context, e))?;
                    (
                        Connection::Standalone(conn),
                        Source::Standalone(Box::new(client)),
                        Publish::Classic,
                        None,
                    )
                }
                Target::Sentinel(config) => {
                    let master = sentinel::Master::connect(config, settings).await.map_err(
                        |(failure, e)| {
                            let kind = match failure {
                                sentinel::Failure::Unavailable => ErrorKind::Connection,
                                sentinel::Failure::Auth => ErrorKind::Auth,
                                sentinel::Failure::UnknownMaster => ErrorKind::Config,
                            };
                            Error::new(kind, format!("{context}: {e}"))
                        },
                    )?;
                    (
                        Connection::Sentinel(master.clone()),
                        Source::Sentinel(master),
                        Publish::Classic,
                        None,
                    )
                }
                Target::Cluster(config) => {
                    let conn = cluster::connect(&config, settings)
                        .await
                        .map_err(|e| Error::from_redis(&context, e))?;
                    let seeds = config
                        .seed_urls()
                        .iter()
                        .map(|u| naming::client_with_ca(u.as_str(), settings.tls_ca.as_deref()))
                        .collect::<redis::RedisResult<Vec<_>>>()
                        .map_err(|e| Error::from_redis(&context, e))?;
                    let seeds = Arc::new(seeds);
                    let nodes = Arc::new(cluster::Nodes::new(seeds.clone(), settings.clone()));
                    // Read the slot map now: the blocking release needs it even when no grant
                    // is confirmed (failures are retried at the first grant).
                    let _ = nodes.slot_map().await;
                    let mut conn = Connection::Cluster(conn);
                    let publish = cluster::publish_mode(&mut conn, settings.pubsub)
                        .await
                        .map_err(|e| Error::from_redis(&context, e))?
                        .map_err(|why| {
                            Error::new(ErrorKind::Config, format!("{context}: {why}"))
                        })?;
                    (conn, Source::Cluster(seeds, publish), publish, Some(nodes))
                }
            };
            let backend = Backend {
                conn,
                publish,
                nodes,
            };
            backend
                .query::<String>(&context, &redis::cmd("PING"))
                .await?;
            let subscriber = Subscriber {
                source,
                name: settings.client_name.clone(),
                command: backend.clone(),
            };
            Ok::<_, Error>((backend, subscriber))
        };
        match tokio::time::timeout(settings.connect_timeout, connect).await {
            Ok(r) => r,
            Err(_) => Err(Error::new(
                ErrorKind::Connection,
                format!(
                    "{context}: no answer within the connect timeout ({:?})",
                    settings.connect_timeout
                ),
            )),
        }
    }

    /// A client for the server commands go to now (the blocking fallback connects with it).
    pub(crate) fn current_client(&self, key: &str) -> Option<redis::Client> {
        match (&self.conn, &self.nodes) {
            (Connection::Sentinel(m), _) => Some(m.client()),
            (Connection::Cluster(_), Some(nodes)) => nodes.client_for(key),
            _ => None,
        }
    }

    /// Where a grant is sent: this backend itself, or — where grants must be confirmed by
    /// replicas — a backend over a connection set aside for it, held until the returned
    /// value drops, with the `WAIT` to send after the grant.
    pub(crate) async fn for_grant(&self, key: &str) -> Result<GrantChannel> {
        match (&self.conn, &self.nodes) {
            // A grant goes to one master from first send to last (its token's generation is
            // that master's config epoch): after a switch it fails, and is built again.
            (Connection::Sentinel(m), _) => match m.grant_connection().await.map_err(|e| {
                m.nudge();
                Error::new(ErrorKind::Connection, format!("grant: {e}"))
            })? {
                Some((conn, epoch, wanted, timeout, guard)) => Ok(GrantChannel {
                    wait: Some((wanted, timeout)),
                    slot: Some(guard),
                    ..GrantChannel::unconfirmed(Connection::Pinned(conn), self.publish, epoch, None)
                }),
                None => {
                    let (manager, epoch) = m.snapshot();
                    Ok(GrantChannel::unconfirmed(
                        Connection::Standalone(manager),
                        self.publish,
                        epoch,
                        None,
                    ))
                }
            },
            // The script reads its node's config epoch (`cluster:<floor>`); a grant to be
            // confirmed goes to the key's master over a connection set aside for it.
            (Connection::Cluster(_), Some(nodes)) => {
                let set_aside = nodes.grant_connection(key).await.map_err(|e| {
                    nodes.mark_stale();
                    Error::new(ErrorKind::Connection, format!("grant: {e}"))
                })?;
                let nodes = Some(nodes.clone());
                Ok(match set_aside {
                    Some((conn, wanted, timeout, guard)) => GrantChannel {
                        wait: Some((wanted, timeout)),
                        slot: Some(guard),
                        ..GrantChannel::unconfirmed(
                            Connection::Pinned(conn),
                            self.publish,
                            0,
                            nodes,
                        )
                    },
                    None => GrantChannel::unconfirmed(self.conn.clone(), self.publish, 0, nodes),
                })
            }
            _ => Ok(GrantChannel::unconfirmed(
                self.conn.clone(),
                self.publish,
                0,
                None,
            )),
        }
    }

    /// The token floor a grant made inside another request's script takes (a release that
    /// hands the lock to a waiter), without I/O: as [`GrantChannel::floor`] of a grant on
    /// this backend, with the Sentinel master's config epoch as the client last saw it (an
    /// older generation than the counter's counts on in the counter's; see prelude.lua).
    pub(crate) fn grant_floor(&self, floor: &str) -> String {
        let generation = match &self.conn {
            Connection::Sentinel(m) => m.snapshot().1,
            _ => 0,
        };
        floor_arg(floor, self.nodes.is_some(), generation).into_owned()
    }

    /// Whether grants on this backend may be confirmed by replicas (`WAIT`): Sentinel or
    /// Cluster with [`replica_acks`](crate::ClientBuilder::replica_acks) above 0.
    pub(crate) fn confirms_grants(&self) -> bool {
        match (&self.conn, &self.nodes) {
            (_, Some(nodes)) => nodes.replica_acks() > 0,
            (Connection::Sentinel(m), _) => m.replica_acks() > 0,
            _ => false,
        }
    }

    /// The command connection (routes like every request of this backend).
    pub(crate) fn connection(&self) -> Connection {
        self.conn.clone()
    }

    /// How this backend's scripts publish wake-ups.
    pub(crate) fn publish(&self) -> Publish {
        self.publish
    }

    /// Send once over this backend's connection, and once more to the importing node when
    /// the answer is an `ASK` redirect.
    async fn send_once<T, F, Fut>(&self, send: &mut F) -> redis::RedisResult<T>
    where
        F: FnMut(Connection) -> Fut,
        Fut: std::future::Future<Output = redis::RedisResult<T>>,
    {
        let r = send(self.conn.clone()).await;
        if let Err(e) = &r {
            if let Some(target) = self.ask_target(e).await {
                return send(target).await;
            }
        }
        r
    }

    /// Send a script once (EVALSHA, NOSCRIPT → EVAL), following an `ASK` redirect.
    async fn invoke<T: FromRedisValue>(
        &self,
        invocation: &ScriptInvocation<'_>,
    ) -> redis::RedisResult<T> {
        let publish = self.publish;
        self.send_once(&mut |mut conn| async move {
            invocation.invoke_async::<T>(&mut conn, publish).await
        })
        .await
    }

    /// When `e` is an `ASK` redirect (its slot is being migrated and the key already moved):
    /// a connection to the importing node that sends `ASKING` before the request. `None`
    /// for any other error, or off a Cluster. Nothing ran on the node that answered `ASK`.
    async fn ask_target(&self, e: &redis::RedisError) -> Option<Connection> {
        let nodes = self.nodes.as_ref()?;
        if e.kind() != redis::ErrorKind::Server(redis::ServerErrorKind::Ask) {
            return None;
        }
        let (addr, _) = e.redirect_node()?;
        match nodes.connection_to(addr).await {
            Ok(c) => Some(Connection::Asking(c)),
            Err(err) => {
                tracing::debug!(
                    node = addr,
                    error = format_args!("{err:#}"),
                    "cannot follow ASK"
                );
                None
            }
        }
    }

    /// Whether this backend sends over a connection set aside for one grant.
    fn pinned(&self) -> bool {
        matches!(self.conn, Connection::Pinned(_))
    }

    /// A request failed with `e`: on Sentinel, a refused write (READONLY: the master was
    /// demoted) or an unreachable master has the sentinels asked at once.
    fn saw_error(&self, e: &redis::RedisError) {
        if let Connection::Sentinel(m) = &self.conn {
            if retriable(e) {
                m.nudge();
            }
        }
    }

    /// Whether every script call must keep its keys in one hash slot (Redis Cluster). A
    /// single server takes any keys in one call, so batches need not be split by slot.
    pub(crate) fn single_slot_scripts(&self) -> bool {
        matches!(self.conn, Connection::Cluster(_))
    }

    /// Run a script (EVALSHA, NOSCRIPT → SCRIPT LOAD + retry), resending on connection
    /// failures. `context` names the operation for error messages.
    pub(crate) async fn eval<T: FromRedisValue>(
        &self,
        context: impl fmt::Display,
        invocation: &ScriptInvocation<'_>,
    ) -> Result<T> {
        let publish = self.publish;
        self.with_retries(context, |mut conn| async move {
            invocation.invoke_async::<T>(&mut conn, publish).await
        })
        .await
    }

    /// Run a script that must not run twice (it is not idempotent), without resending it:
    /// after a connection failure the caller cannot know whether it ran.
    pub(crate) async fn eval_once<T: FromRedisValue>(
        &self,
        context: impl fmt::Display,
        invocation: &ScriptInvocation<'_>,
    ) -> Result<T> {
        self.invoke(invocation)
            .await
            .map_err(|e| Error::from_redis(&context.to_string(), e))
    }

    /// Run a script that a request latch makes idempotent, resending it after connection
    /// failures until the server answers or `window` has passed since the first send (the
    /// last send then waits its command timeout).
    ///
    /// Every resend carries the same request id, so whichever send the server runs first is
    /// the one applied and the others answer its result. When the window passes without an
    /// answer the error says the outcome is unknown ([`Error::is_outcome_unknown`]): the
    /// server may still run a send that is queued there (a paused or stalled server), and the
    /// caller must resolve it — resend in the background ([`Backend::resend_in_background`])
    /// or undo it through its latch. Also says whether it was sent more than once.
    pub(crate) async fn eval_resolving<T: FromRedisValue>(
        &self,
        context: impl fmt::Display,
        invocation: &ScriptInvocation<'_>,
        window: Duration,
    ) -> Result<(T, bool)> {
        let deadline = tokio::time::Instant::now() + window;
        let mut attempt = 0usize;
        // Whether a send so far may have run without its answer reaching us.
        let mut unknown = false;
        loop {
            match self.invoke(invocation).await {
                Ok(v) => return Ok((v, attempt > 0)),
                Err(e) if retriable(&e) => {
                    self.saw_error(&e);
                    unknown |= unanswered(&e);
                    let now = tokio::time::Instant::now();
                    // Over a connection set aside for a grant, which does not reconnect, the
                    // caller gets the error at once (and resolves an unknown outcome through
                    // the latch); a refusal where nothing ran is ridden out like any
                    // connection error.
                    if now >= deadline || self.pinned() {
                        let e = Error::from_redis(&context.to_string(), e);
                        return Err(if unknown { e.outcome_unknown() } else { e });
                    }
                    tracing::debug!(%context, error = format_args!("{e:#}"), attempt, "resending (same request id)");
                    // The last resend goes out at the deadline at the latest.
                    tokio::time::sleep(resend_delay(attempt).min(deadline - now)).await;
                    attempt += 1;
                }
                Err(e) => return Err(Error::from_redis(&context.to_string(), e)),
            }
        }
    }

    /// [`Backend::eval_resolving`] for a write that replicas must confirm where the
    /// deployment asks for it (releases, count-downs, permits added): sent over a connection
    /// set aside for `key`'s master and followed there by `WAIT`. A send whose answer or
    /// confirmation does not come (a broken connection, too few replicas: the write may be
    /// lost by a failover) is sent again — with the same request id, so it is applied at most
    /// once wherever it lands — until it is confirmed or `window` has passed; then the error
    /// says the outcome is unknown. Redisson syncs its unlock with `WAIT` in the same way.
    pub(crate) async fn eval_confirmed<T: FromRedisValue>(
        &self,
        key: &str,
        context: impl fmt::Display,
        invocation: &ScriptInvocation<'_>,
        window: Duration,
    ) -> Result<(T, bool)> {
        let deadline = tokio::time::Instant::now() + window;
        let mut attempt = 0usize;
        loop {
            let remaining = deadline.saturating_duration_since(tokio::time::Instant::now());
            let failed = match self.for_grant(key).await {
                Ok(grant) if grant.wait.is_none() => {
                    // Nothing to confirm: resends over the client's own connection.
                    drop(grant);
                    return self
                        .eval_resolving::<T>(&context, invocation, remaining)
                        .await
                        .map(|(v, resent)| (v, resent || attempt > 0));
                }
                Ok(mut grant) => {
                    match grant
                        .backend
                        .eval_resolving::<T>(&context, invocation, remaining)
                        .await
                    {
                        Ok((v, _)) => match grant.confirm(&context).await {
                            Ok(()) => return Ok((v, attempt > 0)),
                            Err(e) => {
                                grant.failed(&e);
                                e
                            }
                        },
                        Err(e) => {
                            grant.failed(&e);
                            e
                        }
                    }
                }
                Err(e) => e,
            };
            let resendable =
                failed.kind() == ErrorKind::NotReplicated || failed.kind() == ErrorKind::Connection;
            let now = tokio::time::Instant::now();
            if !resendable || now >= deadline {
                return Err(if resendable {
                    failed.outcome_unknown()
                } else {
                    failed
                });
            }
            tracing::debug!(%context, error = format_args!("{failed:#}"), attempt, "not confirmed; resending (same request id)");
            tokio::time::sleep(resend_delay(attempt).min(deadline - now)).await;
            attempt += 1;
        }
    }

    /// Keep sending a cancellation (a script that leaves a tombstone in a request's latch and
    /// answers the same when resent) from a background task until the server answers, at
    /// most `limit`; `on_answer` gets the reply. Used to give back grants whose outcome was
    /// unknown to their caller.
    pub(crate) fn resend_in_background<T, F>(
        &self,
        runtime: &tokio::runtime::Handle,
        context: String,
        invocation: ScriptInvocation<'static>,
        limit: Duration,
        on_answer: F,
    ) where
        T: FromRedisValue + Send + 'static,
        F: FnOnce(Result<T>) + Send + 'static,
    {
        let backend = self.clone();
        runtime.spawn(async move {
            let r = backend
                .eval_resolving::<T>(&context, &invocation, limit)
                .await
                .map(|(v, _)| v);
            if let Err(e) = &r {
                if e.is_outcome_unknown() {
                    tracing::error!(%context, "server unreachable for {limit:?}: outcome of the request stays unknown");
                }
            }
            on_answer(r);
        });
    }

    /// Run one command, resending on connection failures (use for idempotent commands).
    pub(crate) async fn query<T: FromRedisValue>(
        &self,
        context: impl fmt::Display,
        cmd: &redis::Cmd,
    ) -> Result<T> {
        self.with_retries(context, |mut conn| async move {
            cmd.query_async::<T>(&mut conn).await
        })
        .await
    }

    /// Run a pipeline (read-only or idempotent), resending on connection failures.
    pub(crate) async fn pipeline<T: FromRedisValue>(
        &self,
        context: impl fmt::Display,
        pipe: &redis::Pipeline,
    ) -> Result<T> {
        self.with_retries(context, |mut conn| async move {
            pipe.query_async::<T>(&mut conn).await
        })
        .await
    }

    /// Send a request, and send it again after [`RETRY_DELAYS`] while it fails in a way that
    /// allows a resend.
    /// `context` is formatted only when something goes wrong (no allocation per call).
    async fn with_retries<T, F, Fut>(&self, context: impl fmt::Display, mut send: F) -> Result<T>
    where
        F: FnMut(Connection) -> Fut,
        Fut: std::future::Future<Output = redis::RedisResult<T>>,
    {
        let mut attempt = 0;
        // A connection set aside for one grant does not reconnect: a failure there goes back
        // to the caller, which sends the grant again over a fresh one.
        let resends = if self.pinned() { 0 } else { RETRY_DELAYS.len() };
        loop {
            match self.send_once(&mut send).await {
                Ok(v) => return Ok(v),
                Err(e) if retriable(&e) && attempt < resends => {
                    self.saw_error(&e);
                    tracing::debug!(%context, error = format_args!("{e:#}"), attempt, "resending");
                    tokio::time::sleep(RETRY_DELAYS[attempt]).await;
                    attempt += 1;
                }
                Err(e) => return Err(Error::from_redis(&context.to_string(), e)),
            }
        }
    }
}

/// Pause before resend number `attempt` (0-based): 10 ms, 100 ms, 400 ms, then every second.
fn resend_delay(attempt: usize) -> Duration {
    RETRY_DELAYS
        .get(attempt)
        .copied()
        .unwrap_or(Duration::from_secs(1))
}

/// Whether a failed send may have run on the server: its answer never came (a broken
/// connection, a timeout). A server's refusal (MOVED, TRYAGAIN, READONLY, …) or a refused
/// connection means nothing ran.
fn unanswered(e: &redis::RedisError) -> bool {
    (e.is_io_error() || e.is_connection_dropped() || e.is_timeout()) && !e.is_connection_refusal()
}

/// Errors after which the same request may be sent again: broken or refused connections,
/// timeouts, a server that is still loading its snapshot or asks to try again, a replica's
/// READONLY refusal (given before anything runs: a master demoted by a failover), and a
/// cluster's MOVED and ASK redirects (nothing ran; on MOVED the cluster client rebuilds its
/// slot map, so the resend goes to the slot's new master; an ASK that could not be followed
/// is resent like a MOVED).
fn retriable(e: &redis::RedisError) -> bool {
    use redis::{ErrorKind as K, ServerErrorKind as S};
    e.is_io_error()
        || e.is_connection_dropped()
        || e.is_connection_refusal()
        || e.is_timeout()
        || matches!(
            e.kind(),
            K::Server(S::BusyLoading)
                | K::Server(S::TryAgain)
                | K::Server(S::MasterDown)
                | K::Server(S::ClusterDown)
                | K::Server(S::ReadOnly)
                | K::Server(S::Moved)
                | K::Server(S::Ask)
        )
}

/// The fencing floor argument of a grant's script (see `prelude.lua`'s `next_token`):
/// `cluster:<floor>` on a Cluster, else `<generation>:<floor>` above generation 0, else
/// `floor` itself.
fn floor_arg(floor: &str, cluster: bool, generation: u64) -> std::borrow::Cow<'_, str> {
    if cluster {
        format!("cluster:{floor}").into()
    } else if generation == 0 {
        floor.into()
    } else {
        format!("{generation}:{floor}").into()
    }
}

#[cfg(test)]
mod tests {
    use super::redact_url;

    #[test]
    fn passwords_are_masked() {
        assert_eq!(
            redact_url("redis://:hunter2@127.0.0.1:6379/0"),
            "redis://:***@127.0.0.1:6379/0"
        );
        assert_eq!(
            redact_url("rediss://app:hunter2@host/"),
            "rediss://app:***@host/"
        );
        assert_eq!(redact_url("redis://host:6379"), "redis://host:6379");
        assert!(!redact_url("redis://u:p@ss@h/").contains("p@ss"));
        assert!(!redact_url("redis://u:se/cret@h/").contains("cret"));
        assert!(!redact_url("redis-sentinel://u:a#b?c@h1,h2#m").contains("a#b"));
    }

    #[test]
    fn the_parser_keeps_the_rest_of_the_url() {
        // An unencoded `@` in the password: the credentials end at the last one.
        assert_eq!(redact_url("redis://u:p@ss@h/"), "redis://u:***@h/");
        assert_eq!(
            redact_url("redis://app:s%40cret@[::1]:6380/2?protocol=resp3#insecure"),
            "redis://app:***@[::1]:6380/2?protocol=resp3#insecure"
        );
        assert_eq!(
            redact_url("redis-cluster://app:hunter2@h1,h2,h3"),
            "redis-cluster://app:***@h1,h2,h3"
        );
        assert_eq!(redact_url("no url at all"), "no url at all");
    }

    #[test]
    fn a_url_without_a_scheme_is_masked_too() {
        assert_eq!(
            redact_url("app:hunter2@127.0.0.1:6379"),
            "app:***@127.0.0.1:6379"
        );
        assert_eq!(redact_url(":hunter2@host"), ":***@host");
        assert_eq!(redact_url("hunter2@host"), "***@host");
        assert_eq!(redact_url("localhost:6379"), "localhost:6379");
    }

    #[test]
    fn a_password_in_the_query_is_masked() {
        assert_eq!(
            redact_url("redis+unix:///run/redis.sock?db=1&pass=hunter2"),
            "redis+unix:///run/redis.sock?db=1&pass=***"
        );
        assert_eq!(
            redact_url("unix:///tmp/r.sock?user=app&password=hunter2#x"),
            "unix:///tmp/r.sock?user=app&password=***#x"
        );
    }

    #[test]
    fn a_lone_user_name_is_masked_whole() {
        assert_eq!(redact_url("redis://secret@host/"), "redis://***@host/");
        assert_eq!(
            redact_url("redis://secret@host:6379"),
            "redis://***@host:6379"
        );
    }

    #[test]
    fn unparsable_urls_are_masked_up_to_the_last_at() {
        // Several `host:port` (the parser refuses them): the user name stays.
        assert_eq!(
            redact_url("redis-sentinel://u:p@h1:26379,h2:26379/0#mymaster"),
            "redis-sentinel://u:***@h1:26379,h2:26379/0#mymaster"
        );
        // A `/` in the password (the parser would end the credentials there).
        assert_eq!(redact_url("redis://u:se/cret@h/"), "redis://u:***@h/");
        // `redis://u:12/x@h/` parses as host `u`, port 12, no credentials: still masked.
        assert_eq!(redact_url("redis://u:12/x@h/"), "redis://u:***@h/");
        // A `/` in the user name: all of it.
        assert_eq!(redact_url("redis://u/v:pw@h/"), "redis://***@h/");
        assert_eq!(
            redact_url("redis-sentinel://u:a#b?c@h1,h2#m"),
            "redis-sentinel://u:***@h1,h2#m"
        );
    }
}
