//! The script calls of both semaphores, built from keys and arguments alone (no client), so
//! that everything that sends them — the engine, and the model of the protocol in tests —
//! builds the same call.

use std::sync::Arc;

use crate::keys::{self, Record};
use crate::registry::ReleaseRequest;
use crate::scripts::{self, FastPath, Invocation, Script};

/// A semaphore's set-up: `permits` permits if it has none yet.
pub(crate) fn set_permits(key: &str, channel: &str, permits: u64) -> Invocation<'static> {
    let mut inv = scripts::SEMAPHORE_SET.prepare_invoke();
    inv.key(key).key(channel).arg(permits);
    inv
}

/// A semaphore's acquire of `permits` permits, recorded in its grant record `grant`, sent at
/// `now_ms` on the client's record clock.
pub(crate) fn acquire(key: &str, grant: &Record, permits: u64, now_ms: u64) -> Invocation<'static> {
    let (ttl, late) = grant.ttl(now_ms);
    let mut inv = scripts::SEMAPHORE_ACQUIRE.prepare_invoke();
    inv.key(key)
        .key(&grant.key)
        .arg(permits)
        .arg(&grant.field)
        .arg(ttl)
        .arg(if late { "1" } else { "0" });
    inv
}

/// The script call of a release of `permits` permits (`semaphore_release.lua`), at most once
/// through its release record `record`, made at `now_ms` on the client's record clock.
pub(crate) fn release_call(
    key: &str,
    channel: &str,
    record: &Record,
    permits: u64,
    now_ms: u64,
) -> Invocation<'static> {
    recorded_return(
        &scripts::SEMAPHORE_RELEASE,
        key,
        channel,
        record,
        permits,
        now_ms,
    )
}

/// The give-back, made at `now_ms` on the client's record clock, of an acquire of unknown
/// outcome whose grant record is `grant`: its permits back if it ran, a tombstone if it has
/// not.
pub(crate) fn give_back(
    context: String,
    key: &str,
    channel: &str,
    grant: &Record,
    permits: u64,
    now_ms: u64,
) -> ReleaseRequest {
    let inv = recorded_return(
        &scripts::SEMAPHORE_GIVE_BACK,
        key,
        channel,
        grant,
        permits,
        now_ms,
    );
    ReleaseRequest::new(context, inv)
}

/// `script` (a release or a give-back, which take the same keys and arguments) returning
/// `permits` permits to the semaphore at `key` at most once through `record`, made at
/// `now_ms` on the client's record clock.
fn recorded_return(
    script: &'static Script,
    key: &str,
    channel: &str,
    record: &Record,
    permits: u64,
    now_ms: u64,
) -> Invocation<'static> {
    let mut inv = script.prepare_invoke();
    inv.key(key)
        .key(channel)
        .key(&record.key)
        .arg(permits)
        .arg(&record.field)
        .arg(record.ttl(now_ms).0);
    inv
}

/// The keys of a leased semaphore whose count is at `key`, and its calls.
pub(crate) struct LeasedKeys {
    pub(crate) key: String,
    pub(crate) channel: String,
    /// Redisson's leases zset, `{<name>}:timeout`.
    pub(crate) leases: String,
    /// The leases key of distlock before it followed Redisson's name (migrated by the
    /// scripts).
    pub(crate) old_leases: String,
    /// The hand-off queue and its waiter entries.
    pub(crate) queue: String,
    pub(crate) waiters: String,
}

impl LeasedKeys {
    pub(crate) fn new(key: &str) -> LeasedKeys {
        LeasedKeys {
            key: key.to_string(),
            channel: keys::semaphore_channel(key),
            leases: keys::semaphore_leases(key),
            old_leases: keys::legacy_semaphore_leases(key),
            queue: keys::permit_queue(key),
            waiters: keys::permit_waiters(key),
        }
    }

    /// An acquire of permit `id` with a lease of `lease_ms` ms; `entry`: the caller's
    /// hand-off queue entry ([`queue_entry`]), `0` for one attempt that lets the queue go
    /// first, empty without hand-off.
    pub(crate) fn acquire(&self, id: &str, lease_ms: u64, entry: &str) -> Invocation<'static> {
        let mut inv = self.call(&scripts::LEASED_ACQUIRE, id);
        inv.arg(lease_ms).arg(entry);
        inv
    }

    /// The fast path of an acquire of permit `id` that was never sent before, with a lease of
    /// `lease_ms` ms (`leased_acquire_fast.lua`: an available permit, nobody queued).
    pub(crate) fn acquire_fast(&self, id: &str, lease_ms: u64) -> FastPath {
        let mut inv = scripts::LEASED_ACQUIRE_FAST.prepare_invoke();
        inv.key(&self.key)
            .key(&self.leases)
            .arg(member(id))
            .arg(lease_ms);
        FastPath::new(inv, whole_lease)
    }

    /// The fast path of the give-back of permit `id`, for a permit whose holder still counts
    /// on its lease (`leased_release_fast.lua`: nobody queued).
    pub(crate) fn release_fast(&self, id: &str) -> FastPath {
        let mut inv = scripts::LEASED_RELEASE_FAST.prepare_invoke();
        inv.key(&self.key).key(&self.leases).arg(member(id));
        FastPath::new(inv, |v| v)
    }

    /// A call of `script` over the six keys of an acquire or release, in their order, with
    /// permit `id` as its first argument.
    fn call(&self, script: &'static scripts::Script, id: &str) -> Invocation<'static> {
        let mut inv = script.prepare_invoke();
        inv.key(&self.key)
            .key(&self.leases)
            .key(&self.channel)
            .key(&self.old_leases)
            .key(&self.queue)
            .key(&self.waiters)
            .arg(member(id));
        inv
    }

    /// The give-back of permit `id` (idempotent: by id), handing it to the first live queued
    /// waiter; it also takes `id` out of the hand-off queue. `fast`: try
    /// [`LeasedKeys::release_fast`] first, for a permit whose holder still counts on its
    /// lease (the full call is then built only if a send needs it).
    pub(crate) fn release(
        self: &Arc<Self>,
        context: String,
        id: &str,
        fast: bool,
    ) -> ReleaseRequest {
        if !fast {
            return ReleaseRequest::new(context, self.call(&scripts::LEASED_RELEASE, id));
        }
        let (keys, owned) = (self.clone(), id.to_string());
        let full = move || keys.call(&scripts::LEASED_RELEASE, &owned);
        ReleaseRequest::new(context, Invocation::later(full, self.release_fast(id)))
    }

    /// The extension of permit `id`'s lease to `lease_ms` ms from now.
    pub(crate) fn extend(&self, id: &str, lease_ms: u64) -> Invocation<'static> {
        let mut inv = scripts::LEASED_EXTEND.prepare_invoke();
        inv.key(&self.leases)
            .key(&self.old_leases)
            .arg(member(id))
            .arg(lease_ms);
        inv
    }
}

/// The time left of a lease granted whole, as `leased_acquire.lua` reports a grant's: above
/// any lease asked for, so it is never taken for a lease a hand-off cut short.
pub(crate) const WHOLE_LEASE: i64 = i64::MAX;

/// A fast acquire's expiry (`leased_acquire_fast.lua`) in its full script's reply shape
/// `{1, expiry_ms, left_ms}`: the fast path grants the whole lease ([`WHOLE_LEASE`]).
fn whole_lease(expiry: redis::Value) -> redis::Value {
    redis::Value::Array(vec![
        redis::Value::Int(1),
        expiry,
        redis::Value::Int(WHOLE_LEASE),
    ])
}

/// The hand-off queue entry of a waiter for permit `id`, of client `client_id`, whose place
/// lives `liveness_ms` ms and which asks for a lease of `lease_ms` ms.
pub(crate) fn queue_entry(liveness_ms: u128, lease_ms: u64, client_id: &str, id: &str) -> String {
    format!("{liveness_ms};{lease_ms};{client_id};{id}")
}

/// The zset member of permit `id`: its 16 bytes, as Redisson stores permit ids (an id that
/// is not 32 hex characters is sent as it is, and matches nothing Redisson wrote).
pub(crate) fn member(id: &str) -> Vec<u8> {
    match uuid::Uuid::try_parse(id) {
        Ok(u) if id.len() == 32 => u.as_bytes().to_vec(),
        _ => id.as_bytes().to_vec(),
    }
}
