//! Redis Cluster (`redis-cluster://`, `rediss-cluster://`): commands routed by key through
//! redis-rs's async cluster client; [`Nodes`]: the slot map, connections per master set
//! aside for grants confirmed by `WAIT`, and connections that follow `ASK`.
//!
//! The cluster client is built with `retries(0)`: redis-rs would otherwise resend a request
//! after an I/O error on its own (up to 16 times by default), which must never happen to a
//! script that is not idempotent (a semaphore release, a latch count-down). distlock's own
//! resend rules ([`super::Backend`]) decide what is sent again, as on every deployment.
//! Every script's keys share one hash slot (hash tags, the per-slot fencing counter), so the
//! client routes a script by its first key; watchdog batches are split by slot.
//!
//! Wake-ups: sharded pub/sub on each channel's master (`shards.rs`); or, in classic mode, the
//! scripts `PUBLISH`, which a cluster forwards to every node, so one subscription connection
//! to any node hears every channel ([`subscribe_any`]: the seed nodes in turn).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use redis::cluster::ClusterClientBuilder;
use redis::cluster_async::ClusterConnection;
use redis::{ConnectionAddr, ConnectionInfo, Value};

use super::url::MultiHost;
use super::ConnectSettings;
use crate::keys::key_slot;
use crate::scripts::Publish;

/// Port of a node given without one.
const DEFAULT_PORT: u16 = 6379;

/// Whether `url` names a Cluster deployment (lettuce's URL form).
pub(crate) fn is_cluster_url(url: &str) -> bool {
    url.starts_with("redis-cluster://") || url.starts_with("rediss-cluster://")
}

/// Seed nodes of a cluster: parsed from a `redis-cluster://` URL.
#[derive(Clone)]
pub(crate) struct Config {
    url: MultiHost,
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("seeds", &self.url.hosts)
            .finish()
    }
}

impl Config {
    /// Parse lettuce's form `redis-cluster://[user:password@]host1[:port1][,host2[:port2]…]`
    /// (`rediss-cluster://` for TLS, `?insecure` to skip certificate checks). A cluster has
    /// only database 0. Errors are messages without the password.
    pub(crate) fn parse(url: &str) -> Result<Config, String> {
        let url = MultiHost::parse(url, "redis-cluster", "rediss-cluster", DEFAULT_PORT, "node")?;
        if url.fragment.is_some() {
            return Err("a cluster URL has no #fragment".into());
        }
        if !url.db_path.is_empty() && url.db_path != "/0" {
            return Err("Redis Cluster has only database 0".into());
        }
        Ok(Config { url })
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

/// Connect the command side: a cluster connection that never resends on its own. Its node
/// connections are named once, through it (redis-rs sends `CLIENT SETNAME` to every node it
/// knows); those it opens later are not (see `naming.rs`).
pub(crate) async fn connect(
    config: &Config,
    settings: &ConnectSettings,
) -> redis::RedisResult<ClusterConnection> {
    let builder = ClusterClientBuilder::new(config.seed_urls())
        .retries(0)
        .connection_timeout(settings.connect_timeout)
        .response_timeout(settings.command_timeout);
    #[cfg(feature = "tls")]
    // Only for TLS seeds: redis-rs's cluster client would speak TLS to plain ones too.
    let builder = match &settings.tls_ca {
        Some(ca) if config.url.scheme == "rediss" => {
            builder.certs(super::naming::tls_certificates(ca))
        }
        _ => builder,
    };
    let mut conn = builder.build()?.get_async_connection().await?;
    super::naming::set_name(&mut conn, &settings.client_name).await;
    Ok(conn)
}

/// Which pub/sub the scripts and the hub use on this cluster, for the setting `mode`:
/// sharded where the servers support it (`PUBSUB SHARDNUMSUB` answers: Redis 7), as Redisson's
/// default `shardedSubscriptionMode` AUTO. `Ok(Err(why))` when sharded pub/sub was asked for
/// and the servers lack it.
pub(crate) async fn publish_mode(
    conn: &mut super::Connection,
    mode: crate::PubSubMode,
) -> redis::RedisResult<Result<Publish, String>> {
    use crate::PubSubMode;
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

/// Open a subscription connection named `name` to the first seed node that answers within
/// `timeout` each.
pub(crate) async fn subscribe_any(
    seeds: &[redis::Client],
    timeout: Duration,
    name: &str,
) -> redis::RedisResult<super::pubsub::ClassicLink> {
    let mut last = None;
    for client in seeds {
        match tokio::time::timeout(
            timeout,
            super::pubsub::ClassicLink::open(client, name, timeout),
        )
        .await
        {
            Ok(Ok(link)) => return Ok(link),
            Ok(Err(e)) => last = Some(e),
            Err(_) => {}
        }
    }
    Err(last.unwrap_or_else(|| {
        redis::RedisError::from(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            "no cluster node answered",
        ))
    }))
}

/// How often a slot map is read again without any other reason (grants and sharded
/// subscriptions each keep one).
pub(crate) const REFRESH_EVERY: Duration = Duration::from_secs(5);

/// A node's address as `CLUSTER SLOTS` names it: `host:port`.
pub(crate) type Addr = Arc<str>;

/// One range of slots: its master and how many healthy replicas it has (replicas of that
/// master that `CLUSTER NODES` does not flag `fail` or `fail?`).
#[derive(Debug, Clone)]
pub(crate) struct Range {
    first: u16,
    last: u16,
    pub(crate) master: Addr,
    pub(crate) replicas: u32,
}

/// Which master serves each slot, from `CLUSTER SLOTS` and `CLUSTER NODES`.
#[derive(Debug, Clone, Default)]
pub(crate) struct SlotMap {
    /// Sorted by first slot.
    ranges: Vec<Range>,
}

/// What `CLUSTER NODES` (`<id> <ip:port@bus[,hostname]> <flags> <master id> …` per line)
/// says: each node's `ip:port`, and each master's healthy replicas, by node id.
#[derive(Default)]
struct NodeTable {
    addr_of: HashMap<String, Addr>,
    healthy: HashMap<String, u32>,
}

impl NodeTable {
    fn parse(nodes: &str) -> NodeTable {
        let mut table = NodeTable::default();
        for line in nodes.lines() {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let [id, addr, flags, master, ..] = fields[..] else {
                continue;
            };
            let addr = addr.split('@').next().unwrap_or(addr);
            if !addr.starts_with(':') {
                table.addr_of.insert(id.to_string(), Addr::from(addr));
            }
            let down = flags
                .split(',')
                .any(|f| f == "fail" || f == "fail?" || f == "handshake" || f == "noaddr");
            if master != "-" && !down {
                *table.healthy.entry(master.to_string()).or_default() += 1;
            }
        }
        table
    }
}

fn text(v: &Value) -> Option<String> {
    match v {
        Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
        Value::SimpleString(s) => Some(s.clone()),
        _ => None,
    }
}

impl SlotMap {
    /// Parse a `CLUSTER SLOTS` reply (`[[first, last, [host, port, id, …], replica…], …]`)
    /// with the `CLUSTER NODES` text of the same node. A master is found by its node id:
    /// its address is the reply's host and port, or — when the host is empty, `?` or null
    /// (`cluster-preferred-endpoint-type` hostname or unknown-endpoint) — the `ip:port` of
    /// `CLUSTER NODES`, or the node that answered (`asked`); its healthy replicas are counted
    /// by id, so a hostname in one reply and an address in the other still match.
    pub(crate) fn parse(
        slots: Value,
        nodes: &str,
        asked: Option<&Addr>,
    ) -> redis::RedisResult<SlotMap> {
        let Value::Array(ranges) = slots else {
            return Err(io_error("CLUSTER SLOTS: not an array".into()));
        };
        let table = NodeTable::parse(nodes);
        let mut map = Vec::with_capacity(ranges.len());
        for range in &ranges {
            let Value::Array(fields) = range else {
                continue;
            };
            let (Some(Value::Int(first)), Some(Value::Int(last)), Some(Value::Array(master))) =
                (fields.first(), fields.get(1), fields.get(2))
            else {
                continue;
            };
            let host = master.first().and_then(text);
            let port = match master.get(1) {
                Some(Value::Int(p)) => Some(*p),
                _ => None,
            };
            let id = master.get(2).and_then(text);
            let addr = match (host.as_deref(), port) {
                (Some(h), Some(p)) if !h.is_empty() && h != "?" => {
                    Some(Addr::from(format!("{h}:{p}")))
                }
                _ => id
                    .as_ref()
                    .and_then(|id| table.addr_of.get(id).cloned())
                    .or_else(|| asked.cloned()),
            };
            let Some(master) = addr else { continue };
            map.push(Range {
                first: *first as u16,
                last: *last as u16,
                master,
                replicas: id
                    .and_then(|id| table.healthy.get(&id).copied())
                    .unwrap_or(0),
            });
        }
        map.sort_by_key(|r| r.first);
        Ok(SlotMap { ranges: map })
    }

    /// The range serving `slot`.
    pub(crate) fn range_of(&self, slot: u16) -> Option<&Range> {
        let i = self.ranges.partition_point(|r| r.first <= slot);
        i.checked_sub(1)
            .map(|i| &self.ranges[i])
            .filter(|r| slot <= r.last)
    }

    /// The masters, each once.
    pub(crate) fn masters(&self) -> Vec<Addr> {
        let mut m: Vec<Addr> = self.ranges.iter().map(|r| r.master.clone()).collect();
        m.sort();
        m.dedup();
        m
    }
}

/// Read the slot map (`CLUSTER SLOTS`, with healthy replicas counted from `CLUSTER NODES`)
/// from the first of `known` (connections to nodes) or `seeds` that answers within `timeout`
/// each.
pub(crate) async fn fetch_slots(
    known: Vec<(Addr, redis::aio::MultiplexedConnection)>,
    seeds: &[redis::Client],
    timeout: Duration,
) -> redis::RedisResult<SlotMap> {
    let mut last = None;
    let mut both = redis::pipe();
    both.cmd("CLUSTER").arg("SLOTS").cmd("CLUSTER").arg("NODES");
    let both = &both;
    let parse = |(slots, nodes): (Value, String), asked: Option<&Addr>| {
        SlotMap::parse(slots, &nodes, asked)
    };
    for (addr, mut conn) in known {
        match tokio::time::timeout(timeout, both.query_async::<(Value, String)>(&mut conn)).await {
            Ok(Ok(v)) => return parse(v, Some(&addr)),
            Ok(Err(e)) => last = Some(e),
            Err(_) => last = Some(io_error(format!("{addr}: no answer to CLUSTER SLOTS"))),
        }
    }
    for seed in seeds {
        let attempt = async {
            let mut conn = seed.get_multiplexed_async_connection().await?;
            both.query_async::<(Value, String)>(&mut conn).await
        };
        match tokio::time::timeout(timeout, attempt).await {
            Ok(Ok(v)) => {
                let asked = match seed.get_connection_info().addr() {
                    ConnectionAddr::Tcp(h, p)
                    | ConnectionAddr::TcpTls {
                        host: h, port: p, ..
                    } => Some(Addr::from(format!("{h}:{p}"))),
                    _ => None,
                };
                return parse(v, asked.as_ref());
            }
            Ok(Err(e)) => last = Some(e),
            Err(_) => last = Some(io_error("a seed node: no answer to CLUSTER SLOTS".into())),
        }
    }
    Err(last.unwrap_or_else(|| io_error("no cluster node answered".into())))
}

/// A client for the node `addr` (`host:port`) with the first seed's connection settings
/// (auth, TLS) and `protocol`.
pub(crate) fn node_client(
    seeds: &[redis::Client],
    addr: &str,
    protocol: redis::ProtocolVersion,
) -> redis::RedisResult<redis::Client> {
    let seed = seeds
        .first()
        .ok_or_else(|| io_error("no seed node".into()))?;
    super::naming::client(node_info(seed.get_connection_info(), addr, protocol)?)
}

/// `seed`'s connection settings (auth, TLS) with the address `addr` (`host:port`) and
/// `protocol`.
fn node_info(
    seed: &ConnectionInfo,
    addr: &str,
    protocol: redis::ProtocolVersion,
) -> redis::RedisResult<ConnectionInfo> {
    let (host, port) = addr
        .rsplit_once(':')
        .and_then(|(h, p)| Some((h.to_string(), p.parse::<u16>().ok()?)))
        .ok_or_else(|| io_error(format!("bad node address {addr:?}")))?;
    let addr = match seed.addr() {
        ConnectionAddr::TcpTls {
            insecure,
            tls_params,
            ..
        } => ConnectionAddr::TcpTls {
            host,
            port,
            insecure: *insecure,
            tls_params: tls_params.clone(),
        },
        _ => ConnectionAddr::Tcp(host, port),
    };
    let redis = seed.redis_settings().clone().set_protocol(protocol);
    Ok(seed.clone().set_addr(addr).set_redis_settings(redis))
}

pub(crate) fn io_error(msg: String) -> redis::RedisError {
    redis::RedisError::from(std::io::Error::other(msg))
}

/// What the command side knows of the cluster's nodes beyond redis-rs's routing: a slot map
/// with each master's healthy replicas (refreshed every [`REFRESH_EVERY`] and after a grant
/// failed), and connections per master set aside for grants confirmed by `WAIT`.
pub(crate) struct Nodes {
    seeds: Arc<Vec<redis::Client>>,
    settings: super::ConnectSettings,
    /// The map and when it was read.
    map: RwLock<(Arc<SlotMap>, Option<Instant>)>,
    /// Read the map again before the next grant.
    stale: AtomicBool,
    /// One refresh at a time.
    refreshing: tokio::sync::Mutex<()>,
    pools: Mutex<HashMap<Addr, Vec<super::GrantSlot>>>,
    next: AtomicUsize,
}

impl std::fmt::Debug for Nodes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Nodes").finish_non_exhaustive()
    }
}

impl Nodes {
    pub(crate) fn new(seeds: Arc<Vec<redis::Client>>, settings: super::ConnectSettings) -> Nodes {
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
    pub(crate) async fn grant_connection(
        &self,
        key: &str,
    ) -> Result<
        Option<(
            redis::aio::MultiplexedConnection,
            u32,
            Duration,
            super::GrantSlotGuard,
        )>,
        String,
    > {
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
                .or_insert_with(super::grant_slots);
            let n = self.next.fetch_add(1, Ordering::Relaxed);
            pool[n % pool.len()].clone()
        };
        let client = || {
            node_client(&self.seeds, &range.master, redis::ProtocolVersion::RESP2)
                .map_err(|e| format!("a connection for grants to {}: {e}", range.master))
        };
        let (conn, guard) = super::open_grant_slot(grant_slot, client, &self.settings).await?;
        Ok(Some((
            conn,
            wanted,
            self.settings.replica_ack_timeout,
            guard,
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::{Config, SlotMap};
    use redis::Value;

    fn node(host: Option<&str>, port: i64, id: &str) -> Value {
        Value::Array(vec![
            host.map_or(Value::Nil, |h| Value::BulkString(h.into())),
            Value::Int(port),
            Value::BulkString(id.into()),
        ])
    }

    #[test]
    fn slot_maps_find_masters_by_id_and_count_healthy_replicas() {
        let slots = Value::Array(vec![
            Value::Array(vec![
                Value::Int(0),
                Value::Int(5460),
                node(Some("m1.example"), 7000, "id1"),
                node(Some("r1.example"), 7003, "id4"),
            ]),
            Value::Array(vec![
                Value::Int(5461),
                Value::Int(10922),
                node(Some("?"), 7001, "id2"),
            ]),
            Value::Array(vec![
                Value::Int(10923),
                Value::Int(16383),
                node(None, 7002, "id3"),
            ]),
        ]);
        let nodes = "id1 10.0.0.1:7000@17000,m1.example myself,master - 0 0 1 connected 0-5460\n\
                     id2 10.0.0.2:7001@17001 master - 0 0 2 connected 5461-10922\n\
                     id3 10.0.0.3:7002@17002 master - 0 0 3 connected 10923-16383\n\
                     id4 10.0.0.4:7003@17003,r1.example slave id1 0 0 1 connected\n\
                     id5 10.0.0.5:7004@17004 slave id2 0 0 2 connected\n\
                     id6 10.0.0.6:7005@17005 slave,fail id3 0 0 3 disconnected\n";
        let map = SlotMap::parse(slots, nodes, None).unwrap();
        let at = |slot| {
            let r = map.range_of(slot).unwrap();
            (r.master.to_string(), r.replicas)
        };
        // A hostname in CLUSTER SLOTS, an address in CLUSTER NODES: matched by id.
        assert_eq!(at(0), ("m1.example:7000".into(), 1));
        // `?` and a null host: the address from CLUSTER NODES.
        assert_eq!(at(6000), ("10.0.0.2:7001".into(), 1));
        // A failed replica does not count.
        assert_eq!(at(16383), ("10.0.0.3:7002".into(), 0));
        assert!(map.range_of(16384).is_none());
    }

    #[test]
    fn parses_lettuce_cluster_urls() {
        let c = Config::parse("redis-cluster://app:pw@h1:7000,h2:7001,h3").unwrap();
        assert_eq!(
            c.seed_urls(),
            [
                "redis://app:pw@h1:7000",
                "redis://app:pw@h2:7001",
                "redis://app:pw@h3:6379"
            ]
        );
        let c = Config::parse("rediss-cluster://h1:7000?insecure").unwrap();
        assert_eq!(c.seed_urls(), ["rediss://h1:7000#insecure"]);
        for bad in [
            "redis-cluster://h1:7000/3",
            "redis-cluster://h1:7000#x",
            "redis-cluster://,h1",
            "redis://h1",
        ] {
            let e = Config::parse(bad).unwrap_err();
            assert!(!e.contains("pw"), "{e}");
        }
    }
}
