//! The lock model's properties, checked in every state, and the searches two of them need:
//! a bounded search for a grant ("no stuck state") and the documented TTL of every helper
//! key ("no leak").

use stateright::Property;

use super::steps::next_deadline;
use super::{LockModel, LATCH_MS, LEASE_MS, LIVENESS_MS};
use crate::model::deploy::Deployment;
use crate::model::state::{Phase, State};
use crate::model::take::Take;

/// The properties of `m`'s deployment. Where writes a client was told of can be lost (a
/// restart from an older snapshot, a failover without `WAIT`), mutual exclusion is expected
/// to break: the checker must find such a state (a "sometimes" property), and the others
/// still hold.
pub(super) fn properties(m: &LockModel) -> Vec<Property<LockModel>> {
    let mut props = vec![
        Property::always(
            "no renewal extends a hold that is gone or another's",
            |_, s: &State| !s.revived,
        ),
        Property::always("tokens increase", |_, s: &State| !s.regressed),
        Property::always("scripts run", |_, s: &State| s.script_error.is_none()),
        Property::always(
            "no helper key outlives its TTL",
            |m: &LockModel, s: &State| leak(m, s).is_none(),
        ),
        Property::always(
            "a step on one name changes only its keys and its slot's counter",
            |_, s: &State| !s.crossed,
        ),
        Property::sometimes("every cycle done", |_, s: &State| {
            s.left.iter().all(|l| *l == 0)
        }),
    ];
    if m.deploy.loses_writes() {
        props.push(Property::sometimes(
            "two holders after lost writes (expected)",
            |m: &LockModel, s: &State| !exclusive(m, s),
        ));
    } else {
        // A force unlock breaks exclusion on purpose (an operator clears a stuck lock): its
        // holder counts from the notice's check on, and its renewals must fail.
        props.push(Property::always(
            "mutual exclusion",
            |m: &LockModel, s: &State| exclusive(m, s),
        ));
    }
    if m.deploy == Deployment::Single {
        // Every client went through its cycles, nothing crashed and no force unlock came:
        // each hold was released, so the lock is free (a resend applied twice, a hold count
        // off by one, would leave it held until its lease ends).
        props.push(Property::always(
            "released locks are free",
            |m: &LockModel, s: &State| {
                let finished = s.left.iter().all(|l| *l == 0)
                    && s.crashes_left == m.bounds.crashes
                    && s.force_unlock_left;
                !finished || m.locks.iter().all(|n| s.ks.entry(n.as_bytes()).is_none())
            },
        ));
    }
    if m.takes.contains(&Take::Fair) {
        props.push(Property::always(
            "a fair lock grants live waiters in arrival order",
            |_, s: &State| !s.out_of_order,
        ));
    }
    if m.takes.iter().any(|t| t.queues()) {
        props.push(Property::always(
            "a dead waiter's hand-off ends with its liveness",
            |m: &LockModel, s: &State| dead_hand_off(m, s).is_none(),
        ));
    }
    if m.takes.contains(&Take::Plain) {
        props.push(Property::always(
            "a plain lock held while waiters queue is marked for the full release",
            |m: &LockModel, s: &State| unmarked_queue(m, s).is_none(),
        ));
    }
    if m.stuck {
        props.push(Property::always(
            "no stuck state",
            |m: &LockModel, s: &State| !stuck(m, s),
        ));
    }
    props
}

/// Per lock name: at most one client holds an exclusive hold with a valid lease, and never
/// one beside a shared (read) hold.
fn exclusive(m: &LockModel, s: &State) -> bool {
    let now = s.ks.now_ms();
    let firsts = (0..m.locks.len()).filter(|&c| m.lock_index(c) == c);
    firsts.map(|c| m.locks[c]).all(|name| {
        let holding = |exclusive: bool| {
            s.clients
                .iter()
                .enumerate()
                .filter(|(i, c)| {
                    m.locks[*i] == name
                        && m.takes[*i].exclusive() == exclusive
                        && matches!(c, Phase::Holding { valid_until, revoked: false, .. } if *valid_until > now)
                })
                .count()
        };
        let (exclusive, shared) = (holding(true), holding(false));
        exclusive <= 1 && (exclusive == 0 || shared == 0)
    })
}

/// The documented TTL of a key of the model's locks (ms), by its name; `None` for the
/// fencing counter, which is meant to stay.
fn documented_ttl(m: &LockModel, key: &[u8]) -> Option<u64> {
    let key = String::from_utf8_lossy(key);
    // The fencing counter stays. The fair lock's queue is Redisson's layout, whose keys
    // have no TTL (Java waiters could not renew one): a waiter that crashes with nobody
    // behind it leaves the queue, its Redisson timeouts and distlock's liveness set until
    // the next attempt or release on the name drops it (found by this check; left as
    // Redisson has it).
    if key.starts_with("distlock:fencing-counter")
        || key.starts_with("redisson_lock_queue")
        || key.starts_with("redisson_lock_timeout")
        || key.starts_with("distlock_fair_liveness")
    {
        return None;
    }
    // The unlock latch (a release's resend finds it applied) lives its latch time; the lock
    // hash a lease; the queues, waiter entries and liveness sets a liveness timeout after
    // the last attempt; a read hold's timeout key a lease.
    Some(if key.starts_with("redisson_unlock_latch") {
        LATCH_MS
    } else if m.locks.contains(&&*key) || key.contains(":rwlock_timeout:") {
        LEASE_MS
    } else {
        LIVENESS_MS
    })
}

/// A key that lives longer than its documented TTL (or for ever): its name and TTL.
fn leak(m: &LockModel, s: &State) -> Option<(String, Option<u64>)> {
    let now = s.ks.now_ms();
    s.ks.keys.iter().find_map(|(k, e)| {
        let bound = documented_ttl(m, k)?;
        let ttl = e.expires_at.map(|at| at.saturating_sub(now));
        match ttl {
            Some(t) if t <= bound => None,
            // Expired (lazily kept): gone for every reader.
            Some(_) if e.expires_at.is_some_and(|at| at <= now) => None,
            _ => Some((String::from_utf8_lossy(k).into_owned(), ttl)),
        }
    })
}

/// A stuck state: no client holds, acquires or releases (a crashed holder's lease, if any,
/// has ended), a live waiter waits, and no path of at most [`STUCK_DEPTH`] steps — attempts
/// of the waiters (each, as in the client, renewing its liveness) and time jumping to the
/// next deadline, within one liveness timeout — grants anyone. The bounded form of "no
/// action of the protocol (time passing included) ever grants it": a live waiter's wait on
/// a free name ends within a liveness timeout (a crashed waiter at the queue's head, or one
/// it was handed the lock to, blocks the queue no longer than that).
fn stuck(m: &LockModel, s: &State) -> bool {
    let now = s.ks.now_ms();
    if now < s.orphan_until
        || s.script_error.is_some()
        || s.clients
            .iter()
            .any(|c| !matches!(c, Phase::Idle | Phase::Done | Phase::Waiting { .. }))
    {
        return false;
    }
    let live = (0..s.clients.len()).any(|c| {
        matches!(s.clients[c], Phase::Waiting { .. }) && s.last_try[c] + LIVENESS_MS > now
    });
    live && !grants_within(m, s, STUCK_DEPTH, now + LIVENESS_MS)
}

/// How many steps the search for a grant from a stuck-looking state takes at most.
const STUCK_DEPTH: u8 = 4;

/// Whether some path of at most `depth` waiter attempts and time jumps (not past `until`,
/// ms) grants some waiter.
fn grants_within(m: &LockModel, s: &State, depth: u8, until: u64) -> bool {
    if depth == 0 {
        return false;
    }
    for c in 0..s.clients.len() {
        let Phase::Waiting { owner } = s.clients[c] else {
            continue;
        };
        let mut t = s.clone();
        m.attempt(&mut t, c, (owner, false, None), false);
        if matches!(t.clients[c], Phase::Holding { .. }) {
            return true;
        }
        if t.script_error.is_none() && grants_within(m, &t, depth - 1, until) {
            return true;
        }
    }
    match next_deadline(s) {
        Some(next) if next <= until => {
            let mut t = s.clone();
            t.ks.now_us = next * 1000;
            grants_within(m, &t, depth - 1, until)
        }
        _ => false,
    }
}

/// A waiter that crashed while queued and was handed the lock after: the lock's key outlives
/// the end of that waiter's liveness (the hand-off's initial lease must end by then, so a
/// dead waiter blocks the lock no longer than it would have kept its place). The client and
/// the key's expiry (ms) when it does.
fn dead_hand_off(m: &LockModel, s: &State) -> Option<(usize, u64)> {
    (0..m.takes.len()).find_map(|c| {
        let entry = s.ks.entry(m.locks[c].as_bytes())?;
        let crate::model::keyspace::Val::Hash(fields) = &entry.val else {
            return None;
        };
        let expires = entry.expires_at?;
        let until = s.dead_waiter_until[c];
        let prefix = format!("c{c}:");
        let handed = until > 0 && fields.iter().any(|(f, _)| f.starts_with(prefix.as_bytes()));
        (handed && expires > until).then_some((c, expires))
    })
}

/// A plain lock held (its hash, without a mode field) while its hand-off queue has waiters,
/// and without the queued field (`layout::QUEUED_FIELD`): its holder's fast release would
/// free it and wake everyone instead of handing it to the queue's head. The name, if any.
fn unmarked_queue(m: &LockModel, s: &State) -> Option<&'static str> {
    let plain = (0..m.takes.len()).filter(|&c| m.takes[c] == Take::Plain);
    plain.map(|c| m.locks[c]).find(|name| {
        let Some(entry) = s.ks.entry(name.as_bytes()) else {
            return false;
        };
        let crate::model::keyspace::Val::Hash(fields) = &entry.val else {
            return false;
        };
        let marked = |f: &[u8]| f == b"mode" || f == crate::layout::QUEUED_FIELD.as_bytes();
        // A queue key lives only while it has entries.
        !fields.iter().any(|(f, _)| marked(f))
            && s.ks
                .entry(crate::keys::lock_queue(name).as_bytes())
                .is_some()
    })
}
