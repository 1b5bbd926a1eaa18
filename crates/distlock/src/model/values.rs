//! How the model's keyspace reads and writes numbers, as Redis does: integer and float
//! arguments, scores as `%.17g`, index ranges.

pub(super) fn hash_get<'a>(h: &'a [(Vec<u8>, Vec<u8>)], field: &[u8]) -> Option<&'a Vec<u8>> {
    h.iter().find(|(f, _)| f == field).map(|(_, v)| v)
}

/// A Redis integer argument (`string2ll`): an optional `-`, digits without a leading zero
/// (but `0` itself), within i64.
pub(crate) fn parse_i64(b: &[u8]) -> Option<i64> {
    let s = std::str::from_utf8(b).ok()?;
    let digits = s.strip_prefix('-').unwrap_or(s);
    if digits.is_empty()
        || !digits.bytes().all(|c| c.is_ascii_digit())
        || (digits.len() > 1 && digits.starts_with('0'))
        || s == "-0"
    {
        return None;
    }
    s.parse().ok()
}

/// A Redis float argument (`strtod`, without NaN): also `inf`, `+inf`, `-inf`.
pub(super) fn parse_f64(b: &[u8]) -> Option<f64> {
    let s = std::str::from_utf8(b).ok()?;
    let v = match s.to_ascii_lowercase().as_str() {
        "inf" | "+inf" | "infinity" | "+infinity" => f64::INFINITY,
        "-inf" | "-infinity" => f64::NEG_INFINITY,
        _ if s.is_empty() || s.starts_with(char::is_whitespace) => return None,
        _ => s.parse().ok()?,
    };
    (!v.is_nan()).then_some(v)
}

/// A score bound of `ZREMRANGEBYSCORE`/`ZCOUNT`: `(x` excludes x.
#[derive(Clone, Copy)]
pub(super) struct Bound {
    value: f64,
    exclusive: bool,
}

impl Bound {
    /// Whether `s` is above this bound used as a minimum.
    pub(super) fn below(self, s: f64) -> bool {
        if self.exclusive {
            s > self.value
        } else {
            s >= self.value
        }
    }

    /// Whether `s` is below this bound used as a maximum.
    pub(super) fn above(self, s: f64) -> bool {
        if self.exclusive {
            s < self.value
        } else {
            s <= self.value
        }
    }
}

pub(super) fn bound(b: &[u8]) -> Option<Bound> {
    match b.strip_prefix(b"(") {
        Some(rest) => parse_f64(rest).map(|value| Bound {
            value,
            exclusive: true,
        }),
        None => parse_f64(b).map(|value| Bound {
            value,
            exclusive: false,
        }),
    }
}

/// A score as Redis 7.0 prints it (`%.17g`): integers without a fraction.
pub(crate) fn fmt_score(s: f64) -> String {
    if s == f64::INFINITY {
        "inf".into()
    } else if s == f64::NEG_INFINITY {
        "-inf".into()
    } else {
        fmt_g17(s)
    }
}

/// C's `%.17g` for a finite double.
pub(crate) fn fmt_g17(d: f64) -> String {
    if d == 0.0 {
        return if d.is_sign_negative() {
            "-0".into()
        } else {
            "0".into()
        };
    }
    let exp = d.abs().log10().floor() as i32;
    if (-5..17).contains(&exp) {
        // Fixed notation with 17 significant digits, trailing zeros removed.
        let decimals = (16 - exp).max(0) as usize;
        let s = format!("{d:.decimals$}");
        let s = if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s
        };
        return s;
    }
    let s = format!("{d:.16e}");
    let (mantissa, e) = s.split_once('e').expect("exponent");
    let mantissa = if mantissa.contains('.') {
        mantissa.trim_end_matches('0').trim_end_matches('.')
    } else {
        mantissa
    };
    let e: i32 = e.parse().expect("exponent");
    format!("{mantissa}e{}{:02}", if e < 0 { '-' } else { '+' }, e.abs())
}

/// The index `i` (negative from the end) in a sequence of `len`, if inside.
pub(super) fn index(len: usize, i: i64) -> Option<usize> {
    let i = if i < 0 { len as i64 + i } else { i };
    (0..len as i64).contains(&i).then_some(i as usize)
}

/// The inclusive range `a..=b` (negative from the end, clamped) of a sequence of `len`, as
/// `LRANGE`/`ZRANGE` take it; `None` when empty.
pub(super) fn span(len: usize, a: i64, b: i64) -> Option<std::ops::RangeInclusive<usize>> {
    let len = len as i64;
    let a = if a < 0 { (len + a).max(0) } else { a };
    let b = if b < 0 { len + b } else { b.min(len - 1) };
    (a <= b && a < len && b >= 0).then_some(a as usize..=b as usize)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::keyspace::{Keyspace, Reply, WRONGTYPE};

    fn run(ks: &mut Keyspace, cmd: &str) -> Reply {
        ks.exec(
            &cmd.split(' ')
                .map(|s| s.as_bytes().to_vec())
                .collect::<Vec<_>>(),
        )
    }

    #[test]
    fn formats_and_parses_as_redis() {
        assert_eq!(fmt_g17(1700000000000.0), "1700000000000");
        assert_eq!(fmt_g17(1.5), "1.5");
        assert_eq!(fmt_g17(1e20), "1e+20");
        assert_eq!(fmt_g17(0.1), "0.10000000000000001");
        assert_eq!(parse_i64(b"01"), None);
        assert_eq!(parse_i64(b"+1"), None);
        assert_eq!(parse_i64(b"-12"), Some(-12));
        assert_eq!(span(3, 0, -1), Some(0..=2));
        assert_eq!(span(3, -1, -1), Some(2..=2));
        assert_eq!(span(0, 0, 0), None);
    }

    #[test]
    fn expiry_follows_the_virtual_clock() {
        let mut ks = Keyspace::new(1_000_000_000);
        assert_eq!(run(&mut ks, "set k v px 100"), Reply::ok());
        assert_eq!(run(&mut ks, "pttl k"), Reply::Int(100));
        ks.now_us += 99_000;
        assert_eq!(run(&mut ks, "exists k"), Reply::Int(1));
        ks.now_us += 1_000;
        assert_eq!(run(&mut ks, "exists k"), Reply::Int(0));
        assert_eq!(run(&mut ks, "pttl k"), Reply::Int(-2));
        assert_eq!(run(&mut ks, "hset h f 1"), Reply::Int(1));
        assert_eq!(run(&mut ks, "get h"), Reply::err(WRONGTYPE));
        assert_eq!(run(&mut ks, "hdel h f"), Reply::Int(1));
        assert_eq!(run(&mut ks, "type h"), Reply::Status("none".into()));
    }
}
