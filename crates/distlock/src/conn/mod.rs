//! The connection layer: one multiplexed command connection per client ([`Backend`], a
//! redis-rs `ConnectionManager` that reconnects with backoff) and one shared subscription
//! connection ([`pubsub::Hub`]).
//!
//! Every script distlock runs is idempotent under a resend (fresh owners, acquire and
//! unlock latches), so [`Backend`] retries a call whose connection broke or timed out.

pub(crate) mod pubsub;

use std::fmt;
use std::time::Duration;

use redis::aio::ConnectionManager;
use redis::{FromRedisValue, ScriptInvocation};

use crate::error::{Error, ErrorKind, Result};

/// How often a call is sent again after a connection failure, and the pauses between.
const RETRY_DELAYS: [Duration; 3] = [
    Duration::from_millis(10),
    Duration::from_millis(100),
    Duration::from_millis(400),
];

/// `redis://user:secret@host/` → `redis://user:***@host/`, for messages and `Debug`.
pub(crate) fn redact_url(url: &str) -> String {
    let Some(scheme_end) = url.find("://") else {
        return url.to_string();
    };
    let rest = &url[scheme_end + 3..];
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let authority = &rest[..authority_end];
    let Some(at) = authority.rfind('@') else {
        return url.to_string();
    };
    let userinfo = &authority[..at];
    let user = userinfo.split(':').next().unwrap_or("");
    let masked = if userinfo.contains(':') {
        format!("{user}:***")
    } else {
        "***".to_string()
    };
    format!("{}{}@{}", &url[..scheme_end + 3], masked, &rest[at + 1..])
}

/// The command connection of a client.
#[derive(Clone)]
pub(crate) struct Backend {
    conn: ConnectionManager,
}

/// Connection settings a [`Backend`] and the subscription hub share.
#[derive(Clone, Debug)]
pub(crate) struct ConnectSettings {
    pub connect_timeout: Duration,
    pub command_timeout: Duration,
}

impl Backend {
    /// Connect and authenticate; fails fast on an unreachable server or a refused password.
    pub(crate) async fn connect(
        client: &redis::Client,
        settings: &ConnectSettings,
        redacted_url: &str,
    ) -> Result<Backend> {
        let config = redis::aio::ConnectionManagerConfig::new()
            .set_connection_timeout(Some(settings.connect_timeout))
            .set_response_timeout(Some(settings.command_timeout))
            .set_number_of_retries(2)
            .set_min_delay(Duration::from_millis(50))
            .set_max_delay(Duration::from_secs(2));
        let connect = client.get_connection_manager_with_config(config);
        let conn = match tokio::time::timeout(settings.connect_timeout * 3, connect).await {
            Ok(Ok(conn)) => conn,
            Ok(Err(e)) => {
                return Err(Error::from_redis(&format!("connect to {redacted_url}"), e));
            }
            Err(_) => {
                return Err(Error::new(
                    ErrorKind::Connection,
                    format!("connect to {redacted_url}: timed out"),
                ));
            }
        };
        let backend = Backend { conn };
        backend
            .query::<String>(&format!("connect to {redacted_url}"), &redis::cmd("PING"))
            .await?;
        Ok(backend)
    }

    /// Run a script (EVALSHA, NOSCRIPT → SCRIPT LOAD + retry), resending on connection
    /// failures. `context` names the operation for error messages.
    pub(crate) async fn eval<T: FromRedisValue>(
        &self,
        context: impl fmt::Display,
        invocation: &ScriptInvocation<'_>,
    ) -> Result<T> {
        self.with_retries(context, |mut conn| async move {
            invocation.invoke_async::<T>(&mut conn).await
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
        let mut conn = self.conn.clone();
        invocation
            .invoke_async::<T>(&mut conn)
            .await
            .map_err(|e| Error::from_redis(&context.to_string(), e))
    }

    /// As [`Backend::eval`], also telling whether the request was sent more than once (an
    /// earlier send may have been executed).
    pub(crate) async fn eval_resent<T: FromRedisValue>(
        &self,
        context: impl fmt::Display,
        invocation: &ScriptInvocation<'_>,
    ) -> Result<(T, bool)> {
        let mut sends = 0;
        let v = self
            .with_retries(context, |mut conn| {
                sends += 1;
                async move { invocation.invoke_async::<T>(&mut conn).await }
            })
            .await?;
        Ok((v, sends > 1))
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
        F: FnMut(ConnectionManager) -> Fut,
        Fut: std::future::Future<Output = redis::RedisResult<T>>,
    {
        let mut attempt = 0;
        loop {
            match send(self.conn.clone()).await {
                Ok(v) => return Ok(v),
                Err(e) if retriable(&e) && attempt < RETRY_DELAYS.len() => {
                    tracing::debug!(%context, error = %e, attempt, "resending");
                    tokio::time::sleep(RETRY_DELAYS[attempt]).await;
                    attempt += 1;
                }
                Err(e) => return Err(Error::from_redis(&context.to_string(), e)),
            }
        }
    }
}

/// Errors after which the same request may be sent again: broken or refused connections,
/// timeouts, and a server that is still loading its snapshot or asks to try again.
fn retriable(e: &redis::RedisError) -> bool {
    use redis::{ErrorKind as K, ServerErrorKind as S};
    e.is_io_error()
        || e.is_connection_dropped()
        || e.is_connection_refusal()
        || e.is_timeout()
        || matches!(
            e.kind(),
            K::Server(S::BusyLoading) | K::Server(S::TryAgain) | K::Server(S::MasterDown)
        )
}

#[cfg(test)]
mod tests {
    use super::redact_url;

    #[test]
    fn passwords_are_masked() {
        assert_eq!(
            redact_url("redis://:hunter2@127.0.0.1:6379/0"),
            "redis://:***@127.0.0.1:6379/0"
        );
        assert_eq!(
            redact_url("rediss://app:hunter2@host/"),
            "rediss://app:***@host/"
        );
        assert_eq!(redact_url("redis://host:6379"), "redis://host:6379");
        assert!(!redact_url("redis://u:p@ss@h/").contains("p@ss"));
    }
}
