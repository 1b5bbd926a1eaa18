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
/// seconds as flock's `-w` takes it (`10`, `0.5`) — the library's [`distlock::parse_duration`],
/// the one reading of durations for arguments, `DISTLOCK_*` variables and `distlock::Config` —
/// or an ISO-8601 duration as ShedLock's `lockAtMostFor` and Java's `Duration.parse` take it
/// (`PT10M`, `PT0.5S`, `P1DT2H`).
pub fn parse_wait(s: &str) -> Result<Duration, String> {
    if s.starts_with(['P', 'p']) {
        return parse_iso8601(s).map_err(|e| format!("{s:?}: {e}"));
    }
    distlock::parse_duration(s).map_err(|e| {
        let hint = if s.starts_with(['-', '+']) && s[1..].starts_with(['P', 'p']) {
            " (an ISO-8601 duration takes no sign)"
        } else {
            ""
        };
        format!("{e}{hint}")
    })
}

/// An ISO-8601 duration as Java's `Duration.parse` reads it (ShedLock's `"PT10M"`):
/// `P[nD][T[nH][nM][n[.n]S]]`, letters in either case, at least one part, a fraction on the
/// seconds only. No sign; no years, months or weeks (not a fixed length).
fn parse_iso8601(s: &str) -> Result<Duration, String> {
    let upper = s.to_ascii_uppercase();
    let rest = &upper[1..];
    let (date, time) = match rest.split_once('T') {
        Some((date, time)) => (date, Some(time)),
        None => (rest, None),
    };
    let mut total = Duration::ZERO;
    let mut parts = 0;
    let mut read = |text: &str, units: &[(char, u64)]| -> Result<(), String> {
        let mut number = String::new();
        let mut allowed = units;
        for c in text.chars() {
            if c.is_ascii_digit() || c == '.' {
                number.push(c);
                continue;
            }
            let Some(at) = allowed.iter().position(|(u, _)| *u == c) else {
                return Err(match c {
                    'Y' | 'W' => "years and weeks are not a fixed duration: write days (P7D) or \
                                  hours (PT168H)"
                        .to_string(),
                    'M' if units[0].0 == 'D' => "months are not a fixed duration (minutes are \
                                                 PT…M, after the T): write days (P30D)"
                        .to_string(),
                    _ => format!("unexpected {c:?}: ISO-8601 durations read P[nD][T[nH][nM][nS]]"),
                });
            };
            let secs = allowed[at].1;
            let value = if c == 'S' {
                number.parse::<f64>().ok().filter(|_| !number.is_empty())
            } else if number.contains('.') {
                return Err("only the seconds may have a fraction (PT1.5S)".to_string());
            } else {
                number.parse::<u64>().ok().map(|n| n as f64)
            }
            .ok_or_else(|| format!("no number before {c:?}"))?;
            let part = Duration::try_from_secs_f64(value * secs as f64)
                .map_err(|_| "out of range".to_string())?;
            total = total.checked_add(part).ok_or("out of range")?;
            parts += 1;
            number.clear();
            allowed = &allowed[at + 1..];
        }
        if number.is_empty() {
            Ok(())
        } else {
            Err(format!("{number:?} has no unit (D, H, M or S)"))
        }
    };
    read(date, &[('D', 86_400)])?;
    if let Some(time) = time {
        if time.is_empty() {
            return Err("nothing after the T".to_string());
        }
        read(time, &[('H', 3_600), ('M', 60), ('S', 1)])?;
    }
    if parts == 0 {
        return Err("an ISO-8601 duration needs a part: PT10M, PT30S, P1D".to_string());
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::{parse_duration, parse_wait};
    use std::time::Duration;

    /// ShedLock's and Java's ISO-8601 durations read as they do there; what they refuse, or
    /// what is not a fixed duration, is refused with a hint.
    #[test]
    fn iso8601_durations_read_as_java_reads_them() {
        for (text, secs) in [
            ("PT10M", 600.0),
            ("pt30s", 30.0),
            ("PT0.5S", 0.5),
            ("PT1H30M", 5_400.0),
            ("P1D", 86_400.0),
            ("P1DT2H3M4.25S", 93_784.25),
            ("PT0S", 0.0),
        ] {
            assert_eq!(
                parse_wait(text),
                Ok(Duration::from_secs_f64(secs)),
                "{text}"
            );
        }
        for (text, said) in [
            ("P1M", "months"),
            ("P1Y", "years"),
            ("P2W", "weeks"),
            ("P", "needs a part"),
            ("PT", "nothing after the T"),
            ("PT1.5M", "fraction"),
            ("PT5", "no unit"),
            ("PT1S2M", "unexpected"),
            ("-PT5S", "no sign"),
        ] {
            let e = parse_wait(text).unwrap_err();
            assert!(e.contains(said), "{text}: {e}");
        }
        assert!(
            parse_duration("PT0S").is_err(),
            "zero is refused where it is"
        );
        assert_eq!(parse_duration("PT10M"), Ok(Duration::from_secs(600)));
    }
}
