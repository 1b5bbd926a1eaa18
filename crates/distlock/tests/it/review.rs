//! Regressions for defects found in review: each test failed before its fix.

use distlock::ErrorKind;

use crate::util::*;
use distlock::Release;

/// `acquire_as` on a fair (or read-write) lock used to hand out a second guard for the same
/// single hold; it is refused now (re-entry goes through the guard).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquire_as_is_refused_for_fair_and_rw_locks() {
    let (server, client) = setup().await;
    let g = client.fair_lock("fair-as").acquire().await.unwrap();
    let err = g.lock().acquire_as(g.owner()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    // A read guard has no `lock()` (nor `upgrade()`); only its untyped inner guard leads to
    // the read-side lock value, and that still refuses.
    let r = client.rw_lock("rw-as").read().await.unwrap().into_inner();
    assert_eq!(
        r.lock().acquire_as(r.owner()).await.unwrap_err().kind(),
        ErrorKind::InvalidInput
    );
    // Re-entry through the guard still counts holds.
    let inner = g.reenter().await.unwrap();
    assert_eq!(inner.hold_count(), 2);
    let n: u64 = cmd(&server, &["HGET", "fair-as", g.owner().as_str()]);
    assert_eq!(n, 2);
    inner.release().await.unwrap();
    g.release().await.unwrap();
    r.release().await.unwrap();
}
