//! The connection layer, and the seam between distlock and a Redis deployment.
//!
//! Every command, script and pipeline of a client goes through its [`Backend`]
//! (`backend.rs`: the resend rules, one verb per kind of request: `eval` for every script),
//! which sends over a [`Connection`]: a [`Deployment`]
//! (`deployment.rs`: standalone, Sentinel or Cluster, one method per question whose answer
//! differs between them) and a [`Route`] (shared, pinned to a grant connection, or
//! redirected by `ASK`). Each deployment's own behaviour is in `standalone.rs`,
//! `sentinel.rs` (a master found and followed through Redis Sentinel) and `cluster.rs`
//! (Redis Cluster). Grants and their confirmation by replicas are in `backend.rs` too (the
//! connections set aside for them in `grant_slots.rs`); every subscription goes through the
//! [`pubsub::Hub`]. The settings every connection is opened with ([`ConnectSettings`], of
//! which [`PubSubMode`]) are declared here. Scripts route by their first key (redis-rs's cluster client does so), and
//! every script's keys share the lock's hash slot.
//!
//! [`Deployment`]: deployment::Deployment
//! [`Route`]: deployment::Route

use std::sync::Arc;
use std::time::Duration;

mod backend;
mod cluster;
mod deployment;
mod grant_slots;
pub(crate) mod naming;
pub(crate) mod pubsub;
mod redact;
pub(crate) mod resend;
mod sentinel;
mod standalone;
mod target;
mod url;

pub(crate) use backend::{Backend, GrantChannel, Sent};
pub(crate) use deployment::Connection;
pub use redact::redact_url;
pub(crate) use resend::Resend;
pub(crate) use target::Target;

/// Connection settings the command side and the subscription hub share.
#[derive(Clone, Debug)]
pub(crate) struct ConnectSettings {
    pub connect_timeout: Duration,
    pub command_timeout: Duration,
    /// Replicas that must confirm a grant (`WAIT`) where the deployment has replicas; 0: off.
    pub replica_acks: u32,
    /// How long a grant waits for those confirmations.
    pub replica_ack_timeout: Duration,
    /// Classic or sharded pub/sub (Cluster only).
    pub pubsub: PubSubMode,
    /// The name every connection distlock opens gives itself (`CLIENT SETNAME`).
    ///
    /// `distlock:<app>:<host>:<pid>`.
    pub client_name: Arc<str>,
    /// The CA certificates (PEM) that `rediss://` servers are checked against instead of
    /// Mozilla's roots ([`crate::ClientBuilder::tls_ca_cert`]).
    pub tls_ca: Option<Arc<[u8]>>,
    /// Whether scripts may run as Redis Functions ([`crate::ClientBuilder::redis_functions`]).
    pub functions: bool,
}

/// How a client calls distlock's Lua scripts on the server, chosen at connect
/// ([`Client::script_calls`](crate::Client::script_calls)).
///
/// Where the server has Redis Functions (Redis 7+, Valkey) and the user may load and call
/// them (`+function|load +fcall`), the client loads one library of every script
/// (`FUNCTION LOAD`, named `distlock_<hash>`: one per distlock version and pub/sub variant,
/// shown by `FUNCTION LIST`, kept by the server's persistence and replicated like data) and
/// calls its functions with `FCALL`, which costs the server less per call than `EVALSHA`.
/// Otherwise — Redis 6.2, a user without those rules, a Redis Cluster, or
/// [`ClientBuilder::redis_functions(false)`](crate::ClientBuilder::redis_functions) — it
/// calls the same scripts with `EVALSHA`, as Redisson does. Both run the same script text,
/// so clients of either kind share every lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ScriptCalls {
    /// `FCALL` of the functions of the library named `library` (`distlock_<hash>`).
    Functions {
        /// The library's name, as `FUNCTION LIST` shows it.
        library: &'static str,
    },
    /// `EVALSHA` (an `EVAL` where the server does not have the script cached).
    Evalsha {
        /// Why not functions, in words.
        reason: &'static str,
    },
}

impl std::fmt::Display for ScriptCalls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ScriptCalls::Functions { library } => {
                write!(f, "FCALL (Redis Functions, library {library})")
            }
            ScriptCalls::Evalsha { reason } => write!(f, "EVALSHA ({reason})"),
        }
    }
}

/// Which pub/sub carries wake-ups on a Redis Cluster.
///
/// Chosen with [`ClientBuilder::pubsub_mode`](crate::ClientBuilder::pubsub_mode).
///
/// Classic pub/sub (`PUBLISH`/`SUBSCRIBE`) is forwarded by a cluster to every node, so its
/// cost grows with the cluster; sharded pub/sub (`SPUBLISH`/`SSUBSCRIBE`, Redis 7) stays on
/// the master of the channel's hash slot. Redisson 3.22 and later use sharded pub/sub on a
/// Redis 7 cluster (its `shardedSubscriptionMode`, default AUTO), older Redisson classic; a
/// Java waiter only wakes on the kind its client subscribes to. Standalone and Sentinel
/// deployments always use classic pub/sub, as Redisson does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum PubSubMode {
    /// Sharded where every node supports it (`PUBSUB SHARDNUMSUB` answers), classic otherwise.
    ///
    /// Redisson's AUTO. The default.
    #[default]
    Auto,
    /// Classic pub/sub only (Redisson before 3.22, or `shardedSubscriptionMode` OFF).
    Classic,
    /// Sharded pub/sub only; connecting fails on servers without it.
    Sharded,
    /// Publish both ways and listen on both.
    ///
    /// It suits fleets whose Java clients are configured either way; each release costs a
    /// second publish.
    Both,
}
