//! The wake-up message format: how messages wake waiters ([`Wake`]), and direct hand-offs.

use std::sync::Arc;

/// How a channel's messages wake its local waiters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wake {
    /// Locks (Redisson's `LockPubSub`): `0` wakes one waiter, anything else wakes all.
    OneOnZero,
    /// Latches and semaphores: every message wakes every waiter.
    All,
    /// A plain or fair lock's grant channel: `h;<token>;<initial lease ms>;<owner>` is a direct
    /// hand-off to the waiter of that owner, delivered to its [`GrantWatch`](super::channel::GrantWatch) only. A leased
    /// semaphore's is the same with the permit's expiry for the token and its id for the
    /// owner.
    Grant,
    /// The client's own notice channel: every message goes to the channel's handler
    /// ([`Hub::listen`](super::hub::Hub::listen)), no waiter is woken.
    Notice,
}

/// A function of a message's payload.
type OnMessage = dyn Fn(&[u8]) + Send + Sync;

/// What a [`Wake::Notice`] channel runs for each message (the payload).
#[derive(Clone)]
pub(crate) struct Handler(pub(crate) Arc<OnMessage>);

impl std::fmt::Debug for Handler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Handler")
    }
}

/// A direct hand-off announced to one waiter: a release says it granted the waiter the lock
/// (or permit). Only a claim: any client with `PUBLISH` rights on the grant channel can
/// send one, so the waiter asks the server before it takes it (see `Acquire::handed_off`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HandedOff {
    /// The fencing token (a permit's expiry), as the scripts write it: a waiter ignores a
    /// message whose token is at or below one it was refused with (stale).
    pub(crate) token: String,
}

impl HandedOff {
    /// Parse `h;<token>;<initial lease ms>;<owner>` into the owner and the hand-off.
    pub(super) fn parse(payload: &[u8]) -> Option<(&str, HandedOff)> {
        let text = std::str::from_utf8(payload).ok()?;
        let mut parts = text.splitn(4, ';');
        if parts.next()? != "h" {
            return None;
        }
        let token = parts.next()?.to_string();
        parts.next()?.parse::<u64>().ok()?;
        let owner = parts.next()?;
        Some((owner, HandedOff { token }))
    }
}
