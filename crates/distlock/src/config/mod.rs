//! [`Config`]: the client's settings as data — from the environment (the CLI's `DISTLOCK_*`
//! variables) or, with the `serde` feature, from a file in any serde format — as Redisson's
//! YAML config and deadpool's `Config` give them.

use std::path::PathBuf;
use std::time::Duration;

use crate::client::{ClientBuilder, PubSubMode};
use crate::conn::redact_url;
use crate::duration::parse_duration;
use crate::error::{Error, Result};

#[cfg(feature = "serde")]
mod file;
#[cfg(feature = "serde")]
use file::duration_field;

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
/// # Durations: a bare number is **seconds**
///
/// Durations are written as humantime reads them (`"30s"`, `"1m 30s"`, `"250ms"`), as
/// ShedLock's ISO-8601 (`"PT30S"`), or as a bare number of **seconds** (`30`, `0.5`, or the
/// strings `"30"`, `"0.5"`), as the `distlock` command and the `DISTLOCK_*` variables read
/// them ([`parse_duration`], one parser for all).
/// This is *not* Redisson's unit: Redisson's values are milliseconds
/// (`lockWatchdogTimeout: 30000`). So that such a value is not read as 8 hours, a number
/// (not a string) of 1000 or more in a file is refused: write `"30s"` or `"30000ms"`.
///
/// # Addresses as Redisson writes them
///
/// `single.address`, `sentinel.nodes` and `cluster.nodes` are `host:port`, with or without
/// Redisson's `redis://` / `rediss://` scheme (`rediss://` turns TLS on, as `tls: true` does;
/// mixing both schemes, or `tls: true` with `redis://`, is refused). Credentials in an address
/// (`:password@host:port`) are accepted but masked in `Debug` and in errors; prefer
/// `password`. `database` and `tls` apply to these three forms: with `url`, put the database in
/// the URL (`redis://host:6379/2`) and TLS in its scheme (`rediss://`), or it is refused.
///
/// Redisson's own top-level names (`singleServerConfig`, `sentinelServersConfig`,
/// `clusterServersConfig`, `lockWatchdogTimeout`) are not read as theirs: a file that uses one
/// is refused with distlock's form of it.
///
/// # Secrets
///
/// `Debug` masks the password, the sentinels' password and the credentials of the URL and of
/// every address.
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
    /// The watchdog lease (`"30s"`, or a number of seconds; see [Durations](Config#durations-a-bare-number-is-seconds)).
    #[cfg_attr(feature = "serde", serde(deserialize_with = "duration_field"))]
    pub watchdog_lease: Option<String>,
    /// The connect timeout (`"5s"`, or a number of seconds).
    #[cfg_attr(feature = "serde", serde(deserialize_with = "duration_field"))]
    pub connect_timeout: Option<String>,
    /// The command timeout (`"3s"`, or a number of seconds).
    #[cfg_attr(feature = "serde", serde(deserialize_with = "duration_field"))]
    pub command_timeout: Option<String>,
    /// How long the `acquire` verbs wait (`"60s"`, or a number of seconds).
    #[cfg_attr(feature = "serde", serde(deserialize_with = "duration_field"))]
    pub default_wait: Option<String>,
    /// The application name recorded with grants and in connection names.
    pub app_name: Option<String>,
    /// Redisson's names (`singleServerConfig`, `sentinelServersConfig`,
    /// `clusterServersConfig`, `lockWatchdogTimeout`): read only to refuse them with
    /// distlock's form of each.
    #[cfg(feature = "serde")]
    #[serde(
        rename = "singleServerConfig",
        deserialize_with = "file::single_server_config"
    )]
    single_server_config: (),
    #[cfg(feature = "serde")]
    #[serde(
        rename = "sentinelServersConfig",
        deserialize_with = "file::sentinel_servers_config"
    )]
    sentinel_servers_config: (),
    #[cfg(feature = "serde")]
    #[serde(
        rename = "clusterServersConfig",
        deserialize_with = "file::cluster_servers_config"
    )]
    cluster_servers_config: (),
    #[cfg(feature = "serde")]
    #[serde(
        rename = "lockWatchdogTimeout",
        deserialize_with = "file::lock_watchdog_timeout"
    )]
    lock_watchdog_timeout: (),
}

impl std::fmt::Debug for Config {
    /// Every field, with the passwords masked and the URL and addresses redacted
    /// ([`redact_url`]).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("url", &self.url.as_deref().map(redact_url))
            .field("single", &self.single)
            .field("sentinel", &self.sentinel)
            .field("cluster", &self.cluster)
            .field("tls", &self.tls)
            .field("database", &self.database)
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| "***"))
            .field(
                "sentinel_password",
                &self.sentinel_password.as_ref().map(|_| "***"),
            )
            .field("pubsub", &self.pubsub)
            .field("tls_ca_cert", &self.tls_ca_cert)
            .field("key_prefix", &self.key_prefix)
            .field("watchdog_lease", &self.watchdog_lease)
            .field("connect_timeout", &self.connect_timeout)
            .field("command_timeout", &self.command_timeout)
            .field("default_wait", &self.default_wait)
            .field("app_name", &self.app_name)
            .finish()
    }
}

/// Addresses as `Debug` shows them: credentials masked.
struct Redacted<'a>(&'a [String]);

impl std::fmt::Debug for Redacted<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.0.iter().map(|a| redact_url(a)))
            .finish()
    }
}

impl std::fmt::Debug for SingleServer {
    /// The address with its credentials masked.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SingleServer")
            .field("address", &redact_url(&self.address))
            .finish()
    }
}

impl std::fmt::Debug for SentinelServers {
    /// The nodes with their credentials masked.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SentinelServers")
            .field("nodes", &Redacted(&self.nodes))
            .field("master", &self.master)
            .finish()
    }
}

impl std::fmt::Debug for ClusterServers {
    /// The nodes with their credentials masked.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterServers")
            .field("nodes", &Redacted(&self.nodes))
            .finish()
    }
}

/// One server: `address` is `host[:port]` (port 6379 when left out), or Redisson's
/// `redis://host:port` / `rediss://host:port` (TLS).
#[derive(Clone, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields))]
#[non_exhaustive]
pub struct SingleServer {
    /// `host[:port]`, `redis://host[:port]` or `rediss://host[:port]`.
    pub address: String,
}

/// A Sentinel deployment.
///
/// The sentinels (`host[:port]`, port 26379 when left out; Redisson's `redis://` or
/// `rediss://` before it is accepted) and the master's name.
#[derive(Clone, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields))]
#[non_exhaustive]
pub struct SentinelServers {
    /// The sentinels, `[redis://|rediss://]host[:port]`.
    pub nodes: Vec<String>,
    /// The master's name, as the sentinels know it.
    pub master: String,
}

/// A Redis Cluster: seed nodes, `host[:port]` (port 6379 when left out; Redisson's
/// `redis://` or `rediss://` before it is accepted).
#[derive(Clone, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields))]
#[non_exhaustive]
pub struct ClusterServers {
    /// The seed nodes, `[redis://|rediss://]host[:port]`.
    pub nodes: Vec<String>,
}

impl Config {
    /// Returns the settings of the environment variables the `distlock` command reads (the table
    /// above).
    ///
    /// Unset or empty variables are left out.
    ///
    /// # Errors
    /// [`ErrorKind::Config`](crate::ErrorKind::Config) for a duration or `DISTLOCK_PUBSUB` value
    /// that does not parse; the message names the variable (`DISTLOCK_WATCHDOG_LEASE "soon"`).
    /// The URL and the CA file are checked by [`Config::builder`].
    pub fn from_env() -> Result<Config> {
        Config::from_lookup(|name| std::env::var(name).ok().filter(|v| !v.is_empty()))
    }

    /// [`Config::from_env`] over any lookup of variable names (for tests). Not part of the
    /// API.
    ///
    /// # Errors
    /// As [`Config::from_env`].
    #[doc(hidden)]
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Config> {
        let config = Config {
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
        };
        config.values(env_name)?;
        Ok(config)
    }

    /// The parsed durations (watchdog lease, connect timeout, command timeout, default wait)
    /// and pub/sub mode; `name` gives what an error calls each field.
    fn values(&self, name: fn(&'static str) -> &'static str) -> Result<Values> {
        let d = |field: &'static str, value: &Option<String>| duration(name(field), value);
        let pubsub = match self.pubsub.as_deref() {
            None => None,
            Some("auto") => Some(PubSubMode::Auto),
            Some("classic") => Some(PubSubMode::Classic),
            Some("sharded") => Some(PubSubMode::Sharded),
            Some("both") => Some(PubSubMode::Both),
            Some(other) => {
                return Err(Error::config(format!(
                    "{} {other:?}: one of auto, classic, sharded, both",
                    name("pubsub")
                )))
            }
        };
        Ok(Values {
            watchdog_lease: d("watchdog_lease", &self.watchdog_lease)?,
            connect_timeout: d("connect_timeout", &self.connect_timeout)?,
            command_timeout: d("command_timeout", &self.command_timeout)?,
            default_wait: d("default_wait", &self.default_wait)?,
            pubsub,
        })
    }

    /// A [`ClientBuilder`] with these settings.
    ///
    /// # Errors
    /// [`ErrorKind::Config`](crate::ErrorKind::Config) for no deployment or more than one
    /// (`url`, `single`, `sentinel`, `cluster`), `database` or `tls` beside `url`, an address
    /// whose scheme is neither `redis://` nor `rediss://` (or that mixes them), a duration or
    /// `pubsub` value that does not parse, or a CA file that cannot be read; the message names
    /// the field.
    pub fn builder(&self) -> Result<ClientBuilder> {
        let values = self.values(|field| field)?;
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
        if let Some(mode) = values.pubsub {
            b = b.pubsub_mode(mode);
        }
        if let Some(path) = &self.tls_ca_cert {
            let pem = std::fs::read(path)
                .map_err(|e| Error::config(format!("tls_ca_cert {}: {e}", path.display())))?;
            b = b.tls_ca_cert(pem);
        }
        if let Some(prefix) = &self.key_prefix {
            b = b.key_prefix(prefix.clone());
        }
        if let Some(d) = values.watchdog_lease {
            b = b.watchdog_lease(d);
        }
        if let Some(d) = values.connect_timeout {
            b = b.connect_timeout(d);
        }
        if let Some(d) = values.command_timeout {
            b = b.command_timeout(d);
        }
        if let Some(d) = values.default_wait {
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
        let db = self.database.map(|d| format!("/{d}")).unwrap_or_default();
        let mut urls = Vec::new();
        if let Some(url) = &self.url {
            if self.database.is_some() || self.tls {
                return Err(Error::config(
                    "database and tls apply to single, sentinel and cluster, not to url: put \
                     the database in the URL (redis://host:6379/2) and TLS in its scheme \
                     (rediss://)",
                ));
            }
            urls.push(url.clone());
        }
        if let Some(single) = &self.single {
            let (s, address) = self.hosts("single.address", [single.address.as_str()])?;
            urls.push(format!("redis{s}://{}{db}", address[0]));
        }
        if let Some(sentinel) = &self.sentinel {
            let (s, nodes) =
                self.hosts("sentinel.nodes", sentinel.nodes.iter().map(String::as_str))?;
            urls.push(format!(
                "redis{s}-sentinel://{}{db}#{}",
                nodes.join(","),
                sentinel.master
            ));
        }
        if let Some(cluster) = &self.cluster {
            let (s, nodes) =
                self.hosts("cluster.nodes", cluster.nodes.iter().map(String::as_str))?;
            urls.push(format!("redis{s}-cluster://{}", nodes.join(",")));
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

    /// `addresses` without Redisson's `redis://` / `rediss://` scheme (nor a trailing `/`),
    /// and `"s"` when TLS is on (`tls`, or `rediss://`). `field` names them in errors, which
    /// show addresses redacted.
    fn hosts<'a>(
        &self,
        field: &str,
        addresses: impl IntoIterator<Item = &'a str>,
    ) -> Result<(&'static str, Vec<&'a str>)> {
        let mut tls = None::<(bool, &str)>;
        let mut hosts = Vec::new();
        for address in addresses {
            let Some((scheme, host)) = address.split_once("://") else {
                hosts.push(address);
                continue;
            };
            let scheme_tls = match scheme.to_ascii_lowercase().as_str() {
                "redis" => false,
                "rediss" => true,
                other => {
                    return Err(Error::config(format!(
                        "{field} {:?}: the scheme {other}:// is not Redisson's redis:// or \
                         rediss://",
                        redact_url(address)
                    )))
                }
            };
            if self.tls && !scheme_tls {
                return Err(Error::config(format!(
                    "{field} {:?} says redis:// (no TLS) but tls is true: write rediss://, or \
                     leave the scheme out",
                    redact_url(address)
                )));
            }
            if let Some((other, first)) = tls {
                if other != scheme_tls {
                    return Err(Error::config(format!(
                        "{field} mixes redis:// and rediss:// ({:?}, {:?}): TLS is on for all \
                         the nodes or for none",
                        redact_url(first),
                        redact_url(address)
                    )));
                }
            }
            tls = Some((scheme_tls, address));
            hosts.push(host.strip_suffix('/').unwrap_or(host));
        }
        let on = self.tls || tls.is_some_and(|(t, _)| t);
        Ok((if on { "s" } else { "" }, hosts))
    }
}

/// The parsed values of a [`Config`] (see [`Config::values`]).
struct Values {
    watchdog_lease: Option<Duration>,
    connect_timeout: Option<Duration>,
    command_timeout: Option<Duration>,
    default_wait: Option<Duration>,
    pubsub: Option<PubSubMode>,
}

/// The environment variable of a [`Config`] field ([`Config::from_env`]).
fn env_name(field: &'static str) -> &'static str {
    match field {
        "pubsub" => "DISTLOCK_PUBSUB",
        "watchdog_lease" => "DISTLOCK_WATCHDOG_LEASE",
        "connect_timeout" => "DISTLOCK_CONNECT_TIMEOUT",
        "command_timeout" => "DISTLOCK_TIMEOUT",
        "default_wait" => "DISTLOCK_DEFAULT_WAIT",
        other => other,
    }
}

/// A duration field ([`parse_duration`]); errors name it `name`.
fn duration(name: &str, value: &Option<String>) -> Result<Option<Duration>> {
    let Some(v) = value else { return Ok(None) };
    parse_duration(v.trim())
        .map(Some)
        .map_err(|e| Error::config(format!("{name} {e}")))
}

#[cfg(test)]
mod tests;
