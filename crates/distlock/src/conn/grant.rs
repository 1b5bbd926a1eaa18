//! Grants: [`GrantChannel`], their `WAIT` confirmation, and writes resent until confirmed.

use std::borrow::Cow;
use std::fmt;
use std::time::Duration;

use redis::FromRedisValue;

use super::backend::Backend;
use super::deployment::{Connection, Route};
use super::grant_slots::GrantSlotGuard;
use super::resend::{resend_delay, Resend};
use crate::error::{Error, ErrorKind, Result};
use crate::scripts::Invocation as ScriptInvocation;

/// The connection one grant is sent on ([`Backend::for_grant`]).
pub(crate) struct GrantChannel {
    /// Send the grant's script through this.
    pub(crate) backend: Backend,
    /// The generation of the tokens granted through it: the Sentinel master's config epoch,
    /// 0 elsewhere (on a Cluster the script reads its node's own).
    pub(crate) generation: u64,
    /// Replicas to wait for, and how long, after the grant.
    wait: Option<(u32, Duration)>,
    /// Holds the set-aside connection exclusively (WAIT covers this connection's writes).
    slot: Option<GrantSlotGuard>,
}

impl GrantChannel {
    /// The fencing floor argument of a grant's script for the client's `floor` (see
    /// `prelude.lua`'s `next_token`): `floor` itself, `<generation>:<floor>` on Sentinel,
    /// `cluster:<floor>` on a Cluster.
    pub(crate) fn floor<'a>(&self, floor: &'a str) -> Cow<'a, str> {
        self.backend
            .deployment()
            .token_floor(floor, self.generation)
    }

    /// A send on this channel failed with `e`: a broken set-aside connection is reopened
    /// for the next grant; on a Cluster the slot map is read again (the slot may have moved,
    /// or its replicas changed).
    pub(crate) fn failed(&mut self, e: &Error) {
        if e.kind() == ErrorKind::Connection {
            if let Some(slot) = self.slot.as_mut() {
                **slot = None;
            }
        }
        self.backend.deployment().grant_failed();
    }

    /// Send `invocation` over this channel (resent by the usual rules); when `applied` says
    /// the reply made a write to confirm (an extension that found its hold), `WAIT` for the
    /// replicas. Any failure marks the channel failed ([`GrantChannel::failed`]);
    /// [`ErrorKind::NotReplicated`] when too few replicas confirmed.
    pub(crate) async fn eval_then_confirm<T: FromRedisValue>(
        &mut self,
        context: impl fmt::Display,
        invocation: &ScriptInvocation<'_>,
        applied: impl FnOnce(&T) -> bool,
    ) -> Result<T> {
        let sent = self
            .backend
            .eval::<T>(&context, invocation, Resend::Few)
            .await;
        let r = sent.inspect_err(|e| self.failed(e))?;
        if applied(&r) {
            let confirmed = self.confirm(&context).await;
            confirmed.inspect_err(|e| self.failed(e))?;
        }
        Ok(r)
    }

    /// After a grant: `WAIT` for the replicas on the connection that made it. `Ok` when no
    /// confirmation is asked for or enough replicas confirmed; [`ErrorKind::NotReplicated`]
    /// otherwise (the caller gives the grant back).
    pub(crate) async fn confirm(&self, context: impl fmt::Display) -> Result<()> {
        let Some((wanted, timeout)) = self.wait else {
            return Ok(());
        };
        let acked: i64 = self
            .backend
            .query(
                &context,
                redis::cmd("WAIT")
                    .arg(wanted)
                    .arg(timeout.as_millis() as u64),
            )
            .await?;
        let acked = acked.max(0) as u32;
        if acked < wanted {
            return Err(Error::not_replicated(&context.to_string(), acked, wanted));
        }
        Ok(())
    }
}

impl Backend {
    /// Where a grant is sent: this backend itself, or — where grants must be confirmed by
    /// replicas — a backend over a connection set aside for it, held until the returned
    /// value drops, with the `WAIT` to send after the grant ([`Deployment::grant_target`](super::deployment::Deployment::grant_target)).
    pub(crate) async fn for_grant(&self, key: &str) -> Result<GrantChannel> {
        let (deployment, generation, set_aside) = self.conn.deployment.grant_target(key).await?;
        let (route, wait, slot) = match set_aside {
            Some(s) => (
                Route::Pinned(s.conn),
                Some((s.wanted, s.timeout)),
                Some(s.guard),
            ),
            None => (Route::Shared, None, None),
        };
        Ok(GrantChannel {
            backend: Backend {
                conn: Connection { deployment, route },
                publish: self.publish,
            },
            generation,
            wait,
            slot,
        })
    }

    /// The token floor a grant made inside another request's script takes (a release that
    /// hands the lock to a waiter), without I/O: as [`GrantChannel::floor`] of a grant on
    /// this backend, with the Sentinel master's config epoch as the client last saw it (an
    /// older generation than the counter's counts on in the counter's; see prelude.lua).
    pub(crate) fn grant_floor(&self, floor: &str) -> String {
        let deployment = self.deployment();
        deployment
            .token_floor(floor, deployment.generation())
            .into_owned()
    }

    /// Whether grants on this backend may be confirmed by replicas (`WAIT`): Sentinel or
    /// Cluster with [`replica_acks`](crate::ClientBuilder::replica_acks) above 0.
    pub(crate) fn confirms_grants(&self) -> bool {
        self.deployment().confirms_grants()
    }

    /// [`Backend::eval_resolving`] for a write that replicas must confirm where the
    /// deployment asks for it (releases, count-downs, permits added): sent over a connection
    /// set aside for `key`'s master and followed there by `WAIT`. A send whose answer or
    /// confirmation does not come (a broken connection, too few replicas: the write may be
    /// lost by a failover) is sent again — with the same request id, so it is applied at most
    /// once wherever it lands — until it is confirmed or `window` has passed; then the error
    /// says the outcome is unknown. Redisson syncs its unlock with `WAIT` in the same way.
    pub(crate) async fn eval_confirmed<T: FromRedisValue>(
        &self,
        key: &str,
        context: impl fmt::Display,
        invocation: &ScriptInvocation<'_>,
        window: Duration,
    ) -> Result<(T, bool)> {
        let deadline = tokio::time::Instant::now() + window;
        let mut attempt = 0usize;
        loop {
            let remaining = deadline.saturating_duration_since(tokio::time::Instant::now());
            let failed = match self.for_grant(key).await {
                Ok(grant) if grant.wait.is_none() => {
                    // Nothing to confirm: resends over the client's own connection.
                    drop(grant);
                    return self
                        .eval_resolving::<T>(&context, invocation, remaining)
                        .await
                        .map(|(v, resent)| (v, resent || attempt > 0));
                }
                Ok(mut grant) => {
                    match grant
                        .backend
                        .eval_resolving::<T>(&context, invocation, remaining)
                        .await
                    {
                        Ok((v, _)) => match grant.confirm(&context).await {
                            Ok(()) => return Ok((v, attempt > 0)),
                            Err(e) => {
                                grant.failed(&e);
                                e
                            }
                        },
                        Err(e) => {
                            grant.failed(&e);
                            e
                        }
                    }
                }
                Err(e) => e,
            };
            let resendable =
                failed.kind() == ErrorKind::NotReplicated || failed.kind() == ErrorKind::Connection;
            let now = tokio::time::Instant::now();
            if !resendable || now >= deadline {
                return Err(if resendable {
                    failed.outcome_unknown()
                } else {
                    failed
                });
            }
            tracing::debug!(%context, error = format_args!("{failed:#}"), attempt, "not confirmed; resending (same request id)");
            tokio::time::sleep(resend_delay(attempt).min(deadline - now)).await;
            attempt += 1;
        }
    }
}
