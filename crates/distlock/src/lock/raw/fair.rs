//! Redisson's `RFairLock`: the plain lock's hash plus a FIFO queue
//! (`redisson_lock_queue:{key}`) and Redisson's waiter scores (`redisson_lock_timeout:{key}`,
//! Redisson's arithmetic, shared with Java waiters), with distlock waiters' liveness deadlines
//! beside them (`distlock_fair_liveness:{key}`, server time); each waiter is woken on its own
//! channel. A distlock waiter that takes direct hand-offs also has an entry in
//! `distlock_fair_waiters:{key}`: a release that finds it at the head grants it the lock and
//! announces the grant on its client's grant channel, as the plain lock's hand-off does.

use std::time::Duration;

use super::{
    fast_acquire, fast_release, AcquireCall, Mode, Names, Queue, RawLock, ReleaseCall, Resend,
};
use crate::conn::pubsub::Wake;
use crate::keys;
use crate::lock::Owner;
use crate::scripts;

/// The fair (FIFO) lock; a queued waiter stays alive by re-attempting within `liveness`, and
/// takes direct hand-offs unless `handoff` is off.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Fair {
    pub(crate) liveness: Duration,
    pub(crate) handoff: bool,
}

fn queue_key(n: &Names) -> String {
    keys::prefixed("redisson_lock_queue", &n.key)
}

fn timeout_key(n: &Names) -> String {
    keys::prefixed("redisson_lock_timeout", &n.key)
}

/// The distlock waiters' liveness deadlines (distlock only; Redisson's scripts ignore it).
fn liveness_key(n: &Names) -> String {
    keys::prefixed("distlock_fair_liveness", &n.key)
}

/// `fair_leave.lua`'s second argument: what it deletes before it serves the head.
#[derive(Clone, Copy)]
enum Delete {
    /// Nothing: only leave the queue.
    Nothing,
    /// The leaving owner's hold, if it has one (a hand-off that raced the leave).
    GiveBack,
    /// The lock, whoever holds it (force unlock).
    Force,
}

/// `fair_leave.lua`: leave the queue, or delete (see [`Delete`]); then hand the free lock to
/// the head or wake it.
fn leave_invocation(
    n: &Names,
    owner: &str,
    delete: Delete,
    wait_ms: u64,
    floor: &str,
) -> crate::scripts::Invocation<'static> {
    let mut inv = scripts::FAIR_LEAVE.prepare_invoke();
    inv.key(&*n.key)
        .key(queue_key(n))
        .key(timeout_key(n))
        .key(liveness_key(n))
        .key(&n.counter)
        .key(keys::fair_waiters(&n.key))
        .arg(owner)
        .arg(match delete {
            Delete::Nothing => "0",
            Delete::GiveBack => "give-back",
            Delete::Force => "1",
        })
        .arg(n.channel())
        .arg(wait_ms)
        .arg(floor);
    inv
}

impl RawLock for Fair {
    fn kind(&self) -> &'static str {
        crate::kind::FAIR_LOCK
    }

    fn channel(&self) -> fn(&str) -> String {
        keys::lock_channel
    }

    fn wake(&self, n: &Names, owner: &Owner) -> (String, Wake) {
        (
            format!("{}:{}", n.channel(), owner.as_str()),
            Wake::OneOnZero,
        )
    }

    fn recheck(&self) -> Duration {
        self.liveness / 3
    }

    fn handoff_liveness(&self) -> Option<Duration> {
        self.handoff.then_some(self.liveness)
    }

    fn acquire(&self, n: &Names, c: &AcquireCall<'_>) -> crate::scripts::Invocation<'static> {
        let entry = c
            .handoff_initial_ms(self.liveness)
            .map(|initial| format!("{initial};{}", c.client_id))
            .unwrap_or_default();
        let mut inv = scripts::FAIR_ACQUIRE.prepare_invoke();
        inv.key(&*n.key)
            .key(queue_key(n))
            .key(timeout_key(n))
            .key(&n.counter)
            .key(liveness_key(n))
            .key(keys::fair_waiters(&n.key))
            .arg(c.lease_ms)
            .arg(c.owner.as_str())
            .arg(self.liveness.as_millis() as u64)
            .arg(c.mode.short())
            .arg(if c.wait_ms > 0 { "1" } else { "0" })
            .arg(n.channel())
            .arg(c.floor)
            .arg(c.wait_ms)
            .arg(c.holder)
            .arg(entry);
        inv
    }

    fn acquire_fast(&self, n: &Names, c: &AcquireCall<'_>) -> Option<crate::scripts::FastPath> {
        // The common case (a free lock, nobody queued): fair_acquire_fast.lua.
        fast_acquire(
            &scripts::FAIR_ACQUIRE_FAST,
            n,
            c,
            c.owner.as_str(),
            true,
            false,
        )
    }

    fn release(&self, n: &Names, c: &ReleaseCall<'_>) -> crate::scripts::Invocation<'static> {
        let mut inv = scripts::FAIR_RELEASE.prepare_invoke();
        inv.key(&*n.key)
            .key(queue_key(n))
            .key(timeout_key(n))
            .key(c.latch)
            .key(liveness_key(n))
            .key(&n.counter)
            .key(keys::fair_waiters(&n.key))
            .arg(c.lease_ms)
            .arg(c.owner.as_str())
            .arg(c.latch_ms)
            .arg(n.channel())
            .arg(c.floor);
        inv
    }

    fn release_fast(&self, n: &Names, c: &ReleaseCall<'_>) -> Option<crate::scripts::FastPath> {
        // The common case: the last hold, nobody queued (fair_release_fast.lua).
        fast_release(&scripts::FAIR_RELEASE_FAST, n, c, c.owner.as_str())
    }

    fn leave(
        &self,
        n: &Names,
        owner: &str,
        wait_ms: u64,
        give_back: bool,
        floor: &str,
    ) -> Option<crate::scripts::Invocation<'static>> {
        let delete = if give_back {
            Delete::GiveBack
        } else {
            Delete::Nothing
        };
        Some(leave_invocation(n, owner, delete, wait_ms, floor))
    }

    fn leave_gives_back(&self) -> bool {
        true
    }

    fn force_unlock(&self, n: &Names, floor: &str) -> crate::scripts::Invocation<'static> {
        leave_invocation(n, "", Delete::Force, 0, floor)
    }

    fn queue(&self, n: &Names) -> Option<Queue> {
        Some(Queue::Waiters(queue_key(n)))
    }
}

/// Fresh-owner requests of the fair and read-write scripts recognise a resend of
/// themselves; their re-entries keep no latch, so they are sent once.
pub(super) fn nested_sent_once(mode: Mode) -> Resend {
    if mode == Mode::Nested {
        Resend::Never
    } else {
        Resend::Always
    }
}
