//! Redisson's `RLock`: a hash `owner → hold count` with the fencing token and the holder
//! metadata beside, woken by `0` on `redisson_lock__channel:{key}` (one waiter per message);
//! plus distlock's direct hand-off queue ([`Handoff`]): waiters queue beside the lock and a
//! release grants the lock to the first live one, announced on its client's grant channel.

use std::time::Duration;

use super::{fast_acquire, fast_release, AcquireCall, Mode, Names, RawLock, ReleaseCall, Resend};
use crate::conn::pubsub::Wake;
use crate::keys::{self, UNLOCK_MESSAGE};
use crate::lock::DEFAULT_FAIR_LIVENESS;
use crate::lock::{Handoff, Owner};
use crate::scripts;

/// The plain reentrant lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Plain {
    pub(crate) handoff: Handoff,
    /// How long a queued waiter stays live without a new attempt.
    pub(crate) liveness: Duration,
}

impl Default for Plain {
    fn default() -> Plain {
        Plain {
            handoff: Handoff::Fifo,
            liveness: DEFAULT_FAIR_LIVENESS,
        }
    }
}

impl Plain {
    /// Whether its waiters queue for direct hand-off (any setting but `Off`).
    pub(crate) fn queues(&self) -> bool {
        self.handoff != Handoff::Off
    }

    /// lock_acquire.lua's hand-off policy argument.
    fn policy(&self) -> String {
        match self.handoff {
            Handoff::Fifo => "fifo".into(),
            Handoff::Retakes(n) => format!("retake:{n}"),
            Handoff::Off => "off".into(),
        }
    }

    /// lock_release.lua's bound on re-takes: `''` hands off at every release.
    fn retakes(&self) -> String {
        match self.handoff {
            Handoff::Retakes(n) => n.to_string(),
            _ => String::new(),
        }
    }
}

impl RawLock for Plain {
    fn kind(&self) -> &'static str {
        crate::kind::LOCK
    }

    fn channel(&self) -> fn(&str) -> String {
        keys::lock_channel
    }

    fn wake(&self, n: &Names, _owner: &Owner) -> (String, Wake) {
        (n.channel().to_string(), Wake::OneOnZero)
    }

    fn queues_only_to_hand_off(&self) -> bool {
        true
    }

    fn handoff_liveness(&self) -> Option<Duration> {
        self.queues().then_some(self.liveness)
    }

    fn recheck(&self) -> Duration {
        // Waiters nap at most the holder's PTTL; a waiter queued for hand-off also renews
        // its liveness deadline (the engine's request shortens this for it).
        keys::MAX_DURATION
    }

    fn acquire(&self, n: &Names, c: &AcquireCall<'_>) -> crate::scripts::Invocation<'static> {
        // A fresh owner's request needs no latch: pass the lock key in its place (it is
        // never read then, and shares the lock's cluster slot).
        let latch = match c.mode {
            Mode::New => std::borrow::Cow::Borrowed(&*n.key),
            _ => keys::acquire_latch(&n.key, c.request_id).into(),
        };
        // Only a fresh owner that waits joins the queue: the hand-off's owner is that
        // request's alone.
        let entry = c
            .handoff_initial_ms(self.liveness)
            .map(|initial| {
                let liveness = self.liveness.as_millis();
                format!("{liveness};{initial};{}", c.client_id)
            })
            .unwrap_or_default();
        let mut inv = scripts::LOCK_ACQUIRE.prepare_invoke();
        inv.key(&*n.key)
            .key(&n.counter)
            .key(&*latch)
            .key(keys::redisson_fenced_token(&n.key))
            .key(keys::lock_queue(&n.key))
            .key(keys::lock_waiters(&n.key))
            .arg(c.lease_ms)
            .arg(c.owner.as_str())
            .arg(c.mode.as_str())
            .arg(c.latch_ms)
            .arg(c.floor)
            .arg(c.holder)
            .arg(if c.handoff {
                self.policy()
            } else {
                "off".into()
            })
            .arg(entry);
        inv
    }

    fn resend(&self, mode: Mode) -> Resend {
        // A fresh owner recognises its own resend by its field, however late; a re-entry's
        // latch answers a resend while it lives.
        if mode == Mode::New {
            Resend::Always
        } else {
            Resend::Latched
        }
    }

    fn acquire_fast(&self, n: &Names, c: &AcquireCall<'_>) -> Option<crate::scripts::FastPath> {
        // The common case (a free lock nobody queues for): lock_acquire_fast.lua.
        fast_acquire(
            &scripts::LOCK_ACQUIRE_FAST,
            n,
            c,
            c.owner.as_str(),
            true,
            true,
        )
    }

    fn release(&self, n: &Names, c: &ReleaseCall<'_>) -> crate::scripts::Invocation<'static> {
        let mut inv = scripts::LOCK_RELEASE.prepare_invoke();
        inv.key(&*n.key)
            .key(n.channel())
            .key(c.latch)
            .key(&n.counter)
            .key(keys::redisson_fenced_token(&n.key))
            .key(keys::lock_queue(&n.key))
            .key(keys::lock_waiters(&n.key))
            .arg(c.lease_ms)
            .arg(c.owner.as_str())
            .arg(c.latch_ms)
            .arg(c.floor)
            .arg(self.retakes());
        inv
    }

    fn release_fast(&self, n: &Names, c: &ReleaseCall<'_>) -> Option<crate::scripts::FastPath> {
        // The common case: the last hold, nobody queued (lock_release_fast.lua).
        fast_release(&scripts::LOCK_RELEASE_FAST, n, c, c.owner.as_str())
    }

    fn reentry_latched(&self) -> bool {
        true
    }

    fn leave(
        &self,
        n: &Names,
        owner: &str,
        _wait_ms: u64,
        give_back: bool,
        floor: &str,
    ) -> Option<crate::scripts::Invocation<'static>> {
        if !self.queues() {
            return None;
        }
        let mut inv = scripts::LOCK_LEAVE.prepare_invoke();
        inv.key(&*n.key)
            .key(n.channel())
            .key(&n.counter)
            .key(keys::redisson_fenced_token(&n.key))
            .key(keys::lock_queue(&n.key))
            .key(keys::lock_waiters(&n.key))
            .arg(owner)
            .arg(if give_back { "1" } else { "0" })
            .arg(floor);
        Some(inv)
    }

    fn leave_gives_back(&self) -> bool {
        self.queues()
    }

    fn force_unlock(&self, n: &Names, _floor: &str) -> crate::scripts::Invocation<'static> {
        super::force_unlock_invocation(n, UNLOCK_MESSAGE, "lock")
    }

    fn queue(&self, n: &Names) -> Option<super::Queue> {
        Some(super::Queue::HandoffWaiters(keys::lock_queue(&n.key)))
    }
}
