//! The differential test's two sides and how their answers are compared: a real server
//! ([`Real`]) and the model's keyspace, replies and keyspaces compared with the clock's
//! tolerance ([`same_reply`], [`model_snapshot`]).

use std::collections::BTreeMap;

use super::keyspace::{Keyspace, Reply, Val};

/// How far apart two readings of the clock may be, in ms (one step, on a loaded machine).
pub(super) const TOLERANCE_MS: u64 = 200;

/// A real server and a connection to it.
pub(super) struct Real {
    _server: distlock_test::RedisServer,
    pub(super) con: redis::Connection,
}

impl Real {
    pub(super) fn start() -> Real {
        let server = distlock_test::RedisServer::start();
        let con = server.connection();
        Real {
            _server: server,
            con,
        }
    }

    fn query(&mut self, cmd: &redis::Cmd) -> Reply {
        match cmd.query::<redis::Value>(&mut self.con) {
            Ok(v) => Reply::from_value(v),
            Err(e) => {
                let text = format!(
                    "{} {}",
                    e.code().unwrap_or("ERR"),
                    e.detail().unwrap_or_default()
                );
                // Redis 6.2 wraps an error raised by redis.call: `ERR Error running script
                // (call to f_…): @user_script:N: WRONGTYPE …`; 7.0 passes it through.
                let inner = text
                    .strip_prefix("ERR Error running script")
                    .and_then(|rest| rest.split_once("@user_script:"))
                    .and_then(|(_, rest)| rest.split_once(": "))
                    .map(|(_, inner)| inner.to_string());
                Reply::Error(inner.unwrap_or(text))
            }
        }
    }

    pub(super) fn exec(&mut self, args: &[Vec<u8>]) -> Reply {
        let mut cmd = redis::cmd(std::str::from_utf8(&args[0]).expect("command name"));
        for a in &args[1..] {
            cmd.arg(a.as_slice());
        }
        self.query(&cmd)
    }

    pub(super) fn eval(&mut self, text: &str, keys: &[Vec<u8>], args: &[Vec<u8>]) -> Reply {
        let mut cmd = redis::cmd("EVAL");
        cmd.arg(text).arg(keys.len());
        for k in keys {
            cmd.arg(k.as_slice());
        }
        for a in args {
            cmd.arg(a.as_slice());
        }
        self.query(&cmd)
    }

    pub(super) fn time_us(&mut self) -> u64 {
        let (s, us): (u64, u64) = redis::cmd("TIME").query(&mut self.con).expect("TIME");
        s * 1_000_000 + us
    }

    /// Every key: its type, value and PTTL.
    pub(super) fn snapshot(&mut self) -> BTreeMap<Vec<u8>, (String, Reply, i64)> {
        let keys: Vec<Vec<u8>> = redis::cmd("KEYS")
            .arg("*")
            .query(&mut self.con)
            .expect("KEYS");
        let mut out = BTreeMap::new();
        for k in keys {
            let t: String = redis::cmd("TYPE")
                .arg(&k)
                .query(&mut self.con)
                .expect("TYPE");
            let cmd = match t.as_str() {
                "string" => vec!["GET"],
                "hash" => vec!["HGETALL"],
                "list" => vec!["LRANGE", "0", "-1"],
                "zset" => vec!["ZRANGE", "0", "-1", "WITHSCORES"],
                "set" => vec!["SMEMBERS"],
                _ => continue,
            };
            let mut c = redis::cmd(cmd[0]);
            c.arg(&k);
            for a in &cmd[1..] {
                c.arg(*a);
            }
            let mut v = self.query(&c);
            match t.as_str() {
                "set" => sort_array(&mut v),
                "zset" => sort_pairs(&mut v),
                _ => {}
            }
            let pttl: i64 = redis::cmd("PTTL")
                .arg(&k)
                .query(&mut self.con)
                .expect("PTTL");
            out.insert(k, (t, v, pttl));
        }
        out
    }
}

pub(super) fn sort_array(v: &mut Reply) {
    if let Reply::Array(a) = v {
        a.sort_by(|x, y| format!("{x:?}").cmp(&format!("{y:?}")));
    }
}

/// Whether a `ZRANGE … WITHSCORES` reply lists its pairs by score, then member (as Redis does).
fn in_score_order(v: &Reply) -> bool {
    let Reply::Array(a) = v else {
        return true;
    };
    let key = |p: &[Reply]| match p {
        [Reply::Bulk(m), Reply::Bulk(s)] => {
            let score: f64 = std::str::from_utf8(s).ok().and_then(|s| s.parse().ok())?;
            Some((score, m.clone()))
        }
        _ => None,
    };
    let keys: Vec<_> = a.chunks(2).map(key).collect();
    keys.windows(2).all(|w| match (&w[0], &w[1]) {
        (Some((s0, m0)), Some((s1, m1))) => s0.total_cmp(s1).then_with(|| m0.cmp(m1)).is_le(),
        _ => true,
    })
}

/// A `ZRANGE … WITHSCORES` reply with its (member, score) pairs in member order: scores made
/// from the clock are compared within the tolerance, and two members whose scores differ by a
/// millisecond on one side and tie on the other would otherwise be listed in another order.
pub(super) fn sort_pairs(v: &mut Reply) {
    if let Reply::Array(a) = v {
        let mut pairs: Vec<Vec<Reply>> = a.chunks(2).map(<[Reply]>::to_vec).collect();
        pairs.sort_by(|x, y| format!("{:?}", x[0]).cmp(&format!("{:?}", y[0])));
        *a = pairs.into_iter().flatten().collect();
    }
}

/// The model's keyspace as [`Real::snapshot`] gives the real one.
pub(super) fn model_snapshot(ks: &Keyspace) -> BTreeMap<Vec<u8>, (String, Reply, i64)> {
    let now = ks.now_ms();
    let mut out = BTreeMap::new();
    for (k, e) in &ks.keys {
        if e.expires_at.is_some_and(|at| at <= now) {
            continue;
        }
        let bulk = |b: &Vec<u8>| Reply::Bulk(b.clone());
        let mut v = match &e.val {
            Val::Str(s) => bulk(s),
            Val::Hash(h) => Reply::Array(h.iter().flat_map(|(f, v)| [bulk(f), bulk(v)]).collect()),
            Val::List(l) => Reply::Array(l.iter().map(bulk).collect()),
            Val::ZSet(_) | Val::Set(_) => {
                let mut copy = ks.clone();
                let cmd = if matches!(e.val, Val::ZSet(_)) {
                    vec![
                        b"zrange".to_vec(),
                        k.clone(),
                        b"0".to_vec(),
                        b"-1".to_vec(),
                        b"withscores".to_vec(),
                    ]
                } else {
                    vec![b"smembers".to_vec(), k.clone()]
                };
                match &e.val {
                    Val::Set(s) => Reply::Array(s.iter().map(bulk).collect()),
                    _ => copy.exec(&cmd),
                }
            }
        };
        match e.val {
            Val::Set(_) => sort_array(&mut v),
            // The model's own ZRANGE must list by score: one that does not shows as such, and
            // so differs from the server's.
            Val::ZSet(_) if in_score_order(&v) => sort_pairs(&mut v),
            Val::ZSet(_) => v = Reply::Error("the model's ZRANGE is out of score order".into()),
            _ => {}
        }
        let pttl = e.expires_at.map_or(-1, |at| (at - now) as i64);
        out.insert(k.clone(), (e.val.type_name().to_string(), v, pttl));
    }
    out
}

/// Whether two numbers agree: exactly below 1,000; else within the tolerance of their unit
/// (µs from 10^15, s from 10^9 to 10^12, ms otherwise).
pub(super) fn close(a: i128, b: i128) -> bool {
    if a == b {
        return true;
    }
    let m = a.abs().max(b.abs());
    let tolerance = TOLERANCE_MS as i128;
    let allowed = if m < 1_000 {
        0
    } else if m >= 1_000_000_000_000_000 {
        tolerance * 1_000
    } else if (1_000_000_000..1_000_000_000_000).contains(&m) {
        tolerance / 1_000 + 1
    } else {
        tolerance
    };
    (a - b).abs() <= allowed
}

/// Whether two byte strings agree: the same text, with runs of digits compared by [`close`].
pub(super) fn same_text(a: &[u8], b: &[u8]) -> bool {
    fn runs(s: &[u8]) -> Vec<(bool, &[u8])> {
        let mut out = Vec::new();
        let mut i = 0;
        while i < s.len() {
            let digit = s[i].is_ascii_digit();
            let start = i;
            while i < s.len() && s[i].is_ascii_digit() == digit {
                i += 1;
            }
            out.push((digit, &s[start..i]));
        }
        out
    }
    let (ra, rb) = (runs(a), runs(b));
    ra.len() == rb.len()
        && ra.iter().zip(&rb).all(|((da, a), (db, b))| {
            da == db
                && if *da && a.len() < 30 && b.len() < 30 {
                    let parse = |s: &[u8]| std::str::from_utf8(s).ok()?.parse::<i128>().ok();
                    match (parse(a), parse(b)) {
                        (Some(x), Some(y)) => close(x, y),
                        _ => a == b,
                    }
                } else {
                    a == b
                }
        })
}

pub(super) fn same_reply(a: &Reply, b: &Reply) -> bool {
    match (a, b) {
        (Reply::Int(x), Reply::Int(y)) => close(*x as i128, *y as i128),
        (Reply::Bulk(x), Reply::Bulk(y)) => same_text(x, y),
        (Reply::Array(x), Reply::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same_reply(x, y))
        }
        (Reply::Error(_), Reply::Error(_)) => a.error_code() == b.error_code(),
        _ => a == b,
    }
}
