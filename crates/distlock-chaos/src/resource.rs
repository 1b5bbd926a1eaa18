//! The fenced resource the lock-set workload writes through: a value on a redis-server of its
//! own (never faulted) that refuses a token lower than the highest it has seen, and logs
//! every operation in its own order for the fencing and lost-update checkers.

use std::sync::LazyLock;

use anyhow::Context as _;
use redis::aio::MultiplexedConnection;

static SCRIPT: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(include_str!("resource.lua")));

const VALUE: &str = "chaos:resource:value";
const HIGHEST: &str = "chaos:resource:highest-token";
/// The log of every operation (a list of JSON objects, in the resource's order).
pub const LOG: &str = "chaos:resource:log";
/// The unguarded counter of the counter workload (on the resource's server).
pub const COUNTER: &str = "chaos:counter";

/// A connection to the resource.
#[derive(Clone)]
pub struct Resource {
    conn: MultiplexedConnection,
}

impl Resource {
    /// Connect to the resource's server at `url`.
    pub async fn connect(url: &str) -> anyhow::Result<Resource> {
        let client = redis::Client::open(url)?;
        let conn = client
            .get_multiplexed_async_connection()
            .await
            .with_context(|| format!("cannot reach the resource's server {url}"))?;
        Ok(Resource { conn })
    }

    /// A fenced read: `(accepted, value)`.
    pub async fn read(&self, token: u128, by: &str) -> redis::RedisResult<(bool, i64)> {
        self.call("read", token, by, 0).await
    }

    /// A fenced write of `value`: `(accepted, value before)`.
    pub async fn write(
        &self,
        token: u128,
        by: &str,
        value: i64,
    ) -> redis::RedisResult<(bool, i64)> {
        self.call("write", token, by, value).await
    }

    async fn call(
        &self,
        op: &str,
        token: u128,
        by: &str,
        value: i64,
    ) -> redis::RedisResult<(bool, i64)> {
        let mut conn = self.conn.clone();
        let (accepted, before): (i64, i64) = SCRIPT
            .key(VALUE)
            .key(HIGHEST)
            .key(LOG)
            .arg(op)
            .arg(token.to_string())
            .arg(by)
            .arg(value)
            .invoke_async(&mut conn)
            .await?;
        Ok((accepted == 1, before))
    }

    /// The unguarded counter: `GET`.
    pub async fn counter(&self) -> redis::RedisResult<i64> {
        let mut conn = self.conn.clone();
        let v: Option<i64> = redis::cmd("GET")
            .arg(COUNTER)
            .query_async(&mut conn)
            .await?;
        Ok(v.unwrap_or(0))
    }

    /// The unguarded counter: `SET`.
    pub async fn set_counter(&self, value: i64) -> redis::RedisResult<()> {
        let mut conn = self.conn.clone();
        redis::cmd("SET")
            .arg(COUNTER)
            .arg(value)
            .query_async(&mut conn)
            .await
    }
}
