//! Redis Cluster (`redis-cluster://`, `rediss-cluster://`): commands routed by key through
//! redis-rs's async cluster client, wake-ups over classic pub/sub.
//!
//! The cluster client is built with `retries(0)`: redis-rs would otherwise resend a request
//! after an I/O error on its own (up to 16 times by default), which must never happen to a
//! script that is not idempotent (a semaphore release, a latch count-down). distlock's own
//! resend rules ([`super::Backend`]) decide what is sent again, as on every deployment.
//! Every script's keys share one hash slot (hash tags, the per-slot fencing counter), so the
//! client routes a script by its first key; watchdog batches are split by slot.
//!
//! Wake-ups: the scripts `PUBLISH`, which a cluster forwards to every node, so one
//! subscription connection to any node hears every channel; the hub connects to the seed
//! nodes in turn and moves on when its node fails.

use std::time::Duration;

use redis::cluster::ClusterClientBuilder;
use redis::cluster_async::ClusterConnection;

use super::url::MultiHost;
use super::ConnectSettings;
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

/// Connect the command side: a cluster connection that never resends on its own.
pub(crate) async fn connect(
    config: &Config,
    settings: &ConnectSettings,
) -> redis::RedisResult<ClusterConnection> {
    ClusterClientBuilder::new(config.seed_urls())
        .retries(0)
        .connection_timeout(settings.connect_timeout)
        .response_timeout(settings.command_timeout)
        .build()?
        .get_async_connection()
        .await
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
        Err(e) if e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::ResponseError) => {
            false
        }
        Err(e) if e.code().is_some() => false,
        Err(e) => return Err(e),
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

/// Open a subscription connection to the first seed node that answers within `timeout`
/// each.
pub(crate) async fn subscribe_any(
    seeds: &[redis::Client],
    timeout: Duration,
) -> redis::RedisResult<redis::aio::PubSub> {
    let mut last = None;
    for client in seeds {
        match tokio::time::timeout(timeout, client.get_async_pubsub()).await {
            Ok(Ok(pubsub)) => return Ok(pubsub),
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

#[cfg(test)]
mod tests {
    use super::Config;

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
