//! The model check's state and steps: where each client is in the protocol ([`Phase`]), the
//! whole system ([`State`]) and what can happen next ([`Action`]).

use super::deploy::Servers;
use super::keyspace::Keyspace;

/// Where one client is in its protocol.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Phase {
    /// Between cycles (how many are left: [`State::left`]).
    Idle,
    /// An acquire of a fresh owner in flight: its next send tries the fast path (`fast`,
    /// the request's first send) or goes to the full script (a resend, or after a nil).
    /// `since`: when the earliest attempt not answered since began (a lost reply's), from
    /// which a grant's lease counts, as the engine counts it (`acquire::wait_loop`).
    Acquiring {
        owner: u32,
        fast: bool,
        since: Option<u64>,
    },
    /// Refused and queued: attempts again on a wake-up, a hand-off message or its re-check.
    Waiting { owner: u32 },
    /// Granted: the token, and the local validity (server ms) it counts on. `revoked`: an
    /// operator's force unlock deleted the hold, and its notice is on the way.
    Holding {
        owner: u32,
        token: u128,
        valid_until: u64,
        revoked: bool,
    },
    /// Granted by a master whose replica must confirm it (`WAIT`, sent next on the
    /// connection of the grant to the master of config epoch `epoch`); the client does not
    /// count on the hold yet. Fewer acknowledgements, or a failover in between (the
    /// connection breaks): the client gives the grant back and attempts again.
    Confirming {
        owner: u32,
        token: u128,
        since_ms: u64,
        epoch: u64,
    },
    /// A release in flight (`fast`: its first send).
    Releasing { owner: u32, fast: bool, latch: u32 },
    /// Crashed, or all cycles done.
    Done,
}

/// The whole system: the server's keyspace and every client.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct State {
    pub(crate) ks: Keyspace,
    pub(crate) clients: Vec<Phase>,
    /// Acquire-release cycles each client has left (a cycle ends with the release, or with
    /// the hold found lost).
    pub(crate) left: Vec<u8>,
    /// Owners minted so far (each acquire mints one).
    pub(crate) minted: u32,
    /// The highest token granted so far, and whether a grant came in at or below it.
    /// Per lock name, at the name's `LockModel::lock_index` (other entries stay `None`).
    pub(crate) max_token: Vec<Option<u128>>,
    pub(crate) regressed: bool,
    /// A step on one lock name changed a key that is not that name's (but for its slot's
    /// fencing counter).
    pub(crate) crossed: bool,
    /// A script run that erred (not a refusal the protocol expects).
    pub(crate) script_error: Option<String>,
    /// Whether the operator's one force unlock is still to come.
    pub(crate) force_unlock_left: bool,
    /// A renewal that extended a hold that was gone (expired, force-unlocked, lost in a
    /// restart or failover) or is another owner's: its holder did not learn of the loss.
    pub(crate) revived: bool,
    /// The deployment: replica, snapshot, epoch (see [`super::deploy`]).
    pub(crate) servers: Servers,
    /// Per client: the server time (ms) of its latest acquire attempt that reached the
    /// server (its liveness as a waiter runs from there), and its place in the fair queue's
    /// arrival order (from when the server first queued its owner).
    pub(crate) last_try: Vec<u64>,
    pub(crate) arrival: Vec<Option<u32>>,
    pub(crate) arrivals: u32,
    /// A fair lock granted a client while a live waiter that arrived earlier waited.
    pub(crate) out_of_order: bool,
    /// The server's deadline (ms) of the hold a crashed holder left behind: the name is not
    /// free until then.
    pub(crate) orphan_until: u64,
    /// Per client that crashed while waiting: when its queue entry's liveness ended (ms; 0
    /// for the others). A hand-off to it must end by then.
    pub(crate) dead_waiter_until: Vec<u64>,
    /// The bounds of the exploration: lost replies and crashes still allowed (in the whole
    /// run), and per client the renewals and the attempts while waiting.
    pub(crate) lost_left: u8,
    pub(crate) crashes_left: u8,
    pub(crate) cancels_left: u8,
    pub(crate) renewals_left: Vec<u8>,
    pub(crate) waits_left: Vec<u8>,
}

/// One step.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Action {
    /// Client `i` sends its next request; the server runs it; the reply arrives, or is lost
    /// (`lost`).
    Send { client: usize, lost: bool },
    /// Client `i`, holding, renews (the watchdog).
    Renew { client: usize },
    /// Client `i`, waiting (or with an attempt's reply lost), gives up: its future is
    /// dropped, and the request leaves the queue and gives back what a hand-off gave it.
    Cancel { client: usize },
    /// Client `i` crashes: nothing is released.
    Crash { client: usize },
    /// Virtual time jumps to the next deadline.
    Tick,
    /// An operator force-unlocks the lock.
    ForceUnlock,
    /// The force unlock's notice reaches client `i`, which checks the hold with the server.
    Notice { client: usize },
    /// The server saves a snapshot of its keyspace.
    Snapshot,
    /// The server restarts from its snapshot.
    Restart,
    /// The replica catches up with the master.
    Replicate,
    /// The replica is promoted.
    Failover,
}
