//! A script call's keys and arguments in one buffer ([`Packed`]), and a call as sent
//! ([`Call`]: a script with them, an invocation's full call or its fast path).

use redis::{Cmd, RedisWrite};

#[cfg(test)]
use super::Parts;
use super::{Publish, Script};

/// A call's keys and arguments in one buffer (one allocation however many there are; every
/// request builds one): each a 4-byte header, its length times two plus 1 for an argument
/// (0 for a key), then its bytes. Keys and arguments keep their own order.
#[derive(Clone, Default)]
pub(super) struct Packed(pub(super) Vec<u8>, Counts);

/// How many keys and elements a [`Packed`] holds.
#[derive(Clone, Copy, Default)]
struct Counts {
    keys: usize,
    elements: usize,
}

impl Packed {
    /// Room for a call of a few short keys and arguments without regrowing.
    const FIRST: usize = 256;

    fn reserve_first(&mut self, more: usize) {
        if self.0.capacity() == 0 {
            self.0.reserve(more.max(Self::FIRST));
        }
    }

    /// Append one key (`arg` false) or argument.
    fn push(&mut self, arg: bool, bytes: &[u8]) {
        self.reserve_first(bytes.len() + 4);
        self.count(arg);
        self.0.extend_from_slice(&Self::header(arg, bytes.len()));
        self.0.extend_from_slice(bytes);
    }

    /// One more key or argument.
    fn count(&mut self, arg: bool) {
        self.1.keys += usize::from(!arg);
        self.1.elements += 1;
    }

    fn header(arg: bool, len: usize) -> [u8; 4] {
        let len = u32::try_from(len)
            .ok()
            .and_then(|l| l.checked_mul(2))
            .expect("a key or argument under 2 GiB");
        (len | u32::from(arg)).to_le_bytes()
    }

    /// Every element: whether it is an argument, and its bytes.
    fn elements(&self) -> impl Iterator<Item = (bool, &[u8])> + '_ {
        let mut rest = &self.0[..];
        std::iter::from_fn(move || {
            let (head, tail) = rest.split_first_chunk::<4>()?;
            let h = u32::from_le_bytes(*head);
            let (bytes, tail) = tail.split_at((h >> 1) as usize);
            rest = tail;
            Some((h & 1 == 1, bytes))
        })
    }

    pub(super) fn keys(&self) -> impl Iterator<Item = &[u8]> + '_ {
        self.elements().filter(|(a, _)| !a).map(|(_, b)| b)
    }

    pub(super) fn args(&self) -> impl Iterator<Item = &[u8]> + '_ {
        self.elements().filter(|(a, _)| *a).map(|(_, b)| b)
    }

    /// How many keys, how many elements, and their bytes in all.
    fn counts(&self) -> (usize, usize, usize) {
        let Counts { keys, elements } = self.1;
        (keys, elements, self.0.len() - 4 * elements)
    }
}

/// Where a key's or argument's [`ToRedisArgs`](redis::ToRedisArgs) writes: a call's [`Packed`] buffer.
pub(super) struct PackedWriter<'p> {
    pub(super) packed: &'p mut Packed,
    pub(super) arg: bool,
}

impl RedisWrite for PackedWriter<'_> {
    fn write_arg(&mut self, arg: &[u8]) {
        self.packed.push(self.arg, arg);
    }

    fn write_arg_fmt(&mut self, arg: impl std::fmt::Display) {
        use std::io::Write as _;
        let _ = write!(self.writer_for_next_arg(), "{arg}");
    }

    fn writer_for_next_arg(&mut self) -> impl std::io::Write + '_ {
        self.packed.reserve_first(4);
        self.packed.count(self.arg);
        let start = self.packed.0.len();
        self.packed.0.extend_from_slice(&[0; 4]);
        NextArg {
            packed: &mut *self.packed,
            arg: self.arg,
            start,
        }
    }
}

/// One element written piecemeal ([`RedisWrite::writer_for_next_arg`]): its header is
/// written when it is complete (dropped).
struct NextArg<'p> {
    packed: &'p mut Packed,
    arg: bool,
    start: usize,
}

impl std::io::Write for NextArg<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.packed.0.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for NextArg<'_> {
    fn drop(&mut self) {
        let len = self.packed.0.len() - self.start - 4;
        self.packed.0[self.start..self.start + 4].copy_from_slice(&Packed::header(self.arg, len));
    }
}

/// A script and its keys and arguments, as sent: an invocation's full call, or its fast path.
#[derive(Clone, Copy)]
pub(super) struct Call<'p> {
    pub(super) script: &'static Script,
    pub(super) packed: &'p Packed,
}

impl Call<'_> {
    fn command(self, verb: &str, script: &str) -> Cmd {
        // Sized at once: the command is built on every send.
        let packed = self.packed;
        let (keys, count, bytes) = packed.counts();
        let mut cmd = Cmd::with_capacity(3 + count, verb.len() + script.len() + 4 + bytes);
        cmd.arg(verb).arg(script).arg(keys);
        for k in packed.keys() {
            cmd.write_arg(k);
        }
        for a in packed.args() {
            cmd.write_arg(a);
        }
        cmd
    }

    /// Its script, keys and arguments, for the model.
    #[cfg(test)]
    pub(super) fn parts(self) -> Parts {
        let owned = |i: &mut dyn Iterator<Item = &[u8]>| i.map(<[u8]>::to_vec).collect();
        (
            self.script,
            owned(&mut self.packed.keys()),
            owned(&mut self.packed.args()),
        )
    }

    /// `EVALSHA` of the variant for `mode`.
    pub(super) fn evalsha(self, mode: Publish) -> Cmd {
        self.command("EVALSHA", self.script.hash(mode))
    }

    /// `EVAL` of the variant for `mode` (the full text).
    pub(super) fn eval(self, mode: Publish) -> Cmd {
        self.command("EVAL", self.script.text(mode))
    }

    /// `FCALL` of the function of the variant for `mode` in its library.
    pub(super) fn fcall(self, mode: Publish) -> Cmd {
        self.command("FCALL", self.script.function(mode))
    }
}

#[cfg(test)]
mod tests {
    /// A call's keys and arguments, packed in one buffer, come out as added: each in its own
    /// order, whether written whole, formatted, or piecemeal through `writer_for_next_arg`, and
    /// empty ones too.
    #[test]
    fn keys_and_arguments_keep_their_order_and_bytes() {
        use redis::RedisWrite;
        let mut inv = crate::scripts::LOCK_RELEASE.prepare_invoke();
        inv.key("k1")
            .arg(42u64)
            .key(b"".as_slice())
            .arg("")
            .arg("x".repeat(300));
        inv.arg(-7i64).key("k3");
        let mut w = crate::scripts::PackedWriter {
            packed: &mut inv.packed,
            arg: true,
        };
        w.write_arg_fmt(format_args!("{}-{}", "a", 1));
        {
            use std::io::Write;
            let mut next = w.writer_for_next_arg();
            next.write_all(b"pie").unwrap();
            next.write_all(b"ce").unwrap();
        }
        let _ = w.writer_for_next_arg();
        let (script, keys, args) = inv.parts();
        assert!(std::ptr::eq(script, &*crate::scripts::LOCK_RELEASE));
        assert_eq!(keys, [b"k1".to_vec(), Vec::new(), b"k3".to_vec()]);
        assert_eq!(
            args,
            [
                b"42".to_vec(),
                Vec::new(),
                "x".repeat(300).into_bytes(),
                b"-7".to_vec(),
                b"a-1".to_vec(),
                b"piece".to_vec(),
                Vec::new(),
            ]
        );
        assert_eq!(inv.route_key(), b"k1");
        let sent: Vec<Vec<u8>> = inv
            .evalsha(crate::scripts::Publish::Classic)
            .args_iter()
            .map(|a| match a {
                redis::Arg::Simple(b) => b.to_vec(),
                _ => Vec::new(),
            })
            .collect();
        assert_eq!(
            &sent[2..6],
            [b"3".to_vec(), b"k1".to_vec(), Vec::new(), b"k3".to_vec()]
        );
        assert_eq!(sent[6], b"42");
        assert_eq!(sent.len(), 6 + 7);
    }
}
