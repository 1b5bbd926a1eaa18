//! The wake-up message format: how messages wake waiters ([`Wake`]), and direct hand-offs.

use std::sync::Arc;
use std::time::Duration;

/// How a channel's messages wake its local waiters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wake {
    /// Locks (Redisson's `LockPubSub`): `0` wakes one waiter, anything else wakes all.
    OneOnZero,
    /// Latches and semaphores: every message wakes every waiter.
    All,
    /// A plain or fair lock's grant channel: `h;<token>;<initial lease ms>;<owner>` is a direct
    /// hand-off to the waiter of that owner, delivered to its [`GrantWatch`](super::hub::GrantWatch) only. A leased
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

/// A direct hand-off announced to one waiter: a release granted it the lock, which it holds
/// already.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HandedOff {
    /// The fencing token, as the scripts write it.
    pub(crate) token: String,
    /// The initial lease the release set.
    pub(crate) initial: Duration,
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
        let initial = Duration::from_millis(parts.next()?.parse().ok()?);
        let owner = parts.next()?;
        Some((owner, HandedOff { token, initial }))
    }

    /// Whether the message was read too late to trust: less than a third of its initial lease
    /// (less drift) is left, counted from `held_since` (the start of the waiter's last attempt
    /// that found the lock or permit taken; the hand-off came after it). A queued waiter
    /// attempts at least every third of its initial lease, so a message read on time leaves
    /// two thirds of it; less means the process was paused or starved, the hand-off may have
    /// run out and gone on, and an attempt must say whether it is still the waiter's.
    pub(crate) fn read_late(&self, held_since: tokio::time::Instant) -> bool {
        let left = (held_since
            + self
                .initial
                .saturating_sub(crate::keys::drift(self.initial)))
        .saturating_duration_since(tokio::time::Instant::now());
        left < self.initial / 3
    }
}
