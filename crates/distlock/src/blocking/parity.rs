//! The blocking API keeps the async one's methods: a test that reads the crate's sources,
//! lists the public methods of each builder and guard on both sides, and fails on any
//! difference not in [`ALLOWED`].
//!
//! Methods are found in `impl Type { … }` blocks (`pub fn` and `pub async fn`), in
//! `impl Lease for Type` / `impl Release for Type` (the async guards' verbs), in the
//! `macro_rules!` bodies those blocks invoke, and in macros invoked with the type as first
//! argument (`some_front!(LockGuard, Lock)`). A type that is an alias of a generic one
//! (`pub type LockGuard = HoldGuard<Plain>;`) has the methods of every impl whose type it is
//! an instance of: `impl<K: HoldKind> HoldGuard<K>` and `impl HoldGuard<Plain>`, not
//! `impl HoldGuard<Write>`. An impl's parameter stands for the types that implement its
//! bounds (by the `impl Trait for Type` blocks seen), so the blocking
//! `impl<G: Release + Lease> Guard<G>` applies to `JobGuard = Guard<crate::JobGuard>` and not
//! to `SemaphorePermit = Guard<crate::SemaphorePermit>`. In a blocking file a type named
//! through `crate::` is the async side's (`crate::LockGuard` is `HoldGuard<Plain>` there). A
//! file under `src/blocking/` is the blocking side; any other file the async side.

mod scan;

use std::collections::{BTreeMap, BTreeSet};

use scan::{methods_of, sources, strip};

/// The types compared, by name (the same on both sides).
const TYPES: &[&str] = &[
    "ClientBuilder",
    "Lock",
    "FairLock",
    "RwLock",
    "LockGuard",
    "FairLockGuard",
    "RwLockReadGuard",
    "RwLockWriteGuard",
    "SemaphorePermit",
    "LeasedPermit",
    "JobGuard",
    "MultiLockGuard",
    "RedLockGuard",
];

/// Intended differences: (type, or `*` for every type, method, side that has it alone,
/// why).
const ALLOWED: &[(&str, &str, Side, &str)] = &[
    (
        "*",
        "lost_timeout",
        Side::Blocking,
        "a bounded blocking wait; async code wraps lost() in tokio::time::timeout",
    ),
    (
        "*",
        "into_async",
        Side::Blocking,
        "every blocking guard hands the async guard underneath over",
    ),
    (
        "MultiLockGuard",
        "guards",
        Side::Async,
        "the members' guards are async guards",
    ),
    (
        "ClientBuilder",
        "worker_threads",
        Side::Blocking,
        "the blocking client's own runtime",
    ),
    (
        "Lock",
        "as_async",
        Side::Blocking,
        "the async handle underneath, for code that mixes both",
    ),
    (
        "FairLock",
        "as_async",
        Side::Blocking,
        "the async handle underneath, for code that mixes both",
    ),
    (
        "RwLock",
        "as_async",
        Side::Blocking,
        "the async handle underneath, for code that mixes both",
    ),
    (
        "LockGuard",
        "lock",
        Side::Async,
        "the handle is the async one; blocking code keeps its own",
    ),
    (
        "FairLockGuard",
        "lock",
        Side::Async,
        "the handle is the async one; blocking code keeps its own",
    ),
    (
        "RwLockReadGuard",
        "lock",
        Side::Async,
        "the handle is the async one; blocking code keeps its own",
    ),
    (
        "RwLockWriteGuard",
        "lock",
        Side::Async,
        "the handle is the async one; blocking code keeps its own",
    ),
    (
        "JobGuard",
        "lease",
        Side::Async,
        "a JobLease is an async handle; the blocking guard has its verbs itself",
    ),
];

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Side {
    Async,
    Blocking,
}

/// Differences between the two sides' methods that [`ALLOWED`] does not list, and allowed
/// ones that no longer exist.
fn differences(files: &[(bool, String)]) -> Vec<String> {
    let async_side = methods_of(files, false);
    let blocking_side = methods_of(files, true);
    let mut problems = Vec::new();
    for ty in TYPES {
        let a = async_side.get(*ty).cloned().unwrap_or_default();
        let b = blocking_side.get(*ty).cloned().unwrap_or_default();
        if a.is_empty() || b.is_empty() {
            problems.push(format!(
                "{ty}: no methods found on one side (the scanner is broken)"
            ));
        }
        for (only, side, other) in [(&a, Side::Async, &b), (&b, Side::Blocking, &a)] {
            for m in only.difference(other) {
                if !ALLOWED
                    .iter()
                    .any(|(t, n, s, _)| (t == ty || *t == "*") && n == m && *s == side)
                {
                    problems.push(format!("{ty}::{m}: only on the {side:?} side"));
                }
            }
        }
    }
    for (ty, m, side, _) in ALLOWED.iter().filter(|(t, ..)| *t != "*") {
        let has =
            |s: &BTreeMap<String, BTreeSet<String>>| s.get(*ty).is_some_and(|x| x.contains(*m));
        let (this, other) = match side {
            Side::Async => (&async_side, &blocking_side),
            Side::Blocking => (&blocking_side, &async_side),
        };
        if !has(this) || has(other) {
            problems.push(format!("allow-list entry {ty}::{m} ({side:?}) is stale"));
        }
    }
    problems
}

#[test]
fn both_apis_have_the_same_builder_settings_and_guard_verbs() {
    let problems = differences(&sources());
    assert!(
        problems.is_empty(),
        "the blocking and async APIs differ (add the method to the other side, or to \
         ALLOWED in src/blocking/parity.rs with the reason):\n{}",
        problems.join("\n")
    );
}

/// The scanner sees a method added to one side only.
#[test]
fn a_setter_on_one_builder_only_is_found() {
    let mut files = sources();
    files.push((
        false,
        strip("impl ClientBuilder {\n    /// New.\n    pub fn brand_new(self) -> Self { self }\n}"),
    ));
    let problems = differences(&files);
    assert_eq!(
        problems,
        ["ClientBuilder::brand_new: only on the Async side"],
        "{problems:?}"
    );
}

/// An alias of a generic guard has the verbs of the generic impls and of its own kind's,
/// not another kind's: `downgrade` is the write guard's alone, on both sides.
#[test]
fn an_alias_has_its_kinds_verbs_only() {
    let files = sources();
    for blocking in [false, true] {
        let side = methods_of(&files, blocking);
        for ty in [
            "LockGuard",
            "FairLockGuard",
            "RwLockReadGuard",
            "RwLockWriteGuard",
        ] {
            let verbs = &side[ty];
            assert!(
                verbs.contains("reenter"),
                "{ty} (blocking {blocking}): {verbs:?}"
            );
            assert_eq!(
                verbs.contains("downgrade"),
                ty == "RwLockWriteGuard",
                "{ty} (blocking {blocking}): {verbs:?}"
            );
        }
    }
}

/// The scanner sees a verb added to one side's generic guard, under each of its aliases.
#[test]
fn a_verb_on_one_generic_guard_only_is_found() {
    let mut files = sources();
    files.push((
        false,
        strip("impl<K: HoldKind> HoldGuard<K> {\n    /// New.\n    pub fn brand_new(&self) {}\n}"),
    ));
    let problems = differences(&files);
    assert_eq!(
        problems,
        [
            "LockGuard::brand_new: only on the Async side",
            "FairLockGuard::brand_new: only on the Async side",
            "RwLockReadGuard::brand_new: only on the Async side",
            "RwLockWriteGuard::brand_new: only on the Async side",
        ],
        "{problems:?}"
    );
}

/// A verb on one side's guard written once by trait bound is found under every guard that
/// has the bound, and only those: a semaphore permit has no lease.
#[test]
fn a_verb_on_the_leased_guards_only_is_found() {
    let mut files = sources();
    files.push((
        true,
        strip(
            "impl<G: Release + Lease> Guard<G> {\n    /// New.\n    pub fn brand_new(&self) {}\n}",
        ),
    ));
    let problems = differences(&files);
    assert_eq!(
        problems,
        [
            "LockGuard::brand_new: only on the Blocking side",
            "FairLockGuard::brand_new: only on the Blocking side",
            "RwLockReadGuard::brand_new: only on the Blocking side",
            "RwLockWriteGuard::brand_new: only on the Blocking side",
            "LeasedPermit::brand_new: only on the Blocking side",
            "JobGuard::brand_new: only on the Blocking side",
            "MultiLockGuard::brand_new: only on the Blocking side",
            "RedLockGuard::brand_new: only on the Blocking side",
        ],
        "{problems:?}"
    );
}

/// A verb on one kind's own impl is found under that kind's alias alone.
#[test]
fn a_verb_on_one_concrete_guard_only_is_found() {
    let mut files = sources();
    files.push((
        true,
        strip("impl Guard<crate::JobGuard> {\n    /// New.\n    pub fn brand_new(&self) {}\n}"),
    ));
    files.push((
        false,
        strip(
            "impl LockHandle<ReadWrite> {\n    /// New.\n    pub async fn other_new(&self) {}\n}",
        ),
    ));
    let problems = differences(&files);
    assert_eq!(
        problems,
        [
            "RwLock::other_new: only on the Async side",
            "JobGuard::brand_new: only on the Blocking side",
        ],
        "{problems:?}"
    );
}
