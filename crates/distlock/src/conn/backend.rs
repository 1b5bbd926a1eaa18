//! [`Backend`]: the command side of a client, and the resend rules (what is sent again, how
//! long); grants ([`GrantChannel`]), their `WAIT` confirmation, and writes resent until
//! replicas confirm them ([`Resend::Confirmed`]).

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use redis::FromRedisValue;

use super::deployment::{Connection, Deployment, Route, SCAN_COUNT};
use super::grant_slots::GrantSlotGuard;
use super::resend::{classify, classify_unconfirmed, resend_after, Failure, Resend};
use crate::error::{Error, ErrorKind, Result};
use crate::scripts::{Invocation as ScriptInvocation, Publish, Via};

/// The command side of a client (or of one grant): resend rules over a [`Connection`].
#[derive(Clone)]
pub(crate) struct Backend {
    pub(super) conn: Connection,
    /// How the scripts are called: which variant runs (how they publish wake-ups), and
    /// whether as Redis Functions.
    pub(super) via: Via,
    /// How the scripts are called, and why, as chosen at connect.
    pub(super) calls: crate::ScriptCalls,
}

impl Backend {
    /// The deployment this backend sends to.
    pub(crate) fn deployment(&self) -> &Deployment {
        &self.conn.deployment
    }

    /// The command connection (routes like every request of this backend).
    pub(crate) fn connection(&self) -> Connection {
        self.conn.clone()
    }

    /// How this backend's scripts publish wake-ups.
    pub(crate) fn publish(&self) -> Publish {
        self.via.publish
    }

    /// How this backend calls its scripts.
    pub(crate) fn via(&self) -> Via {
        self.via
    }

    /// How the scripts are called, and why, as chosen at connect.
    pub(crate) fn script_calls(&self) -> crate::ScriptCalls {
        self.calls
    }

    /// Whether every script call must keep its keys in one hash slot
    /// ([`Deployment::single_slot_scripts`]).
    pub(crate) fn single_slot_scripts(&self) -> bool {
        self.conn.deployment.single_slot_scripts()
    }

    /// A client for the server commands on `key` go to now, for the blocking fallback
    /// ([`Deployment::current_client`]).
    pub(crate) fn current_client(&self, key: &str) -> Option<redis::Client> {
        self.conn.deployment.current_client(key)
    }

    /// `SCAN` every master — the server, or each master of a Cluster — for keys matching
    /// `pattern` (a glob, as `SCAN MATCH`), looking at about `examine` keys per master (in
    /// calls of [`SCAN_COUNT`]); the keys found (sorted, without duplicates) and whether every
    /// master was scanned to the end.
    pub(crate) async fn scan(&self, pattern: &str, examine: usize) -> Result<(Vec<String>, bool)> {
        let calls = examine.div_ceil(SCAN_COUNT).max(1);
        let context = format!("SCAN MATCH {pattern:?}");
        let (mut keys, complete) = self.conn.deployment.scan(pattern, calls, &context).await?;
        keys.sort();
        keys.dedup();
        Ok((keys, complete))
    }

    /// Send once over this backend's connection, and once more to the importing node when
    /// the answer is an `ASK` redirect.
    async fn send_once<T, F, Fut>(&self, send: &mut F) -> redis::RedisResult<T>
    where
        F: FnMut(Connection) -> Fut,
        Fut: std::future::Future<Output = redis::RedisResult<T>>,
    {
        let r = send(self.conn.clone()).await;
        if let Err(e) = &r {
            // Boxed: only a Cluster's migrating slot answers ASK, and following it may open a
            // connection, a future far larger than the send's.
            if e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::Ask) {
                if let Some(target) = Box::pin(self.ask_target(e)).await {
                    return Box::pin(send(target)).await;
                }
            }
        }
        r
    }

    /// When `e` is an `ASK` redirect (its slot is being migrated and the key already moved):
    /// a connection to the importing node that sends `ASKING` before the request. `None`
    /// for any other error, or off a Cluster. Nothing ran on the node that answered `ASK`.
    async fn ask_target(&self, e: &redis::RedisError) -> Option<Connection> {
        if e.kind() != redis::ErrorKind::Server(redis::ServerErrorKind::Ask) {
            return None;
        }
        let (addr, _) = e.redirect_node()?;
        let c = self.conn.deployment.redirect(addr).await?;
        Some(Connection {
            deployment: self.conn.deployment.clone(),
            route: Route::Asking(c),
        })
    }

    /// Whether this backend sends to a single server (no Sentinel, no Cluster): its grants
    /// go over its own connection, and nothing asks replicas to confirm them.
    fn is_standalone(&self) -> bool {
        matches!(self.conn.deployment, Deployment::Standalone(_))
    }

    /// Whether this backend sends over a connection set aside for one grant.
    fn pinned(&self) -> bool {
        matches!(self.conn.route, Route::Pinned(_))
    }

    /// Run a script (EVALSHA, NOSCRIPT → EVAL), sent by `rule`: resent after a failure that
    /// allows it ([`resend_after`]) and, with [`Resend::Confirmed`], confirmed by replicas
    /// where the deployment asks for it. `context` names the operation for error messages (it
    /// is formatted only when something goes wrong). The one verb that sends a script: the
    /// reply as `R`, a [`Reply`] — the value itself, or [`Sent`] to learn also whether it was
    /// sent more than once.
    ///
    /// With [`Resend::Within`] and [`Resend::Confirmed`] (a request that its latch makes
    /// idempotent), every resend carries the same request id, so whichever send the server
    /// runs first is the one applied and the others answer its result. A window that passes
    /// with no send answered (or, confirmed, none confirmed) gives an error that says the
    /// outcome is unknown ([`Error::is_outcome_unknown`]): the server may still run a send
    /// that is queued there (a paused or stalled server), and the caller must resolve it —
    /// resend in the background ([`Backend::resend_in_background`]) or undo it through its
    /// latch. No resend goes out after the window (the last send then waits its command
    /// timeout).
    pub(crate) async fn eval<R: Reply>(
        &self,
        context: impl fmt::Display,
        invocation: &ScriptInvocation<'_>,
        rule: Resend<'_>,
    ) -> Result<R> {
        let (value, resent) = match rule {
            // A single server has no replicas to confirm: resent over its own connection
            // within the window, as `send_confirmed` does where nothing is to be confirmed.
            Resend::Confirmed { left, .. } if self.is_standalone() => {
                self.send_script(context, invocation, Resend::Within { left })
                    .await?
            }
            // Boxed: it may set a connection aside, WAIT and pause between sends, a future
            // far larger than a send's.
            Resend::Confirmed { key, left } => {
                Box::pin(self.send_confirmed(key, context, invocation, left)).await?
            }
            rule => self.send_script(context, invocation, rule).await?,
        };
        Ok(R::from_sent(Sent { value, resent }))
    }

    /// [`Backend::eval`] by a rule other than [`Resend::Confirmed`]: the reply, and whether
    /// it was sent more than once.
    async fn send_script<T: FromRedisValue>(
        &self,
        context: impl fmt::Display,
        invocation: &ScriptInvocation<'_>,
        rule: Resend<'_>,
    ) -> Result<(T, bool)> {
        let via = self.via;
        self.send(context, rule, |mut conn| async move {
            invocation.invoke_async::<T>(&mut conn, via).await
        })
        .await
    }

    /// [`Backend::eval`] by [`Resend::Confirmed`]: sent over a connection set aside for
    /// `key`'s master and followed there by `WAIT`. A send whose answer or confirmation does
    /// not come (a broken connection, too few replicas: the write may be lost by a failover)
    /// is sent again — with the same request id, so it is applied at most once wherever it
    /// lands — until it is confirmed or `window` has passed; then the error says the outcome
    /// is unknown. Redisson syncs its unlock with `WAIT` in the same way.
    async fn send_confirmed<T: FromRedisValue>(
        &self,
        key: &str,
        context: impl fmt::Display,
        invocation: &ScriptInvocation<'_>,
        window: Duration,
    ) -> Result<(T, bool)> {
        let started = tokio::time::Instant::now();
        let rule = Resend::Confirmed { key, left: window };
        let mut attempt = 0usize;
        loop {
            let within = Resend::Within {
                left: window.saturating_sub(started.elapsed()),
            };
            let failed = match self.for_grant(key).await {
                Ok(grant) if grant.wait.is_none() => {
                    // Nothing to confirm: resends over the client's own connection.
                    drop(grant);
                    return self
                        .send_script::<T>(&context, invocation, within)
                        .await
                        .map(|(v, resent)| (v, resent || attempt > 0));
                }
                Ok(mut grant) => {
                    match grant
                        .backend
                        .send_script::<T>(&context, invocation, within)
                        .await
                    {
                        Ok((v, _)) => match grant.confirm(&context).await {
                            Ok(()) => return Ok((v, attempt > 0)),
                            Err(e) => e,
                        },
                        Err(e) => {
                            grant.failed(&e);
                            e
                        }
                    }
                }
                Err(e) => e,
            };
            let failure = classify_unconfirmed(&failed);
            match resend_after(failure, rule.after(started.elapsed()), attempt, false) {
                Some(pause) => {
                    tracing::debug!(%context, error = format_args!("{failed:#}"), attempt, "not confirmed; resending (same request id)");
                    tokio::time::sleep(pause).await;
                    attempt += 1;
                }
                None if failure == Failure::Final => return Err(failed),
                None => return Err(failed.outcome_unknown()),
            }
        }
    }

    /// Keep sending a cancellation (a script that leaves a tombstone in a request's latch and
    /// answers the same when resent) from a background task until the server answers, at
    /// most `limit`; `on_answer` gets the reply. Used to give back grants whose outcome was
    /// unknown to their caller.
    pub(crate) fn resend_in_background<T, F>(
        &self,
        runtime: &tokio::runtime::Handle,
        context: String,
        invocation: ScriptInvocation<'static>,
        limit: Duration,
        on_answer: F,
    ) where
        T: FromRedisValue + Send + 'static,
        F: FnOnce(Result<T>) + Send + 'static,
    {
        let backend = self.clone();
        runtime.spawn(async move {
            let r = backend
                .eval::<T>(&context, &invocation, Resend::Within { left: limit })
                .await;
            if let Err(e) = &r {
                if e.is_outcome_unknown() {
                    tracing::error!(%context, "server unreachable for {limit:?}: outcome of the request stays unknown");
                }
            }
            on_answer(r);
        });
    }

    /// Run one command, resending on connection failures (use for idempotent commands).
    pub(crate) async fn query<T: FromRedisValue>(
        &self,
        context: impl fmt::Display,
        cmd: &redis::Cmd,
    ) -> Result<T> {
        self.send(context, Resend::Few, |mut conn| async move {
            cmd.query_async::<T>(&mut conn).await
        })
        .await
        .map(|(v, _)| v)
    }

    /// Run a pipeline (read-only or idempotent), resending on connection failures.
    pub(crate) async fn pipeline<T: FromRedisValue>(
        &self,
        context: impl fmt::Display,
        pipe: &redis::Pipeline,
    ) -> Result<T> {
        self.send(context, Resend::Few, |mut conn| async move {
            pipe.query_async::<T>(&mut conn).await
        })
        .await
        .map(|(v, _)| v)
    }

    /// The one send loop: send a request (following an `ASK` redirect), and send it again
    /// after a failure for as long as `rule` allows ([`resend_after`]); the answer, and whether
    /// it was sent more than once. A failure where a send may have run unanswered, when no
    /// resend follows, is an error whose outcome is unknown (under a window,
    /// [`Resend::latched`]: the caller resolves it through the request's latch).
    pub(super) async fn send<T, F, Fut>(
        &self,
        context: impl fmt::Display,
        rule: Resend<'_>,
        mut send: F,
    ) -> Result<(T, bool)>
    where
        F: FnMut(Connection) -> Fut,
        Fut: std::future::Future<Output = redis::RedisResult<T>>,
    {
        // Only a window needs the first send's start (a clock read per request otherwise).
        let started = rule.latched().then(tokio::time::Instant::now);
        let mut attempt = 0usize;
        // Whether a send so far may have run without its answer reaching us.
        let mut unknown = false;
        loop {
            let e = match self.send_once(&mut send).await {
                Ok(v) => return Ok((v, attempt > 0)),
                Err(e) => e,
            };
            let failure = classify(&e);
            if failure != Failure::Final {
                // On Sentinel, a refused write (READONLY: the master was demoted) or an
                // unreachable master has the sentinels asked at once.
                self.conn.deployment.request_failed();
            }
            unknown |= failure == Failure::Unanswered;
            let rule = rule.after(started.map_or(Duration::ZERO, |s| s.elapsed()));
            match resend_after(failure, rule, attempt, self.pinned()) {
                Some(pause) => {
                    tracing::debug!(%context, error = format_args!("{e:#}"), attempt, "resending (same request)");
                    // Boxed: a timer is large, and only a failed send waits.
                    Box::pin(tokio::time::sleep(pause)).await;
                    attempt += 1;
                }
                None => {
                    let e = Error::from_redis(&context.to_string(), e);
                    return Err(if unknown && rule.latched() && failure != Failure::Final {
                        e.outcome_unknown()
                    } else {
                        e
                    });
                }
            }
        }
    }
}

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

    /// Whether [`GrantChannel::confirm`] asks the replicas anything (else it answers `Ok` at
    /// once).
    pub(crate) fn confirms(&self) -> bool {
        self.wait.is_some()
    }

    /// After a write sent over this channel (a grant, or an extension that found its hold):
    /// `WAIT` for the replicas on the connection that made it. `Ok` when no confirmation is
    /// asked for or enough replicas confirmed; [`ErrorKind::NotReplicated`] otherwise (the
    /// caller gives a grant back). An error marks the channel failed
    /// ([`GrantChannel::failed`]).
    pub(crate) async fn confirm(&mut self, context: impl fmt::Display) -> Result<()> {
        let r = self.wait_for_replicas(&context).await;
        r.inspect_err(|e| self.failed(e))
    }

    /// [`GrantChannel::confirm`]'s `WAIT`.
    async fn wait_for_replicas(&self, context: impl fmt::Display) -> Result<()> {
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
                via: self.via,
                calls: self.calls,
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
    pub(crate) fn grant_floor(&self, floor: &Arc<str>) -> Arc<str> {
        let deployment = self.deployment();
        match deployment.token_floor(floor, deployment.generation()) {
            // The client's own floor, shared: no copy on a single server.
            Cow::Borrowed(_) => floor.clone(),
            Cow::Owned(f) => f.into(),
        }
    }

    /// Whether grants on this backend may be confirmed by replicas (`WAIT`): Sentinel or
    /// Cluster with [`replica_acks`](crate::ClientBuilder::replica_acks) above 0.
    pub(crate) fn confirms_grants(&self) -> bool {
        self.deployment().confirms_grants()
    }
}

/// What [`Backend::eval`] answers: a script's reply `T` itself (any [`FromRedisValue`]), or
/// [`Sent<T>`] with whether it was sent more than once.
pub(crate) trait Reply: Sized {
    /// The script's reply.
    type Value: FromRedisValue;
    /// This answer of a send.
    fn from_sent(sent: Sent<Self::Value>) -> Self;
}

impl<T: FromRedisValue> Reply for T {
    type Value = T;
    fn from_sent(sent: Sent<T>) -> T {
        sent.value
    }
}

/// A script's reply, and whether it was sent more than once ([`Backend::eval`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Sent<T> {
    /// The reply.
    pub(crate) value: T,
    /// Whether it was sent more than once (or, confirmed, over more than one connection): a
    /// resend may find what an earlier send did.
    pub(crate) resent: bool,
}

impl<T: FromRedisValue> Reply for Sent<T> {
    type Value = T;
    fn from_sent(sent: Sent<T>) -> Self {
        sent
    }
}
