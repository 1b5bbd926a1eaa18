//! The raw layer of the lock family, in the manner of lock_api's raw traits: what differs
//! between a plain, a fair, a read and a write lock — which script each step runs with which
//! keys, the hash field an owner holds, where waiters are woken, how a hold is renewed —
//! behind one trait, [`RawLock`], with one implementation per kind. The engine
//! (`super::engine`) drives every kind the same way: the acquire loop, the cancel guard,
//! grants, re-entry, release, renewal, status. It builds requests here and sends them there;
//! nothing in this layer does I/O.

mod fair;
mod plain;
mod reply;
mod rw;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::conn::pubsub::Wake;
use crate::error::NotHeldReason;
use crate::lock::Owner;
pub(crate) use crate::watchdog::Renewal;

pub(crate) use fair::Fair;
pub(crate) use plain::Plain;
pub(crate) use reply::Texts;
pub(crate) use rw::{Read, Write};

/// Re-check interval while the holder's key has no TTL (a foreign lock set without expiry),
/// and of waiting readers.
pub(crate) const NO_TTL_RECHECK: Duration = Duration::from_secs(1);

/// The names one lock's scripts work on.
#[derive(Debug, Clone)]
pub(crate) struct Names {
    /// The name given by the user.
    pub(crate) name: String,
    /// Key prefix + name (shared with the client's leases: a grant's entry there keeps it
    /// without a copy).
    pub(crate) key: Arc<str>,
    /// The kind's wake channel ([`RawLock::channel`]), named when first needed (an
    /// uncontended acquire and release never need it).
    channel: std::sync::OnceLock<String>,
    channel_of: fn(&str) -> String,
    /// The fencing counter of the key's hash slot.
    pub(crate) counter: String,
}

impl Names {
    /// The names of the lock `name` of the kind `raw`, its key `<key_prefix><name>`.
    pub(crate) fn new(raw: &dyn RawLock, key_prefix: &str, name: String) -> Names {
        let key = crate::keys::concat_shared(&[key_prefix, &name]);
        Names {
            channel: std::sync::OnceLock::new(),
            channel_of: raw.channel(),
            counter: crate::keys::fencing_counter(key_prefix, &key),
            name,
            key,
        }
    }

    /// The kind's wake channel of this lock ([`RawLock::channel`]).
    pub(crate) fn channel(&self) -> &str {
        self.channel.get_or_init(|| (self.channel_of)(&self.key))
    }
}

impl AsRef<str> for Names {
    /// The name given by the user.
    fn as_ref(&self) -> &str {
        &self.name
    }
}

/// One acquire attempt, as the engine asks for it.
pub(crate) struct AcquireCall<'a> {
    pub(crate) owner: &'a Owner,
    pub(crate) mode: Mode,
    pub(crate) lease_ms: u64,
    /// Re-entrant modes: the request id of the acquire latch.
    pub(crate) request_id: &'a str,
    /// The caller's whole wait in ms, 0 for a single attempt: a refused waiter joins the
    /// kind's wait queue when it is not 0 (the fair lock also scores it with it, as Redisson
    /// scores its waiters).
    pub(crate) wait_ms: u64,
    pub(crate) latch_ms: u64,
    /// The fencing floor (legacy server-wide counter read at connect).
    pub(crate) floor: &'a str,
    /// The client's holder metadata `<app>;<host>;<pid>`, recorded with a grant
    /// to a new holder by the kinds that keep a holder field (plain and fair locks).
    pub(crate) holder: &'a str,
    /// The client's id (the first part of its owners): where a hand-off to this waiter is
    /// announced.
    pub(crate) client_id: &'a str,
    /// Whether a waiting fresh owner takes direct hand-offs (plain lock with hand-off on, fair
    /// lock; where the deployment does not confirm grants by `WAIT`).
    pub(crate) handoff: bool,
    /// Whether to try the kind's fast path first (the lock handle met no contention lately).
    pub(crate) fast: bool,
    /// The client's estimate of the server's clock in microseconds, for the plain lock's fast
    /// path (`ServerClock`, one server only); `None`: the script reads `TIME`.
    pub(crate) clock: Option<u64>,
}

impl AcquireCall<'_> {
    /// The initial lease in ms a direct hand-off grants this request (its lease, at most
    /// `liveness`), when it takes hand-offs: a fresh owner that waits, where the lock and the
    /// deployment hand off. `None` otherwise.
    pub(crate) fn handoff_initial_ms(&self, liveness: Duration) -> Option<u64> {
        (self.handoff && self.mode == Mode::New && self.wait_ms > 0)
            .then(|| self.lease_ms.min(liveness.as_millis() as u64).max(1))
    }
}

/// One release of one hold, as the engine asks for it.
pub(crate) struct ReleaseCall<'a> {
    pub(crate) owner: &'a Owner,
    pub(crate) lease_ms: u64,
    /// The unlock latch key of this request; empty for [`RawLock::release_fast`], which has
    /// none (the latch is named only for the full call).
    pub(crate) latch: &'a str,
    pub(crate) latch_ms: u64,
    /// The token floor of a hand-off to a waiter ([`crate::conn::Backend::grant_floor`]).
    pub(crate) floor: &'a str,
    /// Whether to try the kind's fast path first (the lock handle met no contention lately).
    pub(crate) fast: bool,
}

/// A fast acquire's token (`*_acquire_fast.lua`) in its full script's reply shape:
/// `{1, 1, token}`.
fn granted_once(token: redis::Value) -> redis::Value {
    redis::Value::Array(vec![redis::Value::Int(1), redis::Value::Int(1), token])
}

/// The fast path of an acquire (`script`, one of the `*_acquire_fast.lua`: the lock key and the
/// slot's counter; the lease, the owner's `field`, the holder metadata where the kind records a
/// holder, the client's clock estimate (`''` for none) where the script takes one (`clock`:
/// the plain lock's), the floor unless it is `0`), for a fresh owner's attempt on a lock handle that met no
/// contention lately; `None` otherwise. The floor carries the deployment's generation, if any
/// (`fast.lua`'s `fast_token` handles each in its common case).
pub(crate) fn fast_acquire(
    script: &'static crate::scripts::Script,
    n: &Names,
    c: &AcquireCall<'_>,
    field: &str,
    holder: bool,
    clock: bool,
) -> Option<crate::scripts::FastPath> {
    if !c.fast || c.mode != Mode::New {
        return None;
    }
    let mut fast = script.prepare_invoke();
    fast.key(&*n.key).key(&n.counter).arg(c.lease_ms).arg(field);
    if holder {
        fast.arg(c.holder);
    }
    if clock {
        match c.clock {
            Some(us) => fast.arg(us),
            None => fast.arg(""),
        };
    }
    if c.floor != "0" {
        fast.arg(c.floor);
    }
    Some(crate::scripts::FastPath::new(fast, granted_once))
}

/// The fast path of a release (`script`, one of the `*_release_fast.lua`: the lock key, the
/// owner's `field`), for a lock handle that met no contention lately; `None` otherwise.
pub(crate) fn fast_release(
    script: &'static crate::scripts::Script,
    n: &Names,
    c: &ReleaseCall<'_>,
    field: &str,
) -> Option<crate::scripts::FastPath> {
    if !c.fast {
        return None;
    }
    let mut fast = script.prepare_invoke();
    fast.key(&*n.key).arg(field);
    Some(crate::scripts::FastPath::new(fast, |v| v))
}

/// How an acquire request may be sent again after a connection failure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Resend {
    /// Whenever: the script recognises a resend of itself (a fresh owner finds its field).
    Always,
    /// Within the latch window; past it the outcome is unknown and the engine undoes it
    /// through the latch.
    Latched,
    /// Never: nothing tells a resend apart (the extra hold, if any, ends with the lease).
    Never,
}

/// What one acquire attempt found.
#[derive(Debug)]
pub(crate) enum Attempt {
    Granted {
        hold_count: u32,
        token: u128,
    },
    /// Held by another owner: its PTTL, and a token at or above the holder's where the
    /// script reports one (the plain lock: the holder's token, when it has one; the fair
    /// lock: the last token issued in the lock's slot). A hand-off message with a token at
    /// or below it was sent before this attempt.
    Held {
        pttl_ms: i64,
        holder_token: Option<u128>,
    },
}

/// Whose hold an acquire asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// A fresh owner minted for this call.
    New,
    /// A caller-given owner: grant if free, one more hold if it holds already.
    As,
    /// One more hold of an owner that holds now (re-entry, downgrade).
    Nested,
}

impl Mode {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Mode::New => "new",
            Mode::As => "as",
            Mode::Nested => "nested",
        }
    }

    /// The fair and read-write scripts know only fresh and nested requests.
    pub(crate) fn short(self) -> &'static str {
        if self == Mode::Nested {
            "nested"
        } else {
            "new"
        }
    }
}

/// The wait queue a kind keeps, for `status`.
pub(crate) enum Queue {
    /// A list of waiting owners, first in line first (fair lock).
    Waiters(String),
    /// A zset of waiting writers (read-write lock).
    WaitingWriters(String),
    /// A zset of waiting owners by arrival (plain lock's direct hand-off queue).
    HandoffWaiters(String),
}

/// What differs between the kinds of the lock family. Every method only builds requests.
pub(crate) trait RawLock: Send + Sync + fmt::Debug + 'static {
    /// The kind's name in tracing spans: `lock`, `fair_lock`, `read_lock`, `write_lock`.
    fn kind(&self) -> &'static str;

    /// How the wake channel of a lock key is named (a function of the key alone).
    fn channel(&self) -> fn(&str) -> String;

    /// The hash field `owner` holds the lock under: the owner's own string (shared, as the
    /// client's leases keep it) for every kind but the write side of a read-write lock.
    fn field(&self, owner: &Owner) -> Arc<str> {
        owner.shared()
    }

    /// Where a waiter of `owner` is woken, and how.
    fn wake(&self, n: &Names, owner: &Owner) -> (String, Wake);

    /// Whether its waiters queue only to be handed the lock (the plain lock's: where it hands
    /// nothing off, they do not queue, and leave nothing behind).
    fn queues_only_to_hand_off(&self) -> bool {
        false
    }

    /// How long a waiter queued for direct hand-off stays live without a new attempt (a
    /// hand-off grants it at most this long an initial lease); `None` when the kind (or its
    /// setting) hands off nothing.
    fn handoff_liveness(&self) -> Option<Duration> {
        None
    }

    /// Longest wait between two attempts of a waiter (liveness heartbeats, re-checks).
    fn recheck(&self) -> Duration;

    /// The acquire script call (the full script: [`RawLock::acquire_fast`] is tried first).
    fn acquire(&self, n: &Names, c: &AcquireCall<'_>) -> crate::scripts::Invocation<'static>;

    /// How an acquire of `mode` may be resent.
    fn resend(&self, mode: Mode) -> Resend {
        fair::nested_sent_once(mode)
    }

    /// The acquire's fast path (its `*_acquire_fast.lua`, through [`fast_acquire`]), `None`
    /// when the call has none: the engine then builds [`RawLock::acquire`] only when the fast
    /// path answers nil.
    fn acquire_fast(&self, n: &Names, c: &AcquireCall<'_>) -> Option<crate::scripts::FastPath>;

    /// The script call that releases one hold (the full script: [`RawLock::release_fast`]
    /// is tried first).
    fn release(&self, n: &Names, c: &ReleaseCall<'_>) -> crate::scripts::Invocation<'static>;

    /// The release's fast path (its `*_release_fast.lua`, through [`fast_release`]), `None`
    /// when the call has none.
    fn release_fast(&self, n: &Names, c: &ReleaseCall<'_>) -> Option<crate::scripts::FastPath>;

    /// Whether this kind's re-entries carry an acquire latch (and so can be undone by it): the
    /// plain lock's script keeps one (`Lock::acquire_as` and re-entry); the others re-enter
    /// through their guards without one.
    fn reentry_latched(&self) -> bool {
        false
    }

    /// What renews a hold of `owner`.
    fn renewal(&self, _n: &Names, _owner: &Owner) -> Renewal {
        Renewal::Hash
    }

    /// The call that takes a timed-out or cancelled waiter out of the kind's queue (its whole
    /// wait was `wait_ms`); `None` when the kind has none. `give_back`: the owner is fresh
    /// (minted for the wait), so a hold a direct hand-off gave it is given back too (to the
    /// next waiter, with a token issued from `floor`).
    fn leave(
        &self,
        _n: &Names,
        _owner: &str,
        _wait_ms: u64,
        _give_back: bool,
        _floor: &str,
    ) -> Option<crate::scripts::Invocation<'static>> {
        None
    }

    /// Whether [`RawLock::leave`] with `give_back` also gives back every hold of the owner
    /// (the plain lock's hand-off queue), so that nothing is left to give back after it.
    fn leave_gives_back(&self) -> bool {
        false
    }

    /// The call that deletes the lock whoever holds it and wakes its waiters (or hands the
    /// lock to the head waiter, with a token issued from `floor`); it answers 1 when
    /// something was deleted.
    fn force_unlock(&self, n: &Names, floor: &str) -> crate::scripts::Invocation<'static>;

    /// The queue `status` reports.
    fn queue(&self, _n: &Names) -> Option<Queue> {
        None
    }
}

/// An acquire script's reply (read as strings: the token may not fit an integer): a grant, a
/// refusal with the holder's PTTL, or (as `Err`) a code for the caller to interpret (not
/// held, would deadlock, cancelled; `None`: malformed).
pub(crate) fn parse_attempt<S: AsRef<str>>(r: &[S]) -> std::result::Result<Attempt, Option<i64>> {
    match r {
        [one, count, token] if one.as_ref() == "1" => {
            match (count.as_ref().parse::<u32>(), parse_token(token.as_ref())) {
                (Ok(count), Some(token)) if count > 0 => Ok(Attempt::Granted {
                    hold_count: count,
                    token,
                }),
                _ => Err(None),
            }
        }
        // A third element is a hint: the holder's token or the slot counter's value (a
        // Cluster counter's replication ID is read past); '' or anything else that is no
        // token gives none.
        [zero, pttl, seen @ ..] if zero.as_ref() == "0" && seen.len() <= 1 => pttl
            .as_ref()
            .parse()
            .map(|pttl_ms| Attempt::Held {
                pttl_ms,
                holder_token: seen.first().and_then(|s| parse_token(s.as_ref())),
            })
            .map_err(|_| None),
        [code] => Err(code.as_ref().parse().ok()),
        _ => Err(None),
    }
}

/// The call that extends `owner`'s hold of the lock `n` to `lease_ms` ms (one renewal; the
/// watchdog batches many): `lock_renew_one.lua` for a plain, fair or write hold (the hash
/// mode the kind asks for), `rw_read_renew.lua` for a read hold. Its reply, an integer or an
/// array of one, is read by [`renew_reply`].
pub(crate) fn renew_call(
    raw: &dyn RawLock,
    n: &Names,
    owner: &Owner,
    lease_ms: u64,
) -> crate::scripts::Invocation<'static> {
    match raw.renewal(n, owner) {
        Renewal::Read { prefix } => {
            let mut inv = crate::scripts::RW_READ_RENEW.prepare_invoke();
            inv.key(&*n.key)
                .arg(lease_ms)
                .arg(owner.as_str())
                .arg(prefix);
            inv
        }
        hash @ (Renewal::Hash | Renewal::Write) => {
            renew_one_call(&n.key, lease_ms, &raw.field(owner), hash.hash_mode())
        }
    }
}

/// `lock_renew_one.lua`'s call: renew the hold of `field` on `key` to `lease_ms` ms, the hash
/// being of the kind `hash_mode` names ([`Renewal::hash_mode`]: `Some("")` a plain or fair
/// lock, sent as no argument; `Some("write")` a write hold).
pub(crate) fn renew_one_call(
    key: &str,
    lease_ms: u64,
    field: &str,
    hash_mode: Option<&str>,
) -> crate::scripts::Invocation<'static> {
    let mut inv = crate::scripts::LOCK_RENEW_ONE.prepare_invoke();
    inv.key(key).arg(lease_ms).arg(field);
    if let Some(mode) = hash_mode.filter(|m| !m.is_empty()) {
        inv.arg(mode);
    }
    inv
}

/// A renewal's code from its reply: `lock_renew_one.lua`'s integer, or the first element of
/// `rw_read_renew.lua`'s array; `None` for anything else.
pub(crate) fn renew_reply(v: &redis::Value) -> Option<i64> {
    match v {
        redis::Value::Int(code) => Some(*code),
        redis::Value::Array(codes) if codes.len() == 1 => match codes[0] {
            redis::Value::Int(code) => Some(code),
            _ => None,
        },
        _ => None,
    }
}

/// The call that reads `owner`'s hold of the lock at `key` (`lock_inspect.lua`): its hold
/// count, the lock's fencing token and PTTL ([`parse_inspect`]).
pub(crate) fn inspect_call(
    raw: &dyn RawLock,
    key: &str,
    owner: &Owner,
) -> crate::scripts::Invocation<'static> {
    let mut inv = crate::scripts::LOCK_INSPECT.prepare_invoke();
    inv.key(key)
        .arg(&*raw.field(owner))
        .arg(crate::keys::TOKEN_FIELD);
    inv
}

/// `lock_inspect.lua`'s reply: (hold count, token, PTTL ms); a lock held by another kind or
/// owner's hash as `(0, 0, HELD_BY_OTHER)`; `None` for anything else.
pub(crate) fn parse_inspect(r: &[String]) -> Option<(u32, u128, i64)> {
    use crate::scripts::reply::HELD_BY_OTHER;
    match r {
        [code] if code.parse() == Ok(HELD_BY_OTHER) => Some((0, 0, HELD_BY_OTHER)),
        [count, token, pttl] => match (count.parse(), parse_token(token), pttl.parse()) {
            (Ok(count), Some(token), Ok(pttl)) => Some((count, token, pttl)),
            _ => None,
        },
        _ => None,
    }
}

/// A token as the scripts write it: `<sequence>`, or `<generation>:<sequence>` (generation
/// above 0), both decimal; the value is `generation × 2^64 + sequence`. A Cluster's fencing
/// counter adds `@<replication ID>` (hex) after the token, which is ignored. `None` when it is
/// neither, or the sequence is not below 2^64.
pub(crate) fn parse_token(s: &str) -> Option<u128> {
    // The common token, a bare sequence (no generation, no replication ID: a single
    // server's), read in one pass; `u64`'s parse refuses any ':' or '@', and such a token is
    // read below (as the slow path alone would read a bare one: the same digits accepted).
    if let Ok(sequence) = s.parse::<u64>() {
        return Some(u128::from(sequence));
    }
    let s = match s.split_once('@') {
        Some((token, id)) if !id.is_empty() && id.bytes().all(|b| b.is_ascii_hexdigit()) => token,
        Some(_) => return None,
        None => s,
    };
    let (generation, sequence) = match s.split_once(':') {
        Some((g, q)) => (g.parse::<u64>().ok()?, q),
        None => (0, s),
    };
    let sequence = sequence.parse::<u64>().ok()?;
    Some((u128::from(generation) << 64) | u128::from(sequence))
}

/// The scripts' not-held codes.
pub(crate) fn not_held_reason(code: i64) -> Option<NotHeldReason> {
    match code {
        crate::scripts::reply::GONE => Some(NotHeldReason::Gone),
        crate::scripts::reply::HELD_BY_OTHER => Some(NotHeldReason::HeldByOther),
        _ => None,
    }
}

/// The invocation of `lock_force_unlock.lua` with a wake message, for the kind `kind`
/// (`lock` or `rw`: a lock hash of the other kind is refused).
fn force_unlock_invocation(
    n: &Names,
    message: &str,
    kind: &str,
) -> crate::scripts::Invocation<'static> {
    let mut inv = crate::scripts::LOCK_FORCE_UNLOCK.prepare_invoke();
    inv.key(&*n.key).key(n.channel()).arg(message).arg(kind);
    inv
}

#[cfg(test)]
mod tests {
    use super::parse_token;

    #[test]
    fn tokens_and_counters_parse_with_and_without_a_replication_id() {
        assert_eq!(parse_token("42"), Some(42));
        assert_eq!(parse_token("3:42"), Some((3 << 64) | 42));
        assert_eq!(
            parse_token("3:42@0a1b2c3d4e5f60718293a4b5c6d7e8f901234567"),
            Some((3 << 64) | 42)
        );
        for bad in [
            "",
            "x",
            "3:",
            ":4",
            "3:42@",
            "3:42@xyz",
            "3:42@ab@cd",
            "18446744073709551616",
        ] {
            assert_eq!(parse_token(bad), None, "{bad:?}");
        }
        // Bare sequences (read in one pass) as `u64`'s parse reads them.
        for s in [
            "0",
            "007",
            "1764400000000001",
            "9999999999999999999",
            "18446744073709551615",
            "+5",
        ] {
            assert_eq!(
                parse_token(s),
                s.parse::<u64>().ok().map(u128::from),
                "{s:?}"
            );
        }
    }
}
