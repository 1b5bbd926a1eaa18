//! A blocking API over the async one, for synchronous programs (feature `blocking`).
//!
//! [`Client`] owns a small multi-thread tokio runtime (two worker threads by default) and the
//! async [`crate::Client`] that runs on it. Every primitive and guard here wraps its async
//! twin and blocks the calling thread on that runtime, so the verbs are the same —
//! `acquire`, `try_acquire`, `try_acquire_for`, `release`, `extend`, `is_held`, … — and so
//! are the data layouts, the errors and the defaults. Because the runtime's worker threads
//! run in the background, the watchdog keeps renewing leases and wake-ups keep arriving
//! while the calling thread does synchronous work, unlike a `block_on` on a current-thread
//! runtime (which runs tasks only inside `block_on`, so a lock held longer than its lease
//! expires silently).
//!
//! The structure follows mini-redis's blocking client: a thin synchronous facade whose
//! methods are `runtime.block_on(async_method)`. Its types mirror the async ones: every guard
//! is a [`Guard`] over its async guard ([`LockGuard`] is `Guard<distlock::LockGuard>`,
//! [`JobGuard`] is `Guard<distlock::JobGuard>`, …), and the lock family's handles are
//! [`LockHandle`]s of the async handle's kind ([`Lock`] is `LockHandle<Plain>`, …).
//!
//! Guards release when dropped, synchronously: the drop sends the release and waits for it,
//! bounded by twice the client's command timeout (a failure or timeout is logged; the lease
//! ends the hold then). Dropped on a thread inside a tokio runtime's context (async code, or
//! a `spawn_blocking` thread), a guard releases in the background on the client's runtime
//! instead, as the async guard does.
//!
//! Handles are cheap to clone and `Send + Sync`: share one [`Client`] between threads (a
//! thread pool, request handlers) rather than building one per thread.
//!
//! # Panics
//! Every blocking call panics when made from inside an async runtime (a `#[tokio::main]`
//! function, a spawned task, `async` code of any tokio runtime): blocking there would stall
//! that runtime's worker, and tokio refuses to start a runtime from within a runtime. Use
//! the async API there. `spawn_blocking` threads may call it.
//!
//! # Examples
//! ```no_run
//! use std::time::Duration;
//!
//! fn main() -> distlock::Result<()> {
//!     let client = distlock::blocking::Client::builder()
//!         .url("redis://127.0.0.1/")
//!         .watchdog_lease(Duration::from_secs(30))
//!         .build()?;
//!     let guard = client.lock("nightly-report").acquire()?;
//!     // ... synchronous work; the watchdog renews the lease meanwhile ...
//!     assert!(guard.is_held()?);
//!     guard.release()?;
//!     Ok(())
//! }
//! ```

mod guard;
mod handle;
mod hold;
mod job;
mod latch;
mod lock;
mod multi;
#[cfg(test)]
mod parity;
mod rwlock;
mod semaphore;

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

pub use guard::Guard;
pub use handle::LockHandle;
pub use hold::{FairLockGuard, HoldGuard, LockGuard, RwLockReadGuard, RwLockWriteGuard};
pub use job::{JobGuard, JobLock};
pub use latch::CountDownLatch;
pub use lock::{FairLock, Lock};
pub use multi::{MultiLock, MultiLockGuard, RedLock, RedLockGuard, RedLockNodes};
pub use rwlock::RwLock;
pub use semaphore::{LeasedPermit, LeasedSemaphore, Semaphore, SemaphorePermit};

use crate::error::{Error, ErrorKind, Result};
use crate::PubSubMode;

/// Default number of worker threads of a blocking client's runtime: 2.
pub const DEFAULT_WORKER_THREADS: usize = 2;

/// The runtime a blocking client and everything made from it run on; the last handle to go
/// shuts it down.
#[derive(Clone)]
struct Rt(Arc<RtInner>);

struct RtInner {
    runtime: Option<tokio::runtime::Runtime>,
    /// Bound of a release sent from a guard's drop: twice the command timeout.
    drop_bound: Duration,
}

impl Rt {
    /// Start a runtime of `worker_threads` workers and run `connect` on it: what it connected,
    /// and the runtime to keep for it, whose guards' drops wait at most
    /// `drop_bound(&connected)` for their release.
    fn start<T>(
        worker_threads: usize,
        connect: impl Future<Output = Result<T>>,
        drop_bound: impl FnOnce(&T) -> Duration,
    ) -> Result<(T, Rt)> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(worker_threads)
            .thread_name("distlock-blocking")
            .enable_all()
            .build()
            .map_err(|e| {
                Error::new(
                    ErrorKind::Config,
                    format!("cannot start the blocking client's runtime: {e}"),
                )
            })?;
        let connected = runtime.block_on(connect)?;
        let drop_bound = drop_bound(&connected);
        let rt = Rt(Arc::new(RtInner {
            runtime: Some(runtime),
            drop_bound,
        }));
        Ok((connected, rt))
    }

    /// Identifies this runtime (and so the client it belongs to) within the process.
    fn id(&self) -> usize {
        Arc::as_ptr(&self.0) as usize
    }

    /// Enter the runtime's context, for calls that spawn without blocking.
    fn enter(&self) -> tokio::runtime::EnterGuard<'_> {
        self.0
            .runtime
            .as_ref()
            .expect("runtime lives until dropped")
            .enter()
    }

    /// Run `future` to completion on the runtime, blocking this thread.
    ///
    /// # Panics
    /// Inside an async runtime (tokio's "Cannot start a runtime from within a runtime").
    fn block_on<F: Future>(&self, future: F) -> F::Output {
        self.0
            .runtime
            .as_ref()
            .expect("runtime lives until dropped")
            .block_on(future)
    }

    /// Run `acquire` (an async handle's acquire) to completion and hold the guard it gives
    /// on this runtime, in its blocking form.
    ///
    /// # Panics
    /// Inside an async runtime, as [`Rt::block_on`].
    fn acquire<G: crate::Release>(
        &self,
        acquire: impl Future<Output = Result<G>>,
    ) -> Result<Guard<G>> {
        let guard = self.block_on(acquire)?;
        Ok(Guard::new(guard, self.clone()))
    }

    /// [`Rt::acquire`] for an attempt that may give nothing (`Ok(None)`: taken, or the wait
    /// elapsed).
    ///
    /// # Panics
    /// Inside an async runtime, as [`Rt::block_on`].
    fn try_acquire<G: crate::Release>(
        &self,
        attempt: impl Future<Output = Result<Option<G>>>,
    ) -> Result<Option<Guard<G>>> {
        let guard = self.block_on(attempt)?;
        Ok(guard.map(|g| Guard::new(g, self.clone())))
    }

    /// A guard's drop: run `release` and wait for it (bounded), where this thread may block;
    /// elsewhere drop `guard` itself, whose own drop releases in the background.
    fn release_on_drop<G, Fut, T>(&self, what: &str, guard: G, release: impl FnOnce(G) -> Fut)
    where
        Fut: Future<Output = Result<T>>,
    {
        if tokio::runtime::Handle::try_current().is_ok() {
            // In this client's runtime context, so the release is spawned there, not on the
            // caller's runtime (which may never run it).
            let _runtime = self.enter();
            drop(guard);
            return;
        }
        let bound = self.0.drop_bound;
        match self.block_on(async { tokio::time::timeout(bound, release(guard)).await }) {
            Ok(Ok(_)) => {}
            Ok(Err(e)) if e.kind() == ErrorKind::NotHeld => {
                tracing::debug!(%what, error = format_args!("{e:#}"), "dropped guard: nothing left to release")
            }
            Ok(Err(e)) => {
                tracing::warn!(%what, error = format_args!("{e:#}"), "dropped guard: release failed; the lease ends the hold")
            }
            Err(_) => {
                tracing::warn!(%what, bound = ?self.0.drop_bound, "dropped guard: release timed out; the lease ends the hold")
            }
        }
    }
}

impl Drop for RtInner {
    fn drop(&mut self) {
        let Some(runtime) = self.runtime.take() else {
            return;
        };
        if tokio::runtime::Handle::try_current().is_ok() {
            // Dropping a runtime may block; not allowed in async code.
            runtime.shutdown_background();
        } else {
            runtime.shutdown_timeout(self.drop_bound);
        }
    }
}

/// A blocking client: the async [`crate::Client`] and the runtime it runs on.
///
/// Cheap to clone (clones share both); `Send + Sync`. Build one per process with
/// [`Client::builder`] or [`Client::connect`].
///
/// The runtime lives while the client, or any primitive or guard made from it, lives.
#[derive(Clone)]
pub struct Client {
    inner: crate::Client,
    rt: Rt,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("blocking::Client")
            .field(&self.inner)
            .finish()
    }
}

impl Client {
    /// A builder; set at least [`ClientBuilder::url`].
    pub fn builder() -> ClientBuilder {
        ClientBuilder {
            inner: crate::Client::builder(),
            worker_threads: DEFAULT_WORKER_THREADS,
        }
    }

    /// Connect with default settings: `Client::builder().url(url).build()`.
    ///
    /// # Errors
    /// As [`crate::ClientBuilder::build`].
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](self#panics)).
    pub fn connect(url: &str) -> Result<Client> {
        Client::builder().url(url).build()
    }

    /// Returns the async client underneath, for code that mixes both.
    ///
    /// It runs on this client's runtime; use it from async code only.
    pub fn as_async(&self) -> &crate::Client {
        &self.inner
    }

    /// A plain reentrant lock named `name`, as [`crate::Client::lock`].
    pub fn lock(&self, name: impl Into<String>) -> Lock {
        Lock::new(self.inner.lock(name), self.rt.clone())
    }

    /// A fair (first come, first served) lock named `name`, as [`crate::Client::fair_lock`].
    pub fn fair_lock(&self, name: impl Into<String>) -> FairLock {
        FairLock::new(self.inner.fair_lock(name), self.rt.clone())
    }

    /// A read-write lock named `name`, as [`crate::Client::rw_lock`].
    pub fn rw_lock(&self, name: impl Into<String>) -> RwLock {
        RwLock::new(self.inner.rw_lock(name), self.rt.clone())
    }

    /// A semaphore named `name`, as [`crate::Client::semaphore`].
    pub fn semaphore(&self, name: impl Into<String>) -> Semaphore {
        Semaphore::new(self.inner.semaphore(name), self.rt.clone())
    }

    /// A semaphore with leased permits named `name`, as [`crate::Client::leased_semaphore`].
    pub fn leased_semaphore(&self, name: impl Into<String>) -> LeasedSemaphore {
        LeasedSemaphore::new(self.inner.leased_semaphore(name), self.rt.clone())
    }

    /// A count-down latch named `name`, as [`crate::Client::count_down_latch`].
    pub fn count_down_latch(&self, name: impl Into<String>) -> CountDownLatch {
        CountDownLatch::new(self.inner.count_down_latch(name), self.rt.clone())
    }

    /// A job lock named `name` (ShedLock's layout), as [`crate::Client::job_lock`].
    pub fn job_lock(&self, name: impl Into<String>) -> JobLock {
        JobLock::new(self.inner.job_lock(name), self.rt.clone())
    }

    /// The application name this client reports, as [`crate::Client::app_name`].
    pub fn app_name(&self) -> &str {
        self.inner.app_name()
    }

    /// How this client calls its scripts (Redis Functions or `EVALSHA`) and why, as
    /// [`crate::Client::script_calls`].
    pub fn script_calls(&self) -> crate::ScriptCalls {
        self.inner.script_calls()
    }

    /// Returns the name of this client's connections (`distlock:<app>:<host>:<pid>`), as
    /// [`crate::Client::connection_name`].
    pub fn connection_name(&self) -> &str {
        self.inner.connection_name()
    }

    /// Locks this client's watchdog is renewing now.
    pub fn watchdog_locks(&self) -> usize {
        self.inner.watchdog_locks()
    }

    /// Releases everything this client holds and stops its background work, as
    /// [`crate::Client::shutdown`].
    ///
    /// The runtime itself stops when the last handle is dropped.
    ///
    /// # Errors
    /// As [`crate::Client::shutdown`].
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](self#panics)).
    pub fn shutdown(&self) -> Result<()> {
        self.rt.block_on(self.inner.shutdown())
    }
}

/// Settings of a blocking [`Client`].
///
/// Those of [`crate::ClientBuilder`] (each method here sets the one of the same name) and the
/// runtime's worker threads.
#[derive(Clone)]
pub struct ClientBuilder {
    inner: crate::ClientBuilder,
    worker_threads: usize,
}

impl fmt::Debug for ClientBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("blocking::ClientBuilder")
            .field("inner", &self.inner)
            .field("worker_threads", &self.worker_threads)
            .finish()
    }
}

impl ClientBuilder {
    /// This builder with `set` applied to its async settings.
    fn map(mut self, set: impl FnOnce(crate::ClientBuilder) -> crate::ClientBuilder) -> Self {
        self.inner = set(self.inner);
        self
    }

    /// Sets the server URL: one server, a Sentinel deployment or a Cluster, as
    /// [`crate::ClientBuilder::url`].
    pub fn url(self, url: impl Into<String>) -> Self {
        self.map(|b| b.url(url))
    }

    /// Sets how many replicas must confirm a grant before it counts, as
    /// [`crate::ClientBuilder::replica_acks`].
    pub fn replica_acks(self, n: u32) -> Self {
        self.map(|b| b.replica_acks(n))
    }

    /// Sets how long a grant waits for its replicas' confirmations, as
    /// [`crate::ClientBuilder::replica_ack_timeout`].
    pub fn replica_ack_timeout(self, timeout: Duration) -> Self {
        self.map(|b| b.replica_ack_timeout(timeout))
    }

    /// Sets which pub/sub carries wake-ups on a Redis Cluster, as
    /// [`crate::ClientBuilder::pubsub_mode`].
    pub fn pubsub_mode(self, mode: PubSubMode) -> Self {
        self.map(|b| b.pubsub_mode(mode))
    }

    /// Sets credentials for the sentinels of a `redis-sentinel://` URL, as
    /// [`crate::ClientBuilder::sentinel_auth`].
    pub fn sentinel_auth(self, user: Option<&str>, password: &str) -> Self {
        self.map(|b| b.sentinel_auth(user, password))
    }

    /// Sets a prefix put before every name to form its key, as
    /// [`crate::ClientBuilder::key_prefix`].
    pub fn key_prefix(self, prefix: impl Into<String>) -> Self {
        self.map(|b| b.key_prefix(prefix))
    }

    /// Sets the lease of locks acquired without an explicit lease, as
    /// [`crate::ClientBuilder::watchdog_lease`].
    pub fn watchdog_lease(self, lease: Duration) -> Self {
        self.map(|b| b.watchdog_lease(lease))
    }

    /// Sets how long an `acquire` waits before failing with `NotAcquired`, as
    /// [`crate::ClientBuilder::default_wait`].
    pub fn default_wait(self, wait: Duration) -> Self {
        self.map(|b| b.default_wait(wait))
    }

    /// Sets the timeout of one command (a guard's drop waits at most twice it), as
    /// [`crate::ClientBuilder::command_timeout`].
    pub fn command_timeout(self, timeout: Duration) -> Self {
        self.map(|b| b.command_timeout(timeout))
    }

    /// Sets the timeout for establishing a connection, as
    /// [`crate::ClientBuilder::connect_timeout`].
    pub fn connect_timeout(self, timeout: Duration) -> Self {
        self.map(|b| b.connect_timeout(timeout))
    }

    /// Refuses servers that may evict lock keys (with `true`), as
    /// [`crate::ClientBuilder::require_noeviction`].
    pub fn require_noeviction(self, require: bool) -> Self {
        self.map(|b| b.require_noeviction(require))
    }

    /// Lets the client run its scripts as Redis Functions where it can (default `true`), as
    /// [`crate::ClientBuilder::redis_functions`].
    pub fn redis_functions(self, allow: bool) -> Self {
        self.map(|b| b.redis_functions(allow))
    }

    /// Labels the acquire metrics with the lock's name too (with `true`), as
    /// [`crate::ClientBuilder::metrics_lock_names`].
    pub fn metrics_lock_names(self, by_name: bool) -> Self {
        self.map(|b| b.metrics_lock_names(by_name))
    }

    /// Sets the application name this client reports to the server and records with its grants, as
    /// [`crate::ClientBuilder::app_name`].
    pub fn app_name(self, name: impl Into<String>) -> Self {
        self.map(|b| b.app_name(name))
    }

    /// Sets the password of the data servers, given apart from the URL, as
    /// [`crate::ClientBuilder::password`].
    pub fn password(self, password: impl Into<String>) -> Self {
        self.map(|b| b.password(password))
    }

    /// Sets the ACL user name of the data servers, given apart from the URL, as
    /// [`crate::ClientBuilder::username`].
    pub fn username(self, user: impl Into<String>) -> Self {
        self.map(|b| b.username(user))
    }

    /// Checks `rediss://` servers against the CA certificates in `pem`, as
    /// [`crate::ClientBuilder::tls_ca_cert`].
    pub fn tls_ca_cert(self, pem: impl Into<Vec<u8>>) -> Self {
        self.map(|b| b.tls_ca_cert(pem))
    }

    /// Sets the server by a `redis::Client` the application already has, as
    /// [`crate::ClientBuilder::redis_client`].
    pub fn redis_client(self, client: redis::Client) -> Self {
        self.map(|b| b.redis_client(client))
    }

    /// Sets the number of worker threads of the client's runtime.
    ///
    /// They run the watchdog, wake-ups and the connection I/O while the calling threads block.
    /// Default [`DEFAULT_WORKER_THREADS`] (2); at least 1.
    pub fn worker_threads(mut self, n: usize) -> Self {
        self.worker_threads = n;
        self
    }

    /// Start the runtime and connect.
    ///
    /// # Errors
    /// As [`crate::ClientBuilder::build`]; [`ErrorKind::Config`] for zero worker threads or a
    /// runtime that cannot start.
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](self#panics)).
    pub fn build(self) -> Result<Client> {
        if self.worker_threads == 0 {
            return Err(Error::config(
                "a blocking client needs at least 1 worker thread",
            ));
        }
        let (inner, rt) = Rt::start(self.worker_threads, self.inner.build(), |client| {
            client.command_timeout().saturating_mul(2)
        })?;
        Ok(Client { inner, rt })
    }
}

impl From<crate::ClientBuilder> for ClientBuilder {
    /// A blocking builder with every setting of `builder` (and
    /// [`DEFAULT_WORKER_THREADS`]): what [`Config::blocking_builder`](crate::Config::blocking_builder)
    /// gives, and the way to reuse an async builder's settings.
    fn from(builder: crate::ClientBuilder) -> Self {
        ClientBuilder {
            inner: builder,
            worker_threads: DEFAULT_WORKER_THREADS,
        }
    }
}
