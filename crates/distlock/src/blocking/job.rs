//! Blocking form of the job lock (ShedLock's Redis layout, with an ownership-checked
//! release).

use std::cell::RefCell;
use std::fmt;
use std::time::Duration;

use super::{Guard, Rt};
use crate::error::Result;
use crate::JobHolder;

thread_local! {
    /// Jobs (runtime, key) this thread runs under [`JobLock::run`]: a nested run of the same
    /// job runs at once (ShedLock's `alreadyLockedBy`).
    static RUNNING: RefCell<Vec<(usize, String)>> = const { RefCell::new(Vec::new()) };
}

/// Takes its job off [`RUNNING`] when dropped (also when the task panics).
struct Running((usize, String));

impl Drop for Running {
    fn drop(&mut self) {
        RUNNING.with(|r| {
            let mut r = r.borrow_mut();
            if let Some(i) = r.iter().rposition(|j| *j == self.0) {
                r.remove(i);
            }
        });
    }
}

/// A lock for scheduled jobs, blocking form of [`crate::JobLock`].
///
/// Made by [`Client::job_lock`](super::Client::job_lock).
#[derive(Clone)]
pub struct JobLock {
    inner: crate::JobLock,
    rt: Rt,
}

impl fmt::Debug for JobLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("blocking::JobLock")
            .field(&self.inner)
            .finish()
    }
}

impl JobLock {
    pub(super) fn new(inner: crate::JobLock, rt: Rt) -> JobLock {
        JobLock { inner, rt }
    }

    /// Takes the job lock, waiting up to the client's default wait, as [`crate::JobLock::acquire`].
    ///
    /// The calling thread sleeps while it waits; a release elsewhere wakes it.
    ///
    /// # Errors
    /// As [`crate::JobLock::acquire`].
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn acquire(&self) -> Result<JobGuard> {
        self.rt.acquire(self.inner.acquire())
    }

    /// Takes the job lock if no other instance holds it, never waiting, as
    /// [`crate::JobLock::try_acquire`].
    ///
    /// `Ok(None)` when another instance holds it.
    ///
    /// # Errors
    /// As [`crate::JobLock::try_acquire`].
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn try_acquire(&self) -> Result<Option<JobGuard>> {
        self.rt.try_acquire(self.inner.try_acquire())
    }

    /// Takes the job lock, waiting at most `wait`, as [`crate::JobLock::try_acquire_for`].
    ///
    /// `Ok(None)` when the wait elapsed.
    ///
    /// # Errors
    /// As [`crate::JobLock::try_acquire_for`].
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn try_acquire_for(&self, wait: Duration) -> Result<Option<JobGuard>> {
        self.rt.try_acquire(self.inner.try_acquire_for(wait))
    }

    /// The environment part of the key, as [`crate::JobLock::environment`].
    pub fn environment(self, env: impl Into<String>) -> Self {
        JobLock::new(self.inner.environment(env), self.rt)
    }

    /// The longest the lock is kept (ShedLock's `lockAtMostFor`), as
    /// [`crate::JobLock::at_most_for`].
    pub fn at_most_for(self, d: Duration) -> Self {
        JobLock::new(self.inner.at_most_for(d), self.rt)
    }

    /// The shortest the lock is kept (ShedLock's `lockAtLeastFor`), as
    /// [`crate::JobLock::at_least_for`].
    pub fn at_least_for(self, d: Duration) -> Self {
        JobLock::new(self.inner.at_least_for(d), self.rt)
    }

    /// Extend the lock while the job runs, as [`crate::JobLock::keep_alive`].
    pub fn keep_alive(self) -> Self {
        JobLock::new(self.inner.keep_alive(), self.rt)
    }

    /// The job's name.
    pub fn name(&self) -> &str {
        self.inner.name()
    }

    /// The Redis key: `<prefix>job-lock:<env>:<name>`.
    pub fn key(&self) -> String {
        self.inner.key()
    }

    /// Runs `task` on this thread if this instance gets the lock.
    ///
    /// `Ok(Some(output))` when it ran, `Ok(None)` when another instance holds the lock (never
    /// waits), as [`crate::JobLock::run`]. The lock is released afterwards with the
    /// ownership-checked script, kept until `at_least_for` has passed. Inside a running job of the
    /// same name and environment on the same client and thread, the inner task runs at once without
    /// locking again (ShedLock's `alreadyLockedBy`).
    ///
    /// # Errors
    /// As [`crate::JobLock::run`]: [`ErrorKind::NotHeld`](crate::ErrorKind::NotHeld) when
    /// the task outran `at_most_for` and the lock was not ours at release (the output is
    /// dropped; use [`try_acquire`](JobLock::try_acquire) to keep it).
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)). A panic of `task` is
    /// passed on after the lock is released.
    pub fn run<T>(&self, task: impl FnOnce() -> T) -> Result<Option<T>> {
        let job = (self.rt.id(), self.inner.key());
        if RUNNING.with(|r| r.borrow().contains(&job)) {
            return Ok(Some(task()));
        }
        let Some(guard) = self.try_acquire()? else {
            return Ok(None);
        };
        RUNNING.with(|r| r.borrow_mut().push(job.clone()));
        let running = Running(job);
        let output = task();
        drop(running);
        guard.release()?;
        Ok(Some(output))
    }

    /// Who holds the lock now, if anyone, as [`crate::JobLock::status`].
    ///
    /// # Errors
    /// As [`crate::JobLock::status`].
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn status(&self) -> Result<Option<JobHolder>> {
        self.rt.block_on(self.inner.status())
    }
}

/// A held job lock, blocking form of [`crate::JobGuard`]: a [`Guard`] over it.
///
/// Released by [`release`](Guard::release) (kept until `at_least_for` passed) or when dropped
/// (synchronously, bounded by twice the command timeout; see the [module docs](super)).
pub type JobGuard = Guard<crate::JobGuard>;

impl Guard<crate::JobGuard> {
    /// The value this guard wrote: `ADDED:<time>@<host>:<uuid>`.
    pub fn value(&self) -> &str {
        self.get().value()
    }

    /// The key: `<prefix>job-lock:<env>:<name>`.
    pub fn key(&self) -> &str {
        self.get().key()
    }

    /// The environment the job runs in.
    pub fn environment(&self) -> &str {
        self.get().environment()
    }

    /// Extends the lock to `at_most_for` from now and keeps it at least `at_least_for` from
    /// now, as [`crate::JobGuard::extend_active`] (ShedLock's `extendActiveLock`).
    ///
    /// # Errors
    /// As [`crate::JobGuard::extend_active`].
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn extend_active(&self, at_most_for: Duration, at_least_for: Duration) -> Result<()> {
        self.block_on(self.get().extend_active(at_most_for, at_least_for))
    }
}
