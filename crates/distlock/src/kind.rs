//! The names of the kinds of primitive: one vocabulary for every place distlock names a kind.
//!
//! The same strings are the `kind` field of the tracing spans and events (`distlock.acquire`,
//! `distlock.lease_lost`, …), the `kind` label of every metric (feature `metrics`), what
//! [`InspectedKind::as_str`](crate::InspectedKind::as_str) reads back from a key, and the
//! `distlock` command's `KIND` column and JSON `kind` (`list`, `top`, `status`), so a
//! dashboard joins them on `kind`.
//!
//! A read-write lock is two kinds, [`READ_LOCK`] and [`WRITE_LOCK`]: its guards are counted
//! by the side they hold, and an inspection names the side the lock is held in.

/// A plain lock ([`Lock`](crate::Lock); Redisson's `RLock`). Also a fair lock with nobody
/// queued, which is laid out as a plain lock, and a name with no key.
pub const LOCK: &str = "lock";
/// A fair lock ([`FairLock`](crate::FairLock); Redisson's `RFairLock`).
pub const FAIR_LOCK: &str = "fair_lock";
/// The read side of a read-write lock ([`RwLock::read`](crate::RwLock::read); Redisson's
/// `RReadWriteLock`).
pub const READ_LOCK: &str = "read_lock";
/// The write side of a read-write lock ([`RwLock::write`](crate::RwLock::write)).
pub const WRITE_LOCK: &str = "write_lock";
/// A semaphore ([`Semaphore`](crate::Semaphore); Redisson's `RSemaphore`).
pub const SEMAPHORE: &str = "semaphore";
/// A semaphore with leased permits ([`LeasedSemaphore`](crate::LeasedSemaphore); Redisson's
/// `RPermitExpirableSemaphore`).
pub const LEASED_SEMAPHORE: &str = "leased_semaphore";
/// A count-down latch ([`CountDownLatch`](crate::CountDownLatch); Redisson's
/// `RCountDownLatch`).
pub const LATCH: &str = "latch";
/// A job lock ([`JobLock`](crate::JobLock); ShedLock's `job-lock:<env>:<name>`).
pub const JOB_LOCK: &str = "job_lock";
/// A RedLock over independent masters ([`RedLock`](crate::RedLock)).
pub const REDLOCK: &str = "redlock";
/// What an inspection cannot tell apart: an integer key with no waiter and no lease set, a
/// semaphore or a count-down latch (the two share one layout in Redisson's family).
pub const SEMAPHORE_OR_LATCH: &str = "semaphore_or_latch";

/// Every kind name, in the order of the README's table.
pub const ALL: &[&str] = &[
    LOCK,
    FAIR_LOCK,
    READ_LOCK,
    WRITE_LOCK,
    SEMAPHORE,
    LEASED_SEMAPHORE,
    LATCH,
    JOB_LOCK,
    REDLOCK,
    SEMAPHORE_OR_LATCH,
];

/// A kind of primitive: the enum of the names above.
///
/// [`Kind::as_str`] is its name; an inspection says which kind a key holds
/// ([`InspectedKind::kind`](crate::InspectedKind::kind)). Ordered as the `distlock` command
/// lists kinds: the locks, then the counted primitives, then job locks and RedLocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Kind {
    /// [`LOCK`].
    Lock,
    /// [`FAIR_LOCK`].
    FairLock,
    /// [`READ_LOCK`].
    ReadLock,
    /// [`WRITE_LOCK`].
    WriteLock,
    /// [`LEASED_SEMAPHORE`].
    LeasedSemaphore,
    /// [`SEMAPHORE`].
    Semaphore,
    /// [`LATCH`].
    Latch,
    /// [`SEMAPHORE_OR_LATCH`].
    SemaphoreOrLatch,
    /// [`JOB_LOCK`].
    JobLock,
    /// [`REDLOCK`].
    RedLock,
}

impl Kind {
    /// Every kind, in the order of [`ALL`] (the README's table).
    pub const ALL: [Kind; 10] = [
        Kind::Lock,
        Kind::FairLock,
        Kind::ReadLock,
        Kind::WriteLock,
        Kind::Semaphore,
        Kind::LeasedSemaphore,
        Kind::Latch,
        Kind::JobLock,
        Kind::RedLock,
        Kind::SemaphoreOrLatch,
    ];

    /// Its name: the `kind` of spans and metrics, the `distlock` command's `KIND`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Kind::Lock => LOCK,
            Kind::FairLock => FAIR_LOCK,
            Kind::ReadLock => READ_LOCK,
            Kind::WriteLock => WRITE_LOCK,
            Kind::LeasedSemaphore => LEASED_SEMAPHORE,
            Kind::Semaphore => SEMAPHORE,
            Kind::Latch => LATCH,
            Kind::SemaphoreOrLatch => SEMAPHORE_OR_LATCH,
            Kind::JobLock => JOB_LOCK,
            Kind::RedLock => REDLOCK,
        }
    }

    /// Whether it is held by owners (a lock of any kind) rather than counted (permits, a
    /// count).
    pub const fn is_lock(self) -> bool {
        matches!(
            self,
            Kind::Lock
                | Kind::FairLock
                | Kind::ReadLock
                | Kind::WriteLock
                | Kind::JobLock
                | Kind::RedLock
        )
    }
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    /// The enum and the names are one list: each kind's name, in [`super::ALL`]'s order.
    #[test]
    fn every_kind_is_named_once_in_order() {
        let names: Vec<&str> = super::Kind::ALL.iter().map(|k| k.as_str()).collect();
        assert_eq!(names, super::ALL);
    }

    /// The README's table of kind names (section "Kind names") is this module's list, in
    /// order: the one place the vocabulary is documented cannot drift from the code. (Read
    /// from the repository; a packaged crate has no project README and skips it.)
    #[test]
    fn the_readme_documents_every_kind_name() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md");
        let Ok(readme) = std::fs::read_to_string(path) else {
            assert!(
                !std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../.git")).exists(),
                "{path} is missing from the repository"
            );
            return;
        };
        let section = readme
            .split("### Kind names")
            .nth(1)
            .expect("a \"Kind names\" section in the README");
        let documented: Vec<&str> = section
            .lines()
            .skip_while(|l| !l.starts_with("| `"))
            .take_while(|l| l.starts_with('|'))
            .filter_map(|l| l.split('`').nth(1))
            .collect();
        assert_eq!(documented, super::ALL);
    }
}

/// The kind of hold a [`HoldGuard`](crate::HoldGuard) is, at the type level: [`Plain`],
/// [`Fair`], [`Read`] or [`Write`]. Sealed: these four are all there are.
///
/// Each names the handle its guards came from ([`HoldKind::Lock`]).
pub trait HoldKind: crate::lease::Sealed + Send + Sync + 'static {
    /// The handle a guard of this kind returns from [`HoldGuard::lock`](crate::HoldGuard::lock).
    type Lock: Clone + std::fmt::Debug + Send + Sync + 'static;
    /// The name of the guard type, as `Debug` prints it (`LockGuard`, …).
    const GUARD: &'static str;
}

/// The kind of lock a [`LockHandle`](crate::LockHandle) is, at the type level: [`Plain`],
/// [`Fair`] or [`ReadWrite`]. Sealed: these three are all there are.
pub trait LockKind: crate::lease::Sealed + Send + Sync + 'static {}

/// A plain lock and its holds: [`Lock`](crate::Lock) is `LockHandle<Plain>`,
/// [`LockGuard`](crate::LockGuard) `HoldGuard<Plain>`. Never constructed; a type-level name.
#[derive(Debug)]
pub enum Plain {}

/// A fair lock and its holds: [`FairLock`](crate::FairLock) is `LockHandle<Fair>`,
/// [`FairLockGuard`](crate::FairLockGuard) `HoldGuard<Fair>`. Never constructed; a type-level
/// name.
#[derive(Debug)]
pub enum Fair {}

/// A read-write lock: [`RwLock`](crate::RwLock) is `LockHandle<ReadWrite>`; its holds are
/// [`Read`] and [`Write`]. Never constructed; a type-level name.
#[derive(Debug)]
pub enum ReadWrite {}

/// A read hold of a read-write lock ([`RwLock`](crate::RwLock)):
/// [`RwLockReadGuard`](crate::RwLockReadGuard) is `HoldGuard<Read>`. Never constructed; a
/// type-level name.
#[derive(Debug)]
pub enum Read {}

/// A write hold of a read-write lock ([`RwLock`](crate::RwLock)):
/// [`RwLockWriteGuard`](crate::RwLockWriteGuard) is `HoldGuard<Write>`. Never constructed; a
/// type-level name.
#[derive(Debug)]
pub enum Write {}

impl crate::lease::Sealed for Plain {}
impl crate::lease::Sealed for Fair {}
impl crate::lease::Sealed for Read {}
impl crate::lease::Sealed for Write {}
impl crate::lease::Sealed for ReadWrite {}

impl LockKind for Plain {}
impl LockKind for Fair {}
impl LockKind for ReadWrite {}

impl HoldKind for Plain {
    type Lock = crate::Lock;
    const GUARD: &'static str = "LockGuard";
}

impl HoldKind for Fair {
    type Lock = crate::FairLock;
    const GUARD: &'static str = "FairLockGuard";
}

impl HoldKind for Read {
    type Lock = crate::RwLock;
    const GUARD: &'static str = "RwLockReadGuard";
}

impl HoldKind for Write {
    type Lock = crate::RwLock;
    const GUARD: &'static str = "RwLockWriteGuard";
}
