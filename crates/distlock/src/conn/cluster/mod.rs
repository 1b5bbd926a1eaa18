//! Redis Cluster (`redis-cluster://`, `rediss-cluster://`): commands routed by key through
//! redis-rs's async cluster client; [`Nodes`]: the slot map, connections per master set
//! aside for grants confirmed by `WAIT`, and connections that follow `ASK`.
//!
//! The cluster client is built with `retries(0)`: redis-rs would otherwise resend a request
//! after an I/O error on its own (up to 16 times by default), which must never happen to a
//! script that is not idempotent (a semaphore release, a latch count-down). distlock's own
//! resend rules (`backend.rs`) decide what is sent again, as on every deployment.
//! Every script's keys share one hash slot (hash tags, the per-slot fencing counter), so the
//! client routes a script by its first key; watchdog batches are split by slot.
//!
//! The slot map is in `cluster/slots.rs`; wake-ups (sharded or classic pub/sub) in
//! `pubsub/links.rs` and `pubsub/shards.rs`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use redis::cluster::ClusterClientBuilder;
use redis::cluster_async::ClusterConnection;

use super::grant_slots::{grant_slots, open_grant_slot, GrantSlot, SetAside};
use super::naming;
use super::url::MultiHost;
use super::ConnectSettings;
use super::PubSubMode;
use crate::keys::key_slot;
use crate::scripts::Publish;
use slots::{fetch_slots, node_client, Addr, SlotMap, REFRESH_EVERY};

pub(crate) mod slots;

/// Port of a node given without one.
const DEFAULT_PORT: u16 = 6379;

/// Whether `url` names a Cluster deployment (lettuce's URL form).
pub(crate) fn is_cluster_url(url: &str) -> bool {
    url.starts_with("redis-cluster://") || url.starts_with("rediss-cluster://")
}

/// Seed nodes of a cluster: parsed from a `redis-cluster://` URL.
#[derive(Clone)]
pub(crate) struct ClusterUrl {
    url: MultiHost,
}

impl std::fmt::Debug for ClusterUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterUrl")
            .field("seeds", &self.url.hosts)
            .finish()
    }
}

impl ClusterUrl {
    /// Parse lettuce's form `redis-cluster://[user:password@]host1[:port1][,host2[:port2]…]`
    /// (`rediss-cluster://` for TLS, `?insecure` to skip certificate checks). A cluster has
    /// only database 0. Errors are messages without the password.
    pub(crate) fn parse(url: &str) -> Result<ClusterUrl, String> {
        let url = MultiHost::parse(url, "redis-cluster", "rediss-cluster", DEFAULT_PORT, "node")?;
        if url.fragment.is_some() {
            return Err("a cluster URL has no #fragment".into());
        }
        if !url.db_path.is_empty() && url.db_path != "/0" {
            return Err("Redis Cluster has only database 0".into());
        }
        Ok(ClusterUrl { url })
    }

    /// A redis-rs URL for each seed node.
    pub(crate) fn seed_urls(&self) -> Vec<String> {
        self.url
            .hosts
            .iter()
            .map(|h| self.url.node_url(&self.url.userinfo, h))
            .collect()
    }
}

/// Connect the command side ([`connect`]) and what it knows of the nodes ([`Nodes`], over the
/// seed nodes), reading the slot map once now: the blocking release needs it even when no
/// grant is confirmed (failures are retried at the first grant).
pub(crate) async fn open(
    config: &ClusterUrl,
    settings: &ConnectSettings,
) -> redis::RedisResult<(ClusterConnection, Arc<Nodes>)> {
    let conn = connect(config, settings).await?;
    let seeds = config
        .seed_urls()
        .iter()
        .map(|u| naming::client_with_ca(u.as_str(), settings.tls_ca.as_deref()))
        .collect::<redis::RedisResult<Vec<_>>>()?;
    let nodes = Arc::new(Nodes::new(Arc::new(seeds), settings.clone()));
    let _ = nodes.slot_map().await;
    Ok((conn, nodes))
}

/// Connect the command side: a cluster connection that never resends on its own. Its node
/// connections are named once, through it (redis-rs sends `CLIENT SETNAME` to every node it
/// knows); those it opens later are not (see `naming.rs`).
async fn connect(
    config: &ClusterUrl,
    settings: &ConnectSettings,
) -> redis::RedisResult<ClusterConnection> {
    let builder = ClusterClientBuilder::new(config.seed_urls())
        .retries(0)
        .connection_timeout(settings.connect_timeout)
        .response_timeout(settings.command_timeout);
    #[cfg(feature = "tls")]
    // Only for TLS seeds: redis-rs's cluster client would speak TLS to plain ones too.
    let builder = match &settings.tls_ca {
        Some(ca) if config.url.scheme == "rediss" => builder.certs(naming::tls_certificates(ca)),
        _ => builder,
    };
    let mut conn = builder.build()?.get_async_connection().await?;
    naming::set_name(&mut conn, &settings.client_name).await;
    Ok(conn)
}

/// Which pub/sub the scripts and the hub use on this cluster, for the setting `mode`:
/// sharded where the servers support it (`PUBSUB SHARDNUMSUB` answers: Redis 7), as Redisson's
/// default `shardedSubscriptionMode` AUTO. `Ok(Err(why))` when sharded pub/sub was asked for
/// and the servers lack it.
pub(crate) async fn publish_mode(
    conn: &mut ClusterConnection,
    mode: PubSubMode,
) -> redis::RedisResult<Result<Publish, String>> {
    if mode == PubSubMode::Classic {
        return Ok(Ok(Publish::Classic));
    }
    let probe = redis::cmd("PUBSUB")
        .arg("SHARDNUMSUB")
        .query_async::<redis::Value>(conn)
        .await;
    let supported = match probe {
        Ok(_) => true,
        // A broken or refused connection is not an answer: connecting fails.
        Err(e)
            if e.is_io_error()
                || e.is_timeout()
                || e.is_connection_dropped()
                || e.is_connection_refusal() =>
        {
            return Err(e)
        }
        // The server refused the command (an unknown subcommand before Redis 7). redis-rs's
        // cluster router turns Redis 6.2's refusal into a client-side type error without a
        // server code, so every answer that is not a reply counts as a refusal.
        Err(_) => false,
    };
    Ok(match (mode, supported) {
        (PubSubMode::Both, true) => Ok(Publish::Both),
        (_, true) => Ok(Publish::Sharded),
        (PubSubMode::Auto, false) => Ok(Publish::Classic),
        (_, false) => Err(
            "sharded pub/sub was asked for, but the cluster's servers do not \
                           support it (SSUBSCRIBE needs Redis 7 or later)"
                .to_string(),
        ),
    })
}

/// What the command side knows of the cluster's nodes beyond redis-rs's routing: a slot map
/// with each master's healthy replicas (refreshed every [`REFRESH_EVERY`] and after a grant
/// failed), and connections per master set aside for grants confirmed by `WAIT`.
pub(crate) struct Nodes {
    seeds: Arc<Vec<redis::Client>>,
    settings: ConnectSettings,
    /// The map and when it was read.
    map: RwLock<(Arc<SlotMap>, Option<Instant>)>,
    /// Read the map again before the next grant.
    stale: AtomicBool,
    /// One refresh at a time.
    refreshing: tokio::sync::Mutex<()>,
    pools: Mutex<HashMap<Addr, Vec<GrantSlot>>>,
    next: AtomicUsize,
}

impl std::fmt::Debug for Nodes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Nodes").finish_non_exhaustive()
    }
}

impl Nodes {
    fn new(seeds: Arc<Vec<redis::Client>>, settings: ConnectSettings) -> Nodes {
        Nodes {
            seeds,
            settings,
            map: RwLock::new((Arc::new(SlotMap::default()), None)),
            stale: AtomicBool::new(true),
            refreshing: tokio::sync::Mutex::new(()),
            pools: Mutex::new(HashMap::new()),
            next: AtomicUsize::new(0),
        }
    }

    /// The seed nodes, as clients (with the connection settings every node connection copies).
    pub(crate) fn seeds(&self) -> &Arc<Vec<redis::Client>> {
        &self.seeds
    }

    /// Replicas a grant waits for (`WAIT`), as configured.
    pub(crate) fn replica_acks(&self) -> u32 {
        self.settings.replica_acks
    }

    /// Read the map again before the next grant (a grant failed: the slot may have moved).
    pub(crate) fn mark_stale(&self) {
        self.stale.store(true, Ordering::Relaxed);
    }

    /// The current map, read again first when stale or older than [`REFRESH_EVERY`].
    pub(crate) async fn slot_map(&self) -> Result<Arc<SlotMap>, String> {
        let fresh = |m: &(Arc<SlotMap>, Option<Instant>)| {
            !self.stale.load(Ordering::Relaxed)
                && m.1.is_some_and(|at| at.elapsed() < REFRESH_EVERY)
        };
        let have_map = {
            let m = self.map.read().unwrap();
            if fresh(&m) {
                return Ok(m.0.clone());
            }
            m.1.is_some()
        };
        // One refresh at a time; while one runs, the others go on with the map they have
        // (a slow node must not hold up every grant).
        let _one = match self.refreshing.try_lock() {
            Ok(guard) => guard,
            Err(_) if have_map => return Ok(self.map.read().unwrap().0.clone()),
            Err(_) => self.refreshing.lock().await,
        };
        {
            let m = self.map.read().unwrap();
            if fresh(&m) {
                return Ok(m.0.clone());
            }
        }
        self.stale.store(false, Ordering::Relaxed);
        // The masters of the last map first (the seeds may be gone), each asked briefly.
        let mut candidates: Vec<redis::Client> = self
            .map
            .read()
            .unwrap()
            .0
            .masters()
            .iter()
            .filter_map(|a| node_client(&self.seeds, a, redis::ProtocolVersion::RESP2).ok())
            .collect();
        candidates.extend(self.seeds.iter().cloned());
        let each = self.settings.connect_timeout.min(Duration::from_secs(1));
        match fetch_slots(Vec::new(), &candidates, each).await {
            Ok(map) => {
                let map = Arc::new(map);
                let masters = map.masters();
                self.pools
                    .lock()
                    .unwrap()
                    .retain(|addr, _| masters.contains(addr));
                *self.map.write().unwrap() = (map.clone(), Some(Instant::now()));
                Ok(map)
            }
            Err(e) => {
                self.stale.store(true, Ordering::Relaxed);
                Err(format!("reading the cluster's slot map: {e}"))
            }
        }
    }

    /// A new connection to the node `addr` (`host:port`, from an `ASK` redirect: rare, only
    /// while a slot migrates, so none is kept).
    pub(crate) async fn connection_to(
        &self,
        addr: &str,
    ) -> redis::RedisResult<redis::aio::MultiplexedConnection> {
        let config = redis::AsyncConnectionConfig::new()
            .set_connection_timeout(Some(self.settings.connect_timeout))
            .set_response_timeout(Some(self.settings.command_timeout));
        // Not named: it serves one redirected command and is dropped (a name would cost a
        // round trip more per redirect).
        node_client(&self.seeds, addr, redis::ProtocolVersion::RESP2)?
            .get_multiplexed_async_connection_with_config(&config)
            .await
    }

    /// A client for the master that serves `key` in the last map read (no refresh): for
    /// the blocking release, which cannot wait for one.
    pub(crate) fn client_for(&self, key: &str) -> Option<redis::Client> {
        let m = self.map.read().unwrap();
        let range = m.0.range_of(key_slot(key))?;
        node_client(&self.seeds, &range.master, redis::ProtocolVersion::RESP2).ok()
    }

    /// A connection to the master serving `key`, set aside for one grant to be confirmed by
    /// `WAIT` and held exclusively until the guard drops, with the replicas to wait for (the
    /// number asked for, at most the healthy replicas of that master) and the timeout; `None`
    /// when grants need no confirmation (asked for none, or no healthy replica).
    pub(crate) async fn grant_connection(&self, key: &str) -> Result<Option<SetAside>, String> {
        if self.settings.replica_acks == 0 {
            // Kept fresh all the same, for the blocking release at runtime end.
            let _ = self.slot_map().await;
            return Ok(None);
        }
        let map = self.slot_map().await?;
        let slot = key_slot(key);
        let Some(range) = map.range_of(slot) else {
            self.mark_stale();
            return Err(format!("no master serves slot {slot} (cluster down?)"));
        };
        let wanted = self.settings.replica_acks.min(range.replicas);
        if wanted == 0 {
            return Ok(None);
        }
        let grant_slot = {
            let mut pools = self.pools.lock().unwrap();
            let pool = pools
                .entry(range.master.clone())
                .or_insert_with(grant_slots);
            let n = self.next.fetch_add(1, Ordering::Relaxed);
            pool[n % pool.len()].clone()
        };
        let client = || {
            node_client(&self.seeds, &range.master, redis::ProtocolVersion::RESP2)
                .map_err(|e| format!("a connection for grants to {}: {e}", range.master))
        };
        let (conn, guard) = open_grant_slot(grant_slot, client, &self.settings).await?;
        Ok(Some(SetAside {
            conn,
            wanted,
            timeout: self.settings.replica_ack_timeout,
            guard,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::ClusterUrl;

    #[test]
    fn parses_lettuce_cluster_urls() {
        let c = ClusterUrl::parse("redis-cluster://app:pw@h1:7000,h2:7001,h3").unwrap();
        assert_eq!(
            c.seed_urls(),
            [
                "redis://app:pw@h1:7000",
                "redis://app:pw@h2:7001",
                "redis://app:pw@h3:6379"
            ]
        );
        let c = ClusterUrl::parse("rediss-cluster://h1:7000?insecure").unwrap();
        assert_eq!(c.seed_urls(), ["rediss://h1:7000#insecure"]);
        for bad in [
            "redis-cluster://h1:7000/3",
            "redis-cluster://h1:7000#x",
            "redis-cluster://,h1",
            "redis://h1",
        ] {
            let e = ClusterUrl::parse(bad).unwrap_err();
            assert!(!e.contains("pw"), "{e}");
        }
    }
}
