//! Redisson's `RFairLock`: the plain lock's hash plus a FIFO queue
//! (`redisson_lock_queue:{key}`) and Redisson's waiter scores (`redisson_lock_timeout:{key}`,
//! Redisson's arithmetic, shared with Java waiters), with distlock waiters' liveness deadlines
//! beside them (`distlock_fair_liveness:{key}`, server time); each waiter is woken on its own
//! channel.

use std::time::Duration;

use super::{AcquireCall, Mode, Names, Queue, RawLock, ReleaseCall, Resend};
use crate::conn::pubsub::Wake;
use crate::holds::ReleaseRequest;
use crate::keys::{self, HOLDER_FIELD, TOKEN_FIELD, UNLOCK_MESSAGE};
use crate::lock::Owner;
use crate::scripts;

/// The fair (FIFO) lock; a queued waiter stays alive by re-attempting within `liveness`.
#[derive(Debug)]
pub(crate) struct Fair {
    pub(crate) liveness: Duration,
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

/// `fair_leave.lua`: leave the queue, or with `force` delete the lock and wake the head.
fn leave_invocation(
    n: &Names,
    owner: &str,
    force: bool,
    wait_ms: u64,
) -> crate::scripts::Invocation<'static> {
    let mut inv = scripts::FAIR_LEAVE.prepare_invoke();
    inv.key(&n.key)
        .key(queue_key(n))
        .key(timeout_key(n))
        .key(liveness_key(n))
        .arg(owner)
        .arg(if force { "1" } else { "0" })
        .arg(&n.channel)
        .arg(wait_ms);
    inv
}

impl RawLock for Fair {
    fn kind(&self) -> &'static str {
        "fair_lock"
    }

    fn channel(&self, key: &str) -> String {
        keys::lock_channel(key)
    }

    fn wake(&self, n: &Names, owner: &Owner) -> (String, Wake) {
        (format!("{}:{}", n.channel, owner.as_str()), Wake::OneOnZero)
    }

    fn recheck(&self) -> Duration {
        self.liveness / 3
    }

    fn acquire(
        &self,
        n: &Names,
        c: &AcquireCall<'_>,
    ) -> (crate::scripts::Invocation<'static>, Resend) {
        let mut inv = scripts::FAIR_ACQUIRE.prepare_invoke();
        inv.key(&n.key)
            .key(queue_key(n))
            .key(timeout_key(n))
            .key(&n.counter)
            .key(liveness_key(n))
            .arg(c.lease_ms)
            .arg(c.owner.as_str())
            .arg(self.liveness.as_millis() as u64)
            .arg(c.mode.short())
            .arg(if c.wait_ms > 0 { "1" } else { "0" })
            .arg(TOKEN_FIELD)
            .arg(&n.channel)
            .arg(c.floor)
            .arg(c.wait_ms)
            .arg(HOLDER_FIELD)
            .arg(c.holder);
        (inv, nested_sent_once(c.mode))
    }

    fn release(&self, n: &Names, c: &ReleaseCall<'_>) -> ReleaseRequest {
        ReleaseRequest::new(c.context.clone(), &scripts::FAIR_RELEASE)
            .key(&n.key)
            .key(queue_key(n))
            .key(timeout_key(n))
            .key(c.latch)
            .key(liveness_key(n))
            .arg(UNLOCK_MESSAGE)
            .arg(c.lease_ms)
            .arg(c.owner.as_str())
            .arg(c.latch_ms)
            .arg(&n.channel)
    }

    fn leave(
        &self,
        n: &Names,
        owner: &str,
        wait_ms: u64,
        _give_back: bool,
        _floor: &str,
    ) -> Option<crate::scripts::Invocation<'static>> {
        Some(leave_invocation(n, owner, false, wait_ms))
    }

    fn force_unlock(&self, n: &Names) -> crate::scripts::Invocation<'static> {
        leave_invocation(n, "", true, 0)
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
