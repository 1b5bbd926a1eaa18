//! The hash, list, sorted-set and set commands of the model's keyspace.

use std::collections::{BTreeMap, VecDeque};

use super::keyspace::{Entry, Keyspace, Reply, Val, NOT_FLOAT, NOT_INTEGER, SYNTAX, WRONGTYPE};
use super::values::{bound, fmt_score, hash_get, parse_f64, parse_i64, span};

impl Keyspace {
    pub(super) fn hset(&mut self, rest: &[Vec<u8>]) -> Reply {
        let Val::Hash(h) = (match self.val_mut(&rest[0], Val::Hash(Vec::new())) {
            Ok(v) => v,
            Err(r) => return r,
        }) else {
            unreachable!()
        };
        let mut added = 0;
        for pair in rest[1..].chunks(2) {
            match h.iter_mut().find(|(f, _)| *f == pair[0]) {
                Some((_, v)) => *v = pair[1].clone(),
                None => {
                    h.push((pair[0].clone(), pair[1].clone()));
                    added += 1;
                }
            }
        }
        Reply::Int(added)
    }

    pub(super) fn hdel(&mut self, rest: &[Vec<u8>]) -> Reply {
        let removed = match self.entry_mut(&rest[0]) {
            None => return Reply::Int(0),
            Some(Entry {
                val: Val::Hash(h), ..
            }) => {
                let before = h.len();
                h.retain(|(f, _)| !rest[1..].contains(f));
                before - h.len()
            }
            Some(_) => return Reply::err(WRONGTYPE),
        };
        self.drop_if_empty(&rest[0]);
        Reply::Int(removed as i64)
    }

    pub(super) fn hincrby(&mut self, rest: &[Vec<u8>]) -> Reply {
        let Some(by) = parse_i64(&rest[2]) else {
            return Reply::err(NOT_INTEGER);
        };
        let Val::Hash(h) = (match self.val_mut(&rest[0], Val::Hash(Vec::new())) {
            Ok(v) => v,
            Err(r) => return r,
        }) else {
            unreachable!()
        };
        let current = match hash_get(h, &rest[1]) {
            None => 0,
            Some(v) => match parse_i64(v) {
                Some(v) => v,
                None => {
                    let r = Reply::err("ERR hash value is not an integer");
                    self.drop_if_empty(&rest[0]);
                    return r;
                }
            },
        };
        let Some(next) = current.checked_add(by) else {
            self.drop_if_empty(&rest[0]);
            return Reply::err("ERR increment or decrement would overflow");
        };
        let value = next.to_string().into_bytes();
        match h.iter_mut().find(|(f, _)| *f == rest[1]) {
            Some((_, v)) => *v = value,
            None => h.push((rest[1].clone(), value)),
        }
        Reply::Int(next)
    }

    pub(super) fn push(&mut self, key: &[u8], items: &[Vec<u8>]) -> Reply {
        let Val::List(l) = (match self.val_mut(key, Val::List(VecDeque::new())) {
            Ok(v) => v,
            Err(r) => return r,
        }) else {
            unreachable!()
        };
        l.extend(items.iter().cloned());
        Reply::Int(l.len() as i64)
    }

    pub(super) fn lpop(&mut self, key: &[u8]) -> Reply {
        let r = match self.entry_mut(key) {
            None => return Reply::Nil,
            Some(Entry {
                val: Val::List(l), ..
            }) => l.pop_front().map_or(Reply::Nil, Reply::bulk),
            Some(_) => return Reply::err(WRONGTYPE),
        };
        self.drop_if_empty(key);
        r
    }

    pub(super) fn lrem(&mut self, rest: &[Vec<u8>]) -> Reply {
        let Some(count) = parse_i64(&rest[1]) else {
            return Reply::err(NOT_INTEGER);
        };
        let removed = match self.entry_mut(&rest[0]) {
            None => return Reply::Int(0),
            Some(Entry {
                val: Val::List(l), ..
            }) => {
                let mut removed = 0i64;
                let limit = if count == 0 { i64::MAX } else { count.abs() };
                if count >= 0 {
                    let mut i = 0;
                    while i < l.len() && removed < limit {
                        if l[i] == rest[2] {
                            l.remove(i);
                            removed += 1;
                        } else {
                            i += 1;
                        }
                    }
                } else {
                    let mut i = l.len();
                    while i > 0 && removed < limit {
                        i -= 1;
                        if l[i] == rest[2] {
                            l.remove(i);
                            removed += 1;
                        }
                    }
                }
                removed
            }
            Some(_) => return Reply::err(WRONGTYPE),
        };
        self.drop_if_empty(&rest[0]);
        Reply::Int(removed)
    }

    /// `ZADD key [NX] score member [score member ...]` (the option the scripts use: NX, add
    /// only members not there yet, leaving the others' scores).
    pub(super) fn zadd(&mut self, rest: &[Vec<u8>]) -> Reply {
        let nx = rest[1].eq_ignore_ascii_case(b"nx");
        let members = &rest[1 + usize::from(nx)..];
        if members.is_empty() || members.len() % 2 == 1 {
            return Reply::err("ERR syntax error");
        }
        let mut pairs = Vec::new();
        for pair in members.chunks(2) {
            match parse_f64(&pair[0]) {
                Some(s) => pairs.push((s, pair[1].clone())),
                None => return Reply::err(NOT_FLOAT),
            }
        }
        let Val::ZSet(z) = (match self.val_mut(&rest[0], Val::ZSet(BTreeMap::new())) {
            Ok(v) => v,
            Err(r) => return r,
        }) else {
            unreachable!()
        };
        let mut added = 0;
        for (score, member) in pairs {
            if nx && z.contains_key(&member) {
                continue;
            }
            if z.insert(member, score).is_none() {
                added += 1;
            }
        }
        Reply::Int(added)
    }

    pub(super) fn zrem(&mut self, rest: &[Vec<u8>]) -> Reply {
        let removed = match self.entry_mut(&rest[0]) {
            None => return Reply::Int(0),
            Some(Entry {
                val: Val::ZSet(z), ..
            }) => rest[1..].iter().filter(|m| z.remove(*m).is_some()).count(),
            Some(_) => return Reply::err(WRONGTYPE),
        };
        self.drop_if_empty(&rest[0]);
        Reply::Int(removed as i64)
    }

    pub(super) fn zincrby(&mut self, rest: &[Vec<u8>]) -> Reply {
        let Some(by) = parse_f64(&rest[1]) else {
            return Reply::err(NOT_FLOAT);
        };
        let Val::ZSet(z) = (match self.val_mut(&rest[0], Val::ZSet(BTreeMap::new())) {
            Ok(v) => v,
            Err(r) => return r,
        }) else {
            unreachable!()
        };
        let score = z.get(&rest[2]).copied().unwrap_or(0.0) + by;
        z.insert(rest[2].clone(), score);
        Reply::bulk(fmt_score(score))
    }

    /// Members in score order (ties by member bytes), as `ZRANGE` walks them.
    pub(super) fn ordered(z: &BTreeMap<Vec<u8>, f64>) -> Vec<(&Vec<u8>, f64)> {
        let mut v: Vec<(&Vec<u8>, f64)> = z.iter().map(|(m, s)| (m, *s)).collect();
        v.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.cmp(b.0)));
        v
    }

    pub(super) fn zrange(&mut self, rest: &[Vec<u8>]) -> Reply {
        let with_scores = match rest.get(3) {
            None => false,
            Some(o) if o.eq_ignore_ascii_case(b"withscores") => true,
            Some(_) => return Reply::err(SYNTAX),
        };
        let (Some(a), Some(b)) = (parse_i64(&rest[1]), parse_i64(&rest[2])) else {
            return Reply::err(NOT_INTEGER);
        };
        self.with_zset(&rest[0], |z| {
            let items = Self::ordered(z);
            let mut out = Vec::new();
            if let Some(r) = span(items.len(), a, b) {
                for (m, s) in &items[r] {
                    out.push(Reply::bulk((*m).clone()));
                    if with_scores {
                        out.push(Reply::bulk(fmt_score(*s)));
                    }
                }
            }
            Reply::Array(out)
        })
    }

    pub(super) fn zremrangebyscore(&mut self, rest: &[Vec<u8>]) -> Reply {
        let (Some(min), Some(max)) = (bound(&rest[1]), bound(&rest[2])) else {
            return Reply::err("ERR min or max is not a float");
        };
        let removed = match self.entry_mut(&rest[0]) {
            None => return Reply::Int(0),
            Some(Entry {
                val: Val::ZSet(z), ..
            }) => {
                let before = z.len();
                z.retain(|_, s| !(min.below(*s) && max.above(*s)));
                before - z.len()
            }
            Some(_) => return Reply::err(WRONGTYPE),
        };
        self.drop_if_empty(&rest[0]);
        Reply::Int(removed as i64)
    }

    pub(super) fn sadd(&mut self, rest: &[Vec<u8>]) -> Reply {
        let Val::Set(s) = (match self.val_mut(&rest[0], Val::Set(Vec::new())) {
            Ok(v) => v,
            Err(r) => return r,
        }) else {
            unreachable!()
        };
        let mut added = 0;
        for m in &rest[1..] {
            if !s.contains(m) {
                s.push(m.clone());
                added += 1;
            }
        }
        Reply::Int(added)
    }

    pub(super) fn srem(&mut self, rest: &[Vec<u8>]) -> Reply {
        let removed = match self.entry_mut(&rest[0]) {
            None => return Reply::Int(0),
            Some(Entry {
                val: Val::Set(s), ..
            }) => {
                let before = s.len();
                s.retain(|m| !rest[1..].contains(m));
                before - s.len()
            }
            Some(_) => return Reply::err(WRONGTYPE),
        };
        self.drop_if_empty(&rest[0]);
        Reply::Int(removed as i64)
    }
}
