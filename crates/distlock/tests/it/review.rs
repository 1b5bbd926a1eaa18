//! Regressions for defects found in review: each test failed before its fix.

use crate::util::*;

/// `acquire_as` on a fair (or read-write) lock used to hand out a second guard for the same
/// single hold. It does not compile now (a `FairLock` has no `acquire_as`, a read guard no
/// plain `Lock` inside: see the `compile_fail` examples on `FairLock` and `RwLockReadGuard`);
/// re-entry goes through the guard and still counts holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fair_reentry_goes_through_the_guard() {
    let (server, client) = setup().await;
    let g = client.fair_lock("fair-as").acquire().await.unwrap();
    let inner = g.reenter().await.unwrap();
    assert_eq!(inner.hold_count(), 2);
    let n: u64 = cmd(&server, &["HGET", "fair-as", g.owner().as_str()]);
    assert_eq!(n, 2);
    inner.release().await.unwrap();
    g.release().await.unwrap();
}
