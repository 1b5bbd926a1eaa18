//! The model check's deployments beyond one server that keeps its data: a server that
//! restarts from an older snapshot (with an empty script cache), and a Sentinel master with
//! one replica that a failover promotes, its grants confirmed by `WAIT` or not.
//!
//! What the real code depends on, and the model keeps: the server clock goes on across a
//! restart (`TIME`, which every token is at least: tokens stay above those of before the
//! restart although the counter comes back older); a promoted replica has a new replication
//! ID (`INFO replication`'s `master_replid`) and a config epoch above its master's, which the
//! client sends as the token's generation (`<epoch>:<floor>`); a restarted or promoted server
//! has no scripts cached, so an `EVALSHA` answers `NOSCRIPT`, having run nothing, and the
//! connection layer sends one `EVAL` of the full text (`scripts::Invocation::send_async`).

use std::collections::BTreeMap;

use super::keyspace::{Entry, Keyspace, Reply};
use super::lua;

/// How the server is deployed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Deployment {
    /// One server that keeps its data.
    Single,
    /// One server that snapshots its keyspace at some step and restarts from that snapshot
    /// at a later one: the writes in between are lost, its script cache is empty, and its
    /// clock has gone on ([`RESTART_MS`]).
    Restart,
    /// A Sentinel master (config epoch 1) with one replica, written asynchronously; a
    /// failover promotes the replica (epoch 2) with what it has, and the old master comes
    /// back as its replica. `wait`: the client's `replica_acks` is 1 (grants, renewals and
    /// releases confirmed by `WAIT 1`, no direct hand-off), else 0.
    Replica { wait: bool },
}

/// The time a restart takes at least (ms of the server clock). Tokens after it stay above
/// those before as long as they were not issued faster than one per µs on average (the
/// design's stated assumption): a millisecond covers a thousand grants at one instant.
pub(crate) const RESTART_MS: u64 = 1;

/// The deployment's part of the state: the replica's keyspace, the snapshot, the master's
/// config epoch, and how many snapshots, restarts and failovers may still come.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub(crate) struct Servers {
    pub(crate) replica: Option<BTreeMap<Vec<u8>, Entry>>,
    pub(crate) snapshot: Option<BTreeMap<Vec<u8>, Entry>>,
    pub(crate) epoch: u64,
    pub(crate) snapshots_left: u8,
    pub(crate) restarts_left: u8,
    pub(crate) failovers_left: u8,
}

impl Deployment {
    /// The servers at the start: one snapshot and one restart, or one failover.
    pub(crate) fn servers(self) -> Servers {
        match self {
            Deployment::Single => Servers::default(),
            Deployment::Restart => Servers {
                snapshots_left: 1,
                restarts_left: 1,
                ..Servers::default()
            },
            Deployment::Replica { .. } => Servers {
                replica: Some(BTreeMap::new()),
                epoch: 1,
                failovers_left: 1,
                ..Servers::default()
            },
        }
    }

    /// Whether the client waits for a replica's acknowledgement of its writes.
    pub(crate) fn waits(self) -> bool {
        self == Deployment::Replica { wait: true }
    }

    /// Whether writes a client was told of can be lost (a restart from an older snapshot, a
    /// failover without `WAIT`): mutual exclusion is then expected to break.
    pub(crate) fn loses_writes(self) -> bool {
        matches!(
            self,
            Deployment::Restart | Deployment::Replica { wait: false }
        )
    }
}

impl Servers {
    /// The fencing floor argument the client sends: `<epoch>:0` to a Sentinel master, `0`
    /// elsewhere (as `Deployment::token_floor` builds it).
    pub(crate) fn floor(&self) -> String {
        if self.epoch > 0 {
            format!("{}:0", self.epoch)
        } else {
            "0".into()
        }
    }

    /// The replica catches up with the master (asynchronous replication, or a `WAIT`).
    pub(crate) fn replicate(&mut self, ks: &Keyspace) {
        if self.replica.is_some() {
            self.replica = Some(ks.keys.clone());
        }
    }

    /// Whether the replica lacks some of the master's writes.
    pub(crate) fn behind(&self, ks: &Keyspace) -> bool {
        self.replica.as_ref().is_some_and(|r| *r != ks.keys)
    }

    /// The server saves its keyspace (an RDB snapshot).
    pub(crate) fn snapshot(&mut self, ks: &Keyspace) {
        self.snapshots_left -= 1;
        self.snapshot = Some(ks.keys.clone());
    }

    /// The server restarts from its snapshot (empty without one).
    pub(crate) fn restart(&mut self, ks: &mut Keyspace) {
        self.restarts_left -= 1;
        ks.keys = self.snapshot.clone().unwrap_or_default();
        new_reign(ks);
        ks.now_us += RESTART_MS * 1000;
    }

    /// The replica is promoted with what it has; the old master resyncs as its replica and
    /// acknowledges every WAIT from then on (no second failover comes, so the model keeps no
    /// copy of it).
    pub(crate) fn failover(&mut self, ks: &mut Keyspace) {
        self.failovers_left -= 1;
        ks.keys = self.replica.take().unwrap_or_default();
        self.epoch += 1;
        new_reign(ks);
    }
}

/// A new master's reign: a new replication ID (and no scripts cached: see [`evalsha`]).
fn new_reign(ks: &mut Keyspace) {
    let n = u128::from_str_radix(&ks.replid, 16).unwrap_or(0) + 1;
    ks.replid = format!("{n:040x}");
}

/// Run a script as the connection layer sends it: `EVALSHA`, and when the server has not
/// cached it (after a restart or a promotion), `NOSCRIPT` and one `EVAL` of the full text
/// on the same connection, which caches it. `NOSCRIPT` is answered before anything runs,
/// and the `EVAL` runs the same text atomically, so either way the request runs exactly
/// once: the model keeps no script cache (it would only split states that answer alike).
/// A reply lost after the `EVAL` is a lost reply like any other.
pub(crate) fn evalsha(ks: &mut Keyspace, text: &str, keys: &[Vec<u8>], args: &[Vec<u8>]) -> Reply {
    lua::eval(ks, text, keys, args)
}
