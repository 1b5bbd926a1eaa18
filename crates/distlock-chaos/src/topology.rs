//! The deployments a scenario runs on, from the test-support crate: one server, a Sentinel
//! set (a master, two replicas, three sentinels), a Cluster (three masters with a replica
//! each), or independent masters for RedLock — plus the fenced resource's own server, which
//! no fault touches.

use std::time::{Duration, Instant};

use distlock::layout;
use distlock_test::cluster::ClusterSet;
use distlock_test::sentinel::SentinelSet;
use distlock_test::RedisServer;
use serde::{Deserialize, Serialize};

/// Which deployment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Topology {
    /// One redis-server.
    Standalone,
    /// A master, two replicas and three sentinels.
    Sentinel,
    /// Three masters with a replica each.
    Cluster,
    /// Five independent masters (RedLock).
    Redlock,
}

impl Topology {
    /// The name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Topology::Standalone => "standalone",
            Topology::Sentinel => "sentinel",
            Topology::Cluster => "cluster",
            Topology::Redlock => "redlock",
        }
    }
}

/// A running deployment.
pub struct Deployment {
    /// Which one.
    pub topology: Topology,
    /// The server of a standalone deployment.
    pub standalone: Option<RedisServer>,
    /// The Sentinel set.
    pub sentinel: Option<SentinelSet>,
    /// The Cluster.
    pub cluster: Option<ClusterSet>,
    /// RedLock's masters.
    pub masters: Vec<RedisServer>,
    /// The fenced resource's server.
    pub resource: RedisServer,
    /// Proxies in front of the standalone server (one per group of workers), and the
    /// runtime they run on.
    pub proxies: Vec<crate::proxy::Proxy>,
    proxy_runtime: Option<tokio::runtime::Runtime>,
}

impl Deployment {
    /// Start `topology` (a persistent standalone server when `persistent`).
    pub fn start(topology: Topology, persistent: bool) -> Deployment {
        let mut d = Deployment {
            topology,
            standalone: None,
            sentinel: None,
            cluster: None,
            masters: Vec::new(),
            resource: RedisServer::start(),
            proxies: Vec::new(),
            proxy_runtime: None,
        };
        match topology {
            Topology::Standalone => {
                let options = RedisServer::options();
                let options = if persistent {
                    options.persistent()
                } else {
                    options
                };
                d.standalone = Some(options.start());
            }
            Topology::Sentinel => d.sentinel = Some(SentinelSet::start()),
            Topology::Cluster => d.cluster = Some(ClusterSet::start()),
            Topology::Redlock => d.masters = (0..5).map(|_| RedisServer::start()).collect(),
        }
        d
    }

    /// Put `n` proxies in front of the standalone server: [`url_of`](Self::url_of) then
    /// spreads the workers over them.
    pub fn start_proxies(&mut self, n: usize) -> anyhow::Result<()> {
        let server = self.standalone.as_ref().expect("a standalone deployment");
        let upstream = std::net::SocketAddr::from(([127, 0, 0, 1], server.port()));
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()?;
        for _ in 0..n {
            self.proxies
                .push(rt.block_on(crate::proxy::Proxy::start(upstream))?);
        }
        self.proxy_runtime = Some(rt);
        Ok(())
    }

    /// The URL worker `i` connects to: through proxy `i % proxies` when there are proxies.
    pub fn url_of(&self, i: usize) -> String {
        if self.proxies.is_empty() {
            return self.url();
        }
        let port = self.proxies[i % self.proxies.len()].port();
        format!("redis://127.0.0.1:{port}/")
    }

    /// The URL the workers' clients connect to.
    pub fn url(&self) -> String {
        match self.topology {
            Topology::Standalone => self.standalone.as_ref().expect("started").url(),
            Topology::Sentinel => self.sentinel.as_ref().expect("started").url(),
            Topology::Cluster => self.cluster.as_ref().expect("started").url(),
            Topology::Redlock => self.masters[0].url(),
        }
    }

    /// RedLock's masters' URLs.
    pub fn redlock_urls(&self) -> Vec<String> {
        self.masters.iter().map(RedisServer::url).collect()
    }

    /// The servers that hold lock data now: the master(s).
    pub fn masters(&self) -> Vec<&RedisServer> {
        match self.topology {
            Topology::Standalone => self.standalone.iter().collect(),
            Topology::Sentinel => vec![self.sentinel.as_ref().expect("started").master()],
            Topology::Cluster => self.cluster.as_ref().expect("started").masters(),
            Topology::Redlock => self.masters.iter().collect(),
        }
    }

    /// Every server's log, for a failed scenario.
    pub fn logs(&self) -> String {
        let mut out = String::new();
        if let Some(s) = &self.standalone {
            out.push_str(&format!("--- server on port {} ---\n{}", s.port(), s.log()));
        }
        if let Some(s) = &self.sentinel {
            out.push_str(&s.logs());
        }
        if let Some(c) = &self.cluster {
            out.push_str(&c.logs());
        }
        for m in &self.masters {
            out.push_str(&format!("--- master on port {} ---\n{}", m.port(), m.log()));
        }
        out
    }

    /// What the run left behind: lock keys (other than the fencing counters, which live on
    /// by design), permits missing from the semaphore `semaphore` (with `permits` permits),
    /// and subscribed channels. Keys with a TTL get up to `grace` to expire by themselves (a
    /// lease a restored snapshot brought back, a job lock's at-least-for). Returns the
    /// orphans, and how many request records (the unlock and acquire latches that make a
    /// resent release or acquire idempotent, which expire by themselves) were still there.
    pub fn orphans(&self, semaphore: Option<(&str, u32)>, grace: Duration) -> (Vec<String>, usize) {
        let deadline = Instant::now() + grace;
        loop {
            let (found, records) = self.look_for_orphans(semaphore);
            let will_expire = found.iter().all(|(_, ttl)| *ttl);
            if found.is_empty() || !will_expire || Instant::now() >= deadline {
                return (found.into_iter().map(|(o, _)| o).collect(), records);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// ((what, whether it may still expire or come back), request records).
    fn look_for_orphans(&self, semaphore: Option<(&str, u32)>) -> (Vec<(String, bool)>, usize) {
        let mut found = Vec::new();
        let mut records = 0;
        for server in self.masters() {
            let port = server.port();
            // A server just restarted may still be loading its snapshot.
            let mut conn = match query_connection(server) {
                Ok(c) => c,
                Err(e) => {
                    found.push((
                        format!("master {port} (pid {:?}) unreachable: {e}", server.pid()),
                        true,
                    ));
                    continue;
                }
            };
            let keys: redis::RedisResult<Vec<String>> =
                redis::cmd("KEYS").arg("*").query(&mut conn);
            let keys = match keys {
                Ok(k) => k,
                Err(e) => {
                    found.push((format!("master {port} cannot list its keys: {e}"), true));
                    continue;
                }
            };
            for key in keys {
                if key.contains(layout::FENCING_COUNTER_PREFIX) {
                    continue;
                }
                if REQUEST_RECORDS
                    .iter()
                    .any(|p| key.strip_prefix(p).is_some_and(|k| k.starts_with(':')))
                {
                    records += 1;
                    // A record lives for a while, never for good: one without a TTL (a
                    // record set whose creating claim gave it none) is an orphan.
                    let ttl: i64 = redis::cmd("PTTL").arg(&key).query(&mut conn).unwrap_or(-2);
                    if ttl == -1 {
                        found.push((format!("request record {key} on {port} has no TTL"), false));
                    }
                    continue;
                }
                if let Some((name, permits)) = semaphore {
                    if key == name {
                        let v: Option<i64> =
                            redis::cmd("GET").arg(&key).query(&mut conn).ok().flatten();
                        if v != Some(i64::from(permits)) {
                            found.push((
                                format!(
                                    "semaphore {key} on {port} has {v:?} permits, not {permits}"
                                ),
                                false,
                            ));
                        }
                        continue;
                    }
                }
                let ttl: i64 = redis::cmd("PTTL").arg(&key).query(&mut conn).unwrap_or(-1);
                let kind: String = redis::cmd("TYPE")
                    .arg(&key)
                    .query(&mut conn)
                    .unwrap_or_default();
                found.push((
                    format!("{kind} key {key} left on {port} (PTTL {ttl} ms)"),
                    ttl > 0,
                ));
            }
            let mut channels: Vec<String> = redis::cmd("PUBSUB")
                .arg("CHANNELS")
                .query(&mut conn)
                .unwrap_or_default();
            if self.topology == Topology::Cluster {
                let shard: Vec<String> = redis::cmd("PUBSUB")
                    .arg("SHARDCHANNELS")
                    .query(&mut conn)
                    .unwrap_or_default();
                channels.extend(shard);
            }
            // The sentinels' own channel is theirs; a client's notice channel
            // (`distlock_client:{<id>}`) is subscribed for the client's life, and the
            // clients are still up while we look.
            for c in channels
                .into_iter()
                .filter(|c| c != "__sentinel__:hello" && !c.starts_with("distlock_client:"))
            {
                found.push((format!("channel {c} still subscribed on {port}"), false));
            }
        }
        (found, records)
    }
}

/// Key prefixes (before their `:`) of the request records the scripts keep for a while (with
/// a TTL) so that a resent release or acquire is answered as the first one was (Redisson's
/// unlock latch, distlock's acquire latch, the record sets of semaphore grants, releases and
/// latch count-downs, and the per-request records of older versions). Each must have a TTL.
/// Not every helper key ([`layout::classify`]): a queue, a waiter entry or a lease set left
/// behind is an orphan.
const REQUEST_RECORDS: [&str; 8] = [
    layout::UNLOCK_LATCH_PREFIX,
    layout::ACQUIRE_LATCH_PREFIX,
    layout::SEMAPHORE_GRANT_LATCH_PREFIX,
    layout::SEMAPHORE_RELEASE_LATCH_PREFIX,
    layout::LATCH_COUNT_DOWN_LATCH_PREFIX,
    layout::LEGACY_REQUEST_RECORD_PREFIXES[0],
    layout::LEGACY_REQUEST_RECORD_PREFIXES[1],
    layout::LEGACY_REQUEST_RECORD_PREFIXES[2],
];

/// A connection with short timeouts: a paused server must not hang the orchestrator.
pub fn query_connection(server: &RedisServer) -> redis::RedisResult<redis::Connection> {
    let client = redis::Client::open(server.url())?;
    let conn = client.get_connection_with_timeout(Duration::from_secs(2))?;
    conn.set_read_timeout(Some(Duration::from_secs(5)))?;
    conn.set_write_timeout(Some(Duration::from_secs(5)))?;
    Ok(conn)
}
