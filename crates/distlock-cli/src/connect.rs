//! Where the CLI's Redis comes from: `--url` / `DISTLOCK_URL`, a default local server, or
//! (for `demo`) a private `redis-server` started on a free port and stopped at exit.

use std::time::Duration;

use anyhow::Result;
use distlock::{Client, ClientBuilder};
use distlock_harness::RedisServer;

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

    /// A plain redis-rs connection configuration with these timeouts, for the commands that
    /// also talk to Redis directly (`demo`).
    pub fn redis_config(&self) -> redis::AsyncConnectionConfig {
        redis::AsyncConnectionConfig::new()
            .set_connection_timeout(Some(self.connect_timeout))
            .set_response_timeout(Some(self.command_timeout))
    }

    /// A client for `--url`, or the default local server.
    pub async fn client(&self) -> Result<Client> {
        self.client_for(self.url.as_deref().unwrap_or(DEFAULT_URL))
            .await
    }

    /// The URL to use, starting a private server when none was given. The server lives as
    /// long as the returned handle.
    pub fn url_or_embedded(&self) -> Result<(String, Option<RedisServer>)> {
        if let Some(url) = &self.url {
            return Ok((url.clone(), None));
        }
        let server = RedisServer::start_with(RedisServer::options()).map_err(|e| {
            anyhow::anyhow!("no --url given and a private redis-server could not be started: {e}")
        })?;
        Ok((server.url(), Some(server)))
    }
}
