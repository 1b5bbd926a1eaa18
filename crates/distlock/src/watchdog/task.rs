//! The watchdog task: renews the watchdog leases every period, keeps the keep-alives, and
//! checks the explicit leases after a reconnect.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;
use tracing::Instrument;

use super::{EntryKey, LeaseState, Renew, Renewal, Shared, BATCH};
use crate::conn::Backend;
use crate::conn::Resend;
use crate::keys::{self, drift};
use crate::lock::raw::renew_one_call;
use crate::scripts;

pub(super) async fn run(
    backend: Backend,
    lease: Duration,
    shared: Arc<Shared>,
    reconnected: Arc<Notify>,
) {
    let period = lease / 3;
    let lease_ms = lease.as_millis().max(1) as u64;
    // Tick every period whether or not there is work: registering a lock then costs no
    // wake-up of this task (a cross-thread wake per acquire), and a new lock's first renewal
    // comes within one period, well inside its lease (three periods).
    let mut next = Instant::now() + period;
    loop {
        let wake = earliest_kept(&shared).map_or(next, |due| due.min(next));
        let check_all = tokio::select! {
            _ = tokio::time::sleep_until(wake) => false,
            _ = reconnected.notified() => true,
            _ = shared.kept_added.notified() => continue,
        };
        if check_all {
            check_explicit(&backend, &shared).await;
        }
        renew_kept(&shared, check_all).await;
        if !check_all && Instant::now() < next {
            continue;
        }
        // One batch per renewal script and kind: plain and fair, write, read.
        let mut hash = Vec::new();
        let mut write = Vec::new();
        let mut read = Vec::new();
        for (k, e) in shared.entries.lock().unwrap().iter() {
            if e.renew_refs == 0 {
                continue;
            }
            // Grouped by hash slot where the deployment requires single-slot scripts.
            let slot = if backend.single_slot_scripts() {
                keys::key_slot(k.0.as_bytes())
            } else {
                0
            };
            match &e.renewal {
                Renewal::Hash => hash.push((slot, k.clone(), String::new(), e.lease.clone())),
                Renewal::Write => write.push((slot, k.clone(), String::new(), e.lease.clone())),
                Renewal::Read { prefix } => {
                    read.push((slot, k.clone(), prefix.clone(), e.lease.clone()))
                }
            }
        }
        // One script call per slot group (at most BATCH leases each); the calls are issued
        // together, so the multiplexed connection pipelines them.
        let mut calls = Vec::new();
        for (batch, renewal) in [
            (&mut hash, Renewal::Hash),
            (&mut write, Renewal::Write),
            (
                &mut read,
                Renewal::Read {
                    prefix: String::new(),
                },
            ),
        ] {
            batch.sort_by_key(|(slot, ..)| *slot);
            for group in batch.chunk_by(|a, b| a.0 == b.0) {
                for chunk in group.chunks(BATCH) {
                    calls.push(renew_chunk(
                        &backend,
                        &shared,
                        lease,
                        lease_ms,
                        chunk,
                        renewal.hash_mode(),
                    ));
                }
            }
        }
        let failed = futures_util::future::join_all(calls)
            .await
            .into_iter()
            .any(|ok| !ok);
        next = Instant::now()
            + if failed {
                period.min(Duration::from_millis(500))
            } else {
                period
            };
    }
}

/// When the earliest kept lease is due.
fn earliest_kept(shared: &Shared) -> Option<Instant> {
    shared.kept.lock().unwrap().values().map(|k| k.due).min()
}

/// Renew the kept leases that are due (all of them with `all`), concurrently.
async fn renew_kept(shared: &Shared, all: bool) {
    let now = Instant::now();
    let due: Vec<(u64, Renew, Arc<LeaseState>, Duration, Duration, String)> = shared
        .kept
        .lock()
        .unwrap()
        .iter()
        .filter(|(_, k)| all || k.due <= now)
        .map(|(id, k)| {
            (
                *id,
                k.renew.clone(),
                k.state.clone(),
                k.lease,
                k.period,
                k.what.clone(),
            )
        })
        .collect();
    let runs = due
        .into_iter()
        .map(|(id, renew, state, lease, period, what)| async move {
            let started = Instant::now();
            let outcome = renew().await;
            let mut kept = shared.kept.lock().unwrap();
            let Some(k) = kept.get_mut(&id) else { return };
            match outcome {
                // A zero lease is a check that the hold is still there (a job lock without
                // keep-alive): nothing was extended, so nothing is counted or moved.
                Ok(true) if lease.is_zero() => k.due = started + period,
                Ok(true) => {
                    crate::metrics::renewals(state.kind(), 1, 0);
                    state.renewed(started + lease.saturating_sub(drift(lease)));
                    k.due = started + period;
                }
                Ok(false) => {
                    tracing::debug!(%what, "keep-alive found it gone; lease lost");
                    state.mark_lost();
                    kept.remove(&id);
                }
                Err(e) => {
                    crate::metrics::renewals(state.kind(), 0, 1);
                    tracing::warn!(%what, error = format_args!("{e:#}"), "keep-alive failed");
                    if Instant::now() >= state.valid_until() {
                        state.mark_lost();
                    }
                    k.due = Instant::now() + period.min(Duration::from_millis(500));
                }
            }
        });
    futures_util::future::join_all(runs).await;
}

/// After a reconnection: ask the server whether each lease that the watchdog does not renew
/// (explicit leases) still exists, and fire the lost signal of those that are gone.
async fn check_explicit(backend: &Backend, shared: &Shared) {
    let explicit: Vec<(EntryKey, Arc<LeaseState>)> = shared
        .entries
        .lock()
        .unwrap()
        .iter()
        .filter(|(_, e)| e.renew_refs == 0 && !e.lease.is_lost())
        .map(|(k, e)| (k.clone(), e.lease.clone()))
        .collect();
    // On a Cluster one pipeline must stay in one hash slot: one check per lease there.
    let batch = if backend.single_slot_scripts() {
        1
    } else {
        BATCH
    };
    for chunk in explicit.chunks(batch) {
        let mut pipe = redis::pipe();
        for ((key, field), _) in chunk {
            pipe.cmd("HEXISTS").arg(&**key).arg(&**field);
        }
        match backend
            .pipeline::<Vec<bool>>("lease check after reconnect", &pipe)
            .await
        {
            Ok(held) => {
                for (((key, _), state), held) in chunk.iter().zip(held) {
                    if !held {
                        tracing::debug!(lock = %key, "lock gone after the server connection was re-established; lease lost");
                        state.mark_lost();
                    }
                }
            }
            Err(e) => {
                tracing::warn!(
                    error = format_args!("{e:#}"),
                    "lease check after reconnect failed"
                );
            }
        }
    }
}

/// One renewal script call for up to [`BATCH`] leases of one kind in one hash slot; false
/// when it failed. `hash_mode`: [`Renewal::hash_mode`] of the chunk's renewal (`None`: read
/// holds).
///
/// In a DEBUG span `distlock.renew` (`leases`, `kind`: `lock`, `write_lock` or `read_lock`,
/// `read`, `outcome`: `renewed`, `unconfirmed` or `failed`; `lost`: the leases found gone).
async fn renew_chunk(
    backend: &Backend,
    shared: &Shared,
    lease: Duration,
    lease_ms: u64,
    chunk: &[(u16, EntryKey, String, Arc<LeaseState>)],
    hash_mode: Option<&'static str>,
) -> bool {
    // Plain and fair locks' renewals are counted as `lock`, write holds' as `write_lock`.
    let kind = match hash_mode {
        None => crate::kind::READ_LOCK,
        Some("write") => crate::kind::WRITE_LOCK,
        Some(_) => crate::kind::LOCK,
    };
    let span = tracing::debug_span!(
        "distlock.renew",
        leases = chunk.len(),
        kind,
        read = hash_mode.is_none(),
        outcome = tracing::field::Empty,
        lost = tracing::field::Empty,
    );
    renew_chunk_in_span(
        backend, shared, lease, lease_ms, chunk, hash_mode, kind, &span,
    )
    .instrument(span.clone())
    .await
}

#[allow(clippy::too_many_arguments)]
async fn renew_chunk_in_span(
    backend: &Backend,
    shared: &Shared,
    lease: Duration,
    lease_ms: u64,
    chunk: &[(u16, EntryKey, String, Arc<LeaseState>)],
    hash_mode: Option<&'static str>,
    kind: &'static str,
    span: &tracing::Span,
) -> bool {
    let started = Instant::now();
    // A plain, fair or write hold alone in its batch: `lock_renew_one.lua`, whose integer
    // reply costs the server less than the batch's array.
    let inv = match (chunk, hash_mode) {
        ([(_, (key, field), _, _)], Some(_)) => renew_one_call(key, lease_ms, field, hash_mode),
        _ => {
            let mut inv = match hash_mode {
                Some(mode) => {
                    let mut inv = scripts::LOCK_RENEW.prepare_invoke();
                    inv.arg(lease_ms).arg(mode);
                    inv
                }
                None => {
                    let mut inv = scripts::RW_READ_RENEW.prepare_invoke();
                    inv.arg(lease_ms);
                    inv
                }
            };
            for (_, (key, field), prefix, _) in chunk {
                inv.key(&**key);
                inv.arg(&**field);
                if hash_mode.is_none() {
                    inv.arg(prefix.as_str());
                }
            }
            inv
        }
    };
    // Where grants must be confirmed by replicas, so must renewals: an unconfirmed renewal
    // moves no local deadline (the lease runs out locally unless a later one is confirmed).
    // The chunk is one hash slot: its first key routes the grant connection.
    let first_key = chunk.first().map_or("", |(_, (key, _), _, _)| &**key);
    let Ok(mut grant) = backend.for_grant(first_key).await else {
        span.record("outcome", "failed");
        crate::metrics::renewals(kind, 0, chunk.len() as u64);
        return false;
    };
    let sent = grant
        .backend
        .eval::<redis::Value>("watchdog renewal", &inv, Resend::Few)
        .await
        .and_then(|v| match &v {
            // One renewal's integer (`lock_renew_one.lua`).
            redis::Value::Int(code) => Ok(vec![*code]),
            _ => redis::from_redis_value::<Vec<i64>>(v)
                .map_err(|e| crate::Error::unexpected(format!("watchdog renewal: reply {e}"))),
        })
        .inspect_err(|e| grant.failed(e));
    match sent {
        Ok(results) if results.len() == chunk.len() => {
            let confirmed = match grant.confirm("watchdog renewal").await {
                Ok(()) => true,
                Err(e) => {
                    tracing::warn!(
                        error = format_args!("{e:#}"),
                        locks = chunk.len(),
                        "watchdog renewal not confirmed by the replicas; local deadlines kept"
                    );
                    false
                }
            };
            let (mut lost, mut renewed) = (0usize, 0usize);
            for ((_, entry_key, _, state), r) in chunk.iter().zip(results) {
                if r == 1 {
                    renewed += 1;
                    if confirmed {
                        state.renewed(started + lease - drift(lease));
                    } else if Instant::now() >= state.valid_until() {
                        state.mark_lost();
                    }
                } else if stop_renewing(shared, entry_key, state) {
                    tracing::debug!(lock = %entry_key.0, "watchdog found the lock gone; lease lost");
                    state.mark_lost();
                    lost += 1;
                }
            }
            span.record("outcome", if confirmed { "renewed" } else { "unconfirmed" });
            span.record("lost", lost);
            // Unconfirmed renewals count as failures; leases found gone count as lost.
            let (ok, failed) = if confirmed {
                (renewed, 0)
            } else {
                (0, renewed)
            };
            crate::metrics::renewals(kind, ok as u64, failed as u64);
            true
        }
        Ok(results) => {
            span.record("outcome", "failed");
            crate::metrics::renewals(kind, 0, chunk.len() as u64);
            tracing::error!(
                got = results.len(),
                want = chunk.len(),
                "renewal reply of the wrong length"
            );
            false
        }
        Err(e) => {
            span.record("outcome", "failed");
            crate::metrics::renewals(kind, 0, chunk.len() as u64);
            tracing::warn!(
                error = format_args!("{e:#}"),
                locks = chunk.len(),
                "watchdog renewal failed"
            );
            for (_, _, _, state) in chunk {
                if Instant::now() >= state.valid_until() {
                    state.mark_lost();
                }
            }
            false
        }
    }
}

/// Stop renewing a lease the server no longer has (its guards keep their registrations,
/// which become no-ops). Returns false when no guard wanted it renewed any more: then the
/// lock was released while the renewal was in flight, and nothing was lost.
fn stop_renewing(shared: &Shared, key: &EntryKey, state: &Arc<LeaseState>) -> bool {
    match shared.entries.lock().unwrap().get_mut(key) {
        Some(e) if Arc::ptr_eq(&e.lease, state) && e.renew_refs > 0 => {
            e.renew_refs = 0;
            true
        }
        _ => false,
    }
}
