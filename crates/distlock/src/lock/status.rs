//! A lock-family lock's status, as [`Lock::status`](super::Lock::status) reports it.

use super::*;

impl LockCore {
    /// As [`Lock::status`](crate::Lock::status).
    pub(crate) async fn status(&self) -> Result<LockStatus> {
        self.check()?;
        let client = &self.inner.client;
        let counter_key = self.inner.names.counter.clone();
        let mut pipe = redis::pipe();
        pipe.cmd("TYPE")
            .arg(&*self.inner.names.key)
            .cmd("PTTL")
            .arg(&*self.inner.names.key)
            .cmd("GET")
            .arg(&counter_key)
            .cmd("PUBSUB")
            .arg("NUMSUB")
            .arg(self.inner.names.channel())
            .cmd("GET")
            .arg(keys::redisson_fenced_token(&self.inner.names.key));
        // Waiters on a Redis 7 Cluster subscribe with SSUBSCRIBE, which NUMSUB does not
        // count; the pipeline runs on the master of the lock's slot, where the channel is.
        let sharded = self.backend().publish() != crate::scripts::Publish::Classic;
        if sharded {
            pipe.cmd("PUBSUB")
                .arg("SHARDNUMSUB")
                .arg(self.inner.names.channel());
        }
        #[allow(clippy::type_complexity)]
        let (kind, pttl, counter, numsub, fenced, shard_numsub): (
            String,
            i64,
            Option<String>,
            (String, u64),
            Option<String>,
            (String, u64),
        ) = if sharded {
            self.backend()
                .pipeline(&self.context("status"), &pipe)
                .await?
        } else {
            let (kind, pttl, counter, numsub, fenced) = self
                .backend()
                .pipeline(&self.context("status"), &pipe)
                .await?;
            (kind, pttl, counter, numsub, fenced, (String::new(), 0))
        };
        // Before the slot's first grant, its counter will start above the floor (the legacy
        // server-wide counter read at connect): report that.
        let (counter, counter_key) = match counter {
            None => (
                client.fencing_floor().to_string(),
                keys::legacy_fencing_counter(client.key_prefix()),
            ),
            Some(c) => (c, counter_key),
        };
        let counter = raw::parse_token(&counter).ok_or_else(|| {
            Error::new(
                ErrorKind::UnexpectedReply,
                format!(
                    "{}: the fencing counter {counter_key} holds {counter:?}, not a decimal \
                     integer below 2^64 (no grant can draw a token until it is fixed or deleted)",
                    self.context("status"),
                ),
            )
        })?;
        let mut status = LockStatus {
            name: self.inner.names.name.clone(),
            key: self.inner.names.key.to_string(),
            holders: Vec::new(),
            ttl: (pttl >= 0).then(|| Duration::from_millis(pttl as u64)),
            fencing_token: None,
            fencing_counter: counter,
            subscribers: numsub.1 + shard_numsub.1,
            mode: None,
            queue: Vec::new(),
            waiting_writers: 0,
            holder: None,
        };
        match kind.as_str() {
            "none" => {}
            "hash" => {
                let fields: Vec<(String, String)> = self
                    .backend()
                    .query(
                        &self.context("status"),
                        redis::cmd("HGETALL").arg(&*self.inner.names.key),
                    )
                    .await?;
                let mut holder = None;
                for (field, value) in fields {
                    if field == TOKEN_FIELD {
                        status.fencing_token = raw::parse_token(&value).map(FencingToken);
                    } else if field == HOLDER_FIELD {
                        holder = Some(value);
                    } else if field == QUEUED_FIELD {
                        // The hand-off queue's mark (see layout::QUEUED_FIELD), not an owner.
                    } else if field == "mode" {
                        status.mode = LockMode::parse(&value);
                    } else if let Ok(holds) = value.parse() {
                        status.holders.push((field, holds));
                    }
                }
                // Plain and fair locks have one owner; the record is that owner's.
                if let [(owner, _)] = status.holders.as_slice() {
                    status.holder = holder.and_then(|v| HolderInfo::parse(owner, &v));
                }
                // A Redisson RFencedLock holder stores no token in the hash: its token is the
                // last one drawn from its counter.
                if status.fencing_token.is_none() && !status.holders.is_empty() {
                    status.fencing_token =
                        fenced.and_then(|t| raw::parse_token(&t)).map(FencingToken);
                }
            }
            other => {
                return Err(Error::new(
                    ErrorKind::WrongType,
                    format!(
                        "{}: the key holds a {other}, not a lock hash",
                        self.context("status")
                    ),
                ))
            }
        }
        match self.inner.raw.queue(&self.inner.names) {
            Some(Queue::Waiters(list)) => {
                status.queue = self
                    .backend()
                    .query(
                        &self.context("status"),
                        redis::cmd("LRANGE").arg(list).arg(0).arg(-1),
                    )
                    .await?;
            }
            Some(Queue::HandoffWaiters(zset)) => {
                status.queue = self
                    .backend()
                    .query(
                        &self.context("status"),
                        redis::cmd("ZRANGE").arg(zset).arg(0).arg(-1),
                    )
                    .await?;
            }
            Some(Queue::WaitingWriters(zset)) => {
                status.waiting_writers = self
                    .backend()
                    .query(&self.context("status"), redis::cmd("ZCARD").arg(zset))
                    .await?;
            }
            None => {}
        }
        Ok(status)
    }
}
