//! Redisson's `RLock`: a hash `owner → hold count` with the fencing token and the holder
//! metadata beside, woken by `0` on `redisson_lock__channel:{key}` (one waiter per message).

use std::time::Duration;

use super::{AcquireCall, Mode, Names, RawLock, ReleaseCall, Resend};
use crate::conn::pubsub::Wake;
use crate::holds::ReleaseRequest;
use crate::keys::{self, HOLDER_FIELD, TOKEN_FIELD, UNLOCK_MESSAGE};
use crate::lock::Owner;
use crate::scripts;

/// The plain reentrant lock.
#[derive(Debug)]
pub(crate) struct Plain;

impl RawLock for Plain {
    fn kind(&self) -> &'static str {
        "lock"
    }

    fn channel(&self, key: &str) -> String {
        keys::lock_channel(key)
    }

    fn wake(&self, n: &Names, _owner: &Owner) -> (String, Wake) {
        (n.channel.clone(), Wake::OneOnZero)
    }

    fn recheck(&self) -> Duration {
        // Waiters nap at most the holder's PTTL; nothing else to re-check.
        keys::MAX_DURATION
    }

    fn acquire(
        &self,
        n: &Names,
        c: &AcquireCall<'_>,
    ) -> (crate::scripts::Invocation<'static>, Resend) {
        // A fresh owner's request needs no latch: pass the lock key in its place (it is
        // never read then, and shares the lock's cluster slot).
        let latch = match c.mode {
            Mode::New => n.key.clone(),
            _ => keys::acquire_latch(&n.key, c.request_id),
        };
        let inv = plain_acquire_invocation(
            &n.key,
            &n.counter,
            &latch,
            &keys::redisson_fenced_token(&n.key),
            c.lease_ms,
            c.owner.as_str(),
            c.mode,
            c.latch_ms,
            c.floor,
            c.holder,
        );
        // A fresh owner recognises its own resend by its field, however late; a re-entry's
        // latch answers a resend while it lives.
        let resend = if c.mode == Mode::New {
            Resend::Always
        } else {
            Resend::Latched
        };
        (inv, resend)
    }

    fn release(&self, n: &Names, c: &ReleaseCall<'_>) -> ReleaseRequest {
        ReleaseRequest::new(c.context.clone(), &scripts::LOCK_RELEASE)
            .key(&n.key)
            .key(&n.channel)
            .key(c.latch)
            .arg(UNLOCK_MESSAGE)
            .arg(c.lease_ms)
            .arg(c.owner.as_str())
            .arg(c.latch_ms)
    }

    fn acquire_as_allowed(&self) -> bool {
        true
    }

    fn final_release_unlatched(&self) -> bool {
        true
    }

    fn force_unlock(&self, n: &Names) -> crate::scripts::Invocation<'static> {
        super::force_unlock_invocation(n, UNLOCK_MESSAGE)
    }
}

/// The invocation of `lock_acquire.lua` (built on every plain acquire); `holder` is the
/// client's holder metadata (`<app>;<host>;<pid>`).
#[allow(clippy::too_many_arguments)]
pub(crate) fn plain_acquire_invocation(
    key: &str,
    counter: &str,
    latch: &str,
    fenced: &str,
    lease_ms: u64,
    owner: &str,
    mode: Mode,
    latch_ms: u64,
    floor: &str,
    holder: &str,
) -> crate::scripts::Invocation<'static> {
    let mut inv = scripts::LOCK_ACQUIRE.prepare_invoke();
    inv.key(key)
        .key(counter)
        .key(latch)
        .key(fenced)
        .arg(lease_ms)
        .arg(owner)
        .arg(mode.as_str())
        .arg(latch_ms)
        .arg(TOKEN_FIELD)
        .arg(floor)
        .arg(HOLDER_FIELD)
        .arg(holder);
    inv
}
