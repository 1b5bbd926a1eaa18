//! Sending a script call: `FCALL` or `EVALSHA` as the client's [`Via`] says, its fast path
//! first on a request's first send, and the recovery on the same connection when the server
//! lacks the script (`NOSCRIPT`) or the library (`Function not found`): one `EVAL` of the
//! text.

use redis::{Cmd, FromRedisValue};

use super::{functions, Call, Invocation, Via};

impl Call<'_> {
    /// The first command of a send by `via`: `FCALL` or `EVALSHA`.
    fn first_command(self, via: Via) -> Cmd {
        if via.functions {
            self.fcall(via.publish)
        } else {
            self.evalsha(via.publish)
        }
    }

    /// What follows a first command answered by `e`, on the same connection: `EVAL` of the
    /// full text after `NOSCRIPT` or an `FCALL` refused before its function ran
    /// ([`functions::refused_before_running`]), and after `Function not found` (the server lost the
    /// library) the library's `FUNCTION LOAD` (its answer ignored: the `EVAL` runs the script
    /// whatever it says) before it; `None` for any other answer.
    fn recovery(self, via: Via, e: &redis::RedisError) -> Option<(Option<Cmd>, Cmd)> {
        if e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript) {
            return Some((None, self.eval(via.publish)));
        }
        if via.functions && functions::refused_before_running(e) {
            return Some((None, self.eval(via.publish)));
        }
        if via.functions && functions::not_found(e) {
            let mut load = redis::cmd("FUNCTION");
            load.arg("LOAD")
                .arg(functions::Library::of(via.publish).code());
            return Some((Some(load), self.eval(via.publish)));
        }
        None
    }

    /// `FCALL` or `EVALSHA`, and on `NOSCRIPT` (or `Function not found`) one `EVAL`.
    async fn send_async<T: FromRedisValue>(
        self,
        con: &mut impl redis::aio::ConnectionLike,
        via: Via,
    ) -> redis::RedisResult<T> {
        match self.first_command(via).query_async(con).await {
            Err(e) => match self.recovery(via, &e) {
                // Boxed: once per script and connection, and two commands' futures.
                Some((load, eval)) => Box::pin(recover_async(con, load, eval)).await,
                None => Err(e),
            },
            r => r,
        }
    }

    /// `FCALL` or `EVALSHA`, and on `NOSCRIPT` (or `Function not found`) one `EVAL`, over a
    /// blocking connection.
    fn send_blocking<T: FromRedisValue>(
        self,
        con: &mut dyn redis::ConnectionLike,
        via: Via,
    ) -> redis::RedisResult<T> {
        match self.first_command(via).query(con) {
            Err(e) => match self.recovery(via, &e) {
                Some((load, eval)) => {
                    if let Some(load) = load {
                        let _: redis::RedisResult<redis::Value> = load.query(con);
                    }
                    eval.query(con)
                }
                None => Err(e),
            },
            r => r,
        }
    }
}

/// The recovery [`Call::recovery`] chose: `load` (its answer ignored), then `eval`.
async fn recover_async<T: FromRedisValue>(
    con: &mut impl redis::aio::ConnectionLike,
    load: Option<Cmd>,
    eval: Cmd,
) -> redis::RedisResult<T> {
    if let Some(load) = load {
        let _: redis::RedisResult<redis::Value> = load.query_async(con).await;
    }
    eval.query_async(con).await
}

impl Invocation<'_> {
    /// Run it: `FCALL` or `EVALSHA` as `via` says, and on `NOSCRIPT` (or `Function not
    /// found`) one `EVAL` on the same connection (which also caches the script there). On
    /// the request's first send its fast path goes first, when it has one.
    pub(crate) async fn invoke_async<T: FromRedisValue>(
        &self,
        con: &mut impl redis::aio::ConnectionLike,
        via: Via,
    ) -> redis::RedisResult<T> {
        if let Some((later, fast)) = self.fast_first() {
            let v = fast.call().send_async(con, via).await?;
            if let Some(answer) = later.answer(fast, v) {
                return answer;
            }
        }
        self.full().send_async(con, via).await
    }

    /// [`Invocation::invoke_async`] over a blocking connection.
    pub(crate) fn invoke_blocking<T: FromRedisValue>(
        &self,
        con: &mut dyn redis::ConnectionLike,
        via: Via,
    ) -> redis::RedisResult<T> {
        if let Some((later, fast)) = self.fast_first() {
            let v = fast.call().send_blocking(con, via)?;
            if let Some(answer) = later.answer(fast, v) {
                return answer;
            }
        }
        self.full().send_blocking(con, via)
    }
}
