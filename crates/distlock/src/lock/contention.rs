//! Contention memory of a lock handle (its fast paths are skipped for a while after) and
//! the operation names of error messages.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

/// An operation on a named lock, for error messages (names longer than 80 bytes are cut).
pub(crate) struct Ctx<'a> {
    pub(super) op: &'static str,
    pub(super) name: &'a str,
}

impl fmt::Display for Ctx<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = self.name;
        if name.len() > 80 {
            let prefix = crate::error::prefix_at_most(name, 80);
            write!(f, "{} {:?}…", self.op, prefix)
        } else {
            write!(f, "{} {name:?}", self.op)
        }
    }
}

/// How long a lock handle that met contention (a refused attempt, a hand-off, a fast path
/// that found a queue) sends its requests' full scripts directly: a fast path would only
/// answer nil there, costing a round trip and a script call.
pub(super) const CONTENTION_MEMORY: Duration = Duration::from_secs(2);

/// When a lock handle last met contention, in ms since the process's first reading (0:
/// never), and how many of its requests wait now.
#[derive(Default)]
pub(crate) struct Contention {
    pub(super) at: std::sync::atomic::AtomicU64,
    /// Requests of this handle refused at least once and not yet granted or given up.
    pub(super) waiting: Arc<std::sync::atomic::AtomicUsize>,
}

impl Contention {
    fn now_ms() -> u64 {
        static START: std::sync::LazyLock<Instant> = std::sync::LazyLock::new(Instant::now);
        START.elapsed().as_millis() as u64 + 1
    }

    /// Contention was met now.
    pub(crate) fn seen(&self) {
        self.at
            .store(Self::now_ms(), std::sync::atomic::Ordering::Relaxed);
    }

    /// Whether to try the fast paths: no request of this handle waits, and no contention
    /// was met within [`CONTENTION_MEMORY`].
    pub(crate) fn calm(&self) -> bool {
        if self.waiting.load(std::sync::atomic::Ordering::Relaxed) > 0 {
            return false;
        }
        let at = self.at.load(std::sync::atomic::Ordering::Relaxed);
        at == 0 || Self::now_ms() - at >= CONTENTION_MEMORY.as_millis() as u64
    }

    /// A mark for one request, counted among the waiters from [`Waiter::waits`] until it
    /// is dropped.
    pub(super) fn waiter(&self) -> Waiter {
        Waiter {
            count: self.waiting.clone(),
            counted: std::sync::atomic::AtomicBool::new(false),
        }
    }
}

/// One request's place among its lock handle's waiters ([`Contention::waiter`]).
pub(super) struct Waiter {
    pub(super) count: Arc<std::sync::atomic::AtomicUsize>,
    pub(super) counted: std::sync::atomic::AtomicBool,
}

impl Waiter {
    /// The request waits (counted once, however often it is refused).
    pub(super) fn waits(&self) {
        if !self
            .counted
            .swap(true, std::sync::atomic::Ordering::Relaxed)
        {
            self.count
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }
}

impl Drop for Waiter {
    fn drop(&mut self) {
        if *self.counted.get_mut() {
            self.count
                .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
        }
    }
}
