//! A model of distlock's protocol over its real scripts (test only).
//!
//! [`keyspace`] is a deterministic, in-memory Redis: exactly the commands the scripts call,
//! on a virtual clock. [`lua`] runs the project's own `.lua` files, joined as
//! `scripts/mod.rs` joins them (the same bytes, the same SHA), unchanged by Lua 5.1 as Redis
//! embeds it, with Redis's script semantics. [`diff`] is the proof that this Redis is
//! honest: generated sequences of the scripts' calls, built by the raw kinds as the engine
//! builds them, and of plain commands, run against it and against real servers, with every
//! reply and the keyspace compared after each step.

mod check;
mod collections;
#[cfg(test)]
mod compare;
mod counts;
mod deploy;
#[cfg(test)]
mod diff;
mod job;
pub(crate) mod keyspace;
mod latch;
mod leased;
pub(crate) mod lua;
#[cfg(test)]
mod mutant;
#[cfg(test)]
mod replay;
mod semaphore;
mod state;
mod take;
#[cfg(test)]
mod trace;
mod values;

/// A request as the engine sends it: `fast` tried on its first send, `full` when that answers
/// nil (or for a resend); `full` alone when the call has no fast path.
fn with_fast(
    full: crate::scripts::Invocation<'static>,
    fast: Option<crate::scripts::FastPath>,
) -> crate::scripts::Invocation<'static> {
    match fast {
        Some(fast) => {
            let full = std::sync::Arc::new(full);
            crate::scripts::Invocation::later(move || (*full).clone(), fast)
        }
        None => full,
    }
}
