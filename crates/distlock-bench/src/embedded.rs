//! The private deployment `demo` and `bench` start when no URL is given: one `redis-server`,
//! a Sentinel set or a Cluster, on free loopback ports, stopped when dropped.

use crate::connect::Options;
use anyhow::Result;
use distlock_test::{ClusterSet, RedisServer, SentinelSet};

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

/// The URL to use: `opts`' own, or a private deployment of `topology` started now (it lives
/// as long as the returned handle).
///
/// # Errors
/// No URL was given and the deployment could not be started (the message names what to
/// install).
pub fn url_or_embedded(opts: &Options, topology: Topology) -> Result<(String, Option<Embedded>)> {
    if let Some(url) = &opts.url {
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
