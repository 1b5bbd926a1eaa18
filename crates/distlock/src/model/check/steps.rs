//! The lock model's steps beyond a client's acquire: the release, a waiter that gives up,
//! the watchdog's renewal, whether a hold is on the server, the fair queue's arrival order,
//! and the next deadline.

use crate::model::counts;

use super::{end_cycle, owner, send, strings, LockModel, LEASE_MS, LIVENESS_MS};
use crate::keys;
use crate::lock::raw::{inspect_call, parse_inspect, renew_call, renew_reply};
use crate::model::keyspace::{Reply, Val};
use crate::model::state::{Phase, State};
use crate::model::take::Take;

impl LockModel {
    /// Whether client `client`'s hold of owner `o` is on the server (its field in the lock
    /// hash, as `HEXISTS` finds it).
    pub(super) fn held(&self, s: &State, client: usize, o: u32) -> bool {
        let field = self.field(client, o);
        let key = self.names(client).key.as_bytes().to_vec();
        s.ks.entry(&key)
            .is_some_and(|e| matches!(&e.val, Val::Hash(h) if h.iter().any(|(f, _)| *f == field)))
    }

    /// The watchdog renews client `client`'s hold (`None`: it holds nothing). A renewal that
    /// finds its hold gone fires `lost()`; one that extends a hold that is not there (gone,
    /// or another owner's) is recorded (`revived`).
    pub(super) fn renew(&self, s: &mut State, client: usize, now_ms: u64) -> Option<()> {
        let Phase::Holding { owner: o, .. } = s.clients[client].clone() else {
            return None;
        };
        let there = self.held(s, client, o);
        let raw = self.raw(client);
        let names = self.names(client);
        let holder = owner(client, o);
        let inv = renew_call(&*raw, &names, &holder, LEASE_MS);
        let reply = send(&mut s.ks, &inv, false);
        match renew_reply(&reply.to_value()) {
            Some(1) => {
                if !there {
                    s.revived = true;
                }
                if self.deploy.waits() {
                    // WAIT: confirmed, or the deadline stays (modelled as confirmed).
                    s.servers.replicate(&s.ks);
                }
                if let Phase::Holding { valid_until, .. } = &mut s.clients[client] {
                    *valid_until = (*valid_until).max(counts::valid_until(now_ms, LEASE_MS));
                }
            }
            Some(_) => {
                // Found gone or taken: lost() fires; the client gives up this hold.
                end_cycle(s, client);
            }
            None => s.script_error = Some(format!("renewal: {reply:?}")),
        }
        Some(())
    }

    /// Fair lock: the order in which the server queued its waiters, and whether a grant
    /// (a hold that appeared in this step) passed a live waiter that arrived earlier.
    pub(super) fn observe_queue(&self, last: &State, s: &mut State) {
        if !self.takes.contains(&Take::Fair) {
            return;
        }
        let now = s.ks.now_ms();
        let waiting = |st: &State, c: usize| match st.clients[c] {
            Phase::Waiting { owner } | Phase::Acquiring { owner, .. } => Some(owner),
            _ => None,
        };
        let queued = |st: &State, c: usize, o: u32| {
            let field = self.field(c, o);
            let queue = keys::fair_queue(&self.names(c).key).into_bytes();
            st.ks
                .entry(&queue)
                .is_some_and(|e| matches!(&e.val, Val::List(l) if l.contains(&field)))
        };
        for x in 0..s.clients.len() {
            let Some(o) = waiting(last, x) else { continue };
            if self.takes[x] != Take::Fair || self.held(last, x, o) || !self.held(s, x, o) {
                continue;
            }
            // x was granted in this step: no live waiter that arrived before it waits.
            let passed = (0..s.clients.len()).any(|y| {
                y != x
                    && self.locks[y] == self.locks[x]
                    && waiting(last, y).is_some()
                    && last.last_try[y] + LIVENESS_MS > now
                    && match (last.arrival[y], last.arrival[x]) {
                        (Some(ay), Some(ax)) => ay < ax,
                        (Some(_), None) => true,
                        _ => false,
                    }
            });
            if passed {
                s.out_of_order = true;
            }
        }
        for c in 0..s.clients.len() {
            match waiting(s, c) {
                Some(o) if self.takes[c] == Take::Fair && queued(s, c, o) => {
                    if s.arrival[c].is_none() {
                        s.arrival[c] = Some(s.arrivals);
                        s.arrivals += 1;
                    }
                }
                _ => s.arrival[c] = None,
            }
        }
    }
}

impl LockModel {
    /// Whether a step on lock name `name` changed a key that is not that name's: every key of
    /// a lock (its hash, channels, queues, waiter entries, latches) holds its name, and the
    /// only key that names of one slot share is the slot's fencing counter.
    pub(super) fn changed_another_name(&self, last: &State, s: &State, name: &str) -> bool {
        if !self.several_names() {
            return false;
        }
        let keys = last.ks.keys.keys().chain(s.ks.keys.keys());
        keys.filter(|k| {
            let k = String::from_utf8_lossy(k);
            !k.contains(name) && !k.starts_with(keys::FENCING_COUNTER_PREFIX)
        })
        .any(|k| last.ks.entry(k) != s.ks.entry(k))
    }
}

/// The next deadline after now: a key's TTL, or a holder's local validity.
pub(super) fn next_deadline(s: &State) -> Option<u64> {
    let holders = s.clients.iter().filter_map(|c| match c {
        Phase::Holding { valid_until, .. } => Some(*valid_until),
        _ => None,
    });
    crate::model::counts::next_deadline(&s.ks, holders)
}

/// How long a waiter that gives up waited (ms): what `leave` is told of its wait.
const GIVE_UP_WAIT_MS: u64 = 1_000;

impl LockModel {
    /// Client `client` gives up its wait for owner `o` (its future dropped), as the engine's
    /// `LockRequest::give_back` does for a fresh owner: where the kind hands off, the
    /// request leaves the queue (a plain lock's leave gives back a hold a hand-off gave it,
    /// whole); otherwise, and for the kinds whose leave does not, every hold the owner has is
    /// read (`lock_inspect.lua`) and given back one release at a time. The cycle ends.
    pub(super) fn give_up(&self, s: &mut State, client: usize, o: u32) {
        let raw = self.raw(client);
        let names = self.names(client);
        let who = owner(client, o);
        let hands_off = raw.handoff_liveness().is_some() && !self.deploy.waits();
        let mut gave_back = false;
        if hands_off {
            let floor = s.servers.floor();
            if let Some(inv) = raw.leave(&names, who.as_str(), GIVE_UP_WAIT_MS, true, &floor) {
                let r = send(&mut s.ks, &inv, false);
                if r.error_code().is_some_and(|c| c != "WRONGTYPE") {
                    s.script_error = Some(format!("leave: {r:?}"));
                    return;
                }
                gave_back = raw.leave_gives_back();
            }
        }
        if !gave_back {
            let inv = inspect_call(&*raw, &names.key, &who);
            let reply = send(&mut s.ks, &inv, false);
            let count = strings(&reply)
                .and_then(|r| parse_inspect(&r))
                .map_or(0, |(count, _, _)| count);
            for _ in 0..count {
                s.minted += 1;
                let latch = s.minted;
                let inv = self.release_call(s, client, o, latch, true);
                let r = send(&mut s.ks, &inv, true);
                if r.error_code().is_some_and(|c| c != "WRONGTYPE") {
                    s.script_error = Some(format!("give back: {r:?}"));
                    return;
                }
            }
        }
        end_cycle(s, client);
    }
}

impl LockModel {
    /// Client `client`'s release of `owner`'s hold (its fast path when `fast`); with `lost`
    /// the reply is lost and the client resends it to the full script, same latch.
    pub(super) fn release(
        &self,
        s: &mut State,
        client: usize,
        owner: u32,
        fast: bool,
        latch: u32,
        lost: bool,
    ) {
        let inv = self.release_call(s, client, owner, latch, fast);
        let r = send(&mut s.ks, &inv, fast);
        if !lost && self.deploy.waits() {
            // WAIT: the release is resent until the replica acknowledges it
            // (`Resend::Confirmed`); a reply that came is one the replica has.
            s.servers.replicate(&s.ks);
        }
        match r {
            Reply::Int(_) if lost => {
                s.clients[client] = Phase::Releasing {
                    owner,
                    fast: false,
                    latch,
                };
            }
            Reply::Int(_) => end_cycle(s, client),
            // The hold ran out and another kind took the name: the release is refused.
            other if other.error_code() == Some("WRONGTYPE") => end_cycle(s, client),
            other => s.script_error = Some(format!("release: {other:?}")),
        }
    }
}
