//! Where the CLI's Redis comes from: `--url` / `DISTLOCK_URL`, a default local server, or
//! (for `demo`) a private `redis-server` started on a free port and stopped at exit.

use std::time::Duration;

use anyhow::Result;
use distlock::{Client, ClientBuilder};
use distlock_test::{ClusterSet, RedisServer, SentinelSet};

/// Connection options shared by every subcommand.
#[derive(Clone, Debug)]
pub struct Options {
    pub url: Option<String>,
    /// `--sentinel-password`: the sentinels' password for a `redis-sentinel://` URL.
    pub sentinel_password: Option<String>,
    pub key_prefix: String,
    pub watchdog_lease: Duration,
    /// `--connect-timeout`: bound on establishing a connection.
    pub connect_timeout: Duration,
    /// `--timeout`: bound on one command (resent up to three times).
    pub command_timeout: Duration,
}

/// The URL used when none is given, for commands that talk to an existing server.
pub const DEFAULT_URL: &str = "redis://127.0.0.1:6379/";

impl Options {
    /// A client builder for `url` with these options (prefix, watchdog lease, timeouts).
    pub fn builder_for(&self, url: &str) -> ClientBuilder {
        let builder = Client::builder()
            .url(url)
            .key_prefix(self.key_prefix.clone())
            .watchdog_lease(self.watchdog_lease)
            .connect_timeout(self.connect_timeout)
            .command_timeout(self.command_timeout);
        match &self.sentinel_password {
            Some(pw) => builder.sentinel_auth(None, pw),
            None => builder,
        }
    }

    /// A client for `url` with these options.
    pub async fn client_for(&self, url: &str) -> Result<Client> {
        self.connect(self.builder_for(url)).await
    }

    /// Build `builder`'s client; a connection failure names the connect timeout.
    pub async fn connect(&self, builder: ClientBuilder) -> Result<Client> {
        builder.build().await.map_err(|e| {
            // The library's message names the server with its password masked.
            let context = if e.kind() == distlock::ErrorKind::Connection {
                format!(
                    "cannot connect (connect timeout {})",
                    humantime::format_duration(self.connect_timeout)
                )
            } else {
                "cannot connect".to_string()
            };
            anyhow::Error::new(e).context(context)
        })
    }

    /// A client for `--url`, or the default local server.
    pub async fn client(&self) -> Result<Client> {
        self.client_for(self.url.as_deref().unwrap_or(DEFAULT_URL))
            .await
    }

    /// The URL to use, starting a private deployment of `topology` when none was given. The
    /// deployment lives as long as the returned handle.
    pub fn url_or_embedded(&self, topology: Topology) -> Result<(String, Option<Embedded>)> {
        if let Some(url) = &self.url {
            return Ok((url.clone(), None));
        }
        // The harness panics with a message naming what to install when a binary is missing.
        let started = std::panic::catch_unwind(|| match topology {
            Topology::Standalone => RedisServer::start_with(RedisServer::options())
                .map(Embedded::Server)
                .map_err(|e| e.to_string()),
            Topology::Sentinel => Ok(Embedded::Sentinel(Box::new(SentinelSet::start()))),
            Topology::Cluster => Ok(Embedded::Cluster(Box::new(ClusterSet::start()))),
        });
        let embedded = match started {
            Ok(Ok(e)) => e,
            Ok(Err(e)) => {
                anyhow::bail!("no --url given and a private redis-server could not be started: {e}")
            }
            Err(_) => anyhow::bail!(
                "no --url given and a private {topology:?} deployment could not be started \
                 (see the message above)"
            ),
        };
        Ok((embedded.url(), Some(embedded)))
    }
}

/// Which private deployment `demo` starts when no URL is given.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Topology {
    /// One redis-server.
    #[default]
    Standalone,
    /// A master with two replicas and three redis-sentinel processes.
    Sentinel,
    /// Three masters with a replica each (Redis Cluster).
    Cluster,
}

/// A private deployment started for one command, stopped when dropped.
pub enum Embedded {
    Server(RedisServer),
    Sentinel(Box<SentinelSet>),
    Cluster(Box<ClusterSet>),
}

impl Embedded {
    /// The URL clients connect with (`redis://`, `redis-sentinel://` or `redis-cluster://`).
    pub fn url(&self) -> String {
        match self {
            Embedded::Server(s) => s.url(),
            Embedded::Sentinel(s) => s.url(),
            Embedded::Cluster(s) => s.url(),
        }
    }
}
