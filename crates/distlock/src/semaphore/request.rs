//! One acquire of a [`Semaphore`](super::Semaphore)'s permits, for the crate's acquire
//! driver: its grant record, its give-back, and what a resent attempt leaves to do.

use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;

use tokio::time::Instant;

use super::{calls, Names, GRANT_LATCH_LIFETIMES, RECHECK};
use crate::acquire::{confirm_grant, Acquire, Step};
use crate::client::process_ms;
use crate::conn::pubsub::Wake;
use crate::conn::{Resend, Sent};
use crate::error::Result;
use crate::keys::{Record, RecordKind};
use crate::registry::ReleaseRequest;
use crate::scripts::reply;

/// One acquire of semaphore permits, for the crate's acquire driver.
pub(super) struct PermitRequest {
    names: Names,
    /// The grant record of this request: it answers a resend, and its tombstone makes a send
    /// still queued on a stalled server do nothing. A new one after a grant the replicas did
    /// not confirm (given back: its record is a tombstone). Every attempt names the same
    /// record (a send of an earlier attempt held up on its way finds it).
    record: std::sync::Mutex<Record>,
    /// Whether an attempt under the current record was sent more than once and not granted
    /// ([`RESENT`]): a send of it held up on its way (a stalled server, a broken connection's
    /// buffer) may still run after the wait ends and take permits that have no lease, for no
    /// one. An acquire that then gives up gives back through the record (a tombstone, which
    /// makes such a send do nothing), once ([`GIVEN_BACK`]).
    resent: AtomicU8,
    permits: u64,
}

/// [`PermitRequest::resent`]: no attempt under the current record was resent.
const NOT_RESENT: u8 = 0;
/// [`PermitRequest::resent`]: an attempt under the current record was resent, not granted.
const RESENT: u8 = 1;
/// [`PermitRequest::resent`]: the wait ended and the record was given back already.
const GIVEN_BACK: u8 = 2;

/// A fresh grant record for an acquire of `n`. It outlives the give-back's resend horizon
/// (ten latch lifetimes): a plain permit has no lease, so a grant whose record expired before
/// the give-back reached the server would be lost for good.
fn grant_record(n: &Names) -> Record {
    let c = &n.client;
    c.record(
        RecordKind::Grant,
        &n.key,
        c.latch_ttl_ms() * GRANT_LATCH_LIFETIMES,
    )
}

impl PermitRequest {
    /// An acquire of `permits` permits of `names`, under a fresh grant record.
    pub(super) fn new(names: Names, permits: u64) -> PermitRequest {
        PermitRequest {
            record: std::sync::Mutex::new(grant_record(&names)),
            resent: AtomicU8::new(NOT_RESENT),
            names,
            permits,
        }
    }

    /// Give the grant back if the acquire ran; tombstone its record if it has not, so that a
    /// send still queued on a stalled server does nothing when it runs. Tracked like a
    /// release, so it is sent even when the runtime is shutting down.
    fn give_back_in_background(&self) {
        let request = self.give_back_request(&self.record.lock().unwrap());
        let client = &self.names.client;
        let horizon = client.latch_ttl() * GRANT_LATCH_LIFETIMES as u32;
        client
            .registry()
            .give_back_in_background(client.backend(), request, horizon);
    }

    /// The script call that gives back the grant recorded in `record` (or tombstones it).
    fn give_back_request(&self, record: &Record) -> ReleaseRequest {
        let n = &self.names;
        calls::give_back(
            n.context("give back"),
            &n.key,
            &n.channel,
            record,
            self.permits,
            process_ms(),
        )
    }
}

impl Acquire for PermitRequest {
    /// Nothing: the grant's record is left to its set's TTL.
    type Grant = ();

    fn describe(&self) -> (&'static str, &str, Option<&str>) {
        (crate::kind::SEMAPHORE, &self.names.name, None)
    }

    fn wake(&self) -> Option<(&str, Wake)> {
        Some((&self.names.channel, Wake::All))
    }

    fn recheck(&self) -> Duration {
        RECHECK
    }

    async fn attempt(&self, _started: Instant) -> Result<Step<()>> {
        // The grant record answers a resend only while it lives: the request is resent within
        // the resend window only (as every latched request is); past it the outcome is
        // unknown, the wait stops, and the give-back returns what a send may have got.
        let n = &self.names;
        let inv = calls::acquire(
            &n.key,
            &self.record.lock().unwrap(),
            self.permits,
            process_ms(),
        );
        let context = n.context("acquire");
        // Where replicas confirm grants, over a connection set aside for it (see `for_grant`).
        let mut grant = n.client.backend().for_grant(&n.key).await?;
        let left = n.client.resolve_window();
        let sent: Sent<i64> = grant
            .backend
            .eval(&context, &inv, Resend::Within { left })
            .await
            .inspect_err(|e| grant.failed(e))?;
        let got = sent.value;
        if got == reply::CANCELLED {
            // This record was cancelled (an unconfirmed grant given back): a new one, and try
            // again at once. The tombstone answers any send of the old one still on its way.
            *self.record.lock().unwrap() = grant_record(n);
            self.resent.store(NOT_RESENT, Ordering::Relaxed);
            return Ok(Step::Wait(Some(Duration::ZERO)));
        }
        if got != 1 {
            if sent.resent {
                self.resent.store(RESENT, Ordering::Relaxed);
            }
            return Ok(Step::Wait(None));
        }
        confirm_grant(grant, &context, || async {
            // A new record whatever the give-back's fate: this one (the attempt's: attempts
            // run one at a time) holds a grant or its tombstone.
            let record = std::mem::replace(&mut *self.record.lock().unwrap(), grant_record(n));
            let request = self.give_back_request(&record);
            // Not confirmed itself: the replicas may be what is missing.
            let rule = n.client.latched_unconfirmed();
            n.client
                .backend()
                .eval::<i64>(&request.context, request.call(), rule)
                .await?;
            Ok(())
        })
        .await?;
        Ok(Step::Done(()))
    }

    /// A wait that ended refused, after an attempt that was resent: the record is given back
    /// (see [`PermitRequest::resent`]) in the background, as a cancelled acquire's is.
    fn leave(&self) -> impl std::future::Future<Output = ()> + Send {
        let ordering = (Ordering::Relaxed, Ordering::Relaxed);
        if self
            .resent
            .compare_exchange(RESENT, GIVEN_BACK, ordering.0, ordering.1)
            .is_ok()
        {
            self.give_back_in_background();
        }
        std::future::ready(())
    }

    /// Given back unless [`Acquire::leave`] did already (a client shut down mid-wait).
    fn give_back(self) {
        if self.resent.load(Ordering::Relaxed) != GIVEN_BACK {
            self.give_back_in_background();
        }
    }
}
