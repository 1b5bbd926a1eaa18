//! [`Config`]: the client's settings as data — from the environment (the CLI's `DISTLOCK_*`
//! variables) or, with the `serde` feature, from a file in any serde format — as Redisson's
//! YAML config and deadpool's `Config` give them.

use std::path::PathBuf;
use std::time::Duration;

use crate::client::{ClientBuilder, PubSubMode};
use crate::error::{Error, Result};

/// A client's settings as data.
///
/// Every field is optional: what is left out keeps [`ClientBuilder`]'s default. Build a client with
/// [`Config::builder`] (then [`build`](ClientBuilder::build)), or a blocking one with
/// `Config::blocking_builder` (feature `blocking`).
///
/// | field | environment ([`Config::from_env`]) | builder method | default |
/// |---|---|---|---|
/// | `url` | `DISTLOCK_URL` | [`url`](ClientBuilder::url) | none: required, here or as `single`, `sentinel` or `cluster` |
/// | `single.address` | — | a `redis://` URL | — |
/// | `sentinel.nodes`, `sentinel.master` | — | a `redis-sentinel://` URL | sentinels on 26379 |
/// | `cluster.nodes` | — | a `redis-cluster://` URL | nodes on 6379 |
/// | `tls` | — | `rediss…://` schemes for `single`, `sentinel`, `cluster` | false |
/// | `username` | `DISTLOCK_USERNAME` | [`username`](ClientBuilder::username) | the URL's |
/// | `password` | `DISTLOCK_PASSWORD` | [`password`](ClientBuilder::password) | the URL's |
/// | `database` | — | `/<db>` in the URL | 0 |
/// | `sentinel_password` | `DISTLOCK_SENTINEL_PASSWORD` | [`sentinel_auth`](ClientBuilder::sentinel_auth) | none |
/// | `pubsub` | `DISTLOCK_PUBSUB` (`auto`, `classic`, `sharded`, `both`) | [`pubsub_mode`](ClientBuilder::pubsub_mode) | `auto` |
/// | `tls_ca_cert` | `DISTLOCK_TLS_CA_CERT` (a PEM file) | [`tls_ca_cert`](ClientBuilder::tls_ca_cert) | Mozilla's roots |
/// | `key_prefix` | `DISTLOCK_KEY_PREFIX` | [`key_prefix`](ClientBuilder::key_prefix) | none |
/// | `watchdog_lease` | `DISTLOCK_WATCHDOG_LEASE` | [`watchdog_lease`](ClientBuilder::watchdog_lease) | 30 s |
/// | `connect_timeout` | `DISTLOCK_CONNECT_TIMEOUT` | [`connect_timeout`](ClientBuilder::connect_timeout) | 5 s |
/// | `command_timeout` | `DISTLOCK_TIMEOUT` | [`command_timeout`](ClientBuilder::command_timeout) | 3 s |
/// | `default_wait` | `DISTLOCK_DEFAULT_WAIT` | [`default_wait`](ClientBuilder::default_wait) | 60 s |
/// | `app_name` | `DISTLOCK_APP_NAME` | [`app_name`](ClientBuilder::app_name) | the executable's name |
///
/// Durations are written as humantime reads them (`30s`, `1m 30s`, `250ms`) or as a number
/// of seconds (`30`, `0.5`).
///
/// # Examples
/// ```no_run
/// # async fn f() -> distlock::Result<()> {
/// let client = distlock::Config::from_env()?.builder()?.build().await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(default, deny_unknown_fields))]
#[non_exhaustive]
pub struct Config {
    /// The deployment's URL (see [`ClientBuilder::url`]).
    pub url: Option<String>,
    /// One server, by address (`host:port`), as Redisson's `singleServerConfig`.
    pub single: Option<SingleServer>,
    /// A master behind Redis Sentinel, as Redisson's `sentinelServersConfig`.
    pub sentinel: Option<SentinelServers>,
    /// A Redis Cluster by its seed nodes, as Redisson's `clusterServersConfig`.
    pub cluster: Option<ClusterServers>,
    /// TLS (`rediss…://`) for `single`, `sentinel` and `cluster`.
    pub tls: bool,
    /// The database number for `single` and `sentinel`.
    pub database: Option<u32>,
    /// The ACL user name of the data servers.
    pub username: Option<String>,
    /// The data servers' password: any characters, no percent-encoding. Never logged.
    pub password: Option<String>,
    /// The sentinels' own password.
    pub sentinel_password: Option<String>,
    /// `auto`, `classic`, `sharded` or `both` ([`PubSubMode`]).
    pub pubsub: Option<String>,
    /// A PEM file of CA certificates for `rediss…://` servers.
    pub tls_ca_cert: Option<PathBuf>,
    /// The prefix put before every name to form its key.
    pub key_prefix: Option<String>,
    /// The watchdog lease (`30s`).
    pub watchdog_lease: Option<String>,
    /// The connect timeout (`5s`).
    pub connect_timeout: Option<String>,
    /// The command timeout (`3s`).
    pub command_timeout: Option<String>,
    /// How long the `acquire` verbs wait (`60s`).
    pub default_wait: Option<String>,
    /// The application name recorded with grants and in connection names.
    pub app_name: Option<String>,
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("url", &self.url.as_deref().map(crate::conn::redact_url))
            .field("single", &self.single)
            .field("sentinel", &self.sentinel)
            .field("cluster", &self.cluster)
            .field("tls", &self.tls)
            .field("key_prefix", &self.key_prefix)
            .field("password", &self.password.as_ref().map(|_| "***"))
            .finish_non_exhaustive()
    }
}

/// One server: `address` is `host[:port]` (port 6379 when left out).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields))]
#[non_exhaustive]
pub struct SingleServer {
    /// `host[:port]`.
    pub address: String,
}

/// A Sentinel deployment.
///
/// The sentinels (`host[:port]`, port 26379 when left out) and the master's name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields))]
#[non_exhaustive]
pub struct SentinelServers {
    /// The sentinels, `host[:port]`.
    pub nodes: Vec<String>,
    /// The master's name, as the sentinels know it.
    pub master: String,
}

/// A Redis Cluster: seed nodes, `host[:port]` (port 6379 when left out).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields))]
#[non_exhaustive]
pub struct ClusterServers {
    /// The seed nodes, `host[:port]`.
    pub nodes: Vec<String>,
}

impl Config {
    /// Returns the settings of the environment variables the `distlock` command reads (the table
    /// above).
    ///
    /// Unset or empty variables are left out.
    ///
    /// # Errors
    /// None today: values are checked by [`Config::builder`]. The `Result` leaves room for
    /// variables that fail to read.
    pub fn from_env() -> Result<Config> {
        Ok(Config::from_lookup(|name| {
            std::env::var(name).ok().filter(|v| !v.is_empty())
        }))
    }

    /// [`Config::from_env`] over any lookup of variable names (for tests). Not part of the
    /// API.
    #[doc(hidden)]
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Config {
        Config {
            url: get("DISTLOCK_URL"),
            username: get("DISTLOCK_USERNAME"),
            password: get("DISTLOCK_PASSWORD"),
            sentinel_password: get("DISTLOCK_SENTINEL_PASSWORD"),
            pubsub: get("DISTLOCK_PUBSUB"),
            tls_ca_cert: get("DISTLOCK_TLS_CA_CERT").map(PathBuf::from),
            key_prefix: get("DISTLOCK_KEY_PREFIX"),
            watchdog_lease: get("DISTLOCK_WATCHDOG_LEASE"),
            connect_timeout: get("DISTLOCK_CONNECT_TIMEOUT"),
            command_timeout: get("DISTLOCK_TIMEOUT"),
            default_wait: get("DISTLOCK_DEFAULT_WAIT"),
            app_name: get("DISTLOCK_APP_NAME"),
            ..Config::default()
        }
    }

    /// A [`ClientBuilder`] with these settings.
    ///
    /// # Errors
    /// [`ErrorKind::Config`](crate::ErrorKind::Config) for no deployment or more than one
    /// (`url`, `single`, `sentinel`, `cluster`), a duration or `pubsub` value that does not
    /// parse, or a CA file that cannot be read; the message names the field.
    pub fn builder(&self) -> Result<ClientBuilder> {
        let mut b = crate::Client::builder().url(self.deployment_url()?);
        if let Some(user) = &self.username {
            b = b.username(user);
        }
        if let Some(password) = &self.password {
            b = b.password(password);
        }
        if let Some(pw) = &self.sentinel_password {
            b = b.sentinel_auth(None, pw);
        }
        if let Some(mode) = &self.pubsub {
            b = b.pubsub_mode(match mode.as_str() {
                "auto" => PubSubMode::Auto,
                "classic" => PubSubMode::Classic,
                "sharded" => PubSubMode::Sharded,
                "both" => PubSubMode::Both,
                other => {
                    return Err(Error::config(format!(
                        "pubsub {other:?}: one of auto, classic, sharded, both"
                    )))
                }
            });
        }
        if let Some(path) = &self.tls_ca_cert {
            let pem = std::fs::read(path)
                .map_err(|e| Error::config(format!("tls_ca_cert {}: {e}", path.display())))?;
            b = b.tls_ca_cert(pem);
        }
        if let Some(prefix) = &self.key_prefix {
            b = b.key_prefix(prefix.clone());
        }
        if let Some(d) = duration("watchdog_lease", &self.watchdog_lease)? {
            b = b.watchdog_lease(d);
        }
        if let Some(d) = duration("connect_timeout", &self.connect_timeout)? {
            b = b.connect_timeout(d);
        }
        if let Some(d) = duration("command_timeout", &self.command_timeout)? {
            b = b.command_timeout(d);
        }
        if let Some(d) = duration("default_wait", &self.default_wait)? {
            b = b.default_wait(d);
        }
        if let Some(app) = &self.app_name {
            b = b.app_name(app.clone());
        }
        Ok(b)
    }

    /// A blocking [`ClientBuilder`](crate::blocking::ClientBuilder) with these settings (feature
    /// `blocking`): [`Config::builder`]'s, handed to the blocking client, so both clients take
    /// every setting the same way.
    ///
    /// # Errors
    /// As [`Config::builder`].
    ///
    /// # Examples
    /// ```no_run
    /// # fn f() -> distlock::Result<()> {
    /// let client = distlock::Config::from_env()?.blocking_builder()?.build()?;
    /// # Ok(()) }
    /// ```
    #[cfg(feature = "blocking")]
    pub fn blocking_builder(&self) -> Result<crate::blocking::ClientBuilder> {
        self.builder().map(Into::into)
    }

    /// The URL of the one deployment given.
    fn deployment_url(&self) -> Result<String> {
        let s = if self.tls { "s" } else { "" };
        let db = self.database.map(|d| format!("/{d}")).unwrap_or_default();
        let mut urls = Vec::new();
        if let Some(url) = &self.url {
            urls.push(url.clone());
        }
        if let Some(single) = &self.single {
            urls.push(format!("redis{s}://{}{db}", single.address));
        }
        if let Some(sentinel) = &self.sentinel {
            urls.push(format!(
                "redis{s}-sentinel://{}{db}#{}",
                sentinel.nodes.join(","),
                sentinel.master
            ));
        }
        if let Some(cluster) = &self.cluster {
            urls.push(format!("redis{s}-cluster://{}", cluster.nodes.join(",")));
        }
        match urls.len() {
            1 => Ok(urls.remove(0)),
            0 => Err(Error::config(
                "no deployment: give url (DISTLOCK_URL), single, sentinel or cluster",
            )),
            _ => Err(Error::config(
                "more than one deployment: give one of url, single, sentinel, cluster",
            )),
        }
    }
}

/// A duration field: humantime's form or a number of seconds.
fn duration(field: &str, value: &Option<String>) -> Result<Option<Duration>> {
    let Some(v) = value else { return Ok(None) };
    let v = v.trim();
    let parsed = if !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        v.parse::<f64>()
            .ok()
            .and_then(|secs| Duration::try_from_secs_f64(secs).ok())
            .ok_or_else(|| "not a number of seconds".to_string())
    } else {
        humantime::parse_duration(v).map_err(|e| e.to_string())
    };
    parsed
        .map(Some)
        .map_err(|e| Error::config(format!("{field} {v:?}: {e}")))
}

#[cfg(test)]
mod tests {
    use super::{ClusterServers, Config, SentinelServers, SingleServer};
    use std::collections::HashMap;

    #[test]
    fn the_environment_gives_the_clis_settings() {
        let vars: HashMap<&str, &str> = [
            ("DISTLOCK_URL", "redis://h:1/"),
            ("DISTLOCK_PASSWORD", "p@ss"),
            ("DISTLOCK_KEY_PREFIX", "app:"),
            ("DISTLOCK_WATCHDOG_LEASE", "1m"),
            ("DISTLOCK_TIMEOUT", "0.5"),
            ("DISTLOCK_PUBSUB", "sharded"),
        ]
        .into();
        let c = Config::from_lookup(|n| vars.get(n).map(|v| v.to_string()));
        assert_eq!(c.url.as_deref(), Some("redis://h:1/"));
        assert_eq!(c.password.as_deref(), Some("p@ss"));
        assert_eq!(c.command_timeout.as_deref(), Some("0.5"));
        assert!(c.builder().is_ok());
        assert!(!format!("{c:?}").contains("p@ss"));
        let bad = Config {
            watchdog_lease: Some("soon".into()),
            ..c.clone()
        };
        let e = bad.builder().unwrap_err();
        assert!(e.to_string().contains("watchdog_lease \"soon\""), "{e}");
        let bad = Config {
            pubsub: Some("loud".into()),
            ..c
        };
        assert!(bad.builder().unwrap_err().to_string().contains("pubsub"));
    }

    #[test]
    fn one_deployment_of_four_forms() {
        let single = Config {
            single: Some(SingleServer {
                address: "h:1".into(),
            }),
            database: Some(2),
            tls: true,
            ..Config::default()
        };
        assert_eq!(single.deployment_url().unwrap(), "rediss://h:1/2");
        let sentinel = Config {
            sentinel: Some(SentinelServers {
                nodes: vec!["s1".into(), "s2:5000".into()],
                master: "m".into(),
            }),
            ..Config::default()
        };
        assert_eq!(
            sentinel.deployment_url().unwrap(),
            "redis-sentinel://s1,s2:5000#m"
        );
        let cluster = Config {
            cluster: Some(ClusterServers {
                nodes: vec!["c1:7000".into(), "c2:7000".into()],
            }),
            ..Config::default()
        };
        assert_eq!(
            cluster.deployment_url().unwrap(),
            "redis-cluster://c1:7000,c2:7000"
        );
        assert!(Config::default().deployment_url().is_err());
        let both = Config {
            url: Some("redis://h/".into()),
            ..cluster
        };
        assert!(both.deployment_url().is_err());
    }
}
