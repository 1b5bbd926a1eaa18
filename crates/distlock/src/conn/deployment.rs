//! [`Deployment`] answers what differs between deployments; [`Route`]: how one request travels.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, Pipeline, RedisFuture, Value};

use super::cluster::slots::io_error;
use super::cluster::Nodes;
use super::grant_slots::SetAside;
use super::pubsub::links::{ClassicLink, Links};
use super::pubsub::Deliver;
use super::sentinel::Master;
use super::standalone::Server;
use crate::error::{Error, ErrorKind, Result};
use crate::scripts::Publish;

/// The deployment behind a command connection: one variant per kind.
#[derive(Clone)]
pub(crate) enum Deployment {
    /// One server. Also the Sentinel master a grant goes to, fixed from its first send to
    /// its last (its token's generation is that master's config epoch).
    Standalone(Server),
    /// The master Redis Sentinel names now (a request goes to the master current when it is
    /// sent; a switch of master takes effect for the next request).
    Sentinel(Arc<Master>),
    /// Redis Cluster: each request routed by its first key, never resent by the driver;
    /// `nodes`: the slot map and the connections per master distlock keeps itself (grants
    /// confirmed by `WAIT`, `ASK` redirects, the blocking release).
    Cluster {
        conn: ClusterConnection,
        nodes: Arc<Nodes>,
    },
}

/// How one request travels.
#[derive(Clone)]
pub(crate) enum Route {
    /// Over the deployment's command connection.
    Shared,
    /// Over a connection set aside for grants confirmed by `WAIT` (which blocks its
    /// connection), held exclusively for one grant; it does not reconnect.
    Pinned(MultiplexedConnection),
    /// One request redirected by `ASK` (a slot being migrated): sent to the importing node
    /// right after `ASKING`. Single commands only.
    Asking(MultiplexedConnection),
}

/// The command connection of a client, or of one grant: a deployment and a route.
#[derive(Clone)]
pub(crate) struct Connection {
    pub(crate) deployment: Deployment,
    pub(crate) route: Route,
}

impl ConnectionLike for Connection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match &mut self.route {
            Route::Shared => self.deployment.req_packed_command(cmd),
            Route::Pinned(c) => c.req_packed_command(cmd),
            Route::Asking(c) => Box::pin(async move {
                let mut pipe = redis::pipe();
                pipe.cmd("ASKING").ignore().add_command(cmd.clone());
                let mut replies = c.req_packed_commands(&pipe, 1, 1).await?;
                replies
                    .pop()
                    .ok_or_else(|| io_error("no answer after ASKING".into()))
            }),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match &mut self.route {
            Route::Shared => self.deployment.req_packed_commands(pipeline, offset, count),
            Route::Pinned(c) => c.req_packed_commands(pipeline, offset, count),
            // Never built for pipelines (ASKING covers only the command after it).
            Route::Asking(_) => {
                Box::pin(async { Err(io_error("a pipeline cannot follow ASK".into())) })
            }
        }
    }

    fn get_db(&self) -> i64 {
        match &self.route {
            Route::Shared => self.deployment.get_db(),
            Route::Pinned(c) | Route::Asking(c) => c.get_db(),
        }
    }
}

/// The deployment's own command connection ([`Route::Shared`]).
impl ConnectionLike for Deployment {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Deployment::Standalone(s) => s.manager.req_packed_command(cmd),
            Deployment::Sentinel(m) => {
                let mut c = m.manager();
                Box::pin(async move { c.req_packed_command(cmd).await })
            }
            Deployment::Cluster { conn, .. } => conn.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Deployment::Standalone(s) => s.manager.req_packed_commands(pipeline, offset, count),
            Deployment::Sentinel(m) => {
                let mut c = m.manager();
                Box::pin(async move { c.req_packed_commands(pipeline, offset, count).await })
            }
            Deployment::Cluster { conn, .. } => conn.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Deployment::Standalone(s) => s.manager.get_db(),
            Deployment::Sentinel(m) => m.manager().get_db(),
            Deployment::Cluster { conn, .. } => conn.get_db(),
        }
    }
}

impl Deployment {
    /// Whether every script call must keep its keys in one hash slot (Redis Cluster). A
    /// single server takes any keys in one call, so batches need not be split by slot.
    pub(crate) fn single_slot_scripts(&self) -> bool {
        matches!(self, Deployment::Cluster { .. })
    }

    /// Whether grants may be confirmed by replicas (`WAIT`): Sentinel or Cluster with
    /// [`replica_acks`](crate::ClientBuilder::replica_acks) above 0.
    pub(crate) fn confirms_grants(&self) -> bool {
        match self {
            Deployment::Standalone(_) => false,
            Deployment::Sentinel(m) => m.replica_acks() > 0,
            Deployment::Cluster { nodes, .. } => nodes.replica_acks() > 0,
        }
    }

    /// The generation of the tokens granted now, as last seen (no I/O): the Sentinel
    /// master's config epoch, 0 elsewhere (a Cluster's scripts read their node's own).
    pub(crate) fn generation(&self) -> u64 {
        match self {
            Deployment::Sentinel(m) => m.epoch(),
            Deployment::Standalone(_) | Deployment::Cluster { .. } => 0,
        }
    }

    /// The fencing floor argument of a grant's script for the client's `floor` (see
    /// `prelude.lua`'s `next_token`): `cluster:<floor>` on a Cluster, else
    /// `<generation>:<floor>` above generation 0, else `floor` itself.
    pub(crate) fn token_floor<'a>(&self, floor: &'a str, generation: u64) -> Cow<'a, str> {
        if let Deployment::Cluster { .. } = self {
            format!("cluster:{floor}").into()
        } else if generation == 0 {
            floor.into()
        } else {
            format!("{generation}:{floor}").into()
        }
    }

    /// A client for the server commands on `key` go to now (the blocking fallback connects
    /// with it): the Sentinel master, or the Cluster master serving `key` in the last slot
    /// map read. `None` on a standalone server (the fallback has its own client).
    pub(crate) fn current_client(&self, key: &str) -> Option<redis::Client> {
        match self {
            Deployment::Standalone(_) => None,
            Deployment::Sentinel(m) => Some(m.client()),
            Deployment::Cluster { nodes, .. } => nodes.client_for(key),
        }
    }

    /// A request failed in a way that allows a resend: on Sentinel (a refused write,
    /// READONLY: the master was demoted; or an unreachable master) the sentinels are asked
    /// at once.
    pub(crate) fn request_failed(&self) {
        match self {
            Deployment::Sentinel(m) => m.nudge(),
            // The server may have restarted: the grants after it read its clock again.
            Deployment::Standalone(s) => s.clock.forget(),
            Deployment::Cluster { .. } => {}
        }
    }

    /// The clock reading of the server every request goes to (one server); `None` elsewhere
    /// (Sentinel and Cluster grants read `TIME` for their generation's tokens).
    pub(crate) fn clock(&self) -> Option<Arc<super::standalone::ServerClock>> {
        match self {
            Deployment::Standalone(s) => Some(s.clock.clone()),
            _ => None,
        }
    }

    /// A send on a grant's connection failed: on a Cluster the slot map is read again before
    /// the next grant (the slot may have moved, or its replicas changed).
    pub(crate) fn grant_failed(&self) {
        if let Deployment::Cluster { nodes, .. } = self {
            nodes.mark_stale();
        }
    }

    /// A connection to the node `addr` that an `ASK` redirect names, on a Cluster; `None`
    /// elsewhere, or when it cannot be opened.
    pub(crate) async fn redirect(&self, addr: &str) -> Option<MultiplexedConnection> {
        let Deployment::Cluster { nodes, .. } = self else {
            return None;
        };
        match nodes.connection_to(addr).await {
            Ok(c) => Some(c),
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

    /// Where a grant on `key` goes: the deployment it is sent to, the generation of the
    /// tokens it grants, and — where replicas must confirm it — a connection set aside for
    /// it. On Sentinel, the master current now, fixed for the grant (after a switch it fails,
    /// and is built again); on a Cluster, the key's master (the script reads its node's
    /// config epoch: `cluster:<floor>`).
    pub(crate) async fn grant_target(
        &self,
        key: &str,
    ) -> Result<(Deployment, u64, Option<SetAside>)> {
        let failed = |e: String| Error::new(ErrorKind::Connection, format!("grant: {e}"));
        // The others boxed: asking the sentinels or opening a connection is a future far
        // larger than a single server's grant, which every acquire's future would carry.
        match self {
            Deployment::Standalone(_) => Ok((self.clone(), 0, None)),
            Deployment::Sentinel(m) => {
                let (server, epoch, set_aside) =
                    Box::pin(m.grant_connection()).await.map_err(|e| {
                        m.nudge();
                        failed(e)
                    })?;
                Ok((Deployment::Standalone(server), epoch, set_aside))
            }
            Deployment::Cluster { nodes, .. } => {
                let set_aside = Box::pin(nodes.grant_connection(key)).await.map_err(|e| {
                    nodes.mark_stale();
                    failed(e)
                })?;
                Ok((self.clone(), 0, set_aside))
            }
        }
    }

    /// Open the subscription hub's connections, each named `name`: classic pub/sub to the
    /// server, or to the master the sentinels name now; on a Cluster as `publish` (the
    /// scripts' way of publishing) says.
    pub(crate) async fn subscription_links(
        &self,
        publish: Publish,
        name: &Arc<str>,
        timeout: Duration,
        deliver: &Deliver,
    ) -> redis::RedisResult<Links> {
        match self {
            Deployment::Standalone(s) => ClassicLink::open(&s.client, name, timeout, deliver)
                .await
                .map(Links::classic),
            Deployment::Sentinel(m) => ClassicLink::open(&m.client(), name, timeout, deliver)
                .await
                .map(Links::classic),
            Deployment::Cluster { nodes, .. } => {
                Links::cluster(nodes.seeds(), publish, name, timeout, deliver).await
            }
        }
    }

    /// Changes whenever the server behind the subscriptions changes (a Sentinel failover).
    /// `None` when it never changes.
    pub(crate) fn switches(&self) -> Option<tokio::sync::watch::Receiver<u64>> {
        match self {
            Deployment::Sentinel(m) => Some(m.switches()),
            Deployment::Standalone(_) | Deployment::Cluster { .. } => None,
        }
    }

    /// `SCAN` every master — the server, or each master of a Cluster — for keys matching
    /// `pattern`, in at most `calls` calls of [`SCAN_COUNT`] per master; the keys found and
    /// whether every master was scanned to the end. `context` names the scan in errors.
    pub(crate) async fn scan(
        &self,
        pattern: &str,
        calls: usize,
        context: &str,
    ) -> Result<(Vec<String>, bool)> {
        let Deployment::Cluster { nodes, .. } = self else {
            return scan_on(self.clone(), pattern, calls)
                .await
                .map_err(|e| Error::from_redis(context, e));
        };
        let map = nodes
            .slot_map()
            .await
            .map_err(|e| Error::new(ErrorKind::Connection, format!("{context}: {e}")))?;
        let (mut keys, mut complete) = (Vec::new(), true);
        for master in map.masters() {
            let conn = nodes
                .connection_to(&master)
                .await
                .map_err(|e| Error::from_redis(context, e))?;
            let (found, done) = scan_on(conn, pattern, calls)
                .await
                .map_err(|e| Error::from_redis(context, e))?;
            keys.extend(found);
            complete &= done;
        }
        Ok((keys, complete))
    }
}

/// Keys each `SCAN` call of [`Deployment::scan`] asks the server to look at.
pub(crate) const SCAN_COUNT: usize = 1000;

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
