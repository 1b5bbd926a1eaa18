//! A deterministic, in-memory Redis keyspace: exactly the commands distlock's scripts call
//! (and a few the tests use to set up data), on a virtual clock, with Redis 7's replies and
//! error texts. Expiry is lazy, as seen from outside: a key whose deadline is at or before
//! the clock does not exist.

use std::collections::{BTreeMap, VecDeque};

use super::values::{bound, fmt_score, hash_get, index, parse_i64, span};

/// A reply, as RESP2 carries it (what a script's `redis.call` sees, and what a client reads).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Reply {
    Nil,
    Int(i64),
    Bulk(Vec<u8>),
    Array(Vec<Reply>),
    Status(String),
    Error(String),
}

impl Reply {
    pub(super) fn ok() -> Reply {
        Reply::Status("OK".into())
    }

    pub(super) fn err(text: &str) -> Reply {
        Reply::Error(text.to_string())
    }

    pub(super) fn bulk(b: impl Into<Vec<u8>>) -> Reply {
        Reply::Bulk(b.into())
    }

    /// The reply as redis-rs gives it to the client's parsers.
    pub(crate) fn to_value(&self) -> redis::Value {
        match self {
            Reply::Nil => redis::Value::Nil,
            Reply::Int(i) => redis::Value::Int(*i),
            Reply::Bulk(b) => redis::Value::BulkString(b.clone()),
            Reply::Array(a) => redis::Value::Array(a.iter().map(Reply::to_value).collect()),
            Reply::Status(s) if s == "OK" => redis::Value::Okay,
            Reply::Status(s) => redis::Value::SimpleString(s.clone()),
            Reply::Error(e) => redis::Value::SimpleString(format!("-{e}")),
        }
    }

    /// A reply from redis-rs's form (as [`Reply::to_value`] gives it).
    pub(crate) fn from_value(v: redis::Value) -> Reply {
        match v {
            redis::Value::Nil => Reply::Nil,
            redis::Value::Int(i) => Reply::Int(i),
            redis::Value::BulkString(b) => Reply::Bulk(b),
            redis::Value::Array(a) | redis::Value::Set(a) => {
                Reply::Array(a.into_iter().map(Reply::from_value).collect())
            }
            redis::Value::Okay => Reply::Status("OK".into()),
            redis::Value::SimpleString(s) => Reply::Status(s),
            redis::Value::ServerError(e) => {
                Reply::Error(format!("{} {}", e.code(), e.details().unwrap_or_default()))
            }
            other => Reply::Error(format!("MODEL unexpected reply {other:?}")),
        }
    }

    /// The error's code, its first word (`ERR`, `WRONGTYPE`, …), if it is an error.
    pub(crate) fn error_code(&self) -> Option<&str> {
        match self {
            Reply::Error(e) => e.split_whitespace().next(),
            _ => None,
        }
    }
}

pub(super) const WRONGTYPE: &str =
    "WRONGTYPE Operation against a key holding the wrong kind of value";
pub(super) const NOT_INTEGER: &str = "ERR value is not an integer or out of range";
pub(super) const NOT_FLOAT: &str = "ERR value is not a valid float";
pub(super) const SYNTAX: &str = "ERR syntax error";

/// A value of one key.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Val {
    Str(Vec<u8>),
    /// Field → value, in insertion order (as a small hash's listpack keeps them).
    Hash(Vec<(Vec<u8>, Vec<u8>)>),
    List(VecDeque<Vec<u8>>),
    /// Member → score.
    ZSet(BTreeMap<Vec<u8>, f64>),
    Set(Vec<Vec<u8>>),
}

// Scores are never NaN (ZADD and ZINCRBY refuse it), so equality is an equivalence.
impl Eq for Val {}

impl std::hash::Hash for Val {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        std::mem::discriminant(self).hash(h);
        match self {
            Val::Str(s) => s.hash(h),
            Val::Hash(v) => v.hash(h),
            Val::List(l) => l.hash(h),
            Val::ZSet(z) => {
                for (m, s) in z {
                    m.hash(h);
                    s.to_bits().hash(h);
                }
            }
            Val::Set(s) => s.hash(h),
        }
    }
}

impl Val {
    pub(crate) fn type_name(&self) -> &'static str {
        match self {
            Val::Str(_) => "string",
            Val::Hash(_) => "hash",
            Val::List(_) => "list",
            Val::ZSet(_) => "zset",
            Val::Set(_) => "set",
        }
    }

    fn is_empty(&self) -> bool {
        match self {
            Val::Str(_) => false,
            Val::Hash(h) => h.is_empty(),
            Val::List(l) => l.is_empty(),
            Val::ZSet(z) => z.is_empty(),
            Val::Set(s) => s.is_empty(),
        }
    }
}

/// One key: its value and its deadline (virtual ms), if any.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Entry {
    pub(crate) val: Val,
    pub(crate) expires_at: Option<u64>,
}

/// A message a script or client published.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Message {
    pub(crate) channel: Vec<u8>,
    pub(crate) payload: Vec<u8>,
    pub(crate) sharded: bool,
}

/// The keyspace, its virtual clock and what was published.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Keyspace {
    pub(crate) keys: BTreeMap<Vec<u8>, Entry>,
    /// Virtual server time in µs since the Unix epoch.
    pub(crate) now_us: u64,
    /// Messages published, in order (drained by whoever delivers them).
    pub(crate) published: Vec<Message>,
    /// `master_replid` of `INFO replication`: a new one after a restart or a promotion.
    pub(crate) replid: String,
    /// `cluster_my_epoch` of `CLUSTER INFO`; `None`: cluster support disabled.
    pub(crate) cluster_epoch: Option<u64>,
}

impl Keyspace {
    /// An empty keyspace whose clock reads `now_us`.
    pub(crate) fn new(now_us: u64) -> Keyspace {
        Keyspace {
            keys: BTreeMap::new(),
            now_us,
            published: Vec::new(),
            replid: "0".repeat(40),
            cluster_epoch: None,
        }
    }

    pub(crate) fn now_ms(&self) -> u64 {
        self.now_us / 1000
    }

    /// The live entry of `key`.
    pub(crate) fn entry(&self, key: &[u8]) -> Option<&Entry> {
        let now = self.now_ms();
        self.keys
            .get(key)
            .filter(|e| e.expires_at.is_none_or(|at| at > now))
    }

    pub(super) fn entry_mut(&mut self, key: &[u8]) -> Option<&mut Entry> {
        let now = self.now_ms();
        match self.keys.get(key) {
            Some(e) if e.expires_at.is_some_and(|at| at <= now) => {
                self.keys.remove(key);
                None
            }
            _ => self.keys.get_mut(key),
        }
    }

    /// Remove `key` when its aggregate value became empty.
    pub(super) fn drop_if_empty(&mut self, key: &[u8]) {
        if self.keys.get(key).is_some_and(|e| e.val.is_empty()) {
            self.keys.remove(key);
        }
    }

    /// Run one command (`args[0]` is its name, any case).
    pub(crate) fn exec(&mut self, args: &[Vec<u8>]) -> Reply {
        let Some((name, rest)) = args.split_first() else {
            return Reply::err("ERR empty command");
        };
        let name = String::from_utf8_lossy(name).to_ascii_lowercase();
        let arity = |min: usize| rest.len() >= min;
        let wrong = || {
            Reply::Error(format!(
                "ERR wrong number of arguments for '{name}' command"
            ))
        };
        match name.as_str() {
            "get" if rest.len() == 1 => self.get(&rest[0]),
            "set" if arity(2) => self.set(rest),
            "del" if arity(1) => Reply::Int(
                rest.iter()
                    .filter(|k| self.entry_mut(k).is_some() && self.keys.remove(*k).is_some())
                    .count() as i64,
            ),
            "exists" if arity(1) => {
                Reply::Int(rest.iter().filter(|k| self.entry(k).is_some()).count() as i64)
            }
            "type" if rest.len() == 1 => Reply::Status(
                self.entry(&rest[0])
                    .map_or("none", |e| e.val.type_name())
                    .to_string(),
            ),
            "pexpire" if rest.len() == 2 => self.pexpire(&rest[0], &rest[1]),
            "pttl" if rest.len() == 1 => Reply::Int(match self.entry(&rest[0]) {
                None => -2,
                Some(Entry {
                    expires_at: None, ..
                }) => -1,
                Some(Entry {
                    expires_at: Some(at),
                    ..
                }) => (at - self.now_ms()) as i64,
            }),
            "incrby" | "decrby" if rest.len() == 2 => match parse_i64(&rest[1]) {
                Some(by) if name == "incrby" => self.incr(&rest[0], by),
                Some(by) => match by.checked_neg() {
                    Some(by) => self.incr(&rest[0], by),
                    None => Reply::err("ERR decrement would overflow"),
                },
                None => Reply::err(NOT_INTEGER),
            },
            "incr" if rest.len() == 1 => self.incr(&rest[0], 1),
            "decr" if rest.len() == 1 => self.incr(&rest[0], -1),
            "time" if rest.is_empty() => Reply::Array(vec![
                Reply::bulk((self.now_us / 1_000_000).to_string()),
                Reply::bulk((self.now_us % 1_000_000).to_string()),
            ]),
            "hset" if rest.len() >= 3 && rest.len() % 2 == 1 => self.hset(rest),
            "hget" if rest.len() == 2 => self.with_hash(&rest[0], |h| {
                hash_get(h, &rest[1]).map_or(Reply::Nil, |v| Reply::bulk(v.clone()))
            }),
            "hmget" if arity(2) => self.with_hash(&rest[0], |h| {
                Reply::Array(
                    rest[1..]
                        .iter()
                        .map(|f| hash_get(h, f).map_or(Reply::Nil, |v| Reply::bulk(v.clone())))
                        .collect(),
                )
            }),
            "hexists" if rest.len() == 2 => self.with_hash(&rest[0], |h| {
                Reply::Int(hash_get(h, &rest[1]).is_some() as i64)
            }),
            "hlen" if rest.len() == 1 => self.with_hash(&rest[0], |h| Reply::Int(h.len() as i64)),
            "hkeys" if rest.len() == 1 => self.with_hash(&rest[0], |h| {
                Reply::Array(h.iter().map(|(f, _)| Reply::bulk(f.clone())).collect())
            }),
            "hgetall" if rest.len() == 1 => self.with_hash(&rest[0], |h| {
                Reply::Array(
                    h.iter()
                        .flat_map(|(f, v)| [Reply::bulk(f.clone()), Reply::bulk(v.clone())])
                        .collect(),
                )
            }),
            "hdel" if arity(2) => self.hdel(rest),
            "hincrby" if rest.len() == 3 => self.hincrby(rest),
            "lindex" if rest.len() == 2 => match parse_i64(&rest[1]) {
                None => Reply::err(NOT_INTEGER),
                Some(i) => self.with_list(&rest[0], |l| {
                    index(l.len(), i)
                        .and_then(|i| l.get(i))
                        .map_or(Reply::Nil, |v| Reply::bulk(v.clone()))
                }),
            },
            "lrange" if rest.len() == 3 => match (parse_i64(&rest[1]), parse_i64(&rest[2])) {
                (Some(a), Some(b)) => self.with_list(&rest[0], |l| {
                    let items: Vec<&Vec<u8>> = l.iter().collect();
                    Reply::Array(
                        span(items.len(), a, b)
                            .map(|r| items[r].iter().map(|v| Reply::bulk((*v).clone())).collect())
                            .unwrap_or_default(),
                    )
                }),
                _ => Reply::err(NOT_INTEGER),
            },
            "rpush" if arity(2) => self.push(&rest[0], &rest[1..]),
            "lpop" if rest.len() == 1 => self.lpop(&rest[0]),
            "lrem" if rest.len() == 3 => self.lrem(rest),
            "zadd" if rest.len() >= 3 => self.zadd(rest),
            "zscore" if rest.len() == 2 => self.with_zset(&rest[0], |z| {
                z.get(&rest[1])
                    .map_or(Reply::Nil, |s| Reply::bulk(fmt_score(*s)))
            }),
            "zcard" if rest.len() == 1 => self.with_zset(&rest[0], |z| Reply::Int(z.len() as i64)),
            "zrem" if arity(2) => self.zrem(rest),
            "zincrby" if rest.len() == 3 => self.zincrby(rest),
            "zrange" if rest.len() == 3 || rest.len() == 4 => self.zrange(rest),
            "zremrangebyscore" if rest.len() == 3 => self.zremrangebyscore(rest),
            "zcount" if rest.len() == 3 => match (bound(&rest[1]), bound(&rest[2])) {
                (Some(min), Some(max)) => self.with_zset(&rest[0], |z| {
                    Reply::Int(
                        z.values()
                            .filter(|s| min.below(**s) && max.above(**s))
                            .count() as i64,
                    )
                }),
                _ => Reply::err("ERR min or max is not a float"),
            },
            "sadd" if arity(2) => self.sadd(rest),
            "srem" if arity(2) => self.srem(rest),
            "sismember" if rest.len() == 2 => {
                self.with_set(&rest[0], |s| Reply::Int(s.contains(&rest[1]) as i64))
            }
            "smembers" if rest.len() == 1 => self.with_set(&rest[0], |s| {
                Reply::Array(s.iter().map(|m| Reply::bulk(m.clone())).collect())
            }),
            "publish" | "spublish" if rest.len() == 2 => {
                self.published.push(Message {
                    channel: rest[0].clone(),
                    payload: rest[1].clone(),
                    sharded: name == "spublish",
                });
                Reply::Int(0)
            }
            "info" => Reply::bulk(format!(
                "# Replication\r\nrole:master\r\nconnected_slaves:0\r\nmaster_replid:{}\r\n",
                self.replid
            )),
            "cluster" if rest.len() == 1 && rest[0].eq_ignore_ascii_case(b"info") => {
                match self.cluster_epoch {
                    Some(epoch) => Reply::bulk(format!(
                        "cluster_state:ok\r\ncluster_current_epoch:{epoch}\r\ncluster_my_epoch:{epoch}\r\n"
                    )),
                    None => Reply::err("ERR This instance has cluster support disabled"),
                }
            }
            "ping" => Reply::Status("PONG".into()),
            "get" | "set" | "del" | "exists" | "type" | "pexpire" | "pttl" | "incrby"
            | "decrby" | "incr" | "decr" | "time" | "hset" | "hget" | "hmget" | "hexists"
            | "hlen" | "hkeys" | "hgetall" | "hdel" | "hincrby" | "lindex" | "lrange" | "rpush"
            | "lpop" | "lrem" | "zadd" | "zscore" | "zcard" | "zrem" | "zincrby" | "zrange"
            | "zremrangebyscore" | "zcount" | "sadd" | "srem" | "sismember" | "smembers"
            | "publish" | "spublish" | "cluster" => wrong(),
            _ => Reply::Error(format!("ERR unknown command '{name}'")),
        }
    }

    fn get(&mut self, key: &[u8]) -> Reply {
        match self.entry(key) {
            None => Reply::Nil,
            Some(Entry {
                val: Val::Str(s), ..
            }) => Reply::bulk(s.clone()),
            Some(_) => Reply::err(WRONGTYPE),
        }
    }

    fn set(&mut self, rest: &[Vec<u8>]) -> Reply {
        let (key, value) = (&rest[0], &rest[1]);
        let (mut nx, mut xx, mut get, mut keepttl, mut ttl_ms) = (false, false, false, false, None);
        let mut i = 2;
        while i < rest.len() {
            let opt = String::from_utf8_lossy(&rest[i]).to_ascii_lowercase();
            match opt.as_str() {
                "nx" => nx = true,
                "xx" => xx = true,
                "get" => get = true,
                "keepttl" => keepttl = true,
                "px" | "ex" if i + 1 < rest.len() && ttl_ms.is_none() => {
                    let Some(n) = parse_i64(&rest[i + 1]) else {
                        return Reply::err(NOT_INTEGER);
                    };
                    let ms = if opt == "ex" {
                        n.checked_mul(1000)
                    } else {
                        Some(n)
                    };
                    match ms {
                        Some(ms) if ms > 0 => ttl_ms = Some(ms as u64),
                        _ => return Reply::err("ERR invalid expire time in 'set' command"),
                    }
                    i += 1;
                }
                _ => return Reply::err(SYNTAX),
            }
            i += 1;
        }
        if (nx && xx) || (keepttl && ttl_ms.is_some()) {
            return Reply::err(SYNTAX);
        }
        let old = self.entry(key).cloned();
        let old_reply = match &old {
            None => Reply::Nil,
            Some(Entry {
                val: Val::Str(s), ..
            }) => Reply::bulk(s.clone()),
            Some(_) if get => return Reply::err(WRONGTYPE),
            Some(_) => Reply::Nil,
        };
        if (nx && old.is_some()) || (xx && old.is_none()) {
            return if get { old_reply } else { Reply::Nil };
        }
        let expires_at = match ttl_ms {
            Some(ms) => Some(self.now_ms() + ms),
            None if keepttl => old.and_then(|e| e.expires_at),
            None => None,
        };
        self.keys.insert(
            key.clone(),
            Entry {
                val: Val::Str(value.clone()),
                expires_at,
            },
        );
        if get {
            old_reply
        } else {
            Reply::ok()
        }
    }

    fn pexpire(&mut self, key: &[u8], ms: &[u8]) -> Reply {
        let Some(ms) = parse_i64(ms) else {
            return Reply::err(NOT_INTEGER);
        };
        let now = self.now_ms() as i64;
        let Some(at) = now.checked_add(ms) else {
            return Reply::err("ERR invalid expire time in 'pexpire' command");
        };
        match self.entry_mut(key) {
            None => Reply::Int(0),
            Some(_) if at <= now => {
                self.keys.remove(key);
                Reply::Int(1)
            }
            Some(e) => {
                e.expires_at = Some(at as u64);
                Reply::Int(1)
            }
        }
    }

    fn incr(&mut self, key: &[u8], by: i64) -> Reply {
        let (current, expires_at) = match self.entry(key) {
            None => (0, None),
            Some(Entry {
                val: Val::Str(s),
                expires_at,
            }) => match parse_i64(s) {
                Some(v) => (v, *expires_at),
                None => return Reply::err(NOT_INTEGER),
            },
            Some(_) => return Reply::err(WRONGTYPE),
        };
        let Some(next) = current.checked_add(by) else {
            return Reply::err("ERR increment or decrement would overflow");
        };
        self.keys.insert(
            key.to_vec(),
            Entry {
                val: Val::Str(next.to_string().into_bytes()),
                expires_at,
            },
        );
        Reply::Int(next)
    }

    pub(super) fn with_hash(
        &mut self,
        key: &[u8],
        f: impl FnOnce(&Vec<(Vec<u8>, Vec<u8>)>) -> Reply,
    ) -> Reply {
        match self.entry(key) {
            None => f(&Vec::new()),
            Some(Entry {
                val: Val::Hash(h), ..
            }) => f(h),
            Some(_) => Reply::err(WRONGTYPE),
        }
    }

    pub(super) fn with_list(
        &mut self,
        key: &[u8],
        f: impl FnOnce(&VecDeque<Vec<u8>>) -> Reply,
    ) -> Reply {
        match self.entry(key) {
            None => f(&VecDeque::new()),
            Some(Entry {
                val: Val::List(l), ..
            }) => f(l),
            Some(_) => Reply::err(WRONGTYPE),
        }
    }

    pub(super) fn with_set(&mut self, key: &[u8], f: impl FnOnce(&Vec<Vec<u8>>) -> Reply) -> Reply {
        match self.entry(key) {
            None => f(&Vec::new()),
            Some(Entry {
                val: Val::Set(s), ..
            }) => f(s),
            Some(_) => Reply::err(WRONGTYPE),
        }
    }

    pub(super) fn with_zset(
        &mut self,
        key: &[u8],
        f: impl FnOnce(&BTreeMap<Vec<u8>, f64>) -> Reply,
    ) -> Reply {
        match self.entry(key) {
            None => f(&BTreeMap::new()),
            Some(Entry {
                val: Val::ZSet(z), ..
            }) => f(z),
            Some(_) => Reply::err(WRONGTYPE),
        }
    }

    /// The value of `key` for a write of type `kind` (created empty when absent), or the
    /// WRONGTYPE reply.
    pub(super) fn val_mut(&mut self, key: &[u8], empty: Val) -> Result<&mut Val, Reply> {
        let exists = self.entry_mut(key).is_some();
        if !exists {
            self.keys.insert(
                key.to_vec(),
                Entry {
                    val: empty,
                    expires_at: None,
                },
            );
            return Ok(&mut self.keys.get_mut(key).expect("inserted").val);
        }
        let e = self.keys.get_mut(key).expect("exists");
        if std::mem::discriminant(&e.val) == std::mem::discriminant(&empty) {
            Ok(&mut e.val)
        } else {
            Err(Reply::err(WRONGTYPE))
        }
    }
}
