//! Leases held by this client, and the watchdog that renews them.
//!
//! Every held lock has one [`LeaseState`] per (key, owner), shared by all guards of that
//! owner (re-entry, adopt), carrying the local validity deadline and the lost-lease signal.
//! Locks acquired without an explicit lease are renewed by one task per client: every
//! `watchdog lease / 3` (Redisson's `internalLockLeaseTime / 3`, 10 s of 30 s) it renews all
//! of them with one `lock_renew.lua` call per 500 locks — per hash slot and 500 locks where
//! the backend needs single-slot scripts (Redis Cluster); `lock_renew_one.lua` for a batch of
//! one — all calls issued together so they
//! share round trips, instead of Redisson's one timer and one round trip per lock. A renewal that finds the lock gone or held by another owner
//! fires the lost signal at once; renewals that keep failing let the local deadline pass,
//! which fires it too.
//!
//! When the client's subscription connection reconnects (the server restarted, or the
//! connection broke), the watchdog does not wait for its next tick: it renews every
//! watchdog lease and checks every explicit lease (`HEXISTS`) at once, so a holder learns
//! that a restarted server lost its lock within a reconnect, not a renewal period later.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use crate::conn::Backend;
use crate::notice::Notice;

mod holders;
mod task;

pub(crate) use holders::Holder;
use holders::Holders;

/// What the watchdog (and `extend`) runs to renew one hold.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Renewal {
    /// `lock_renew.lua` (`lock_renew_one.lua` alone) on the hash field of a plain or fair
    /// lock (a hash without a mode field).
    Hash,
    /// `lock_renew.lua` (`lock_renew_one.lua` alone) on the `<owner>:write` field of a
    /// read-write lock's hash whose mode is `write`.
    Write,
    /// `rw_read_renew.lua`, with the owner's read-hold key prefix.
    Read { prefix: String },
}

impl Renewal {
    /// `lock_renew.lua`'s `ARGV[2]` for this renewal: the mode field the renewed hash must
    /// have (`''`: none, a plain or fair lock; `'write'`: a write hold; `lock_renew_one.lua`
    /// takes the same as its `ARGV[3]`, absent for `''`). `None` for a read hold, which
    /// `rw_read_renew.lua` renews.
    pub(crate) fn hash_mode(&self) -> Option<&'static str> {
        match self {
            Renewal::Hash => Some(""),
            Renewal::Write => Some("write"),
            Renewal::Read { .. } => None,
        }
    }
}

/// Renewals per script call.
const BATCH: usize = 500;

/// Local state of one held lease.
#[derive(Debug)]
pub(crate) struct LeaseState {
    /// Marked lost (once: [`LeaseState::mark_lost`]), and what wakes the [`LeaseState::lost`]
    /// futures then: a flag and one `Notify`, made with every grant at no allocation (a
    /// `watch` channel allocated, and woke eight shards when dropped).
    lost: AtomicBool,
    lost_signal: Notify,
    valid_until: Mutex<Instant>,
    /// The primitive's kind (`lock`, `leased_semaphore`, …) and what is leased, for metrics
    /// and the lost-lease event: its name, or a lock's entry in the client's leases (its key
    /// and its owner's field, shared with the lock handle and the owner: no copies).
    kind: &'static str,
    what: Leased,
    /// Whether a loss is counted and reported (not for a state that only bounds a
    /// keep-alive's retries).
    report_loss: bool,
}

impl LeaseState {
    pub(crate) fn new(valid_until: Instant, kind: &'static str, what: String) -> LeaseState {
        LeaseState::leasing(valid_until, kind, Leased::Named(what))
    }

    /// The state of the lock lease whose entry in the client's leases is `entry` (key,
    /// field).
    fn of_entry(valid_until: Instant, kind: &'static str, entry: EntryKey) -> LeaseState {
        LeaseState::leasing(valid_until, kind, Leased::Entry(entry))
    }

    fn leasing(valid_until: Instant, kind: &'static str, what: Leased) -> LeaseState {
        LeaseState {
            lost: AtomicBool::new(false),
            lost_signal: Notify::new(),
            valid_until: Mutex::new(valid_until),
            kind,
            what,
            report_loss: true,
        }
    }

    /// A state that reports nothing when lost: it only bounds a keep-alive's retries (the
    /// lease it stands for has its own lost signal).
    pub(crate) fn unreported(valid_until: Instant, kind: &'static str) -> LeaseState {
        LeaseState {
            report_loss: false,
            ..LeaseState::new(valid_until, kind, String::new())
        }
    }

    pub(crate) fn kind(&self) -> &'static str {
        self.kind
    }

    pub(crate) fn valid_until(&self) -> Instant {
        *self.valid_until.lock().unwrap()
    }

    /// Move the deadline (after a renewal, extension or re-entry); never backwards, since
    /// the server's TTL was reset at least as late as the previous grant's.
    pub(crate) fn renewed(&self, valid_until: Instant) {
        let mut v = self.valid_until.lock().unwrap();
        if valid_until > *v {
            *v = valid_until;
        }
    }

    /// Set the deadline to exactly `valid_until` (after an extension, which may have
    /// shortened the server's TTL).
    pub(crate) fn set_valid_until(&self, valid_until: Instant) {
        *self.valid_until.lock().unwrap() = valid_until;
    }

    /// Fire the lost signal (once: later calls change nothing), count the loss and report it
    /// as a WARN event `distlock.lease_lost` (fields `kind`, `what`).
    pub(crate) fn mark_lost(&self) {
        if self.lost.swap(true, Ordering::AcqRel) {
            return;
        }
        self.lost_signal.notify_waiters();
        if self.report_loss {
            crate::metrics::lease_lost(self.kind);
            tracing::warn!(
                name: "distlock.lease_lost",
                kind = self.kind,
                what = self.what.name(),
                "lease lost"
            );
        }
    }

    /// Whether the holder still counts on the lease: not marked lost, its deadline ahead. A
    /// deadline that passed is not marked here (see [`LeaseState::is_lost`]).
    pub(crate) fn counted_on(&self) -> bool {
        !self.lost.load(Ordering::Acquire) && Instant::now() < self.valid_until()
    }

    /// Whether the lease is lost: marked, or its deadline passed (which marks it).
    pub(crate) fn is_lost(&self) -> bool {
        if self.lost.load(Ordering::Acquire) {
            return true;
        }
        let passed = Instant::now() >= self.valid_until();
        if passed {
            self.mark_lost();
        }
        passed
    }

    /// Resolves when the lease is lost: marked by a renewal, or its deadline passed.
    pub(crate) async fn lost(&self) {
        loop {
            // Registered before the flag is read: a mark in between wakes it.
            let marked = self.lost_signal.notified();
            tokio::pin!(marked);
            marked.as_mut().enable();
            if self.lost.load(Ordering::Acquire) {
                return;
            }
            let deadline = self.valid_until();
            if Instant::now() >= deadline {
                self.mark_lost();
                return;
            }
            tokio::select! {
                () = marked => {}
                _ = tokio::time::sleep_until(deadline) => {}
            }
        }
    }
}

struct Entry {
    refs: usize,
    renew_refs: usize,
    renewal: Renewal,
    lease: Arc<LeaseState>,
    /// Where each of the `refs` guards was taken, one element per guard.
    holders: Holders,
}

/// A lock lease's entry in the client's leases: the lock key and the owner's hash field.
/// Shared: a grant's entry keeps its handle's key and (a plain, fair or read hold) its
/// owner's own string, not copies of them.
pub(crate) type EntryKey = (Arc<str>, Arc<str>);

/// What a [`LeaseState`] leases.
#[derive(Debug)]
enum Leased {
    /// A lease of another kind (job lock, leased permit): its name, for messages.
    Named(String),
    /// A lock lease: its entry in the client's leases.
    Entry(EntryKey),
}

impl Leased {
    /// The name (a lock's key) messages give it.
    fn name(&self) -> &str {
        match self {
            Leased::Named(name) => name,
            Leased::Entry((key, _)) => key,
        }
    }
}

/// The maps of a client's leases: looked up at every grant and release.
type Map<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

#[derive(Default)]
struct Shared {
    entries: Mutex<Map<EntryKey, Entry>>,
    /// Leases with a renewal of their own (job locks, leased permits), by id.
    kept: Mutex<Map<u64, Kept>>,
    next_kept: std::sync::atomic::AtomicU64,
    /// Signalled when a kept lease is added, so the task wakes for an earlier due time.
    kept_added: Notify,
}

/// How a kept lease is renewed: `Ok(true)` renewed to its lease, `Ok(false)` gone (lost),
/// `Err` failed (retried sooner; lost when the local deadline passes).
pub(crate) type Renew =
    Arc<dyn Fn() -> Pin<Box<dyn Future<Output = crate::error::Result<bool>> + Send>> + Send + Sync>;

/// A lease renewed by the watchdog with its own renewal call and period.
struct Kept {
    lease: Duration,
    period: Duration,
    due: Instant,
    renew: Renew,
    state: Arc<LeaseState>,
    what: String,
    /// The job lock key and value whose force-unlock notice fires this lease's lost signal
    /// ([`KeepAlive::hears`]).
    notice: Option<(String, String)>,
}

/// A kept lease's registration: dropping it stops the renewal.
pub(crate) struct KeepAlive {
    shared: Arc<Shared>,
    id: u64,
}

impl std::fmt::Debug for KeepAlive {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeepAlive").field("id", &self.id).finish()
    }
}

impl Drop for KeepAlive {
    fn drop(&mut self) {
        self.shared.kept.lock().unwrap().remove(&self.id);
    }
}

impl KeepAlive {
    /// Have a force-unlock notice of the job lock `key` holding `value` (on the client's
    /// notice channel, see [`crate::notice`]) fire this lease's lost signal, once the server
    /// confirms the value is gone.
    pub(crate) fn hears(self, key: String, value: String) -> KeepAlive {
        if let Some(kept) = self.shared.kept.lock().unwrap().get_mut(&self.id) {
            kept.notice = Some((key, value));
        }
        self
    }
}

/// The leases of one client, and its watchdog task.
pub(crate) struct Leases {
    shared: Arc<Shared>,
    task: tokio::task::AbortHandle,
}

impl Drop for Leases {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// One guard's claim on a lease; dropping it stops renewal once no guard of the owner is left.
pub(crate) struct Registration {
    shared: Arc<Shared>,
    renew: bool,
    lease: Arc<LeaseState>,
    holder: Holder,
}

impl std::fmt::Debug for Registration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registration")
            .field("key", &self.lease.what.name())
            .field("renew", &self.renew)
            .finish()
    }
}

impl Registration {
    pub(crate) fn lease(&self) -> &Arc<LeaseState> {
        &self.lease
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        // The lease's own entry key: a registration keeps none.
        let Leased::Entry(key) = &self.lease.what else {
            return;
        };
        let mut map = self.shared.entries.lock().unwrap();
        // One lookup (the key hashed once), by a clone of the shared key.
        if let std::collections::hash_map::Entry::Occupied(mut o) = map.entry(key.clone()) {
            let e = o.get_mut();
            if !Arc::ptr_eq(&e.lease, &self.lease) {
                return;
            }
            e.refs -= 1;
            e.holders.remove(self.holder);
            if self.renew {
                e.renew_refs = e.renew_refs.saturating_sub(1);
            }
            if e.refs == 0 {
                o.remove();
            }
        }
    }
}

impl Leases {
    /// Start the watchdog task; it renews registered leases to `watchdog_lease` every
    /// `watchdog_lease / 3`, and checks every lease at once when `reconnected` is signalled.
    pub(crate) fn start(
        backend: Backend,
        watchdog_lease: Duration,
        reconnected: Arc<Notify>,
    ) -> Leases {
        let shared = Arc::new(Shared::default());
        let task = tokio::spawn(task::run(
            backend,
            watchdog_lease,
            shared.clone(),
            reconnected,
        ))
        .abort_handle();
        Leases { shared, task }
    }

    /// Register a guard of the owner whose hash field is `field` on `key`, valid until
    /// `valid_until`; `renew` asks the watchdog to keep it alive. Guards of one owner share
    /// one [`LeaseState`]. The entry shares `key` and `field`: no copy is made.
    pub(crate) fn register(
        &self,
        key: &Arc<str>,
        field: Arc<str>,
        valid_until: Instant,
        renewal: Option<Renewal>,
        kind: &'static str,
    ) -> Registration {
        use std::collections::hash_map::Entry as Slot;
        let renew = renewal.is_some();
        // A fresh lease state keeps its entry's key (its registrations find the entry by it).
        let fresh = |key: &EntryKey| Entry {
            refs: 0,
            renew_refs: 0,
            renewal: Renewal::Hash,
            lease: Arc::new(LeaseState::of_entry(valid_until, kind, key.clone())),
            holders: Holders::default(),
        };
        let mut map = self.shared.entries.lock().unwrap();
        // One lookup: the key is hashed once.
        let entry = match map.entry((key.clone(), field)) {
            // A lost or expired lease is not revived by a new grant: start a fresh state.
            Slot::Occupied(mut o) => {
                let e = o.get();
                if e.lease.lost.load(Ordering::Acquire) || e.lease.valid_until() <= Instant::now() {
                    let e = fresh(o.key());
                    o.insert(e);
                }
                o.into_mut()
            }
            Slot::Vacant(v) => {
                let e = fresh(v.key());
                v.insert(e)
            }
        };
        entry.refs += 1;
        let holder = Holder::current();
        entry.holders.push(holder);
        if let Some(r) = renewal {
            entry.renew_refs += 1;
            entry.renewal = r;
        }
        entry.lease.renewed(valid_until);
        let lease = entry.lease.clone();
        drop(map);
        Registration {
            shared: self.shared.clone(),
            renew,
            lease,
            holder,
        }
    }

    /// Keep a lease of another kind alive (a job lock, a leased permit): every `period` the
    /// watchdog runs `renew`, which extends it to `lease`; the lost signal of `state` fires
    /// when `renew` reports it gone or the local deadline passes while renewals fail. Stops
    /// when the returned handle is dropped. With a zero `lease`, `renew` only checks that
    /// the hold is still there (no deadline moves, no renewal is counted).
    pub(crate) fn keep_alive(
        &self,
        what: String,
        lease: Duration,
        period: Duration,
        state: Arc<LeaseState>,
        renew: Renew,
    ) -> KeepAlive {
        let id = self
            .shared
            .next_kept
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.shared.kept.lock().unwrap().insert(
            id,
            Kept {
                lease,
                period,
                due: Instant::now() + period,
                renew,
                state,
                what,
                notice: None,
            },
        );
        self.shared.kept_added.notify_one();
        KeepAlive {
            shared: self.shared.clone(),
            id,
        }
    }

    /// Whether a guard on `key` whose lease is not known lost (any owner of it) was taken
    /// by the calling task ([`Holder::current`]): a linear scan, for the wait path and its
    /// errors only.
    pub(crate) fn held_by_current_task(&self, key: &str) -> bool {
        let here = Holder::current();
        self.shared
            .entries
            .lock()
            .unwrap()
            .iter()
            .any(|((k, _), e)| &**k == key && !e.lease.is_lost() && e.holders.contains(&here))
    }

    /// What the client's notice channel runs: a lost-lease notice (`notice::parse`) naming
    /// a lease this client holds is checked with the server over `backend` (the notice is
    /// only a claim: anyone with `PUBLISH` rights on the channel can send one), and the
    /// lease's lost signal fires when the server says the hold is gone.
    pub(crate) fn notice_handler(&self, backend: Backend) -> crate::conn::pubsub::Handler {
        let shared = self.shared.clone();
        crate::conn::pubsub::Handler(Arc::new(move |payload: &[u8]| {
            let Some(notice) = crate::notice::parse(payload) else {
                return;
            };
            let lease = match notice {
                Notice::Lock { field, key } => shared
                    .entries
                    .lock()
                    .unwrap()
                    .get(&(Arc::<str>::from(key), Arc::<str>::from(field)))
                    .map(|e| e.lease.clone()),
                Notice::Job { value, key } => shared
                    .kept
                    .lock()
                    .unwrap()
                    .values()
                    .find(|k| {
                        k.notice
                            .as_ref()
                            .is_some_and(|(k, v)| k == key && v == value)
                    })
                    .map(|k| k.state.clone()),
            };
            let (Some(lease), Ok(runtime)) = (lease, tokio::runtime::Handle::try_current()) else {
                return;
            };
            let backend = backend.clone();
            let notice = notice.to_owned();
            runtime.spawn(async move {
                let (gone, key) = match &notice {
                    Notice::Lock { field, key } => {
                        (crate::notice::lock_hold_gone(&backend, key, field).await, key)
                    }
                    Notice::Job { value, key } => {
                        (crate::notice::job_hold_gone(&backend, key, value).await, key)
                    }
                };
                if gone {
                    tracing::debug!(lock = %key, "force-unlocked: lease lost");
                    lease.mark_lost();
                } else {
                    tracing::debug!(lock = %key, "a lost-lease notice for a hold the server still has; ignored");
                }
            });
        }))
    }

    /// Stop the watchdog task (client shutdown).
    pub(crate) fn stop(&self) {
        self.task.abort();
    }

    /// Leases the watchdog renews now (for tests and `bench`).
    pub(crate) fn renewing(&self) -> usize {
        self.shared
            .entries
            .lock()
            .unwrap()
            .values()
            .filter(|e| e.renew_refs > 0)
            .count()
    }
}
