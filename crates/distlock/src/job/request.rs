//! `JobRequest`: one acquire of a job lock, for the crate's acquire driver.

use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use tokio::time::Instant;

use crate::acquire::{confirm_grant, Acquire, Step};
use crate::client::Client;
use crate::conn::pubsub::Wake;
use crate::conn::Resend;
use crate::error::Result;
use crate::registry::ReleaseRequest;
use crate::scripts::{self, Invocation};

use super::JOB_POLL_INTERVAL;

/// One acquire of a job lock, for the crate's acquire driver. A job lock has no wake
/// channel: the driver polls every [`JOB_POLL_INTERVAL`].
pub(super) struct JobRequest {
    pub(super) client: Client,
    pub(super) key: String,
    pub(super) at_most_ms: u64,
    pub(super) host: String,
    /// The value of the latest attempt, and whether the server refused it. A refused value is
    /// replaced by a fresh one (so the time in it is the time of the grant, as ShedLock's is);
    /// one whose answer never came is sent again (the script answers 1 when it finds it), so
    /// a grant whose reply was lost is found, or given back, by its value.
    pub(super) value: Mutex<(String, bool)>,
}

impl JobRequest {
    /// The script call that deletes the lock if it still holds `value` (a give-back).
    fn release_request(&self, value: &str) -> ReleaseRequest {
        release_call(
            format!("give back job lock {:?}", self.key),
            &self.key,
            value,
            0,
        )
    }
}

/// A fresh ShedLock value, `ADDED:<time>@<host>:<client-id>`, written by a grant made at `at`
/// by the client `id` (which never writes the same time twice: [`Client::job_stamp`]), so
/// that a force unlock can tell that client ([`crate::notice::tell_job_holder`]).
pub(crate) fn job_value(at: SystemTime, host: &str, id: uuid::Uuid) -> String {
    format!("ADDED:{}@{host}:{id}", humantime::format_rfc3339_millis(at))
}

/// A request's first attempt: ShedLock's own `SET key value NX PX at_most_ms`.
pub(crate) fn first_set(key: &str, value: &str, at_most_ms: u64) -> redis::Cmd {
    let mut set = redis::cmd("SET");
    set.arg(key).arg(value).arg("NX").arg("PX").arg(at_most_ms);
    set
}

/// Every later attempt (a refusal's, a resend's, a waiter's poll): job_acquire.lua.
pub(crate) fn acquire_call(key: &str, value: &str, at_most_ms: u64) -> Invocation<'static> {
    let mut inv = scripts::JOB_ACQUIRE.prepare_invoke();
    inv.key(key).arg(value).arg(at_most_ms);
    inv
}

/// The ownership-checked release of the lock at `key` if it holds `value`, kept `keep_ms` ms
/// more (0: deleted now).
pub(crate) fn release_call(
    context: String,
    key: &str,
    value: &str,
    keep_ms: u64,
) -> ReleaseRequest {
    let mut inv = scripts::JOB_RELEASE.prepare_invoke();
    inv.key(key).arg(value);
    // Deleting now is the script's default: no argument for it.
    if keep_ms > 0 {
        inv.arg(keep_ms);
    }
    ReleaseRequest::new(context, inv)
}

/// The ownership-checked extension of the lock at `key` holding `value` to `ttl_ms` ms from
/// now.
pub(crate) fn extend_call(key: &str, value: &str, ttl_ms: u64) -> Invocation<'static> {
    let mut inv = scripts::JOB_EXTEND.prepare_invoke();
    inv.key(key).arg(value).arg(ttl_ms);
    inv
}

impl Acquire for JobRequest {
    /// The value written and the instant the lease counts from.
    type Grant = (String, Instant);

    fn describe(&self) -> (&'static str, &str, Option<&str>) {
        (crate::kind::JOB_LOCK, &self.key, None)
    }

    fn wake(&self) -> Option<(&str, Wake)> {
        None
    }

    fn recheck(&self) -> Duration {
        JOB_POLL_INTERVAL
    }

    async fn attempt(&self, started: Instant) -> Result<Step<Self::Grant>> {
        let (value, first) = {
            let mut last = self.value.lock().unwrap();
            let first = last.0.is_empty();
            if first || last.1 {
                last.0 = job_value(self.client.job_stamp(), &self.host, self.client.id());
            }
            last.1 = false;
            (last.0.clone(), first)
        };
        let context = format!("job lock {:?}", self.key);
        // Where replicas confirm grants, over a connection set aside for it (see `for_grant`).
        let mut grant = self.client.backend().for_grant(&self.key).await?;
        // A request's first attempt takes a free lock by ShedLock's own `SET NX PX`, no script.
        // Its refusal (or a resend after a lost reply), and every later attempt (a waiter's
        // polls: one round trip each), go to job_acquire.lua, which tells our value from
        // another's and a key of another type.
        let set_taken = if first {
            let set = first_set(&self.key, &value, self.at_most_ms);
            grant
                .backend
                .query::<Option<String>>(&context, &set)
                .await
                .inspect_err(|e| grant.failed(e))?
                .is_some()
        } else {
            false
        };
        let taken: i64 = if set_taken {
            1
        } else {
            let inv = acquire_call(&self.key, &value, self.at_most_ms);
            grant
                .backend
                .eval(&context, &inv, Resend::Few)
                .await
                .inspect_err(|e| grant.failed(e))?
        };
        Ok(if taken == 1 {
            // Not confirmed: deleted if still ours (by value); the next attempt writes a new
            // value.
            confirm_grant(grant, &context, || async {
                self.value.lock().unwrap().1 = true;
                let request = self.release_request(&value);
                self.client
                    .backend()
                    .eval::<i64>(&request.context, request.call(), Resend::Few)
                    .await
                    .map(|_| ())
            })
            .await?;
            Step::Done((value, started))
        } else {
            self.value.lock().unwrap().1 = true;
            Step::Wait(None)
        })
    }

    fn give_back(self) {
        // Delete the lock if the last attempt took it (compared by value, so another
        // instance's lock is never touched). A send still queued on a stalled server that
        // runs after this takes the lock until `at_most_for` ends.
        let (value, refused) = self
            .value
            .lock()
            .map(|v| v.clone())
            .unwrap_or_else(|e| e.into_inner().clone());
        if value.is_empty() || refused {
            return;
        }
        let request = self.release_request(&value);
        let client = &self.client;
        client
            .registry()
            .release_in_background(client.backend(), request);
    }
}
