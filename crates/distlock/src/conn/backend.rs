//! [`Backend`]: the command side of a client, and the resend rules (what is sent again, how long).

use std::fmt;
use std::time::Duration;

use redis::FromRedisValue;

use super::deployment::{Connection, Deployment, Route, SCAN_COUNT};
use crate::error::{Error, Result};
use crate::scripts::{Invocation as ScriptInvocation, Publish};

/// How often a call is sent again after a connection failure, and the pauses between.
const RETRY_DELAYS: [Duration; 3] = [
    Duration::from_millis(10),
    Duration::from_millis(100),
    Duration::from_millis(400),
];

/// The command side of a client (or of one grant): resend rules over a [`Connection`].
#[derive(Clone)]
pub(crate) struct Backend {
    pub(super) conn: Connection,
    /// Which variant of the scripts runs: how they publish wake-ups.
    pub(super) publish: Publish,
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
        self.publish
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
            if let Some(target) = self.ask_target(e).await {
                return send(target).await;
            }
        }
        r
    }

    /// Send a script once (EVALSHA, NOSCRIPT → EVAL), following an `ASK` redirect.
    async fn invoke<T: FromRedisValue>(
        &self,
        invocation: &ScriptInvocation<'_>,
    ) -> redis::RedisResult<T> {
        let publish = self.publish;
        self.send_once(&mut |mut conn| async move {
            invocation.invoke_async::<T>(&mut conn, publish).await
        })
        .await
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

    /// Whether this backend sends over a connection set aside for one grant.
    fn pinned(&self) -> bool {
        matches!(self.conn.route, Route::Pinned(_))
    }

    /// A request failed with `e`: on Sentinel, a refused write (READONLY: the master was
    /// demoted) or an unreachable master has the sentinels asked at once.
    fn saw_error(&self, e: &redis::RedisError) {
        if retriable(e) {
            self.conn.deployment.request_failed();
        }
    }

    /// Run a script (EVALSHA, NOSCRIPT → SCRIPT LOAD + retry), resending on connection
    /// failures. `context` names the operation for error messages.
    pub(crate) async fn eval<T: FromRedisValue>(
        &self,
        context: impl fmt::Display,
        invocation: &ScriptInvocation<'_>,
    ) -> Result<T> {
        let publish = self.publish;
        self.with_retries(context, |mut conn| async move {
            invocation.invoke_async::<T>(&mut conn, publish).await
        })
        .await
    }

    /// Run a script that must not run twice (it is not idempotent), without resending it:
    /// after a connection failure the caller cannot know whether it ran.
    pub(crate) async fn eval_once<T: FromRedisValue>(
        &self,
        context: impl fmt::Display,
        invocation: &ScriptInvocation<'_>,
    ) -> Result<T> {
        self.invoke(invocation)
            .await
            .map_err(|e| Error::from_redis(&context.to_string(), e))
    }

    /// Run a script that a request latch makes idempotent, resending it after connection
    /// failures until the server answers or `window` has passed since the first send (the
    /// last send then waits its command timeout).
    ///
    /// Every resend carries the same request id, so whichever send the server runs first is
    /// the one applied and the others answer its result. When the window passes without an
    /// answer the error says the outcome is unknown ([`Error::is_outcome_unknown`]): the
    /// server may still run a send that is queued there (a paused or stalled server), and the
    /// caller must resolve it — resend in the background ([`Backend::resend_in_background`])
    /// or undo it through its latch. Also says whether it was sent more than once.
    pub(crate) async fn eval_resolving<T: FromRedisValue>(
        &self,
        context: impl fmt::Display,
        invocation: &ScriptInvocation<'_>,
        window: Duration,
    ) -> Result<(T, bool)> {
        let deadline = tokio::time::Instant::now() + window;
        let mut attempt = 0usize;
        // Whether a send so far may have run without its answer reaching us.
        let mut unknown = false;
        loop {
            match self.invoke(invocation).await {
                Ok(v) => return Ok((v, attempt > 0)),
                Err(e) if retriable(&e) => {
                    self.saw_error(&e);
                    unknown |= unanswered(&e);
                    let now = tokio::time::Instant::now();
                    // Over a connection set aside for a grant, which does not reconnect, the
                    // caller gets the error at once (and resolves an unknown outcome through
                    // the latch); a refusal where nothing ran is ridden out like any
                    // connection error.
                    if now >= deadline || self.pinned() {
                        let e = Error::from_redis(&context.to_string(), e);
                        return Err(if unknown { e.outcome_unknown() } else { e });
                    }
                    tracing::debug!(%context, error = format_args!("{e:#}"), attempt, "resending (same request id)");
                    // The last resend goes out at the deadline at the latest.
                    tokio::time::sleep(resend_delay(attempt).min(deadline - now)).await;
                    attempt += 1;
                }
                Err(e) => return Err(Error::from_redis(&context.to_string(), e)),
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
                .eval_resolving::<T>(&context, &invocation, limit)
                .await
                .map(|(v, _)| v);
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
        self.with_retries(context, |mut conn| async move {
            cmd.query_async::<T>(&mut conn).await
        })
        .await
    }

    /// Run a pipeline (read-only or idempotent), resending on connection failures.
    pub(crate) async fn pipeline<T: FromRedisValue>(
        &self,
        context: impl fmt::Display,
        pipe: &redis::Pipeline,
    ) -> Result<T> {
        self.with_retries(context, |mut conn| async move {
            pipe.query_async::<T>(&mut conn).await
        })
        .await
    }

    /// Send a request, and send it again after [`RETRY_DELAYS`] while it fails in a way that
    /// allows a resend.
    /// `context` is formatted only when something goes wrong (no allocation per call).
    async fn with_retries<T, F, Fut>(&self, context: impl fmt::Display, mut send: F) -> Result<T>
    where
        F: FnMut(Connection) -> Fut,
        Fut: std::future::Future<Output = redis::RedisResult<T>>,
    {
        let mut attempt = 0;
        // A connection set aside for one grant does not reconnect: a failure there goes back
        // to the caller, which sends the grant again over a fresh one.
        let resends = if self.pinned() { 0 } else { RETRY_DELAYS.len() };
        loop {
            match self.send_once(&mut send).await {
                Ok(v) => return Ok(v),
                Err(e) if retriable(&e) && attempt < resends => {
                    self.saw_error(&e);
                    tracing::debug!(%context, error = format_args!("{e:#}"), attempt, "resending");
                    tokio::time::sleep(RETRY_DELAYS[attempt]).await;
                    attempt += 1;
                }
                Err(e) => return Err(Error::from_redis(&context.to_string(), e)),
            }
        }
    }
}

/// Pause before resend number `attempt` (0-based): 10 ms, 100 ms, 400 ms, then every second.
pub(super) fn resend_delay(attempt: usize) -> Duration {
    RETRY_DELAYS
        .get(attempt)
        .copied()
        .unwrap_or(Duration::from_secs(1))
}

/// Whether a failed send may have run on the server: its answer never came (a broken
/// connection, a timeout). A server's refusal (MOVED, TRYAGAIN, READONLY, …) or a refused
/// connection means nothing ran.
fn unanswered(e: &redis::RedisError) -> bool {
    (e.is_io_error() || e.is_connection_dropped() || e.is_timeout()) && !e.is_connection_refusal()
}

/// Errors after which the same request may be sent again: broken or refused connections,
/// timeouts, a server that is still loading its snapshot or asks to try again, a replica's
/// READONLY refusal (given before anything runs: a master demoted by a failover), and a
/// cluster's MOVED and ASK redirects (nothing ran; on MOVED the cluster client rebuilds its
/// slot map, so the resend goes to the slot's new master; an ASK that could not be followed
/// is resent like a MOVED).
fn retriable(e: &redis::RedisError) -> bool {
    use redis::{ErrorKind as K, ServerErrorKind as S};
    e.is_io_error()
        || e.is_connection_dropped()
        || e.is_connection_refusal()
        || e.is_timeout()
        || matches!(
            e.kind(),
            K::Server(S::BusyLoading)
                | K::Server(S::TryAgain)
                | K::Server(S::MasterDown)
                | K::Server(S::ClusterDown)
                | K::Server(S::ReadOnly)
                | K::Server(S::Moved)
                | K::Server(S::Ask)
        )
}
