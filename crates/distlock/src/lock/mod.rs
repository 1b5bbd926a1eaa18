//! [`Lock`], its guard and value types, the lock family's engine and its raw kinds.

mod contention;
mod engine;
mod fair;
mod hold;
mod multi;
mod plain;
pub(crate) mod raw;
mod request;
mod rwlock;
mod status;
#[cfg(test)]
mod tests;
mod types;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::client::Client;
use crate::conn::Resend;
use crate::error::{Error, ErrorKind, NotHeldReason, Result};
use crate::keys::{self, HOLDER_FIELD, TOKEN_FIELD};
use raw::{Names, Queue, RawLock};

pub use fair::{FairLock, DEFAULT_FAIR_LIVENESS};
pub(crate) use hold::Hold;
pub use hold::{FairLockGuard, HoldGuard, LockGuard};
pub use multi::{MultiLock, MultiLockGuard};
pub use plain::Lock;
pub(crate) use raw::{Attempt, Mode};
pub use rwlock::{RwLock, RwLockReadGuard, RwLockWriteGuard, DEFAULT_WRITER_LIVENESS};
pub use types::{FencingToken, Handoff, HolderInfo, LockMode, LockStatus, Owner};

/// The engine under every lock-family front ([`Lock`], [`FairLock`], [`RwLock`]): one kind
/// of raw lock (plain, fair, read or write side) on one name.
#[derive(Clone)]
pub(crate) struct LockCore {
    pub(crate) inner: Arc<LockInner>,
}

pub(crate) struct LockInner {
    pub(crate) client: Client,
    /// Shared with the releases built from this handle (a release's full call is built from
    /// them only when a send needs it: [`LockCore::release_request`]).
    pub(crate) names: Arc<Names>,
    pub(crate) lease: Option<Duration>,
    /// What this kind of lock runs (plain, fair, read or write).
    pub(crate) raw: Arc<dyn RawLock>,
    /// When this handle last met another holder or a waiter (its fast paths are skipped
    /// for a while after).
    pub(crate) contention: contention::Contention,
}

impl fmt::Debug for LockCore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lock")
            .field("key", &self.inner.names.key)
            .field("lease", &self.inner.lease)
            .finish()
    }
}

impl LockCore {
    /// A lock of the kind `raw` (plain, fair, read or write side).
    pub(crate) fn with_raw(client: Client, name: String, raw: Arc<dyn RawLock>) -> LockCore {
        let names = Names::new(&*raw, client.key_prefix(), name);
        LockCore {
            inner: Arc::new(LockInner {
                client,
                names: Arc::new(names),
                lease: None,
                raw,
                contention: Default::default(),
            }),
        }
    }

    /// The same lock with another kind (the other side of a read-write lock, a fair lock's
    /// liveness), keeping the lease setting.
    pub(crate) fn rekind(&self, raw: Arc<dyn RawLock>) -> LockCore {
        let mut l = LockCore::with_raw(
            self.inner.client.clone(),
            self.inner.names.name.clone(),
            raw,
        );
        Arc::get_mut(&mut l.inner).expect("fresh").lease = self.inner.lease;
        l
    }

    /// As [`Lock::lease`].
    pub(crate) fn lease(&self, lease: Duration) -> LockCore {
        LockCore {
            inner: Arc::new(LockInner {
                client: self.inner.client.clone(),
                names: self.inner.names.clone(),
                lease: Some(lease),
                raw: self.inner.raw.clone(),
                contention: Default::default(),
            }),
        }
    }

    /// As [`Lock::name`].
    pub(crate) fn name(&self) -> &str {
        &self.inner.names.name
    }

    /// As [`Lock::key`].
    pub(crate) fn key(&self) -> &str {
        &self.inner.names.key
    }

    /// As [`Lock::channel`].
    pub(crate) fn channel(&self) -> &str {
        &self.inner.names.channel
    }

    /// As [`Lock::fencing_counter_key`].
    pub(crate) fn fencing_counter_key(&self) -> String {
        self.inner.names.counter.clone()
    }

    /// As [`Lock::client`].
    pub(crate) fn client(&self) -> &Client {
        &self.inner.client
    }

    /// As [`Lock::lease_setting`].
    pub(crate) fn lease_setting(&self) -> Option<Duration> {
        self.inner.lease
    }

    /// As [`Lock::acquire`].
    pub(crate) async fn acquire(&self) -> Result<Hold> {
        let wait = self.inner.client.default_wait();
        self.try_acquire_for(wait)
            .await?
            .ok_or_else(|| self.not_acquired(wait))
    }

    /// As [`Lock::try_acquire`].
    pub(crate) async fn try_acquire(&self) -> Result<Option<Hold>> {
        self.acquire_inner(None, Mode::New, Duration::ZERO).await
    }

    /// As [`Lock::try_acquire_for`].
    pub(crate) async fn try_acquire_for(&self, wait: Duration) -> Result<Option<Hold>> {
        self.acquire_inner(None, Mode::New, wait).await
    }

    /// As [`Lock::acquire_as`].
    pub(crate) async fn acquire_as(&self, owner: &Owner) -> Result<Hold> {
        let wait = self.inner.client.default_wait();
        self.try_acquire_as(owner, wait)
            .await?
            .ok_or_else(|| self.not_acquired(wait))
    }

    /// As [`Lock::try_acquire_as`].
    pub(crate) async fn try_acquire_as(
        &self,
        owner: &Owner,
        wait: Duration,
    ) -> Result<Option<Hold>> {
        self.acquire_inner(Some(owner.clone()), Mode::As, wait)
            .await
    }

    /// As [`Lock::adopt`].
    pub(crate) async fn adopt(&self, owner: Owner) -> Result<Hold> {
        self.check()?;
        let started = Instant::now();
        let (count, token, pttl) = self.inspect(&owner).await?;
        if count == 0 {
            return Err(Error::not_held(&self.inner.names.name, NotHeldReason::Gone));
        }
        let lease = self.effective_lease()?;
        let pttl = Duration::from_millis(pttl.max(0) as u64);
        let valid_until = started + pttl.saturating_sub(keys::drift(lease));
        Ok(self.guard(owner, count, token, lease, valid_until))
    }

    /// As [`Lock::is_locked`].
    pub(crate) async fn is_locked(&self) -> Result<bool> {
        self.check()?;
        self.backend()
            .query(
                &self.context("is_locked"),
                redis::cmd("EXISTS").arg(&self.inner.names.key),
            )
            .await
    }

    /// As [`Lock::remaining`].
    pub(crate) async fn remaining(&self) -> Result<Option<Duration>> {
        self.check()?;
        let pttl: i64 = self
            .backend()
            .query(
                &self.context("remaining"),
                redis::cmd("PTTL").arg(&self.inner.names.key),
            )
            .await?;
        Ok((pttl >= 0).then(|| Duration::from_millis(pttl as u64)))
    }

    /// As [`Lock::force_unlock`].
    pub(crate) async fn force_unlock(&self) -> Result<bool> {
        self.check()?;
        let floor = self
            .backend()
            .grant_floor(self.inner.client.fencing_floor());
        let inv = self.inner.raw.force_unlock(&self.inner.names, &floor);
        // {1, <owner field>...} when deleted, {0} when there was no lock.
        let mut reply: Vec<String> = self
            .backend()
            .eval(&self.context("force_unlock"), &inv, Resend::Few)
            .await?;
        if reply.first().map(String::as_str) != Some("1") {
            return Ok(false);
        }
        reply.remove(0);
        crate::notice::tell_holders(self.backend(), &self.inner.names.key, &reply).await;
        Ok(true)
    }
}

impl Client {
    /// Returns the reentrant lock called `name` (the Redis key is the key prefix followed by
    /// `name`).
    ///
    /// No I/O; the name is checked when the lock is first used.
    pub fn lock(&self, name: impl Into<String>) -> Lock {
        Lock::new(self.clone(), name.into())
    }

    /// A fresh owner `<client-uuid>:<n>`, never returned before by this client.
    pub fn new_owner(&self) -> Owner {
        Owner::from_parts(self.id_str(), self.next_seq())
    }
}
