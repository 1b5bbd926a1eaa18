//! A script's reply read as text without allocating ([`Texts`]), for [`super::parse_attempt`].

use std::fmt;

/// A script's reply as the strings `Vec<String>` reads from it, for [`parse_attempt`](super::parse_attempt),
/// without allocating for what the scripts answer (an array of integers and bulk strings):
/// its first four elements (a longer reply is none of `parse_attempt`'s shapes either).
pub(crate) struct Texts<'v> {
    items: [Text<'v>; 4],
    len: usize,
}

/// One element of a reply as text: a bulk or simple string's own bytes, an integer's
/// digits, or (a value of another type) its `String` conversion.
pub(crate) enum Text<'v> {
    Str(&'v str),
    Int(crate::keys::Digits),
    Owned(String),
}

impl AsRef<str> for Text<'_> {
    fn as_ref(&self) -> &str {
        match self {
            Text::Str(s) => s,
            Text::Int(digits) => digits.as_str(),
            Text::Owned(s) => s,
        }
    }
}

impl<'v> Text<'v> {
    /// `v` as `String::from_redis_value` reads it.
    fn of(v: &'v redis::Value) -> Result<Text<'v>, redis::ParsingError> {
        use redis::{FromRedisValue, Value};
        match v {
            Value::Int(i) => Ok(Text::Int(crate::keys::Digits::of(*i))),
            Value::BulkString(b) => match std::str::from_utf8(b) {
                Ok(s) => Ok(Text::Str(s)),
                Err(_) => String::from_redis_value_ref(v).map(Text::Owned),
            },
            Value::SimpleString(s) => Ok(Text::Str(s)),
            other => String::from_redis_value_ref(other).map(Text::Owned),
        }
    }
}

impl<'v> Texts<'v> {
    /// `v` as `Vec<String>` reads it (the same values, the same conversion errors).
    pub(crate) fn of(v: &'v redis::Value) -> Result<Texts<'v>, redis::ParsingError> {
        use redis::{FromRedisValue, Value};
        let items: &[Value] = match v {
            Value::Array(items) | Value::Set(items) => items,
            Value::Nil => &[],
            // Anything else (a bare bulk string, a map) as `Vec<String>` converts it.
            other => {
                let owned = Vec::<String>::from_redis_value_ref(other)?;
                let len = owned.len();
                let mut it = owned.into_iter().map(Text::Owned);
                return Ok(Texts {
                    items: std::array::from_fn(|_| it.next().unwrap_or(Text::Str(""))),
                    len: len.min(4),
                });
            }
        };
        let mut texts = Texts {
            items: std::array::from_fn(|_| Text::Str("")),
            len: items.len().min(4),
        };
        for (i, item) in items.iter().enumerate() {
            let text = Text::of(item)?;
            if i < 4 {
                texts.items[i] = text;
            }
        }
        Ok(texts)
    }
}

impl<'v> std::ops::Deref for Texts<'v> {
    type Target = [Text<'v>];
    fn deref(&self) -> &[Text<'v>] {
        &self.items[..self.len]
    }
}

impl fmt::Debug for Texts<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.iter().map(|t| t.as_ref()))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::Texts;

    /// A reply read as texts is what `Vec<String>` reads from it: the same strings (the
    /// first four), the same conversion failures, the same attempt parsed.
    #[test]
    fn texts_read_a_reply_as_vec_of_string_does() {
        use redis::{FromRedisValue, Value};
        let bulk = |s: &str| Value::BulkString(s.as_bytes().to_vec());
        let replies = [
            Value::Array(vec![Value::Int(1), Value::Int(1), bulk("1764400000000001")]),
            Value::Array(vec![Value::Int(0), Value::Int(2999), bulk("3:42@0a1b")]),
            Value::Array(vec![Value::Int(0), Value::Int(-1)]),
            Value::Array(vec![Value::Int(-4)]),
            Value::Array(vec![
                Value::Int(i64::MIN),
                Value::Int(i64::MAX),
                Value::Int(0),
            ]),
            Value::Array(vec![Value::SimpleString("OK".into()), Value::Okay]),
            Value::Array((0..6).map(Value::Int).collect()),
            Value::Array(vec![Value::Int(1), Value::Nil]),
            Value::Array(vec![Value::BulkString(vec![0xff, 0xfe])]),
            Value::Array(vec![Value::Double(1.5)]),
            Value::Nil,
            bulk("1"),
            Value::Int(-1),
        ];
        for v in &replies {
            let want = Vec::<String>::from_redis_value_ref(v);
            let got = Texts::of(v);
            match (&want, &got) {
                (Ok(w), Ok(g)) => {
                    let g: Vec<&str> = g.iter().map(|t| t.as_ref()).collect();
                    assert_eq!(g, w.iter().take(4).map(String::as_str).collect::<Vec<_>>());
                    let (a, b) = (
                        super::super::parse_attempt(w),
                        super::super::parse_attempt(&Texts::of(v).unwrap()),
                    );
                    assert_eq!(format!("{a:?}"), format!("{b:?}"), "{v:?}");
                }
                (Err(_), Err(_)) => {}
                _ => panic!(
                    "{v:?}: {want:?} against {:?}",
                    got.map(|t| format!("{t:?}"))
                ),
            }
        }
    }
}
