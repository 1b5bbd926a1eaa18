//! The Lua scripts, one `.lua` file each; every file's header lists its KEYS, ARGV and
//! return values. They are compiled into the binary, hashed once, and run by `EVALSHA` with a
//! `SCRIPT LOAD` + retry on `NOSCRIPT` (redis-rs [`redis::Script`]), so a server restart or
//! `SCRIPT FLUSH` costs one extra round trip, never an error.

use std::sync::LazyLock;

use redis::Script;

macro_rules! script {
    ($(#[$doc:meta])* $name:ident, $file:literal) => {
        $(#[$doc])*
        pub(crate) static $name: LazyLock<Script> =
            LazyLock::new(|| Script::new(include_str!($file)));
    };
}

script!(
    /// Grant or re-enter a lock and issue its fencing token.
    LOCK_ACQUIRE,
    "lock_acquire.lua"
);
script!(
    /// Release one hold; publish the unlock message on the last.
    LOCK_RELEASE,
    "lock_release.lua"
);
script!(
    /// Renew many leases at once (watchdog) or extend one.
    LOCK_RENEW,
    "lock_renew.lua"
);
script!(
    /// Delete a lock whoever holds it and wake its waiters.
    LOCK_FORCE_UNLOCK,
    "lock_force_unlock.lua"
);
script!(
    /// One owner's hold count, token and TTL.
    LOCK_INSPECT,
    "lock_inspect.lua"
);

script!(
    /// Take a job lock if free; WRONGTYPE for a key of another type.
    JOB_ACQUIRE,
    "job_acquire.lua"
);
script!(
    /// Release a job lock if ours (delete, or keep for the at-least time).
    JOB_RELEASE,
    "job_release.lua"
);
script!(
    /// Extend a job lock if ours.
    JOB_EXTEND,
    "job_extend.lua"
);

/// Sources of every script, by file name, for tools and tests that run them directly.
pub const SOURCES: &[(&str, &str)] = &[
    ("lock_acquire.lua", include_str!("lock_acquire.lua")),
    ("lock_release.lua", include_str!("lock_release.lua")),
    ("lock_renew.lua", include_str!("lock_renew.lua")),
    (
        "lock_force_unlock.lua",
        include_str!("lock_force_unlock.lua"),
    ),
    ("lock_inspect.lua", include_str!("lock_inspect.lua")),
    ("job_acquire.lua", include_str!("job_acquire.lua")),
    ("job_release.lua", include_str!("job_release.lua")),
    ("job_extend.lua", include_str!("job_extend.lua")),
];

#[cfg(test)]
mod tests {
    use super::SOURCES;

    #[test]
    fn every_script_has_a_header_with_keys_argv_and_returns() {
        for (file, src) in SOURCES {
            let header: String = src
                .lines()
                .take_while(|l| l.starts_with("--"))
                .collect::<Vec<_>>()
                .join("\n");
            assert!(header.contains("KEYS[1]"), "{file}: no KEYS in header");
            assert!(header.contains("Returns"), "{file}: no Returns in header");
        }
    }
}
