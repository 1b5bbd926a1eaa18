//! Redisson's `RReadWriteLock`: one hash with `mode`, `<owner>` → read holds and
//! `<owner>:write` → write holds, one TTL key per read hold, woken on
//! `redisson_rwlock:{key}` (every waiter per message); plus distlock's waiting-writers zset
//! (`distlock_rwlock_writers:{key}`), which makes it write-preferring, and its writers'
//! direct hand-off queue (`distlock_rwlock_queue:{key}`, `distlock_rwlock_waiters:{key}`): a
//! release that frees the lock grants the write lock to the first live queued writer and
//! announces it on the writer's client grant channel, as the plain lock's hand-off does.
//!
//! No holder field (`distlock:holder`, which plain and fair locks record with each grant;
//! [`AcquireCall::holder`] is ignored here): Redisson's read-write unlock scripts decide
//! whether to delete the hash by its field count (`HLEN == 1` after the last write hold,
//! `HLEN > 1` while read holds remain), so one more field would leave a Java client's hash
//! behind after its last release.

use std::time::Duration;

use super::{
    fast_acquire, fast_release, AcquireCall, Names, Queue, RawLock, ReleaseCall, Renewal,
    NO_TTL_RECHECK,
};
use crate::conn::pubsub::Wake;
use crate::keys::{self, UNLOCK_MESSAGE};
use crate::lock::Owner;
use crate::scripts;

/// The read side.
#[derive(Debug)]
pub(crate) struct Read;

/// The write side; a waiting writer holds new readers back while it re-attempts within
/// `liveness`, and queues for direct hand-off unless `handoff` is off.
#[derive(Debug)]
pub(crate) struct Write {
    pub(crate) liveness: Duration,
    pub(crate) handoff: bool,
}

fn rw_channel(key: &str) -> String {
    keys::prefixed("redisson_rwlock", key)
}

fn writers_key(n: &Names) -> String {
    keys::rwlock_writers(&n.key)
}

/// What a release that frees the lock needs to hand it to the first queued writer, in the
/// order the release scripts take them: the slot's fencing counter, the hand-off queue, its
/// writer entries and the waiting writers.
fn handoff_keys(n: &Names) -> [String; 4] {
    [
        n.counter.clone(),
        keys::rwlock_queue(&n.key),
        keys::rwlock_waiters(&n.key),
        writers_key(n),
    ]
}

/// The read-hold key prefix of `owner`: `{<key>}:<owner>:rwlock_timeout` (Redisson's
/// `suffixName(name, lockName) + ":rwlock_timeout"`).
fn read_prefix(n: &Names, owner: &Owner) -> String {
    format!("{}:rwlock_timeout", keys::suffixed(&n.key, owner.as_str()))
}

/// `lock_force_unlock.lua` with message `1`: wake every reader and writer.
fn force_unlock(n: &Names) -> crate::scripts::Invocation<'static> {
    super::force_unlock_invocation(n, "1", "rw")
}

impl RawLock for Read {
    fn kind(&self) -> &'static str {
        crate::kind::READ_LOCK
    }

    fn channel(&self) -> fn(&str) -> String {
        rw_channel
    }

    fn wake(&self, n: &Names, _owner: &Owner) -> (String, Wake) {
        (n.channel().to_string(), Wake::All)
    }

    fn recheck(&self) -> Duration {
        NO_TTL_RECHECK
    }

    fn acquire(&self, n: &Names, c: &AcquireCall<'_>) -> crate::scripts::Invocation<'static> {
        let mut inv = scripts::RW_READ_ACQUIRE.prepare_invoke();
        inv.key(&*n.key)
            .key(read_prefix(n, c.owner))
            .key(writers_key(n))
            .key(&n.counter)
            .arg(c.lease_ms)
            .arg(c.owner.as_str())
            .arg(format!("{}:write", c.owner.as_str()))
            .arg(c.mode.short())
            .arg(c.floor);
        inv
    }

    fn acquire_fast(&self, n: &Names, c: &AcquireCall<'_>) -> Option<crate::scripts::FastPath> {
        // The common case (a free lock, no writer waiting or queued): rw_read_acquire_fast.lua.
        fast_acquire(
            &scripts::RW_READ_ACQUIRE_FAST,
            n,
            c,
            c.owner.as_str(),
            false,
            false,
        )
    }

    fn release(&self, n: &Names, c: &ReleaseCall<'_>) -> crate::scripts::Invocation<'static> {
        let mut inv = scripts::RW_READ_RELEASE.prepare_invoke();
        inv.key(&*n.key)
            .key(n.channel())
            .key(read_prefix(n, c.owner))
            .key(keys::hash_tagged(&n.key))
            .key(c.latch)
            .keys(handoff_keys(n))
            .arg(UNLOCK_MESSAGE)
            .arg(c.owner.as_str())
            .arg(c.latch_ms)
            .arg(c.floor);
        inv
    }

    fn release_fast(&self, n: &Names, c: &ReleaseCall<'_>) -> Option<crate::scripts::FastPath> {
        // The common case: the only reader's last hold, nobody queued
        // (rw_read_release_fast.lua).
        fast_release(&scripts::RW_READ_RELEASE_FAST, n, c, c.owner.as_str())
    }

    fn renewal(&self, n: &Names, owner: &Owner) -> Renewal {
        Renewal::Read {
            prefix: read_prefix(n, owner),
        }
    }

    fn force_unlock(&self, n: &Names, _floor: &str) -> crate::scripts::Invocation<'static> {
        force_unlock(n)
    }

    fn queue(&self, n: &Names) -> Option<Queue> {
        Some(Queue::WaitingWriters(writers_key(n)))
    }
}

impl RawLock for Write {
    fn kind(&self) -> &'static str {
        crate::kind::WRITE_LOCK
    }

    fn channel(&self) -> fn(&str) -> String {
        rw_channel
    }

    fn field(&self, owner: &Owner) -> std::sync::Arc<str> {
        crate::keys::concat_shared(&[owner.as_str(), ":write"])
    }

    fn wake(&self, n: &Names, _owner: &Owner) -> (String, Wake) {
        (n.channel().to_string(), Wake::All)
    }

    fn recheck(&self) -> Duration {
        self.liveness / 3
    }

    fn renewal(&self, _n: &Names, _owner: &Owner) -> Renewal {
        Renewal::Write
    }

    fn handoff_liveness(&self) -> Option<Duration> {
        self.handoff.then_some(self.liveness)
    }

    fn acquire(&self, n: &Names, c: &AcquireCall<'_>) -> crate::scripts::Invocation<'static> {
        let entry = c
            .handoff_initial_ms(self.liveness)
            .map(|initial| format!("{initial};{}", c.client_id))
            .unwrap_or_default();
        let field = self.field(c.owner);
        let mut inv = scripts::RW_WRITE_ACQUIRE.prepare_invoke();
        inv.key(&*n.key)
            .key(writers_key(n))
            .key(&n.counter)
            .key(keys::rwlock_queue(&n.key))
            .key(keys::rwlock_waiters(&n.key))
            .arg(c.lease_ms)
            .arg(&*field)
            .arg(c.owner.as_str())
            .arg(c.mode.short())
            .arg(self.liveness.as_millis() as u64)
            .arg(if c.wait_ms > 0 { "1" } else { "0" })
            .arg(c.floor)
            .arg(entry);
        inv
    }

    fn acquire_fast(&self, n: &Names, c: &AcquireCall<'_>) -> Option<crate::scripts::FastPath> {
        // The common case (a free lock, no writer waiting or queued): rw_write_acquire_fast.lua.
        fast_acquire(
            &scripts::RW_WRITE_ACQUIRE_FAST,
            n,
            c,
            &self.field(c.owner),
            false,
            false,
        )
    }

    fn release(&self, n: &Names, c: &ReleaseCall<'_>) -> crate::scripts::Invocation<'static> {
        let field = self.field(c.owner);
        let mut inv = scripts::RW_WRITE_RELEASE.prepare_invoke();
        inv.key(&*n.key)
            .key(n.channel())
            .key(c.latch)
            .keys(handoff_keys(n))
            .arg("1")
            .arg(c.lease_ms)
            .arg(&*field)
            .arg(c.latch_ms)
            .arg(c.floor);
        inv
    }

    fn release_fast(&self, n: &Names, c: &ReleaseCall<'_>) -> Option<crate::scripts::FastPath> {
        // The common case: the last hold, nobody queued (rw_write_release_fast.lua).
        fast_release(&scripts::RW_WRITE_RELEASE_FAST, n, c, &self.field(c.owner))
    }

    fn leave(
        &self,
        n: &Names,
        owner: &str,
        _wait_ms: u64,
        give_back: bool,
        floor: &str,
    ) -> Option<crate::scripts::Invocation<'static>> {
        let mut inv = scripts::RW_WRITER_LEAVE.prepare_invoke();
        inv.key(writers_key(n))
            .key(n.channel())
            .key(&*n.key)
            .key(&n.counter)
            .key(keys::rwlock_queue(&n.key))
            .key(keys::rwlock_waiters(&n.key))
            .arg(owner)
            .arg(if give_back { "1" } else { "0" })
            .arg(floor);
        Some(inv)
    }

    fn leave_gives_back(&self) -> bool {
        true
    }

    fn force_unlock(&self, n: &Names, _floor: &str) -> crate::scripts::Invocation<'static> {
        force_unlock(n)
    }

    fn queue(&self, n: &Names) -> Option<Queue> {
        Some(Queue::WaitingWriters(writers_key(n)))
    }
}
