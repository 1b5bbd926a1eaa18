//! The values of the lock family: [`Owner`], [`FencingToken`], [`LockStatus`].

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::keys::TOKEN_FIELD;
#[cfg(doc)]
use crate::{ErrorKind, Lock};

/// Longest owner string accepted, in bytes.
const MAX_OWNER_LEN: usize = 512;

/// Who holds a lock: the hash field `<client-uuid>:<owner-id>`.
///
/// Owners are values: clone one, send it to another task, or serialize it with
/// [`Owner::as_str`] and [`Owner::parse`] to hand a held lock to another process
/// ([`Lock::adopt`]).
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Owner(Arc<str>);

impl Owner {
    pub(crate) fn from_parts(client_id: &str, n: u64) -> Owner {
        Owner(format!("{client_id}:{n}").into())
    }

    /// An owner from its string form `<client-id>:<owner-id>` (e.g. a Redisson
    /// `<uuid>:<threadId>` field).
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`] when either part is empty, the string has no `:`, is longer
    /// than 512 bytes, or is the reserved fencing-token field name.
    pub fn parse(s: &str) -> Result<Owner> {
        let valid = s.len() <= MAX_OWNER_LEN
            && s != TOKEN_FIELD
            && matches!(s.rsplit_once(':'), Some((a, b)) if !a.is_empty() && !b.is_empty());
        if !valid {
            return Err(Error::invalid(format!(
                "owner {s:?} is not of the form <client-id>:<owner-id> (at most {MAX_OWNER_LEN} bytes)"
            )));
        }
        Ok(Owner(s.into()))
    }

    /// The hash field this owner holds a lock under.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Owner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for Owner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Owner({})", self.0)
    }
}

/// A fencing token: a number issued with every grant, strictly increasing per lock name
/// across releases, expiries, a server restart from an older snapshot and a failover to a
/// replica that missed the last writes (as long as server clocks agree within the failover
/// time). Pass it with every write to the protected resource and have the resource refuse a
/// token lower than the highest it has seen: a holder that was paused past its lease is
/// then refused.
///
/// Tokens are `max(last + 1, server TIME in µs)`, kept in one counter key per cluster hash
/// slot ([`Lock::fencing_counter_key`]: strictly increasing per name, and across the names
/// of one slot, not across slots), computed by decimal-string arithmetic on the server and
/// sent as decimal strings, so they are exact over their whole range (Lua numbers are
/// doubles, exact only below 2^53). The largest token is `i64::MAX` (2^63 - 1); once the
/// counter reaches it, every grant fails with an error naming the counter, and nothing is
/// granted or written.
/// What they cannot fix: two masters that both grant during a network partition (the
/// resource still sees two increasing streams; only the later-seen lower token is refused).
///
/// On Redis Sentinel a token also carries a *generation*, the config epoch of the master that
/// issued it, which rises with every failover: the token's value is
/// `generation × 2^64 + sequence`, so every token of a promoted master is above every token of
/// the master it replaced, whatever the two servers' clocks say — and a grant made by an
/// isolated old master that still serves a stale client is ordered below the new master's.
/// On one server and on Cluster the generation is 0 and the value is the sequence. One
/// number either way: compare tokens as integers (`u128`), print them in decimal.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct FencingToken(pub u128);

impl FencingToken {
    /// The token's value: `generation × 2^64 + sequence`.
    pub fn get(self) -> u128 {
        self.0
    }

    /// The generation: the issuing master's Sentinel config epoch, 0 elsewhere.
    pub fn generation(self) -> u64 {
        (self.0 >> 64) as u64
    }

    /// The sequence within the generation (`max(last + 1, server µs)`).
    pub fn sequence(self) -> u64 {
        self.0 as u64
    }
}

impl fmt::Display for FencingToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// What [`Lock::status`] reports.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct LockStatus {
    /// The lock's name.
    pub name: String,
    /// The lock's Redis key.
    pub key: String,
    /// Owner fields (`<client-uuid>:<owner-id>`) with their hold counts; empty when free.
    pub holders: Vec<(String, u64)>,
    /// Time left on the lease; `None` when free or without TTL.
    pub ttl: Option<Duration>,
    /// The current holder's fencing token, when the holder is a distlock owner.
    pub fencing_token: Option<FencingToken>,
    /// The last token issued by the fencing counter this lock draws from
    /// ([`Lock::fencing_counter_key`]: one per cluster hash slot, shared by the names in that
    /// slot, so an upper bound of this lock's last token). Before the slot's first grant: the
    /// floor its counter will start above (the legacy server-wide counter as read at
    /// connect, 0 when there was none).
    pub fencing_counter: u128,
    /// Connections subscribed to the wake channel (`PUBSUB NUMSUB`): one per waiting client
    /// (per waiter for a fair lock, whose waiters have channels of their own).
    pub subscribers: u64,
    /// Read-write locks: `"read"` or `"write"` while held.
    pub mode: Option<String>,
    /// Fair locks: the waiting owners, first in line first.
    pub queue: Vec<String>,
    /// Read-write locks: writers waiting (new readers hold back while there are any).
    pub waiting_writers: u64,
}
