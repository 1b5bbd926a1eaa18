//! [`Lock`], its guard and value types, the lock family's engine and its raw kinds.

mod engine;
mod fair;
mod handle;
mod hold;
mod multi;
mod plain;
pub(crate) mod raw;
mod release;
mod request;
mod rwlock;
mod status;
#[cfg(test)]
mod tests;
mod types;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::client::Client;
use crate::error::{Error, ErrorKind, Result};
use crate::keys::{self, HOLDER_FIELD, TOKEN_FIELD};
use crate::layout::QUEUED_FIELD;
use raw::{Names, Queue, RawLock};

pub use fair::{FairLock, DEFAULT_FAIR_LIVENESS};
pub use handle::LockHandle;
pub(crate) use hold::Hold;
pub use hold::{FairLockGuard, HoldGuard, LockGuard};
pub use multi::{MultiLock, MultiLockGuard};
pub use plain::Lock;
pub(crate) use raw::{Attempt, Mode};
pub(crate) use request::Contention;
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
    /// them only when a send needs it: [`LockInner::release_request`]).
    pub(crate) names: Arc<Names>,
    pub(crate) lease: Option<Duration>,
    /// What this kind of lock runs (plain, fair, read or write).
    pub(crate) raw: Arc<dyn RawLock>,
    /// When this handle last met another holder or a waiter (its fast paths are skipped
    /// for a while after).
    pub(crate) contention: request::Contention,
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

    /// This lock with an explicit lease for its holds.
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
}
