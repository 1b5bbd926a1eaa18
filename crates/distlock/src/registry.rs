//! [`HoldRegistry`]: the holds a client's guards still have, and the releases still under way, so that
//! [`Client::shutdown`](crate::Client::shutdown) can release them all and a guard dropped
//! at the end of `#[tokio::main]` does not outlive the process.
//!
//! Every guard (lock hold, semaphore permit, leased permit, job lock) registers how it is
//! released — a [`ReleaseRequest`]: one script call that may be sent more than once — and
//! takes its registration back when it is released or forgotten. A dropped guard releases
//! in the background through [`HoldRegistry::release_in_background`]; such a release is tracked
//! until it finished, and if the runtime drops it before that (the runtime is shutting
//! down: `main` returned), a blocking fallback sends the same request over a fresh
//! synchronous connection, bounded by the connect and command timeouts.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;

use crate::conn::Backend;
use crate::conn::Resend;
use crate::error::{Error, NotHeldReason, Result};

tokio::task_local! {
    /// Set inside a scheduled-job loop ([`crate::spawn_every`]): a shutdown called from a job
    /// must not wait for that job's own loop to end.
    pub(crate) static IN_SCHEDULED_JOB: ();
}

/// One release, as a script call that is safe to send again (a resend answers the first
/// send's result or finds nothing left to release), and what it releases, for logs.
pub(crate) struct ReleaseRequest {
    /// What is released, for logs (`release "orders"`).
    pub(crate) context: What,
    /// The call, sent as it is (its clones are the same request: a fast path, if any, is
    /// tried on the first send of any of them only).
    call: crate::scripts::Invocation<'static>,
}

/// What a release releases, for logs and errors: its text, or an operation and the name of
/// what it is on (formatted only when a message needs it: every lock release builds one).
pub(crate) enum What {
    Text(String),
    /// An operation on a named primitive (its name as `name` gives it).
    Named {
        op: &'static str,
        name: Arc<dyn AsRef<str> + Send + Sync>,
    },
}

impl From<String> for What {
    fn from(text: String) -> What {
        What::Text(text)
    }
}

impl std::fmt::Display for What {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            What::Text(text) => f.write_str(text),
            What::Named { op, name } => crate::error::Ctx {
                op,
                name: (**name).as_ref(),
            }
            .fmt(f),
        }
    }
}

impl ReleaseRequest {
    pub(crate) fn new(
        context: impl Into<What>,
        call: crate::scripts::Invocation<'static>,
    ) -> ReleaseRequest {
        ReleaseRequest {
            context: context.into(),
            call,
        }
    }

    /// The key the request is routed by (its script's first key; a Cluster sends it to that
    /// key's master).
    pub(crate) fn route_key(&self) -> &str {
        std::str::from_utf8(self.call.route_key()).unwrap_or("")
    }

    /// The script call itself, to send (a clone of it is the same request).
    pub(crate) fn call(&self) -> &crate::scripts::Invocation<'static> {
        &self.call
    }
}

/// How a registered hold is released: builds a fresh request (with a fresh request id) each
/// time it is called.
pub(crate) type Releaser = Arc<dyn Fn() -> ReleaseRequest + Send + Sync>;

/// What releases one hold of an owner by its lease, with a fresh request each time: a lock
/// handle's shared state, registered with each hold ([`HoldRegistry::register_holds`]).
pub(crate) trait ReleasesHolds: Send + Sync {
    fn release_hold_request(&self, owner: &Arc<str>, lease: Duration) -> ReleaseRequest;
}

/// How a live hold is released: by what releases it, its owner and lease (shared handles
/// cloned, nothing allocated: every lock grant registers one), or by a [`Releaser`].
enum Release {
    Holds(Arc<dyn ReleasesHolds>, Arc<str>, Duration),
    Built(Releaser),
}

impl Release {
    /// A fresh request (with a fresh request id).
    fn request(&self) -> ReleaseRequest {
        match self {
            Release::Holds(of, owner, lease) => of.release_hold_request(owner, *lease),
            Release::Built(releaser) => releaser(),
        }
    }
}

/// The live holds: a slot each, reused once its hold is taken back (no hashing; a hold
/// comes and goes with every grant).
#[derive(Default)]
struct Live {
    /// A live hold's id (which tells a reused slot's hold from an earlier one), kind (for the
    /// `distlock_held` gauge) and release.
    slots: Vec<Option<(u64, &'static str, Release)>>,
    /// The empty slots.
    free: Vec<usize>,
    /// The next hold's id.
    next: u64,
}

/// What the blocking fallback needs to reach the server without the runtime.
#[derive(Clone)]
pub(crate) struct Fallback {
    /// The standalone server's client; `None` when the server changes (Sentinel: the backend
    /// names the current one) or there is no single one (Cluster: no blocking release; the
    /// lease ends the hold).
    pub(crate) client: Option<redis::Client>,
    pub(crate) backend: crate::conn::Backend,
    pub(crate) connect_timeout: Duration,
    pub(crate) command_timeout: Duration,
    /// One deadline for every fallback of the client: the first sets it, the others wait only
    /// for what is left, so a runtime dropping many releases waits one bound, not one each.
    pub(crate) deadline: Arc<Mutex<Option<std::time::Instant>>>,
}

/// A guard's registration; give it back with [`HoldRegistry::take`].
#[derive(Debug)]
pub(crate) struct HoldId {
    id: u64,
    slot: usize,
}

/// The live holds and background releases of one client.
pub(crate) struct HoldRegistry {
    live: Mutex<Live>,
    background: Arc<Background>,
    /// Scheduled-job loops ([`crate::spawn_every`]) still running.
    scheduled: Arc<Background>,
    /// Turns true when shutdown begins: scheduled-job loops stop after their current run.
    closing: tokio::sync::watch::Sender<bool>,
    closed: AtomicBool,
    fallback: Fallback,
    runtime: tokio::runtime::Handle,
}

/// Releases still under way.
#[derive(Default)]
struct Background {
    count: AtomicUsize,
    idle: Notify,
}

impl Background {
    fn done(&self) {
        if self.count.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.idle.notify_waiters();
        }
    }
}

impl HoldRegistry {
    pub(crate) fn new(fallback: Fallback, runtime: tokio::runtime::Handle) -> HoldRegistry {
        HoldRegistry {
            live: Mutex::default(),
            background: Arc::new(Background::default()),
            scheduled: Arc::new(Background::default()),
            closing: tokio::sync::watch::Sender::new(false),
            closed: AtomicBool::new(false),
            fallback,
            runtime,
        }
    }

    /// Whether [`HoldRegistry::close`] ran (the client was shut down).
    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Register a live hold of `kind` (`lock`, `semaphore`, …) and how to release it.
    pub(crate) fn register(&self, kind: &'static str, releaser: Releaser) -> HoldId {
        self.insert(kind, Release::Built(releaser))
    }

    /// Register a live hold of `kind` that `of` releases: one hold of `owner` (its string)
    /// with `lease`.
    pub(crate) fn register_holds(
        &self,
        kind: &'static str,
        of: Arc<dyn ReleasesHolds>,
        owner: Arc<str>,
        lease: Duration,
    ) -> HoldId {
        self.insert(kind, Release::Holds(of, owner, lease))
    }

    fn insert(&self, kind: &'static str, release: Release) -> HoldId {
        let (id, slot) = {
            let mut live = self.live.lock().unwrap();
            let id = live.next;
            live.next += 1;
            let entry = Some((id, kind, release));
            let slot = match live.free.pop() {
                Some(slot) => {
                    live.slots[slot] = entry;
                    slot
                }
                None => {
                    live.slots.push(entry);
                    live.slots.len() - 1
                }
            };
            (id, slot)
        };
        crate::metrics::held(kind, 1);
        HoldId { id, slot }
    }

    /// Take a registration back (the guard is released, forgotten or dropped): whether it was
    /// still live (`false` when shutdown released the hold already).
    pub(crate) fn take(&self, id: &HoldId) -> bool {
        let taken = {
            let mut live = self.live.lock().unwrap();
            let slot = live
                .slots
                .get_mut(id.slot)
                .filter(|s| s.as_ref().is_some_and(|(i, ..)| *i == id.id))
                .and_then(Option::take);
            if slot.is_some() {
                live.free.push(id.slot);
            }
            slot
        };
        // Its release (shared handles) is dropped outside the lock.
        let Some((_, kind, _)) = taken else {
            return false;
        };
        crate::metrics::held(kind, -1);
        true
    }

    /// For a scheduled-job loop: the signal that shutdown began, and a token that counts the
    /// loop as running until dropped (shutdown waits for it).
    pub(crate) fn scheduled(&self) -> (tokio::sync::watch::Receiver<bool>, Running) {
        self.scheduled.count.fetch_add(1, Ordering::AcqRel);
        (self.closing.subscribe(), Running(self.scheduled.clone()))
    }

    /// A guard is released explicitly: take its registration back, or `NotHeld` (gone) when
    /// shutdown released the hold already (`name` names it in the error).
    pub(crate) fn take_for_release(&self, id: &HoldId, name: &str) -> Result<()> {
        if self.take(id) {
            Ok(())
        } else {
            Err(Error::not_held(name, NotHeldReason::Gone))
        }
    }

    /// A guard was dropped: take its registration back and, unless shutdown released the hold
    /// already, release it in the background (`request` is built only then).
    pub(crate) fn release_dropped(
        &self,
        backend: &Backend,
        id: &HoldId,
        request: impl FnOnce() -> ReleaseRequest,
    ) {
        if self.take(id) {
            self.release_in_background(backend, request());
        }
    }

    /// Send `request` from a background task (a dropped guard). The task is tracked until
    /// it finished; if the runtime drops it before (shutting down), the request is sent
    /// from a plain thread over a synchronous connection instead, and the dropping thread
    /// waits for it (at most the connect timeout + twice the command timeout).
    pub(crate) fn release_in_background(&self, backend: &Backend, request: ReleaseRequest) {
        self.send_in_background(backend, request, None);
    }

    /// As [`HoldRegistry::release_in_background`], resending `request` (which must answer a
    /// resend the same, e.g. through a tombstone) until the server answers, at most
    /// `resend_for` — the way grants of unknown outcome are given back.
    pub(crate) fn give_back_in_background(
        &self,
        backend: &Backend,
        request: ReleaseRequest,
        resend_for: Duration,
    ) {
        self.send_in_background(backend, request, Some(resend_for));
    }

    fn send_in_background(
        &self,
        backend: &Backend,
        request: ReleaseRequest,
        resend_for: Option<Duration>,
    ) {
        self.background.count.fetch_add(1, Ordering::AcqRel);
        let mut sentinel = Sentinel {
            request: Some(request),
            fallback: self.fallback.clone(),
            background: self.background.clone(),
        };
        let backend = backend.clone();
        let runtime =
            tokio::runtime::Handle::try_current().unwrap_or_else(|_| self.runtime.clone());
        runtime.spawn(async move {
            let request = sentinel.request.as_ref().expect("armed");
            let inv = request.call();
            let key = request.route_key();
            let rule = match resend_for {
                None => Resend::Few,
                // Confirmed by replicas where the deployment asks for it, as every latched
                // write.
                Some(left) => Resend::Confirmed { key, left },
            };
            let r = backend
                .eval::<redis::Value>(&request.context, inv, rule)
                .await;
            if let Err(e) = r {
                tracing::warn!(what = %request.context, error = format_args!("{e:#}"), "background release failed");
            }
            sentinel.disarm();
        });
    }

    /// Shutdown: refuse new grants, let scheduled-job loops finish their current run and
    /// stop (not bounded: a job's own lock is bounded by its `at_most_for`), release every
    /// live hold (concurrently, each bounded by `limit`), then wait for background releases
    /// (at most `limit`).
    pub(crate) async fn close(&self, backend: &Backend, limit: Duration) {
        self.closed.store(true, Ordering::Release);
        // Scheduled jobs finish their current run (and release its lock) first.
        self.closing.send_replace(true);
        if IN_SCHEDULED_JOB.try_with(|_| ()).is_ok() {
            // Called from a scheduled job: its own loop ends after this run; waiting for it
            // here would wait for ourselves.
            tracing::debug!("shutdown from a scheduled job: not waiting for scheduled loops");
        } else {
            idle(&self.scheduled).await;
        }
        let live: Vec<Release> = {
            let mut live = self.live.lock().unwrap();
            live.free.clear();
            std::mem::take(&mut live.slots)
                .into_iter()
                .flatten()
                .map(|(_, kind, r)| {
                    crate::metrics::held(kind, -1);
                    r
                })
                .collect()
        };
        let releases = live.into_iter().map(|release| {
            let request = release.request();
            let backend = backend.clone();
            async move {
                let inv = request.call();
                let send = backend.eval::<redis::Value>(&request.context, inv, Resend::Few);
                match tokio::time::timeout(limit, send).await {
                    Ok(Ok(_)) => {}
                    Ok(Err(e)) => {
                        tracing::warn!(what = %request.context, error = format_args!("{e:#}"), "release at shutdown failed")
                    }
                    Err(_) => {
                        tracing::warn!(what = %request.context, "release at shutdown timed out")
                    }
                }
            }
        });
        futures_util::future::join_all(releases).await;
        let _ = tokio::time::timeout(limit, idle(&self.background)).await;
    }
}

/// Resolves when `tasks` counts none under way.
async fn idle(tasks: &Background) {
    loop {
        let idle = tasks.idle.notified();
        tokio::pin!(idle);
        idle.as_mut().enable();
        if tasks.count.load(Ordering::Acquire) == 0 {
            return;
        }
        idle.await;
    }
}

/// Counts a scheduled-job loop as running until dropped.
pub(crate) struct Running(Arc<Background>);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.done();
    }
}

/// Armed while a background release has not finished; dropping it armed (the runtime
/// dropped the task) sends the request synchronously.
struct Sentinel {
    request: Option<ReleaseRequest>,
    fallback: Fallback,
    background: Arc<Background>,
}

impl Sentinel {
    fn disarm(&mut self) {
        self.request = None;
    }
}

impl Drop for Sentinel {
    fn drop(&mut self) {
        if let Some(request) = self.request.take() {
            release_blocking(&self.fallback, request);
        }
        self.background.done();
    }
}

/// Send `request` from a fresh thread over a synchronous connection and wait for it, until
/// the client's fallback deadline (the connect timeout plus twice the command timeout after the
/// first fallback): the sends run in parallel, the waits share one bound.
fn release_blocking(fallback: &Fallback, request: ReleaseRequest) {
    let fb = fallback.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    let spawned = std::thread::Builder::new()
        .name("distlock-release".into())
        .spawn(move || {
            // Sentinel: the current master; Cluster: the master of the key's slot in the last
            // slot map read.
            let key = request.route_key();
            let client = fb.client.clone().or_else(|| fb.backend.current_client(key));
            let Some(client) = client else {
                // A Cluster whose slot map was never read (no grant needed it): its lease ends
                // the hold.
                tracing::debug!(what = %request.context, "no server known for a blocking release; the lease ends the hold");
                let _ = tx.send((request.context, Ok(redis::Value::Nil)));
                return;
            };
            let r = client
                .get_connection_with_timeout(fb.connect_timeout)
                .and_then(|mut con| {
                    con.set_read_timeout(Some(fb.command_timeout))?;
                    con.set_write_timeout(Some(fb.command_timeout))?;
                    request.call().invoke_blocking::<redis::Value>(&mut con, fb.backend.via())
                });
            let _ = tx.send((request.context, r));
        });
    if spawned.is_err() {
        return;
    }
    let limit = fallback.connect_timeout + fallback.command_timeout * 2;
    let deadline = *fallback
        .deadline
        .lock()
        .unwrap()
        .get_or_insert_with(|| std::time::Instant::now() + limit);
    match rx.recv_timeout(deadline.saturating_duration_since(std::time::Instant::now())) {
        Ok((_, Ok(_))) => {}
        Ok((what, Err(e))) => {
            tracing::warn!(%what, error = format_args!("{e:#}"), "release at runtime shutdown failed")
        }
        Err(_) => tracing::warn!("release at runtime shutdown timed out"),
    }
}
