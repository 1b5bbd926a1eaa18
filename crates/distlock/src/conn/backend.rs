//! [`Backend`]: the command side of a client, and the resend rules (what is sent again, how long).

use std::fmt;
use std::time::Duration;

use redis::FromRedisValue;

use super::deployment::{Connection, Deployment, Route, SCAN_COUNT};
use super::resend::{classify, resend_after, Failure, Resend};
use crate::error::{Error, Result};
use crate::scripts::{Invocation as ScriptInvocation, Publish};

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

    /// Run a script (EVALSHA, NOSCRIPT → EVAL), resending it by `rule` after a failure that
    /// allows it ([`resend_after`]). `context` names the operation for error messages (it is
    /// formatted only when something goes wrong).
    ///
    /// With [`Resend::Within`], a window that passes with no send answered gives an error
    /// that says the outcome is unknown ([`Error::is_outcome_unknown`]).
    pub(crate) async fn eval<T: FromRedisValue>(
        &self,
        context: impl fmt::Display,
        invocation: &ScriptInvocation<'_>,
        rule: Resend,
    ) -> Result<T> {
        let publish = self.publish;
        self.send(context, rule, |mut conn| async move {
            invocation.invoke_async::<T>(&mut conn, publish).await
        })
        .await
        .map(|(v, _)| v)
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
        let publish = self.publish;
        let rule = Resend::Within { left: window };
        self.send(context, rule, |mut conn| async move {
            invocation.invoke_async::<T>(&mut conn, publish).await
        })
        .await
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
    /// resend follows, is an error whose outcome is unknown (under [`Resend::Within`]: the
    /// caller resolves it through the request's latch).
    async fn send<T, F, Fut>(
        &self,
        context: impl fmt::Display,
        rule: Resend,
        mut send: F,
    ) -> Result<(T, bool)>
    where
        F: FnMut(Connection) -> Fut,
        Fut: std::future::Future<Output = redis::RedisResult<T>>,
    {
        let started = tokio::time::Instant::now();
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
            let rule = match rule {
                Resend::Within { left } => Resend::Within {
                    left: left.saturating_sub(started.elapsed()),
                },
                other => other,
            };
            match resend_after(failure, rule, attempt, self.pinned()) {
                Some(pause) => {
                    tracing::debug!(%context, error = format_args!("{e:#}"), attempt, "resending (same request)");
                    tokio::time::sleep(pause).await;
                    attempt += 1;
                }
                None => {
                    let e = Error::from_redis(&context.to_string(), e);
                    let latched = matches!(rule, Resend::Within { .. });
                    return Err(if unknown && latched && failure != Failure::Final {
                        e.outcome_unknown()
                    } else {
                        e
                    });
                }
            }
        }
    }
}
