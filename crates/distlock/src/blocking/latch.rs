//! Blocking form of the count-down latch (Redisson's `RCountDownLatch`).

use std::fmt;
use std::time::Duration;

use super::Rt;
use crate::error::Result;

/// A count-down latch, blocking form of [`crate::CountDownLatch`].
///
/// Cheap to clone. Made by [`Client::count_down_latch`](super::Client::count_down_latch).
#[derive(Clone)]
pub struct CountDownLatch {
    inner: crate::CountDownLatch,
    rt: Rt,
}

impl fmt::Debug for CountDownLatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("blocking::CountDownLatch")
            .field(&self.inner)
            .finish()
    }
}

impl CountDownLatch {
    pub(super) fn new(inner: crate::CountDownLatch, rt: Rt) -> CountDownLatch {
        CountDownLatch { inner, rt }
    }

    /// The latch's name.
    pub fn name(&self) -> &str {
        self.inner.name()
    }

    /// Set the count if the latch is open, as [`crate::CountDownLatch::try_set_count`].
    ///
    /// # Errors
    /// As [`crate::CountDownLatch::try_set_count`].
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn try_set_count(&self, count: u64) -> Result<bool> {
        self.rt.block_on(self.inner.try_set_count(count))
    }

    /// Count down by one, as [`crate::CountDownLatch::count_down`]: the count after it.
    ///
    /// # Errors
    /// As [`crate::CountDownLatch::count_down`].
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn count_down(&self) -> Result<u64> {
        self.rt.block_on(self.inner.count_down())
    }

    /// The count now (0 when open), as [`crate::CountDownLatch::count`].
    ///
    /// # Errors
    /// As [`crate::CountDownLatch::count`].
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn count(&self) -> Result<u64> {
        self.rt.block_on(self.inner.count())
    }

    /// Block until the count reaches zero, as [`crate::CountDownLatch::wait`].
    ///
    /// # Errors
    /// As [`crate::CountDownLatch::wait`].
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn wait(&self) -> Result<()> {
        self.rt.block_on(self.inner.wait())
    }

    /// Blocks until the count reaches zero or `wait` passed.
    ///
    /// `true` when it reached zero, as [`crate::CountDownLatch::wait_for`].
    ///
    /// # Errors
    /// As [`crate::CountDownLatch::wait_for`].
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn wait_for(&self, wait: Duration) -> Result<bool> {
        self.rt.block_on(self.inner.wait_for(wait))
    }

    /// Delete the latch (open it without waking anyone: waiters find it open at their next
    /// re-read, within a second), as [`crate::CountDownLatch::delete`].
    ///
    /// # Errors
    /// As [`crate::CountDownLatch::delete`].
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn delete(&self) -> Result<bool> {
        self.rt.block_on(self.inner.delete())
    }
}
