//! Unit tests of the scripts: their headers, the prelude, the names they build, the
//! publish variants.

use super::{
    Publish, ALL, FAIR, FAST, HANDOFF, KINDS, LEASES, PERMIT_QUEUE, PRELUDE, PUBLISH, RUNNABLE,
    RW_HANDOFF, SHAPES, SOURCES,
};

/// Every negative reply a script returns is cited by its name ([`super::reply`]) in that
/// script's header, so the Rust side and the Lua side name each code alike.
#[test]
fn every_negative_reply_is_named_in_its_scripts_header() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/src/scripts");
    let mut checked = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("lua") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let header: String = text
            .lines()
            .take_while(|l| l.starts_with("--") || l.trim().is_empty())
            .collect::<Vec<_>>()
            .join("\n");
        let code: Vec<&str> = text
            .lines()
            .skip_while(|l| l.starts_with("--") || l.trim().is_empty())
            .filter(|l| !l.trim_start().starts_with("--"))
            .collect();
        for (name, value) in super::reply::ALL {
            let returned = code.iter().any(|l| {
                let l = l.replace(' ', "");
                l.contains(&format!("return{value}")) || l.contains(&format!("return{{{value}"))
            });
            if returned {
                checked += 1;
                assert!(
                    header.contains(name),
                    "{} returns {value} without naming it {name} in its header",
                    path.display()
                );
            }
        }
    }
    assert!(checked >= 20, "only {checked} negative replies found");
}

#[test]
fn every_script_has_a_header_with_keys_argv_and_returns() {
    assert_eq!(SOURCES.len(), 44);
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

#[test]
fn the_prelude_has_a_header_and_comes_first_in_every_script_that_uses_it() {
    let header: Vec<&str> = PRELUDE
        .lines()
        .take_while(|l| l.starts_with("--"))
        .collect();
    assert!(header[0].starts_with("-- prelude.lua:"), "{}", header[0]);
    for name in [
        "now_ms()",
        "next_token(counter_key, floor[, fenced_key])",
        "held_token(",
        "expire_or_undo(",
        "error_reply(",
        "Errors",
    ] {
        assert!(
            header.iter().any(|l| l.contains(name)),
            "prelude header: no {name}"
        );
    }
    assert_eq!(SOURCES.len(), RUNNABLE.len());
    for ((file, own), (run_file, run)) in SOURCES.iter().zip(RUNNABLE) {
        assert_eq!(file, run_file);
        // A helper call, not `redis.error_reply(`.
        let uses = [
            "now_ms(",
            "next_token(",
            "held_token(",
            "expire_or_undo(",
            " error_reply(",
        ]
        .iter()
        .any(|f| own.contains(f));
        // Every script reads server time through a helper (one TIME per run): the
        // prelude, or the fast paths' fast.lua; a fast path without a token (the leased
        // acquire's) reads it once itself, joining no helper for it.
        let own_time = own.matches("redis.call('time')").count();
        assert!(
            own_time == 0 || (own_time == 1 && file.ends_with("_fast.lua")),
            "{file}: calls TIME itself instead of now_ms()"
        );
        let uses_leases = ["migrate_leases(", "reclaim_leases(", "earliest_lease_end("]
            .iter()
            .any(|f| own.contains(f));
        let uses_fair = [
            "drop_stale_heads(",
            "queue_score(",
            "shift_scores(",
            "leave_queue(",
            "serve_head(",
        ]
        .iter()
        .any(|f| own.contains(f));
        let uses_permit_queue = own.contains("permit_queue()");
        let uses_rw_handoff = [
            "rw_queue_head(",
            "rw_grant(",
            "rw_hand_off(",
            "rw_write_gone(",
        ]
        .iter()
        .any(|f| own.contains(f));
        // The fair and read-write helpers hand off through the hand-off helpers
        // (announce, the queue's).
        let uses_handoff = !uses_permit_queue
            && ["first_live_waiter(", "enqueue(", "dequeue(", "hand_off("]
                .iter()
                .any(|f| own.contains(f))
            || uses_fair
            || uses_rw_handoff;
        let uses_kinds = own.contains("wrong_kind(");
        let uses_shapes = own.contains("lock_hash(") || own.contains("count_of(");
        // Every script that publishes has the helper; one marked `no_publish` runs alone.
        let mut expected = if run.starts_with(PUBLISH) {
            PUBLISH.to_string()
        } else {
            assert!(
                !own.contains("publish("),
                "{file}: publishes without publish.lua"
            );
            String::new()
        };
        if file.ends_with("_fast.lua") {
            assert!(
                !uses && !uses_kinds && !uses_shapes && !uses_leases && !uses_handoff,
                "{file}"
            );
            if own.contains("fast_token(") {
                expected.push_str(FAST);
            }
        }
        if uses || uses_leases || uses_handoff {
            expected.push_str(PRELUDE);
        }
        if uses_kinds {
            expected.push_str(KINDS);
        }
        if uses_shapes {
            expected.push_str(SHAPES);
        }
        if uses_leases || uses_permit_queue {
            expected.push_str(LEASES);
        }
        if uses_permit_queue {
            expected.push_str(PERMIT_QUEUE);
        }
        if uses_handoff {
            expected.push_str(HANDOFF);
        }
        if uses_fair {
            expected.push_str(FAIR);
        }
        if uses_rw_handoff {
            expected.push_str(RW_HANDOFF);
        }
        expected.push_str(own);
        assert_eq!(*run, expected, "{file}: helpers not joined as used");
    }
}

#[test]
fn the_hand_off_helpers_write_the_clients_field_names() {
    let line = format!(
        "local TOKEN_FIELD, HOLDER_FIELD = '{}', '{}'",
        crate::keys::TOKEN_FIELD,
        crate::keys::HOLDER_FIELD
    );
    assert!(HANDOFF.contains(&line), "handoff.lua: no {line}");
    let queued = format!("local QUEUED_FIELD = '{}'", crate::layout::QUEUED_FIELD);
    assert!(HANDOFF.contains(&queued), "handoff.lua: no {queued}");
    // The grant channel the scripts build is the one the client subscribes to.
    for key in ["orders", "{user}:orders"] {
        let channel = crate::keys::lock_grant_channel(key, "c");
        let built = if key.contains('{') {
            format!("distlock_lock_grant:{key}:c")
        } else {
            format!("distlock_lock_grant:{{{key}}}:c")
        };
        assert_eq!(channel, built);
    }
    assert!(HANDOFF.contains("'distlock_lock_grant:{' .. lock .. '}:'"));
    assert!(HANDOFF.contains("'distlock_lock_grant:' .. lock .. ':'"));
    for key in ["exports", "{user}:exports"] {
        let channel = crate::keys::permit_grant_channel(key, "c");
        let built = if key.contains('{') {
            format!("distlock_permit_grant:{key}:c")
        } else {
            format!("distlock_permit_grant:{{{key}}}:c")
        };
        assert_eq!(channel, built);
    }
    assert!(PERMIT_QUEUE.contains("'distlock_permit_grant:{' .. sem .. '}:'"));
    assert!(PERMIT_QUEUE.contains("'distlock_permit_grant:' .. sem .. ':'"));
}

/// The fast paths build the helper key and channel names from the lock key as the client
/// names them (`keys.rs`), and write the client's field names.
#[test]
fn the_fast_paths_name_keys_as_the_client_does() {
    let fast = |file: &str| {
        super::SOURCES
            .iter()
            .find(|(f, _)| *f == file)
            .map(|(_, s)| *s)
            .expect("script")
    };
    type Name = fn(&str) -> String;
    use crate::keys::{fair_queue, fair_timeouts};
    let names: [(&str, &str, Name); 15] = [
        ("fair_acquire_fast.lua", "redisson_lock_queue", fair_queue),
        (
            "fair_acquire_fast.lua",
            "redisson_lock_timeout",
            fair_timeouts,
        ),
        (
            "lock_acquire_fast.lua",
            "distlock_lock_queue",
            crate::keys::lock_queue,
        ),
        (
            "lock_acquire_fast.lua",
            "redisson_lock_token",
            crate::keys::redisson_fenced_token,
        ),
        (
            "lock_release_fast.lua",
            "redisson_lock__channel",
            crate::keys::lock_channel,
        ),
        (
            "rw_write_acquire_fast.lua",
            "distlock_rwlock_writers",
            crate::keys::rwlock_writers,
        ),
        (
            "rw_write_acquire_fast.lua",
            "distlock_rwlock_queue",
            crate::keys::rwlock_queue,
        ),
        (
            "rw_write_release_fast.lua",
            "distlock_rwlock_queue",
            crate::keys::rwlock_queue,
        ),
        (
            "rw_read_acquire_fast.lua",
            "distlock_rwlock_writers",
            crate::keys::rwlock_writers,
        ),
        (
            "rw_read_acquire_fast.lua",
            "distlock_rwlock_queue",
            crate::keys::rwlock_queue,
        ),
        (
            "rw_read_release_fast.lua",
            "distlock_rwlock_queue",
            crate::keys::rwlock_queue,
        ),
        (
            "leased_acquire_fast.lua",
            "distlock_permit_queue",
            crate::keys::permit_queue,
        ),
        (
            "leased_acquire_fast.lua",
            "redisson__timeout__set",
            crate::keys::legacy_semaphore_leases,
        ),
        (
            "leased_release_fast.lua",
            "distlock_permit_queue",
            crate::keys::permit_queue,
        ),
        (
            "leased_release_fast.lua",
            "redisson_sc",
            crate::keys::semaphore_channel,
        ),
    ];
    for (file, prefix, name) in names {
        let src = fast(file);
        assert!(
            src.contains(&format!("'{prefix}:' .. tag")),
            "{file}: {prefix}"
        );
        // tag: the key itself when it has a `{`, else the key in braces.
        assert!(
            src.contains("local tag = key\nif not string.find(key, '{', 1, true) then\n  tag = '{' .. key .. '}'"),
            "{file}"
        );
        for key in ["orders", "app:{user:42}:orders"] {
            let tag = crate::keys::hash_tagged(key);
            assert_eq!(name(key), format!("{prefix}:{tag}"), "{file}");
        }
    }
    for file in ["lock_acquire_fast.lua", "fair_acquire_fast.lua"] {
        let acquire = fast(file);
        assert!(acquire.contains(&format!("'{}', token", crate::keys::TOKEN_FIELD)));
        assert!(acquire.contains(&format!("'{}',", crate::keys::HOLDER_FIELD)));
    }
    assert!(fast("rw_write_release_fast.lua").contains("'redisson_rwlock:' .. tag, '1'"));
    assert!(fast("rw_read_release_fast.lua").contains("'redisson_rwlock:' .. tag, '0'"));
    // The read hold's timeout key, as read_prefix (rw.rs) names it, with hold 1.
    for file in ["rw_read_acquire_fast.lua", "rw_read_release_fast.lua"] {
        assert!(
            fast(file).contains("tag .. ':' .. ARGV[")
                && fast(file).contains(" .. ':rwlock_timeout:1'"),
            "{file}"
        );
    }
    assert_eq!(
        crate::keys::suffixed("orders", "c:1"),
        "{orders}:c:1",
        "the timeout key's prefix is the tag, ':' and the owner"
    );
    assert!(fast("fair_release_fast.lua").contains("'redisson_lock_queue:' .. tag"));
    // The plain release reads the queued field in place of the queue.
    assert!(fast("lock_release_fast.lua").contains(&format!(
        "redis.call('hmget', key, ARGV[1], 'mode', '{}')",
        crate::layout::QUEUED_FIELD
    )));
}

/// Only a request's first send tries its fast path, whichever clone of the invocation
/// sends it (a resend goes to the full script, which recognises it); a request built
/// anew has its own first send.
#[test]
fn a_request_tries_its_fast_path_on_its_first_send_only() {
    let request = || {
        let mut fast = super::LOCK_RELEASE_FAST.prepare_invoke();
        fast.key("k").arg("c:1");
        let full = || {
            let mut full = super::LOCK_RELEASE.prepare_invoke();
            full.key("k");
            full
        };
        super::Invocation::later(full, super::FastPath::new(fast, |v| v))
    };
    let inv = request();
    let resend = inv.clone();
    assert!(inv.fast_first().is_some(), "first send");
    assert!(resend.fast_first().is_none(), "a resend through a clone");
    assert!(inv.fast_first().is_none(), "a resend");
    assert!(request().fast_first().is_some(), "another request");
    assert!(super::LOCK_RELEASE.prepare_invoke().fast_first().is_none());
}

/// A request with a fast path builds its full call only when a send needs it, once per
/// invocation, and sends the call it built.
#[test]
fn a_full_call_is_built_only_when_a_send_needs_it() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let builds = std::sync::Arc::new(AtomicUsize::new(0));
    let counted = builds.clone();
    let mut fast = super::LOCK_RELEASE_FAST.prepare_invoke();
    fast.key("k").arg("c:1");
    let inv = super::Invocation::later(
        move || {
            counted.fetch_add(1, Ordering::SeqCst);
            let mut full = super::LOCK_RELEASE.prepare_invoke();
            full.key("k").arg("full-arg");
            full
        },
        super::FastPath::new(fast, |v| v),
    );
    assert!(inv.fast_first().is_some());
    assert_eq!(
        builds.load(Ordering::SeqCst),
        0,
        "not built for the fast path"
    );
    let sent = inv.evalsha(Publish::Classic);
    let args: Vec<Vec<u8>> = sent
        .args_iter()
        .map(|a| match a {
            redis::Arg::Simple(b) => b.to_vec(),
            _ => Vec::new(),
        })
        .collect();
    let hash = super::LOCK_RELEASE.hashes[0].as_bytes().to_vec();
    assert_eq!(
        args,
        [
            b"EVALSHA".to_vec(),
            hash,
            b"1".to_vec(),
            b"k".to_vec(),
            b"full-arg".to_vec()
        ]
    );
    inv.eval(Publish::Sharded);
    assert_eq!(builds.load(Ordering::SeqCst), 1, "built once");
}

#[test]
fn each_publish_mode_runs_its_own_variant() {
    assert_eq!(ALL.len(), RUNNABLE.len());
    let mut alone = 0;
    for script in ALL {
        let classic = script.text(Publish::Classic);
        let sharded = script.text(Publish::Sharded);
        let both = script.text(Publish::Both);
        assert!(RUNNABLE.iter().any(|(_, s)| *s == classic));
        if !classic.contains("local function publish(") {
            // A script that publishes nothing (`no_publish`): one text for every mode.
            assert!(!classic.contains("publish(") && classic == sharded && classic == both);
            alone += 1;
            continue;
        }
        assert!(!sharded.contains("pcall('publish'"), "{sharded}");
        assert!(sharded.contains("pcall('spublish', channel, message)"));
        assert!(both.contains("pcall('publish'") && both.contains("pcall('spublish'"));
        // Only the helper's body differs.
        assert_eq!(classic.lines().count() + 1, both.lines().count());
    }
    assert_eq!(
        alone, 1,
        "lock_renew_one.lua alone runs without publish.lua"
    );
}

/// A script's code: its lines without comments or blank lines.
fn code_of(file: &str) -> String {
    let (_, src) = SOURCES
        .iter()
        .find(|(f, _)| *f == file)
        .unwrap_or_else(|| panic!("no script {file}"));
    src.lines()
        .filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with("--"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The fast paths come in twins (plain and fair, read and write; and the plain acquire beside
/// the write acquire) that differ only where their kinds do: each twin is its sibling with
/// the listed lines changed, so a fix to the shared lines of one cannot miss the other.
#[test]
fn the_fast_path_twins_differ_only_where_their_kinds_do() {
    // (a script, its twin, the lines that differ: (in the script, in the twin)).
    type Twins = (
        &'static str,
        &'static str,
        &'static [(&'static str, &'static str)],
    );
    let twins: [Twins; 5] = [
        (
            "lock_release_fast.lua",
            "fair_release_fast.lua",
            &[
                ("'mode', 'distlock:queued')", "'mode')"),
                ("or f[2] or f[3] then", "or f[2] then"),
                (
                    "end\nredis.call('del', key)",
                    "end\nif redis.call('exists', 'redisson_lock_queue:' .. tag) == 1 then\n  return nil\nend\nredis.call('del', key)",
                ),
                ("\npublish('redisson_lock__channel:' .. tag, '0')", ""),
            ],
        ),
        (
            "rw_write_release_fast.lua",
            "rw_read_release_fast.lua",
            &[
                ("~= 'write'", "~= 'read'"),
                (
                    "redis.call('del', key)",
                    "redis.call('del', key, tag .. ':' .. ARGV[1] .. ':rwlock_timeout:1')",
                ),
                ("tag, '1')", "tag, '0')"),
            ],
        ),
        (
            "lock_acquire_fast.lua",
            "fair_acquire_fast.lua",
            &[
                (
                    "'distlock_lock_queue:' .. tag, 'redisson_lock_token:' .. tag",
                    "'redisson_lock_queue:' .. tag, 'redisson_lock_timeout:' .. tag",
                ),
                (
                    "fast_token(KEYS[2], ARGV[5], ARGV[4])",
                    "fast_token(KEYS[2], ARGV[4])",
                ),
            ],
        ),
        (
            "rw_write_acquire_fast.lua",
            "rw_read_acquire_fast.lua",
            &[
                ("'mode', 'write'", "'mode', 'read'"),
                (
                    "end\nreturn token",
                    "end\nredis.call('set', tag .. ':' .. ARGV[2] .. ':rwlock_timeout:1', 1, 'px', ARGV[1])\nreturn token",
                ),
            ],
        ),
        (
            "lock_acquire_fast.lua",
            "rw_write_acquire_fast.lua",
            &[
                (
                    "redis.call('exists', key, 'distlock_lock_queue:' .. tag, 'redisson_lock_token:' .. tag) > 0",
                    "redis.call('exists', key, 'distlock_rwlock_writers:' .. tag,\n    'distlock_rwlock_queue:' .. tag) > 0",
                ),
                (
                    "local token, secs = fast_token(KEYS[2], ARGV[5], ARGV[4])",
                    "local token = fast_token(KEYS[2], ARGV[3])",
                ),
                (
                    "redis.call('hset', key, ARGV[2], 1, 'distlock:fencing-token', token, 'distlock:holder',\n  ARGV[3] .. ';' .. secs)",
                    "redis.call('hset', key, 'mode', 'write', ARGV[2], 1)",
                ),
            ],
        ),
    ];
    for (from, to, changes) in twins {
        let mut code = code_of(from);
        for (old, new) in changes {
            assert_eq!(code.matches(old).count(), 1, "{from}: {old:?} once");
            code = code.replacen(old, new, 1);
        }
        assert_eq!(code, code_of(to), "{to} is {from} but for the listed lines");
    }
}

/// Each publish variant's library registers every script under a name of its own, and names
/// differ between variants (a server may hold the libraries of clients of each variant).
#[test]
fn every_script_has_a_function_of_its_own_in_each_variants_library() {
    use super::functions::Library;
    let mut libraries = std::collections::HashSet::new();
    for mode in [Publish::Classic, Publish::Sharded, Publish::Both] {
        let library = Library::of(mode);
        assert!(
            libraries.insert(library.name().to_string()),
            "{}",
            library.name()
        );
        assert!(library
            .code()
            .starts_with(&format!("#!lua name={}\n", library.name())));
        let mut names = std::collections::HashSet::new();
        for (script, (file, own)) in ALL.iter().zip(SOURCES) {
            let name = script.function(mode).to_string();
            assert!(names.insert(name.clone()), "{name} twice");
            // The script's own text ends its function (the stateless helpers it starts with
            // are defined once, before every function).
            let start = format!("redis.register_function('{name}', function(KEYS, ARGV)\n");
            let at = library
                .code()
                .find(&start)
                .unwrap_or_else(|| panic!("{file}"));
            let body = &library.code()[at + start.len()..];
            let end = body
                .find("\nend)\nredis.register_function")
                .unwrap_or(body.len() - 6);
            assert!(
                body[..end].ends_with(own.trim_end()) || body[..end].ends_with(own),
                "{file}"
            );
            // Under EVALSHA the same script runs with every helper joined.
            assert!(script.text(mode).ends_with(own), "{file}");
        }
        assert!(library.code().contains(&library.probe()));
    }
}
