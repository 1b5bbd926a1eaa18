//! [`CountDownLatch`].

use std::time::Duration;

use tokio::time::Instant;

use crate::acquire::{acquire, Acquire, Step};
use crate::client::Client;
use crate::conn::pubsub::Wake;
use crate::conn::Resend;
use crate::error::{Error, ErrorKind, Result};
use crate::keys;
use crate::scripts;

/// Re-check interval while waiting, in case a wake-up message was lost.
const RECHECK: Duration = Duration::from_secs(1);

/// A distributed count-down latch. Made by
/// [`Client::count_down_latch`]; cheap to clone.
///
/// The latch is a string key holding the count; `count_down` decrements it and, at zero,
/// deletes it and publishes `0` on `redisson_countdownlatch__channel__{<name>}`, which wakes
/// every waiter. A latch whose key does not exist is open (count 0).
///
/// # Examples
/// ```no_run
/// # async fn f(client: distlock::Client) -> distlock::Result<()> {
/// let latch = client.count_down_latch("batch-42");
/// latch.try_set_count(5).await?;          // one process sets it up
/// // ... five workers each call latch.count_down().await? when done
/// latch.wait().await?;                     // everyone waiting wakes at zero
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct CountDownLatch {
    client: Client,
    name: String,
    key: String,
    channel: String,
}

impl Client {
    /// The count-down latch called `name`. No I/O.
    pub fn count_down_latch(&self, name: impl Into<String>) -> CountDownLatch {
        let name = name.into();
        let key = format!("{}{}", self.key_prefix(), name);
        let channel = keys::latch_channel(&key);
        CountDownLatch {
            client: self.clone(),
            name,
            key,
            channel,
        }
    }
}

impl CountDownLatch {
    /// The name's checks: every primitive's (`keys::check_name`), and on a Redis Cluster no
    /// hash tag: the latch's channel, Redisson's `redisson_countdownlatch__channel__{<key>}`,
    /// braces the whole key, so a key with its own `{tag}` puts the channel (which the scripts
    /// take as a key, to route and publish in its slot) in another slot than the count, and
    /// the server refuses every call with `CROSSSLOT`.
    fn check_name(&self) -> Result<()> {
        keys::check_name(&self.name)?;
        if self.client.backend().single_slot_scripts() && self.key.contains('{') {
            return Err(Error::invalid(format!(
                "latch name {:?} has a hash tag, which a latch cannot have on a Redis Cluster: \
                 its channel (redisson_countdownlatch__channel__{{<name>}}, as Redisson's) \
                 would hash to another slot than its count; use a name without braces",
                self.name
            )));
        }
        Ok(())
    }

    /// The latch's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Sets the count to `count` if the latch has none (is open). Returns whether it was set.
    ///
    /// As Redisson's `trySetCount`: an open latch and a latch never set look the same (no
    /// key), so a process that calls this after the latch opened arms it again. To start
    /// several processes together, let one of them (or a deployment step) set the count and
    /// the others only [`count_down`](Self::count_down) and [`wait`](Self::wait); a process
    /// that may come late checks first that the work it waits for has not begun.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`] for a zero count or a bad name (on a Redis Cluster, also one with a `{hash tag}`); server failures.
    ///
    /// # Cancel safety
    /// Cancel safe: one idempotent script.
    pub async fn try_set_count(&self, count: u64) -> Result<bool> {
        self.check_name()?;
        if count == 0 || count > keys::MAX_PERMITS {
            return Err(Error::invalid(format!(
                "latch count {count} is not between 1 and {}",
                keys::MAX_PERMITS
            )));
        }
        let inv = set_count_call(&self.key, &self.channel, count);
        let set: i64 = self
            .client
            .backend()
            .eval(&self.context("set count"), &inv, Resend::Few)
            .await?;
        Ok(set == 1)
    }

    /// Counts down by one and returns the count left (0 when the latch opened, or was open
    /// already).
    ///
    /// At zero the latch key is deleted and every waiter, in every process, wakes (as
    /// Redisson's `RCountDownLatch.countDown`). Counting down an open latch does nothing.
    /// Counted at most once: the request records its result in a short-lived request record,
    /// which answers a resend after a broken connection.
    ///
    /// # Errors
    /// [`ErrorKind::WrongType`] when the key holds another type;
    /// [`ErrorKind::InvalidInput`] for a bad name (on a Redis Cluster, also one with a `{hash tag}`); server failures. When the server does not
    /// answer within the resend window the error says the outcome is unknown
    /// ([`Error::is_outcome_unknown`](crate::Error::is_outcome_unknown)): it was counted at
    /// most once, and a send still queued on a stalled server counts it when the server
    /// resumes.
    ///
    /// # Cancel safety
    /// Not cancel safe in the sense that a dropped future may or may not have counted down
    /// (at most once).
    ///
    /// # Examples
    /// ```no_run
    /// # async fn f(client: distlock::Client) -> distlock::Result<()> {
    /// let latch = client.count_down_latch("batch-42");
    /// // ... this worker's part of the batch ...
    /// let left = latch.count_down().await?;
    /// if left == 0 {
    ///     println!("the last worker: the batch is done");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn count_down(&self) -> Result<u64> {
        self.check_name()?;
        // The record is taken at the first send (its set's epoch is the send's).
        let inv = scripts::Invocation::at_first_send(&scripts::LATCH_COUNT_DOWN, &self.key, || {
            let client = &self.client;
            let record = client.record(
                keys::RecordKind::CountDown,
                &self.key,
                client.latch_ttl_ms(),
            );
            count_down_call(&self.key, &record, crate::client::process_ms())
        });
        // Idempotent through its request record: resent until answered within the resend
        // window (never counted down twice).
        let left: i64 = self
            .client
            .backend()
            .eval(
                self.context("count down"),
                &inv,
                self.client.latched(&self.key),
            )
            .await?;
        Ok(left.max(0) as u64)
    }

    /// The current count (0 when open).
    ///
    /// # Errors
    /// [`ErrorKind::WrongType`] when the key holds another type; server failures.
    ///
    /// # Cancel safety
    /// Cancel safe: read-only.
    pub async fn count(&self) -> Result<u64> {
        self.check_name()?;
        let v: Option<i64> = self
            .client
            .backend()
            .query(&self.context("count"), redis::cmd("GET").arg(&self.key))
            .await?;
        Ok(v.unwrap_or(0).max(0) as u64)
    }

    /// Waits until the count reaches zero, at most the client's default wait.
    ///
    /// The default wait is [`ClientBuilder::default_wait`](crate::ClientBuilder::default_wait),
    /// 60 seconds unless set.
    ///
    /// Waiting as for [`CountDownLatch::wait_for`].
    ///
    /// # Errors
    /// [`ErrorKind::NotAcquired`] when the wait elapsed first; as [`CountDownLatch::count`].
    ///
    /// # Cancel safety
    /// Cancel safe: dropping it leaves only its subscription, which is removed at once.
    pub async fn wait(&self) -> Result<()> {
        let wait = self.client.default_wait();
        if self.wait_for(wait).await? {
            Ok(())
        } else {
            Err(Error::new(
                ErrorKind::NotAcquired,
                format!("latch {:?} did not open within {wait:?}", self.name),
            ))
        }
    }

    /// Waits at most `wait` for the count to reach zero; returns whether it did.
    ///
    /// `wait` is a [`Duration`] (at most 365 days); zero checks once. An open latch (count 0,
    /// or no key) returns `true` at once. The waiter subscribes to the latch's channel, is
    /// woken by the count-down that opens it, and re-reads the count every second in case a
    /// message was lost. An unreachable server is retried with backoff until the wait ends.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`] for a `wait` over 365 days or a bad name;
    /// [`ErrorKind::Connection`] when the server was still unreachable when the wait ended;
    /// as [`CountDownLatch::count`].
    ///
    /// # Cancel safety
    /// As [`CountDownLatch::wait`].
    ///
    /// # Examples
    /// ```no_run
    /// use std::time::Duration;
    ///
    /// # async fn f(client: distlock::Client) -> distlock::Result<()> {
    /// let latch = client.count_down_latch("batch-42");
    /// if latch.wait_for(Duration::from_secs(30)).await? {
    ///     println!("every worker counted down");
    /// } else {
    ///     println!("still {} to go after 30 s", latch.count().await?);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn wait_for(&self, wait: Duration) -> Result<bool> {
        self.check_name()?;
        Ok(acquire(&self.client, Opening(self), wait).await?.is_some())
    }

    /// Delete the latch (open it without waking anyone). Returns whether it existed.
    ///
    /// Waiters are not woken: each finds the latch open at its next re-read of the count,
    /// within a second (see [`wait_for`](CountDownLatch::wait_for)).
    ///
    /// Only a latch's count is deleted: a key that holds anything else (a user's data under a
    /// mistyped name, another kind's lock) is refused and left unchanged. A string that is an
    /// integer (as Redis's `INCRBY` takes one: no `3.5`, no leading zero) is a count in
    /// Redisson's layout, which cannot be told from other data that looks like one (or from a
    /// semaphore's permits): it is deleted.
    ///
    /// # Errors
    /// [`ErrorKind::WrongType`] when the key holds another type, or a string that is not an
    /// integer (nothing is deleted); server failures.
    ///
    /// # Cancel safety
    /// Cancel safe: idempotent.
    pub async fn delete(&self) -> Result<bool> {
        self.check_name()?;
        let mut inv = scripts::LATCH_DELETE.prepare_invoke();
        inv.key(&self.key);
        let n: i64 = self
            .client
            .backend()
            .eval(&self.context("delete"), &inv, Resend::Few)
            .await?;
        Ok(n == 1)
    }

    fn context(&self, op: &str) -> String {
        format!("latch {:?}: {op}", self.name)
    }
}

/// The count-down of the latch at `key` (the script names its channel), at most once through
/// its request record `record`, made at `now_ms` on the client's record clock.
pub(crate) fn count_down_call(
    key: &str,
    record: &keys::Record,
    now_ms: u64,
) -> scripts::Invocation<'static> {
    let mut inv = scripts::LATCH_COUNT_DOWN.prepare_invoke();
    inv.key(key)
        .key(&record.key)
        .arg(record.ttl(now_ms).0)
        .arg(&record.field);
    inv
}

/// The set-count call of the latch at `key` (its channel `channel`): `count` if it has none.
pub(crate) fn set_count_call(key: &str, channel: &str, count: u64) -> scripts::Invocation<'static> {
    let mut inv = scripts::LATCH_SET.prepare_invoke();
    inv.key(key).key(channel).arg("1").arg(count);
    inv
}

/// Waiting for a latch to open, for the crate's acquire driver: nothing is granted, so
/// nothing is given back.
struct Opening<'a>(&'a CountDownLatch);

impl Acquire for Opening<'_> {
    type Grant = ();

    fn describe(&self) -> (&'static str, &str, Option<&str>) {
        (crate::kind::LATCH, &self.0.name, None)
    }

    fn wake(&self) -> Option<(&str, Wake)> {
        Some((&self.0.channel, Wake::All))
    }

    fn recheck(&self) -> Duration {
        RECHECK
    }

    async fn attempt(&self, _started: Instant) -> Result<Step<()>> {
        Ok(if self.0.count().await? == 0 {
            Step::Done(())
        } else {
            Step::Wait(None)
        })
    }

    fn give_back(self) {}
}
