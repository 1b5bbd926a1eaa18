//! [`JobLock`]: ShedLock's job lock, with a compare-and-delete release.

mod guard;
pub(crate) mod request;
mod schedule;
#[cfg(test)]
mod tests;

pub use guard::{JobGuard, JobLease};
use request::JobRequest;
#[cfg(feature = "cron")]
pub use schedule::spawn_cron;
pub use schedule::{spawn_every, spawn_every_with};

use std::fmt;
use std::future::Future;
use std::sync::Mutex;
use std::time::Duration;

use crate::acquire::{acquire, not_acquired};
use crate::client::Client;
use crate::conn::Resend;
use crate::error::{Error, ErrorKind, Result};
use crate::keys;
use crate::scripts;

tokio::task_local! {
    /// Jobs (client id, env, name, lease) the current task runs under.
    static RUNNING: Vec<(uuid::Uuid, String, String, JobLease)>;
}

/// Returns whether the current task runs inside [`JobLock::run`] of a job called `name`.
///
/// A run by [`run_with`](JobLock::run_with) or by a schedule counts too, in any environment. It
/// returns a `bool` and never panics: ShedLock's `LockAssert.assertLocked()`, which throws, is
/// `assert!(distlock::holds_job_lock("name"))`.
///
/// The answer is per task: a task spawned from inside the job is not "under the lock" by this
/// test, since it may outlive the job.
///
/// ```no_run
/// # async fn f(client: distlock::Client) -> distlock::Result<()> {
/// use std::time::Duration;
/// async fn rebuild_index() {
///     // Only ever called from the job: fail loudly if a refactoring changes that.
///     assert!(distlock::holds_job_lock("reindex"), "reindex runs without its lock");
/// }
/// let lock = client.job_lock("reindex").at_most_for(Duration::from_secs(300));
/// lock.run(rebuild_index()).await?;
/// # Ok(()) }
/// ```
pub fn holds_job_lock(name: &str) -> bool {
    RUNNING
        .try_with(|jobs| jobs.iter().any(|(_, _, n, _)| n == name))
        .unwrap_or(false)
}

/// Returns whether the current task runs inside [`JobLock::run`] of a job called `name`.
///
/// The former name of [`holds_job_lock`]: it returns a `bool` and does not panic, which an
/// `assert_*` name did not say.
#[deprecated(note = "renamed `holds_job_lock`: it returns a bool and never panics \
            (`assert!(distlock::holds_job_lock(name))` is ShedLock's `LockAssert.assertLocked()`)")]
pub fn assert_locked(name: &str) -> bool {
    holds_job_lock(name)
}

/// The lease of this client's run of the job that this task runs inside (a nested run).
fn running_under(client: &Client, env: &str, name: &str) -> Option<JobLease> {
    let id = client.id();
    RUNNING
        .try_with(|jobs| {
            jobs.iter()
                .find(|(c, e, n, _)| *c == id && e == env && n == name)
                .map(|(_, _, _, lease)| lease.clone())
        })
        .ok()
        .flatten()
}

/// A job lock.
///
/// Made by [`Client::job_lock`]; configure with the builder methods, then [`run`](JobLock::run) or
/// [`try_acquire`](JobLock::try_acquire).
///
/// A job lock is a string key `<key prefix>job-lock:<env>:<name>` holding
/// `ADDED:<ISO-8601 UTC>@<hostname>:<client-id>`, set with `SET NX PX <at_most_for>`: the formats of
/// ShedLock's Redis provider, so a Java service using ShedLock on the same Redis sees the
/// same lock. The job does not wait: if another instance holds the lock, this instance skips
/// the run ([`JobLock::run`] returns `Ok(None)`). For code that must hold the lock itself,
/// [`JobLock::try_acquire`] makes one attempt and [`JobLock::try_acquire_for`] /
/// [`JobLock::acquire`] retry within a wait, as the other locks of the crate do.
///
/// - `at_most_for`: the lock expires after it even if the holder dies or hangs (required).
/// - `at_least_for`: after a short job the lock is kept until this much time has passed since
///   the start, so instances whose clocks or schedules differ slightly do not run the job
///   again (default 0).
/// - `keep_alive`: extend the lock to `at_most_for` every half of it while the job runs
///   (ShedLock's `KeepAliveLockProvider`).
///
/// Unlike ShedLock's Redis provider, whose unlock deletes the key without reading it, release
/// and extension compare the value first, in one script each: a job that outran
/// `at_most_for` never deletes or shortens the lock of the instance that took over; it gets
/// [`ErrorKind::NotHeld`] instead.
///
/// # Examples
/// ```no_run
/// # async fn f(client: distlock::Client) -> distlock::Result<()> {
/// use std::time::Duration;
/// let ran = client
///     .job_lock("nightly-report")
///     .environment("prod")
///     .at_most_for(Duration::from_secs(600))
///     .at_least_for(Duration::from_secs(30))
///     .run(async { /* build the report */ 42 })
///     .await?;
/// match ran {
///     Some(v) => println!("this instance ran it: {v}"),
///     None => println!("another instance holds it"),
/// }
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct JobLock {
    client: Client,
    name: String,
    env: String,
    at_most_for: Option<Duration>,
    at_least_for: Duration,
    keep_alive: bool,
}

impl fmt::Debug for JobLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JobLock")
            .field("key", &self.key())
            .field("at_most_for", &self.at_most_for)
            .field("at_least_for", &self.at_least_for)
            .field("keep_alive", &self.keep_alive)
            .finish()
    }
}

/// Who holds a job lock, read from its value.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct JobHolder {
    /// The whole value, `ADDED:<time>@<host>[:<id>]`.
    pub value: String,
    /// When the holder took the lock, as it wrote it (ISO-8601 UTC, the holder's clock).
    pub locked_at: String,
    /// The holder's hostname.
    pub host: String,
    /// The id after the host, when present: the holding distlock client's
    /// ([`Client::id`]; older distlock versions wrote a fresh id per grant); absent in
    /// ShedLock's values.
    pub id: Option<String>,
    /// Time left until the lock expires.
    pub ttl: Option<Duration>,
}

impl JobHolder {
    /// Parse a ShedLock value; `None` when it does not start with `ADDED:` and contain `@`.
    pub fn parse(value: &str, ttl: Option<Duration>) -> Option<JobHolder> {
        let (locked_at, host, id) = crate::keys::job_value_parts(value)?;
        Some(JobHolder {
            value: value.to_string(),
            locked_at: locked_at.to_string(),
            host: host.to_string(),
            id: id.map(str::to_string),
            ttl,
        })
    }
}

impl Client {
    /// Returns the job lock called `name`, in environment `"default"`, with no `at_most_for` yet.
    ///
    /// Set it before use. No I/O.
    pub fn job_lock(&self, name: impl Into<String>) -> JobLock {
        JobLock {
            client: self.clone(),
            name: name.into(),
            env: "default".into(),
            at_most_for: None,
            at_least_for: Duration::ZERO,
            keep_alive: false,
        }
    }
}

/// Interval at which a waiting job lock acquire polls.
///
/// How often [`JobLock::try_acquire_for`] and [`JobLock::acquire`] try again while another
/// instance holds the lock: a job lock has no wake-up channel, so they poll.
pub const JOB_POLL_INTERVAL: Duration = Duration::from_millis(100);

/// The job-lock key of `name` in `env`: `<prefix>job-lock:<env>:<name>` (ShedLock's format).
pub(crate) fn job_key(key_prefix: &str, env: &str, name: &str) -> String {
    format!("{key_prefix}{}", keys::job_lock(env, name))
}

impl JobLock {
    /// The environment, the middle part of the key (ShedLock's `env`). Default `"default"`.
    pub fn environment(mut self, env: impl Into<String>) -> Self {
        self.env = env.into();
        self
    }

    /// How long the lock lives at most, whatever the holder does (required, ≥ 1 ms).
    pub fn at_most_for(mut self, d: Duration) -> Self {
        self.at_most_for = Some(d);
        self
    }

    /// How long the lock lives at least, from the start of the run (default 0, at most
    /// `at_most_for`).
    pub fn at_least_for(mut self, d: Duration) -> Self {
        self.at_least_for = d;
        self
    }

    /// Extend the lock to `at_most_for` every half of it while the job runs.
    pub fn keep_alive(mut self) -> Self {
        self.keep_alive = true;
        self
    }

    /// The job's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The Redis key: `<prefix>job-lock:<env>:<name>`.
    pub fn key(&self) -> String {
        job_key(self.client.key_prefix(), &self.env, &self.name)
    }

    fn check(&self) -> Result<Duration> {
        keys::check_name_len(&self.name)?;
        if self.env.is_empty() {
            return Err(Error::invalid("job environment is empty"));
        }
        keys::check_name_len(&self.key())?;
        let at_most = self
            .at_most_for
            .ok_or_else(|| Error::invalid("at_most_for is required for a job lock"))?;
        keys::lease_ms("at_most_for", at_most)?;
        if self.at_least_for > at_most {
            return Err(Error::invalid(format!(
                "at_least_for ({:?}) exceeds at_most_for ({at_most:?})",
                self.at_least_for
            )));
        }
        Ok(at_most)
    }

    /// Makes one attempt to take the lock.
    ///
    /// `Ok(None)` when another instance holds it (contention is not an error).
    ///
    /// The key is set with `SET NX PX at_most_for` to a fresh ShedLock value; the caller runs
    /// the job and then [releases](JobGuard::release) the guard, which keeps the lock until
    /// `at_least_for` has passed since this call. With [`keep_alive`](JobLock::keep_alive) the
    /// guard extends the lock to `at_most_for` every half of it until released.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`]: empty name or
    /// environment, `at_most_for` missing, zero or over 365 days, `at_least_for` over
    /// `at_most_for`. [`ErrorKind::WrongType`] when the key
    /// holds another type. Server failures
    /// ([`ErrorKind::Connection`],
    /// [`ErrorKind::Backend`], …).
    ///
    /// # Cancel safety
    /// Cancel safe: a grant that raced the drop (or whose reply was lost) is deleted in the
    /// background, compared by its value. Only a send still queued on a stalled server that
    /// runs after that delete keeps the lock, until `at_most_for` ends.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn f(client: distlock::Client) -> distlock::Result<()> {
    /// use std::time::Duration;
    /// let lock = client.job_lock("reindex").at_most_for(Duration::from_secs(300));
    /// match lock.try_acquire().await? {
    ///     Some(guard) => {
    ///         // reindex, then:
    ///         guard.release().await?;
    ///     }
    ///     None => println!("another instance is reindexing"),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn try_acquire(&self) -> Result<Option<JobGuard>> {
        self.try_acquire_for(Duration::ZERO).await
    }

    /// Takes the lock, retrying while another instance holds it until `wait` has passed.
    ///
    /// A zero `wait` makes one attempt. Returns `Ok(None)` when the wait elapsed.
    ///
    /// A job lock has no wake-up channel (ShedLock's format has none), so this polls: one
    /// attempt every 100 ms ([`JOB_POLL_INTERVAL`]), and a last one when the wait ends. An
    /// unreachable server is retried in the same way until the wait ends (then its error is
    /// returned), as the other locks' waiters ride out outages.
    ///
    /// # Errors
    /// As [`JobLock::try_acquire`], from the last attempt; [`ErrorKind::InvalidInput`] for a
    /// `wait` over 365 days. A connection failure whose outcome is unknown
    /// ([`Error::is_outcome_unknown`]) is returned at once: the grant may have happened, and
    /// then it expires after `at_most_for`.
    ///
    /// # Cancel safety
    /// As [`JobLock::try_acquire`].
    ///
    /// # Examples
    /// ```no_run
    /// # async fn f(client: distlock::Client) -> distlock::Result<()> {
    /// use std::time::Duration;
    /// let lock = client.job_lock("migrate").at_most_for(Duration::from_secs(600));
    /// if let Some(guard) = lock.try_acquire_for(Duration::from_secs(5)).await? {
    ///     // migrate, then:
    ///     guard.release().await?;
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn try_acquire_for(&self, wait: Duration) -> Result<Option<JobGuard>> {
        let at_most = self.check()?;
        let request = JobRequest {
            key: self.key(),
            at_most_ms: at_most.as_millis() as u64,
            host: gethostname::gethostname().to_string_lossy().into_owned(),
            value: Mutex::new((String::new(), false)),
            client: self.client.clone(),
        };
        let key = request.key.clone();
        Ok(acquire(&self.client, request, wait)
            .await?
            .map(|(value, started)| self.guard(key, value, started, at_most)))
    }

    /// Takes the lock, waiting at most the client's default wait.
    ///
    /// The default wait is [`ClientBuilder::default_wait`](crate::ClientBuilder::default_wait),
    /// 60 s unless set. Polls as [`JobLock::try_acquire_for`] does.
    ///
    /// # Errors
    /// [`ErrorKind::NotAcquired`] when the wait elapsed with the lock held elsewhere;
    /// otherwise as [`JobLock::try_acquire_for`].
    ///
    /// # Cancel safety
    /// As [`JobLock::try_acquire`].
    pub async fn acquire(&self) -> Result<JobGuard> {
        let wait = self.client.default_wait();
        self.try_acquire_for(wait).await?.ok_or_else(|| {
            not_acquired(
                format_args!("job lock {:?} (environment {:?})", self.name, self.env),
                wait,
            )
        })
    }

    /// Runs `task` if this instance gets the lock.
    ///
    /// `Ok(Some(output))` when it ran, `Ok(None)` when another instance holds the lock (not an
    /// error; it never waits, as in ShedLock).
    ///
    /// After the task, the lock is released with the ownership-checked script (kept until
    /// `at_least_for` has passed). Inside a running job of the same name and environment,
    /// run by the same client in the same task, the inner task runs at once without locking
    /// again (ShedLock's `alreadyLockedBy`), and [`holds_job_lock`] returns true.
    ///
    /// # Errors
    /// As [`JobLock::try_acquire`]; and [`ErrorKind::NotHeld`]
    /// when the task outran `at_most_for` and the lock expired (or was taken over) before the
    /// release: the output is dropped, the other holder's lock is untouched, and a warning
    /// is logged. Use [`JobLock::try_acquire`] to keep the output in that case.
    ///
    /// # Cancel safety
    /// Dropping the future drops the task and releases the lock in the background.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn f(client: distlock::Client) -> distlock::Result<()> {
    /// use std::time::Duration;
    /// let ran = client
    ///     .job_lock("cleanup")
    ///     .at_most_for(Duration::from_secs(600))
    ///     .run(async { /* the cleanup */ 3 })
    ///     .await?;
    /// if ran.is_none() {
    ///     println!("skipped: another instance runs it");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn run<F, T>(&self, task: F) -> Result<Option<T>>
    where
        F: Future<Output = T>,
    {
        self.run_with(|_| task).await
    }

    /// Runs the task as [`JobLock::run`], handing it a [`JobLease`] on the lock it runs under.
    ///
    /// The job can watch [`lost`](JobLease::lost) (stop when the lock is gone) and
    /// [`extend`](JobLease::extend) it (ShedLock's `LockExtender`). A nested run (the same job,
    /// client and task) gets the outer run's lease.
    ///
    /// # Errors
    /// As [`JobLock::run`].
    ///
    /// # Cancel safety
    /// As [`JobLock::run`].
    ///
    /// # Examples
    /// ```no_run
    /// # async fn import(_batch: u32) {}
    /// # async fn f(client: distlock::Client) -> distlock::Result<()> {
    /// use std::time::Duration;
    /// client
    ///     .job_lock("import")
    ///     .at_most_for(Duration::from_secs(60))
    ///     .run_with(|lease| async move {
    ///         for batch in 0..100 {
    ///             if lease.is_lost() {
    ///                 return; // another instance may run it now
    ///             }
    ///             import(batch).await;
    ///             let _ = lease.extend(Duration::from_secs(60)).await;
    ///         }
    ///     })
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub async fn run_with<F, Fut, T>(&self, task: F) -> Result<Option<T>>
    where
        F: FnOnce(JobLease) -> Fut,
        Fut: Future<Output = T>,
    {
        self.check()?;
        if let Some(lease) = running_under(&self.client, &self.env, &self.name) {
            return Ok(Some(task(lease).await));
        }
        let Some(guard) = self.try_acquire().await? else {
            return Ok(None);
        };
        let lease = guard.lease();
        let mut jobs = RUNNING.try_with(|j| j.clone()).unwrap_or_default();
        jobs.push((
            self.client.id(),
            self.env.clone(),
            self.name.clone(),
            lease.clone(),
        ));
        let output = RUNNING.scope(jobs, task(lease)).await;
        match guard.release().await {
            Ok(()) => Ok(Some(output)),
            Err(e) => {
                if e.kind() == ErrorKind::NotHeld {
                    tracing::warn!(job = %self.name, error = format_args!("{e:#}"), "the job outran at_most_for; the lock was not ours at release and was left alone");
                }
                Err(e)
            }
        }
    }

    /// Who holds the job lock now, if anyone.
    ///
    /// # Errors
    /// [`ErrorKind::WrongType`] when the key holds another type;
    /// [`ErrorKind::UnexpectedReply`] when the value is
    /// not a ShedLock value. Server failures.
    ///
    /// # Cancel safety
    /// Cancel safe: read-only.
    pub async fn status(&self) -> Result<Option<JobHolder>> {
        keys::check_name_len(&self.name)?;
        let key = self.key();
        let mut pipe = redis::pipe();
        pipe.cmd("GET").arg(&key).cmd("PTTL").arg(&key);
        let (value, pttl): (Option<String>, i64) = self
            .client
            .backend()
            .pipeline(&format!("job status {key:?}"), &pipe)
            .await?;
        let Some(value) = value else { return Ok(None) };
        let ttl = (pttl >= 0).then(|| Duration::from_millis(pttl as u64));
        JobHolder::parse(&value, ttl)
            .map(Some)
            .ok_or_else(|| Error::unexpected(format!("{key:?} does not hold a job-lock value")))
    }

    /// Deletes the job lock whoever holds it.
    ///
    /// An operator clears a stuck job with it, as by deleting ShedLock's key by hand (`distlock
    /// unlock --force NAME --env ENV`). Returns whether it was held. A distlock holder's guard
    /// hears of it on its client's notice channel (the value names the client:
    /// [`layout::client_notice_channel`](crate::layout::client_notice_channel)) within a
    /// round trip or two: its [`lost`](crate::Lease::lost) signal fires, and its release answers
    /// [`ErrorKind::NotHeld`]. A ShedLock holder is not told.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`] for an empty name or
    /// environment; [`ErrorKind::WrongType`] when the key holds
    /// another type or a string that is not a ShedLock value (nothing is deleted); server
    /// failures.
    ///
    /// # Cancel safety
    /// Cancel safe: one script; repeating it finds nothing to delete.
    pub async fn force_unlock(&self) -> Result<bool> {
        keys::check_name_len(&self.name)?;
        if self.env.is_empty() {
            return Err(Error::invalid("job environment is empty"));
        }
        let key = self.key();
        let mut inv = scripts::JOB_FORCE_UNLOCK.prepare_invoke();
        inv.key(&key);
        let backend = &self.client.backend();
        let deleted: Option<String> = backend
            .eval(&format!("force unlock job {key:?}"), &inv, Resend::Few)
            .await?;
        let Some(value) = deleted else {
            return Ok(false);
        };
        crate::notice::tell_job_holder(backend, &key, &value).await;
        Ok(true)
    }
}
