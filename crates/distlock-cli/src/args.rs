//! The connection options every `distlock` command takes (the global arguments), and the
//! duration syntax of its arguments.

use std::time::Duration;

use anyhow::Result;

use crate::connect::Options;

/// The global "Connection" arguments: where the server is and how to talk to it.
#[derive(clap::Args, Debug, Clone)]
pub struct ConnectionArgs {
    /// Redis URL: redis://[user][:password@]host[:port][/db] (rediss:// for TLS), or a master
    /// behind Redis Sentinel: redis-sentinel://[user:password@]host1[:port1][,host2...][/db]#master-name
    /// (rediss-sentinel:// for TLS; sentinels without a port listen on 26379; the master is
    /// followed across failovers), or Redis Cluster: redis-cluster://[user:password@]host1[:port1][,host2...]
    /// (rediss-cluster:// for TLS). Without it, redis://127.0.0.1:6379/ (distlock-bench's
    /// `demo` and `bench` start a private redis-server instead).
    #[arg(
        long,
        env = "DISTLOCK_URL",
        global = true,
        help_heading = "Connection",
        hide_env_values = true
    )]
    pub url: Option<String>,

    /// Password of the server (the Sentinel deployment's master, every Cluster node), given
    /// apart from the URL: any characters, no percent-encoding. Replaces the URL's password.
    #[arg(
        long,
        env = "DISTLOCK_PASSWORD",
        global = true,
        help_heading = "Connection",
        hide_env_values = true
    )]
    pub password: Option<String>,

    /// Password of the sentinels of a redis-sentinel:// URL, when they require one (the URL's
    /// credentials are the master's).
    #[arg(
        long,
        env = "DISTLOCK_SENTINEL_PASSWORD",
        global = true,
        help_heading = "Connection",
        hide_env_values = true
    )]
    pub sentinel_password: Option<String>,

    /// Which pub/sub carries wake-ups on a Redis Cluster: auto (sharded where the servers
    /// have it, Redis 7+; classic on Redis 6.2), classic, sharded or both. As Redisson's
    /// shardedSubscriptionMode; standalone and Sentinel always use classic pub/sub.
    #[arg(
        long,
        env = "DISTLOCK_PUBSUB",
        global = true,
        hide_env_values = true,
        help_heading = "Connection",
        value_enum,
        default_value = "auto"
    )]
    pub pubsub: crate::connect::PubSub,

    /// CA certificates (PEM file) that rediss:// servers are checked against instead of
    /// Mozilla's roots, for a private CA; $SSL_CERT_FILE when not given (as the library
    /// reads it).
    #[arg(
        long,
        env = "DISTLOCK_TLS_CA_CERT",
        global = true,
        hide_env_values = true,
        help_heading = "Connection",
        value_name = "FILE"
    )]
    pub tls_ca_cert: Option<std::path::PathBuf>,

    /// Prefix put before every lock name to form its Redis key.
    #[arg(
        long,
        env = "DISTLOCK_KEY_PREFIX",
        global = true,
        hide_env_values = true,
        help_heading = "Connection",
        default_value = ""
    )]
    pub key_prefix: String,

    /// Lease of locks held without --lease; the watchdog renews it every third.
    #[arg(long, env = "DISTLOCK_WATCHDOG_LEASE", global = true, hide_env_values = true, help_heading = "Connection", default_value = "30s", value_parser = parse_duration)]
    pub watchdog_lease: Duration,

    /// Timeout for connecting to Redis (TCP, TLS, AUTH and the first PING). Not for
    /// --redlock nodes, which use the RedLock's own timeouts.
    #[arg(long, env = "DISTLOCK_CONNECT_TIMEOUT", global = true, hide_env_values = true, help_heading = "Connection", default_value = "5s", value_parser = parse_duration)]
    pub connect_timeout: Duration,

    /// Timeout of one Redis command. A command that times out (or whose connection breaks)
    /// is sent again up to three times before distlock gives up. Not for --redlock nodes.
    /// (Named --timeout before; `run --timeout` is now how long to wait for the lock, as
    /// flock's.)
    #[arg(long, env = "DISTLOCK_TIMEOUT", global = true, hide_env_values = true, help_heading = "Connection", default_value = "3s", value_parser = parse_duration)]
    pub command_timeout: Duration,
}

impl ConnectionArgs {
    /// The options the commands connect with; reads the `--tls-ca-cert` file (without it the
    /// library reads `$SSL_CERT_FILE` for a TLS URL).
    ///
    /// # Errors
    /// The CA certificate file cannot be read.
    pub fn options(self) -> Result<Options> {
        let tls_ca = match self.tls_ca_cert {
            Some(path) => Some(std::fs::read(&path).map_err(|e| {
                anyhow::anyhow!("cannot read the TLS CA certificate {}: {e}", path.display())
            })?),
            None => None,
        };
        Ok(Options {
            tls_ca,
            url: self.url,
            password: self.password,
            sentinel_password: self.sentinel_password,
            pubsub: self.pubsub,
            key_prefix: self.key_prefix,
            watchdog_lease: self.watchdog_lease,
            connect_timeout: self.connect_timeout,
            command_timeout: self.command_timeout,
        })
    }
}

/// Parse a human duration (`30s`, `5m`, `1500ms`) and refuse zero.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let d = parse_wait(s)?;
    if d.is_zero() {
        return Err(format!("{s:?}: must be greater than zero"));
    }
    Ok(d)
}

/// Parse a human duration that may be zero (waits): `1m 30s`, `250ms`, a bare number of
/// seconds as flock's `-w` takes it (`10`, `0.5`) or an ISO-8601 duration as ShedLock writes
/// it (`PT10M`) — the library's [`distlock::parse_duration`], the one reading of durations for
/// arguments, `DISTLOCK_*` variables and `distlock::Config`.
pub fn parse_wait(s: &str) -> Result<Duration, String> {
    distlock::parse_duration(s).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::{parse_duration, parse_wait};
    use std::time::Duration;

    /// The CLI reads durations with the library's parser (ISO-8601 included), and refuses
    /// zero where it must.
    #[test]
    fn durations_are_the_librarys() {
        assert_eq!(parse_wait("PT10M"), Ok(Duration::from_secs(600)));
        assert_eq!(parse_wait("PT0S"), Ok(Duration::ZERO));
        assert!(parse_wait("P1M").unwrap_err().contains("months"));
        assert!(
            parse_duration("PT0S").is_err(),
            "zero is refused where it is"
        );
        assert_eq!(parse_duration("PT10M"), Ok(Duration::from_secs(600)));
    }
}
