//! Redis Functions: every script of one publish variant registered as a function of one
//! library, loaded at connect with `FUNCTION LOAD` where the server and the user allow it
//! (Redis 7+, Valkey 7.2+) and called with `FCALL`, which costs the server less per call
//! than `EVALSHA` (counted with callgrind on Redis 7.0: about 3,100 instructions per call,
//! see doc/performance.md).
//!
//! A function runs the script's text unchanged: each is registered as
//! `function(KEYS, ARGV) <the script's text> end`, so its locals, helpers and replies are
//! those it has under `EVALSHA`, fresh on every call — except the helpers joined at the front
//! of scripts that hold no state ([`SHARED`]: `publish.lua`, `fast.lua`, `kinds.lua`,
//! `shapes.lua`, functions and constants only), which the library defines once,
//! before the functions, instead of on every call (creating a helper's closure cost a run
//! about 1,000 instructions on Redis 7.0). `prelude.lua`, whose `TIME` reading is per run, and
//! the helpers after it stay in each function. The library's name carries a hash of
//! every script in it (`distlock_<tag>`), and each function's name the library's tag and its
//! script's hash (`dl_<tag>_<sha>`): two distlock versions with different scripts load two
//! libraries side by side, and a library already loaded (by another client of the same
//! version) is used as it is. A server that lost the library (restarted without persistence,
//! `FUNCTION FLUSH`) answers `Function not found`; the call then loads the library again and
//! runs the script by `EVAL` on the same connection, as a `NOSCRIPT` answer is met.

use std::sync::LazyLock;

use super::{Publish, Script, ALL};

/// One library of every script in one publish variant.
pub(crate) struct Library {
    /// `distlock_<tag>`.
    name: String,
    /// 12 hex digits of the SHA-1 of the variant's script hashes.
    tag: String,
    /// The library's code as `FUNCTION LOAD` takes it.
    code: String,
}

/// The three variants' libraries, in [`Publish`] order, built on first use.
static LIBRARIES: [LazyLock<Library>; 3] = [
    LazyLock::new(|| Library::new(Publish::Classic)),
    LazyLock::new(|| Library::new(Publish::Sharded)),
    LazyLock::new(|| Library::new(Publish::Both)),
];

/// The function every library has besides the scripts: `FCALL` of it answers 1. The connect
/// calls it once to learn whether the user may call functions at all.
const PROBE: &str = "probe";

/// How a library is put together; change it when the code of a library built from the same
/// scripts changes.
const LAYOUT: &str = "library 2: shared helpers, then one function per script";

/// Hex digits of a script's SHA-1 in its function's name.
const SHA_DIGITS: usize = 16;

impl Library {
    /// The library of `publish`'s variant.
    pub(crate) fn of(publish: Publish) -> &'static Library {
        &LIBRARIES[publish.index()]
    }

    fn new(publish: Publish) -> Library {
        let helpers = shared(publish);
        // Named by everything its code is made of: the scripts, the helpers defined once, and
        // the way they are put together (LAYOUT), so that two versions that differ in any of
        // them never share a name.
        let identity: String = ALL
            .iter()
            .map(|s| s.hash(publish))
            .chain(helpers.iter().map(String::as_str))
            .chain([LAYOUT])
            .collect();
        let tag = redis::Script::new(&identity).get_hash()[..12].to_string();
        let name = format!("distlock_{tag}");
        let mut code = format!(
            "#!lua name={name}\n\
             redis.register_function{{function_name='dl_{tag}_{PROBE}', \
             callback=function() return 1 end, flags={{'no-writes'}}}}\n"
        );
        for helper in &helpers {
            code.push_str(helper);
        }
        for script in ALL {
            let script: &Script = script;
            code.push_str(&format!(
                "redis.register_function('{}', function(KEYS, ARGV)\n{}\nend)\n",
                function_name(&tag, script.hash(publish)),
                own_part(script.text(publish), &helpers)
            ));
        }
        Library { name, tag, code }
    }

    /// `distlock_<tag>`: what `FUNCTION LIST` shows.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// The code `FUNCTION LOAD` takes.
    pub(crate) fn code(&self) -> &str {
        &self.code
    }

    /// The name of the function that runs the script whose SHA-1 (in this variant) is `sha`.
    pub(crate) fn function(&self, sha: &str) -> String {
        function_name(&self.tag, sha)
    }

    /// The name of the function that answers 1.
    pub(crate) fn probe(&self) -> String {
        format!("dl_{}_{PROBE}", self.tag)
    }
}

/// The stateless helpers the library defines once, in this order (as the scripts join them):
/// `publish.lua` in `publish`'s variant, then `kinds.lua`, `shapes.lua` and `fast.lua`.
fn shared(publish: Publish) -> Vec<String> {
    let publish_text = include_str!("publish.lua").replacen(
        super::CLASSIC_BODY,
        super::BODIES[publish.index()],
        1,
    );
    let mut helpers = vec![publish_text];
    helpers.extend(SHARED.iter().map(|h| h.to_string()));
    helpers
}

/// The helpers besides `publish.lua` that hold no state, defined once per library.
const SHARED: &[&str] = &[
    include_str!("kinds.lua"),
    include_str!("shapes.lua"),
    include_str!("fast.lua"),
];

/// A script's text without the shared helpers it starts with (any of them, in any order,
/// each at most once); what follows them (`prelude.lua` and the rest) stays.
fn own_part<'t>(text: &'t str, helpers: &[String]) -> &'t str {
    let mut rest = text;
    let mut stripped = vec![false; helpers.len()];
    'strip: loop {
        for (i, helper) in helpers.iter().enumerate() {
            if !stripped[i] {
                if let Some(r) = rest.strip_prefix(helper.as_str()) {
                    rest = r;
                    stripped[i] = true;
                    continue 'strip;
                }
            }
        }
        return rest;
    }
}

fn function_name(tag: &str, sha: &str) -> String {
    format!("dl_{tag}_{}", &sha[..SHA_DIGITS])
}

/// Whether `e` is the server's answer to an `FCALL` of a function it does not have.
pub(crate) fn not_found(e: &redis::RedisError) -> bool {
    e.detail()
        .is_some_and(|d| d.starts_with("Function not found"))
}

/// Whether `e` is a refusal of an `FCALL` before its function ran: a function without flags
/// counts as a write, so a server at `maxmemory` with a policy that refuses writes (`OOM`),
/// one whose last save failed (`MISCONF`) or one short of `min-replicas-to-write`
/// (`NOREPLICAS`) refuses the call whatever the script would do. An `EVAL` of the same script
/// is refused only at its first such write, as every script was before functions: a release,
/// which frees memory, still runs on a full server. (A refusal inside a running script names
/// it: `script: …`.)
pub(crate) fn refused_before_running(e: &redis::RedisError) -> bool {
    matches!(e.code(), Some("OOM" | "MISCONF" | "NOREPLICAS")) && !e.to_string().contains("script:")
}

/// Whether `e` is the answer of a server without Redis Functions (Redis 6.2: an unknown
/// command).
pub(crate) fn unsupported(e: &redis::RedisError) -> bool {
    e.detail()
        .is_some_and(|d| d.to_ascii_lowercase().contains("unknown command"))
}

/// Whether `e` says a library of that name is loaded already (by another client of the
/// same distlock version): it is used as it is.
pub(crate) fn already_loaded(e: &redis::RedisError) -> bool {
    e.detail().is_some_and(|d| d.contains("already exists"))
}
