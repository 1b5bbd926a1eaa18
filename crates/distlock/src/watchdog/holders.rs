//! Where a lease's guards were taken ([`Holder`], [`Holders`]), for a nested acquire's hint.

/// Where a guard was taken, as far as a nested acquire can tell: the tokio task that
/// acquired (or re-entered, or adopted) it, or, outside any task (`block_on`, the blocking
/// facade), the thread. A tokio task-local cannot carry it: one is set only around a future
/// the library runs (as `JobLock::run` does for `holds_job_lock`), and a guard lives on in the
/// caller's code after its acquire returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Holder {
    Task(tokio::task::Id),
    Thread(std::thread::ThreadId),
}

impl Holder {
    /// The task (or, outside a task, the thread) running this call.
    pub(crate) fn current() -> Holder {
        match tokio::task::try_id() {
            Some(id) => Holder::Task(id),
            None => Holder::Thread(std::thread::current().id()),
        }
    }
}

/// Where the guards of one lease were taken: the first inline (most leases have one guard, and
/// every grant registers one), the others beside it.
#[derive(Default)]
pub(super) struct Holders {
    first: Option<Holder>,
    more: Vec<Holder>,
}

impl Holders {
    pub(super) fn push(&mut self, h: Holder) {
        match self.first {
            None => self.first = Some(h),
            Some(_) => self.more.push(h),
        }
    }

    /// Take one `h` out, if there is one.
    pub(super) fn remove(&mut self, h: Holder) {
        if self.first == Some(h) {
            self.first = self.more.pop();
        } else if let Some(i) = self.more.iter().position(|m| *m == h) {
            self.more.swap_remove(i);
        }
    }

    pub(super) fn contains(&self, h: &Holder) -> bool {
        self.first.as_ref() == Some(h) || self.more.contains(h)
    }
}

#[cfg(test)]
mod tests {
    use super::{Holder, Holders};

    /// The guards of one lease: each taken out once, in any order, the first included.
    #[test]
    fn holders_keep_one_element_per_guard() {
        let (a, b, c) = (
            Holder::current(),
            Holder::Thread(
                std::thread::spawn(|| std::thread::current().id())
                    .join()
                    .unwrap(),
            ),
            Holder::Thread(
                std::thread::spawn(|| std::thread::current().id())
                    .join()
                    .unwrap(),
            ),
        );
        let mut h = Holders::default();
        for x in [a, b, a, c] {
            h.push(x);
        }
        h.remove(a);
        assert!(h.contains(&a) && h.contains(&b) && h.contains(&c));
        h.remove(a);
        assert!(!h.contains(&a) && h.contains(&b) && h.contains(&c));
        h.remove(c);
        h.remove(c);
        assert!(h.contains(&b) && !h.contains(&c));
        h.remove(b);
        assert!(!h.contains(&b) && h.first.is_none() && h.more.is_empty());
    }
}
