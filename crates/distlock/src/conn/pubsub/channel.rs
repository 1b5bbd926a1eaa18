//! The local end of one subscribed channel ([`Channel`]), and one waiter's interest in the
//! hand-offs made to its owner on a grant channel ([`GrantWatch`]).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::{watch, Notify};

use super::wake::{HandedOff, Handler, Wake};

/// Where one waiter's hand-off is delivered.
#[derive(Debug, Default)]
pub(super) struct GrantSlot {
    pub(super) handed: Mutex<Option<HandedOff>>,
    pub(super) notify: Notify,
}

/// One waiter's interest in hand-offs to its owner on a grant channel; dropping it stops
/// delivery (a later hand-off message is dropped: the leave gives that grant back).
pub(crate) struct GrantWatch {
    pub(super) channel: Arc<Channel>,
    pub(super) owner: String,
    pub(super) slot: Arc<GrantSlot>,
}

impl GrantWatch {
    /// A hand-off delivered and not taken yet.
    pub(crate) fn take(&self) -> Option<HandedOff> {
        self.slot.handed.lock().unwrap().take()
    }

    /// Wait for a hand-off to this owner.
    ///
    /// # Cancel safety
    /// Cancel safe: a hand-off delivered meanwhile stays for the next call or [`take`](Self::take).
    pub(crate) async fn wait(&self) -> HandedOff {
        loop {
            if let Some(h) = self.take() {
                return h;
            }
            self.slot.notify.notified().await;
        }
    }
}

impl Drop for GrantWatch {
    fn drop(&mut self) {
        let mut grants = self.channel.grants.lock().unwrap();
        if grants
            .get(&self.owner)
            .is_some_and(|s| Arc::ptr_eq(s, &self.slot))
        {
            grants.remove(&self.owner);
        }
    }
}

/// The local end of one channel: waiters wait on `notify`.
#[derive(Debug)]
pub(crate) struct Channel {
    pub(crate) notify: Notify,
    pub(super) wake: Wake,
    /// The server's ACL refused the subscription: waiters must poll.
    pub(super) denied: AtomicBool,
    /// [`Wake::Grant`]: the waiting owners' hand-off slots.
    pub(super) grants: Mutex<HashMap<String, Arc<GrantSlot>>>,
    /// [`Wake::Notice`]: what runs for each message.
    pub(super) handler: Option<Handler>,
    /// `None` until the server first answered the subscription, then whether it is usable
    /// (`Some(false)`: denied). Every local subscriber's [`Subscription::ready`](super::Subscription::ready) waits for
    /// it, not only the first's: a message published before the server subscription is
    /// active reaches nobody.
    pub(super) confirmed: watch::Sender<Option<bool>>,
}

impl Channel {
    /// Whether the server refused this subscription (waiters poll instead).
    pub(crate) fn is_denied(&self) -> bool {
        self.denied.load(Ordering::Relaxed)
    }

    /// The server answered the subscription: `usable` unless denied.
    pub(super) fn confirm(&self, usable: bool) {
        self.confirmed.send_if_modified(|c| {
            let changed = *c != Some(usable);
            *c = Some(usable);
            changed
        });
    }

    pub(super) fn wake(&self, payload: &[u8]) {
        if let Some(handler) = &self.handler {
            (handler.0)(payload);
            return;
        }
        if self.wake == Wake::Grant {
            if let Some((owner, handed)) = HandedOff::parse(payload) {
                let slot = self.grants.lock().unwrap().get(owner).cloned();
                if let Some(slot) = slot {
                    *slot.handed.lock().unwrap() = Some(handed);
                    slot.notify.notify_one();
                }
            }
            return;
        }
        if self.wake == Wake::OneOnZero && payload == b"0" {
            self.notify.notify_one();
        } else {
            self.wake_all();
        }
    }

    pub(super) fn wake_all(&self) {
        self.notify.notify_waiters();
        // Also leave a permit for a waiter that is between two attempts.
        self.notify.notify_one();
    }
}
