//! What the models of the counting primitives (the semaphore, the leased semaphore, the
//! latch) and of the job lock share: the client's timing settings, sending a call or a plain
//! command to the in-memory server, time jumps, the check that no helper key outlives its
//! documented TTL, and running a check.

use std::time::Duration;

use stateright::{Checker, Model};

use super::deploy;
use super::keyspace::{Keyspace, Reply};
use super::trace::{self, Traced};
use crate::scripts::Invocation;

/// Virtual time starts here (µs since the epoch).
pub(super) const START_US: u64 = 1_800_000_000_000_000;
/// The client's command timeout (ms) in the models.
const COMMAND_TIMEOUT_MS: u64 = 1_000;
/// How long request latches live (ms): `Client::latch_ttl_ms` for that command timeout.
pub(super) const LATCH_MS: u64 = crate::client::latch_ttl_ms_for(COMMAND_TIMEOUT_MS);
/// How long a latched request is resent (ms): `Client::resolve_window` for it.
pub(super) const RESEND_MS: u64 = crate::client::resolve_window_for(
    Duration::from_millis(LATCH_MS),
    Duration::from_millis(COMMAND_TIMEOUT_MS),
)
.as_millis() as u64;

/// Until when (ms) a client counts on a lease of `lease_ms` granted or extended by an attempt
/// that began at `from_ms`: the lease less the library's drift margin, as the engine counts it.
pub(super) fn valid_until(from_ms: u64, lease_ms: u64) -> u64 {
    let lease = Duration::from_millis(lease_ms);
    from_ms + lease.saturating_sub(crate::keys::drift(lease)).as_millis() as u64
}

/// Run `inv` as the connection layer sends it: the fast path on a first send (`fast`), and
/// the full script when there is none or it answered nil. The reply in the full script's
/// shape.
pub(super) fn send(ks: &mut Keyspace, inv: &Invocation<'_>, fast: bool) -> Reply {
    if fast {
        if let Some((script, keys, args)) = inv.fast_parts() {
            let r = deploy::evalsha(ks, &trace::text(script), &keys, &args);
            trace::sent(script, true, &keys, &args, &r, ks);
            if r != Reply::Nil {
                return Reply::from_value(inv.fast_shape(r.to_value()));
            }
        }
    }
    let (script, keys, args) = inv.parts();
    let r = deploy::evalsha(ks, &trace::text(script), &keys, &args);
    trace::sent(script, false, &keys, &args, &r, ks);
    r
}

/// A reply as the engine reads an acquire's: strings.
pub(super) fn strings(r: &Reply) -> Option<Vec<String>> {
    match r {
        Reply::Array(a) => a
            .iter()
            .map(|x| match x {
                Reply::Int(i) => Some(i.to_string()),
                Reply::Bulk(b) => String::from_utf8(b.clone()).ok(),
                Reply::Nil => Some(String::new()),
                _ => None,
            })
            .collect(),
        Reply::Int(i) => Some(vec![i.to_string()]),
        _ => None,
    }
}

/// Send a plain command.
pub(super) fn command(ks: &mut Keyspace, cmd: &redis::Cmd) -> Reply {
    let argv: Vec<Vec<u8>> = cmd
        .args_iter()
        .map(|a| match a {
            redis::Arg::Simple(b) => b.to_vec(),
            _ => b"0".to_vec(),
        })
        .collect();
    ks.exec(&argv)
}

/// Forget what no one can see any more: keys whose deadline has passed (the server expires
/// them lazily) and the messages published (a waiter may attempt at any step anyway), so
/// that states that differ only there are one.
pub(super) fn settle(ks: &mut Keyspace) {
    let now = ks.now_ms();
    ks.keys
        .retain(|_, e| e.expires_at.is_none_or(|at| at > now));
    ks.published.clear();
}

/// The first of `deadlines` (ms) after now, or a key's deadline, whichever comes first.
pub(super) fn next_deadline(
    ks: &Keyspace,
    deadlines: impl IntoIterator<Item = u64>,
) -> Option<u64> {
    let now = ks.now_ms();
    ks.keys
        .values()
        .filter_map(|e| e.expires_at)
        .chain(deadlines)
        .filter(|at| *at > now)
        .min()
}

/// Move the clock to the first of `deadlines` (ms) after now, or a key's deadline, whichever
/// comes first; `None` when nothing is ahead.
pub(super) fn tick(ks: &mut Keyspace, deadlines: impl IntoIterator<Item = u64>) -> Option<()> {
    let next = next_deadline(ks, deadlines)?;
    ks.now_us = next * 1000;
    settle(ks);
    Some(())
}

/// Every live key other than `main` is a helper key of a known kind whose TTL is set and at
/// most what `documented` gives its name (`None`: a key nobody documents).
pub(super) fn no_leak(
    ks: &Keyspace,
    main: &[&[u8]],
    documented: impl Fn(&[u8]) -> Option<u64>,
) -> bool {
    let now = ks.now_ms();
    ks.keys.iter().all(|(k, e)| {
        if e.expires_at.is_some_and(|at| at <= now) || main.contains(&k.as_slice()) {
            return true;
        }
        match (e.expires_at, documented(k)) {
            (Some(at), Some(ttl)) => at - now <= ttl,
            _ => false,
        }
    })
}

/// The integer a string key holds (0 when it is missing or not an integer).
pub(super) fn count(ks: &Keyspace, key: &[u8]) -> i64 {
    match ks.entry(key).map(|e| &e.val) {
        Some(super::keyspace::Val::Str(s)) => std::str::from_utf8(s)
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0),
        _ => 0,
    }
}

/// Whether the deeper run is asked for (`DISTLOCK_MODEL_DEEP=1`): larger bounds.
pub(super) fn deep() -> bool {
    std::env::var("DISTLOCK_MODEL_DEEP").is_ok_and(|v| v == "1")
}

/// Explore `model` breadth first and print the states explored; a violated property ends
/// the search early (a planted bug is found in seconds), without one every state is explored.
pub(super) fn explore<M>(what: &str, model: M) -> impl Checker<M>
where
    M: Model + Send + Sync + 'static,
    M::State: std::fmt::Debug + std::hash::Hash + Send + Sync + Clone + PartialEq,
    M::Action: std::fmt::Debug + Send + Sync + Clone + PartialEq,
{
    let started = std::time::Instant::now();
    let checker = model
        .checker()
        .finish_when(stateright::HasDiscoveries::AnyFailures)
        .spawn_bfs()
        .join();
    eprintln!(
        "model check, {what}: {} states ({} unique), depth {}, {:.1} s",
        checker.state_count(),
        checker.unique_state_count(),
        checker.max_depth(),
        started.elapsed().as_secs_f64()
    );
    checker
}

/// Check `model` ([`explore`]), and fail on a property violated (its path printed first as
/// a timeline and in replayable form).
pub(super) fn check<M>(what: &str, model: M)
where
    M: Model + Send + Sync + 'static,
    M::State: std::fmt::Debug + std::hash::Hash + Send + Sync + Clone + PartialEq + Traced,
    M::Action: std::fmt::Debug + Send + Sync + Clone + PartialEq,
{
    let checker = explore(what, model);
    trace::report(&checker);
    checker.assert_properties();
}
