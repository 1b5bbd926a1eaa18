//! What a model client takes of a lock: the kind, with the settings the model uses.

use std::time::Duration;

use crate::lock::raw::{Fair, Plain, RawLock, Read, Write};
use crate::lock::Handoff;

/// A plain lock (hand-off on or off), a fair lock, or a read or write lock of a read-write
/// lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Take {
    Plain,
    PlainOff,
    Fair,
    Read,
    Write,
}

impl Take {
    /// The raw kind, its queued waiters live for `liveness`.
    pub(crate) fn raw(self, liveness: Duration) -> Box<dyn RawLock> {
        match self {
            Take::Plain | Take::PlainOff => Box::new(Plain {
                handoff: if self == Take::Plain {
                    Handoff::Fifo
                } else {
                    Handoff::Off
                },
                liveness,
            }),
            Take::Fair => Box::new(Fair {
                liveness,
                handoff: true,
            }),
            Take::Read => Box::new(Read),
            Take::Write => Box::new(Write {
                liveness,
                handoff: true,
            }),
        }
    }

    /// Whether its waiters queue for direct hand-off.
    pub(crate) fn queues(self) -> bool {
        !matches!(self, Take::PlainOff | Take::Read)
    }

    /// Whether its holds exclude every other hold (all but a read hold).
    pub(crate) fn exclusive(self) -> bool {
        self != Take::Read
    }
}
