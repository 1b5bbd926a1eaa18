//! The blocking API keeps the async one's methods: a test that reads the crate's sources,
//! lists the public methods of each builder and guard on both sides, and fails on any
//! difference not in [`ALLOWED`].
//!
//! Methods are found in `impl Type { … }` blocks (`pub fn` and `pub async fn`), in
//! `impl Lease for Type` / `impl Release for Type` (the async guards' verbs), in the
//! `macro_rules!` bodies those blocks invoke, and in macros invoked with the type as first
//! argument (`some_front!(LockGuard, Lock)`). A type that is an alias of a generic one
//! (`pub type LockGuard = HoldGuard<Plain>;`) has the methods of `impl<K> HoldGuard<K>` and
//! of `impl HoldGuard<Plain>`, not those of `impl HoldGuard<Write>`. A file under
//! `src/blocking/` is the blocking side; any other file the async side.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The types compared, by name (the same on both sides).
const TYPES: &[&str] = &[
    "ClientBuilder",
    "Lock",
    "FairLock",
    "RwLock",
    "LockGuard",
    "FairLockGuard",
    "RwLockReadGuard",
    "RwLockWriteGuard",
    "SemaphorePermit",
    "LeasedPermit",
    "JobGuard",
    "MultiLockGuard",
    "RedLockGuard",
];

/// Intended differences: (type, or `*` for every type, method, side that has it alone,
/// why).
const ALLOWED: &[(&str, &str, Side, &str)] = &[
    (
        "*",
        "lost_timeout",
        Side::Blocking,
        "a bounded blocking wait; async code wraps lost() in tokio::time::timeout",
    ),
    (
        "MultiLockGuard",
        "guards",
        Side::Async,
        "the members' guards are async guards",
    ),
    (
        "ClientBuilder",
        "worker_threads",
        Side::Blocking,
        "the blocking client's own runtime",
    ),
    (
        "LockGuard",
        "into_async",
        Side::Blocking,
        "hands the async guard underneath over",
    ),
    (
        "FairLockGuard",
        "into_async",
        Side::Blocking,
        "hands the async guard underneath over",
    ),
    (
        "RwLockReadGuard",
        "into_async",
        Side::Blocking,
        "hands the async guard underneath over",
    ),
    (
        "RwLockWriteGuard",
        "into_async",
        Side::Blocking,
        "hands the async guard underneath over",
    ),
    (
        "Lock",
        "as_async",
        Side::Blocking,
        "the async handle underneath, for code that mixes both",
    ),
    (
        "FairLock",
        "as_async",
        Side::Blocking,
        "the async handle underneath, for code that mixes both",
    ),
    (
        "RwLock",
        "as_async",
        Side::Blocking,
        "the async handle underneath, for code that mixes both",
    ),
    (
        "LockGuard",
        "lock",
        Side::Async,
        "the handle is the async one; blocking code keeps its own",
    ),
    (
        "FairLockGuard",
        "lock",
        Side::Async,
        "the handle is the async one; blocking code keeps its own",
    ),
    (
        "RwLockReadGuard",
        "lock",
        Side::Async,
        "the handle is the async one; blocking code keeps its own",
    ),
    (
        "RwLockWriteGuard",
        "lock",
        Side::Async,
        "the handle is the async one; blocking code keeps its own",
    ),
    (
        "JobGuard",
        "lease",
        Side::Async,
        "a JobLease is an async handle; the blocking guard has its verbs itself",
    ),
];

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Side {
    Async,
    Blocking,
}

/// `text` with comments removed and string and character literals emptied, so that braces
/// inside them do not count.
fn strip(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                i += 2;
                while i + 1 < b.len() && !(b[i] == b'*' && b[i + 1] == b'/') {
                    i += 1;
                }
                i += 2;
            }
            b'r' if b.get(i + 1) == Some(&b'#') || b.get(i + 1) == Some(&b'"') => {
                // A raw string r#"…"# (or r"…"), or an identifier ending in r.
                let mut j = i + 1;
                while b.get(j) == Some(&b'#') {
                    j += 1;
                }
                let hashes = j - i - 1;
                let prev_ident = i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_');
                if b.get(j) != Some(&b'"') || prev_ident {
                    out.push('r');
                    i += 1;
                    continue;
                }
                let end = format!("\"{}", "#".repeat(hashes));
                let rest = &text[j + 1..];
                let close = rest.find(&end).map_or(b.len(), |k| j + 1 + k + end.len());
                out.push_str("\"\"");
                i = close;
            }
            b'"' => {
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
                out.push_str("\"\"");
            }
            b'\'' => {
                // A character literal ('{', '\n'), or a lifetime ('a).
                if b.get(i + 1) == Some(&b'\\') {
                    i += 2;
                    while i < b.len() && b[i] != b'\'' {
                        i += 1;
                    }
                    i += 1;
                    out.push_str("' '");
                } else if b.get(i + 2) == Some(&b'\'') {
                    i += 3;
                    out.push_str("' '");
                } else {
                    out.push('\'');
                    i += 1;
                }
            }
            c => {
                out.push(c as char);
                i += 1;
            }
        }
    }
    out
}

/// The text between the brace at `open` and its match (exclusive).
fn block(text: &str, open: usize) -> &str {
    let mut depth = 0;
    for (i, c) in text[open..].char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return &text[open + 1..open + i];
                }
            }
            _ => {}
        }
    }
    &text[open + 1..]
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '$'
}

/// The identifier starting at `s`'s beginning (after whitespace).
fn ident(s: &str) -> &str {
    let s = s.trim_start();
    let end = s.find(|c| !is_ident(c)).unwrap_or(s.len());
    &s[..end]
}

/// Every position of `word` in `text` as a whole word.
fn words<'a>(text: &'a str, word: &'a str) -> impl Iterator<Item = usize> + 'a {
    text.match_indices(word).map(|(i, _)| i).filter(move |&i| {
        let before = text[..i].chars().next_back();
        let after = text[i + word.len()..].chars().next();
        !before.is_some_and(is_ident) && !after.is_some_and(is_ident)
    })
}

/// `macro_rules!` bodies by name.
fn macros(files: &[(bool, String)]) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for (_, text) in files {
        for i in words(text, "macro_rules") {
            let rest = &text[i + "macro_rules".len()..];
            let name = ident(rest.trim_start().trim_start_matches('!'));
            if let Some(open) = rest.find('{') {
                out.insert(
                    name.to_string(),
                    block(text, i + "macro_rules".len() + open).to_string(),
                );
            }
        }
    }
    out
}

/// Public method names declared directly in `body` (`pub fn`, `pub async fn`; with
/// `any_fn`, every `fn`, as in a trait impl), and those of the macros it invokes
/// (`name!(…)` / `name! { … }`). A macro whose methods are named by its arguments
/// (`pub fn $name`) contributes the first identifier of each `;`-separated argument.
fn methods(body: &str, any_fn: bool, macros: &BTreeMap<String, String>) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for i in words(body, "fn") {
        let before = body[..i].trim_end();
        let public = before.ends_with("pub") || before.ends_with("pub async");
        let name = ident(&body[i + 2..]);
        if (public || any_fn) && !name.is_empty() && !name.starts_with('$') {
            out.insert(name.to_string());
        }
    }
    for (name, mac) in macros {
        for i in words(body, name) {
            let rest = body[i + name.len()..].trim_start();
            let Some(rest) = rest.strip_prefix('!') else {
                continue;
            };
            let rest = rest.trim_start();
            let args = match rest.chars().next() {
                Some('(') => &rest[1..rest.find(')').unwrap_or(rest.len())],
                Some('{') => block(rest, 0),
                _ => continue,
            };
            if mac.contains("pub fn $") {
                out.extend(
                    args.split(';')
                        .map(ident)
                        .filter(|n| !n.is_empty())
                        .map(str::to_string),
                );
            } else if !mac.contains("impl $") {
                out.extend(methods(mac, false, macros));
            }
        }
    }
    out
}

/// `s` split after the `<…>` that opens it (nested brackets counted): (what is inside,
/// the rest); `None` when `s` does not start with `<`.
fn generics(s: &str) -> Option<(&str, &str)> {
    let s = s.strip_prefix('<')?;
    let mut depth = 1;
    for (i, c) in s.char_indices() {
        match c {
            '<' => depth += 1,
            '>' => {
                depth -= 1;
                if depth == 0 {
                    return Some((&s[..i], &s[i + 1..]));
                }
            }
            _ => {}
        }
    }
    Some((s, ""))
}

/// A type as written (`crate::HoldGuard<kind::Write>`): its name without the path
/// (`HoldGuard`) and its arguments' names without their paths (`["Write"]`).
fn type_name(ty: &str) -> (&str, Vec<&str>) {
    let ty = ty.trim();
    let (path, args) = match ty.find('<') {
        Some(k) => (&ty[..k], generics(&ty[k..]).map_or("", |(a, _)| a)),
        None => (ty, ""),
    };
    let args = args
        .split(',')
        .map(|a| {
            let a = a.trim();
            a.rsplit("::").next().unwrap_or(a).trim()
        })
        .filter(|a| !a.is_empty())
        .collect();
    (path.rsplit("::").next().unwrap_or(path).trim(), args)
}

/// The aliases in `text` of a type in `TYPES`: `pub type LockGuard = HoldGuard<Plain>;` is
/// (`LockGuard`, `HoldGuard<Plain>`).
fn aliases(text: &str) -> Vec<(&str, &str)> {
    let mut out = Vec::new();
    for i in words(text, "type") {
        let rest = &text[i + "type".len()..];
        let name = ident(rest);
        if let (true, Some((_, def))) =
            (text[..i].trim_end().ends_with("pub"), rest.split_once('='))
        {
            if TYPES.contains(&name) {
                out.push((name, def.split(';').next().unwrap_or(def)));
            }
        }
    }
    out
}

/// Public methods of every type named in `TYPES`, on one side.
fn methods_of(files: &[(bool, String)], blocking: bool) -> BTreeMap<String, BTreeSet<String>> {
    let macros = macros(files);
    let aliases: Vec<_> = files
        .iter()
        .filter(|(b, _)| *b == blocking)
        .flat_map(|(_, text)| aliases(text))
        .collect();
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let add_impls = |text: &str, out: &mut BTreeMap<String, BTreeSet<String>>| {
        for i in words(text, "impl") {
            let head_end = match text[i..].find(['{', ';']) {
                Some(k) if text.as_bytes()[i + k] == b'{' => i + k,
                _ => continue,
            };
            let head = &text[i + 4..head_end];
            // `impl<…> Trait for Type`, `impl Type`, `impl $crate::Release for $guard`.
            let (params, head) = match generics(head.trim_start()) {
                Some((params, rest)) => (params, rest),
                None => ("", head),
            };
            let params: Vec<&str> = params
                .split(',')
                .filter_map(|p| p.split(':').next())
                .map(str::trim)
                .collect();
            let (trait_, ty) = match head.split_once(" for ") {
                Some((t, ty)) => (Some(t.trim()), ty.trim()),
                None => (None, head.trim()),
            };
            let (ty, args) = type_name(ty);
            // The type itself, or each alias of it whose arguments the impl's cover (a
            // parameter of the impl covers any).
            let names: Vec<&str> = if TYPES.contains(&ty) {
                vec![ty]
            } else {
                let covers = |def: &str| {
                    let (base, alias_args) = type_name(def);
                    base == ty
                        && alias_args.len() == args.len()
                        && alias_args
                            .iter()
                            .zip(&args)
                            .all(|(a, b)| a == b || params.contains(b))
                };
                aliases
                    .iter()
                    .filter(|(_, def)| covers(def))
                    .map(|(name, _)| *name)
                    .collect()
            };
            if names.is_empty() {
                continue;
            }
            let any_fn = match trait_ {
                None => false,
                Some(t) if t.ends_with("Lease") || t.ends_with("Release") => true,
                Some(_) => continue,
            };
            let found = methods(block(text, head_end), any_fn, &macros);
            for name in names {
                out.entry(name.to_string())
                    .or_default()
                    .extend(found.iter().cloned());
            }
        }
    };
    for (is_blocking, text) in files {
        if *is_blocking != blocking {
            continue;
        }
        add_impls(text, &mut out);
        // `some_macro!(Type, …)` whose body has `impl $param`: the body with the type in
        // place of its first parameter.
        for (name, mac) in &macros {
            if !mac.contains("impl $") {
                continue;
            }
            let Some(param) = mac.find('$').map(|k| ident(&mac[k..])) else {
                continue;
            };
            for i in words(text, name) {
                let rest = text[i + name.len()..].trim_start();
                let Some(rest) = rest.strip_prefix('!') else {
                    continue;
                };
                let ty = ident(rest.trim_start().trim_start_matches(['(', '{']));
                if TYPES.contains(&ty) {
                    let expanded = words(mac, param)
                        .collect::<Vec<_>>()
                        .into_iter()
                        .rev()
                        .fold(mac.clone(), |mut m, k| {
                            m.replace_range(k..k + param.len(), ty);
                            m
                        });
                    add_impls(&expanded, &mut out);
                }
            }
        }
    }
    out
}

/// The crate's sources: (under `src/blocking/`, text without comments and literals).
fn sources() -> Vec<(bool, String)> {
    fn walk(dir: &Path, out: &mut Vec<(bool, String)>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs")
                && path.file_name().is_some_and(|n| n != "parity.rs")
            {
                let blocking = path.components().any(|c| c.as_os_str() == "blocking");
                out.push((blocking, strip(&std::fs::read_to_string(&path).unwrap())));
            }
        }
    }
    let mut out = Vec::new();
    walk(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"), &mut out);
    out
}

/// Differences between the two sides' methods that [`ALLOWED`] does not list, and allowed
/// ones that no longer exist.
fn differences(files: &[(bool, String)]) -> Vec<String> {
    let async_side = methods_of(files, false);
    let blocking_side = methods_of(files, true);
    let mut problems = Vec::new();
    for ty in TYPES {
        let a = async_side.get(*ty).cloned().unwrap_or_default();
        let b = blocking_side.get(*ty).cloned().unwrap_or_default();
        if a.is_empty() || b.is_empty() {
            problems.push(format!(
                "{ty}: no methods found on one side (the scanner is broken)"
            ));
        }
        for (only, side, other) in [(&a, Side::Async, &b), (&b, Side::Blocking, &a)] {
            for m in only.difference(other) {
                if !ALLOWED
                    .iter()
                    .any(|(t, n, s, _)| (t == ty || *t == "*") && n == m && *s == side)
                {
                    problems.push(format!("{ty}::{m}: only on the {side:?} side"));
                }
            }
        }
    }
    for (ty, m, side, _) in ALLOWED.iter().filter(|(t, ..)| *t != "*") {
        let has =
            |s: &BTreeMap<String, BTreeSet<String>>| s.get(*ty).is_some_and(|x| x.contains(*m));
        let (this, other) = match side {
            Side::Async => (&async_side, &blocking_side),
            Side::Blocking => (&blocking_side, &async_side),
        };
        if !has(this) || has(other) {
            problems.push(format!("allow-list entry {ty}::{m} ({side:?}) is stale"));
        }
    }
    problems
}

#[test]
fn both_apis_have_the_same_builder_settings_and_guard_verbs() {
    let problems = differences(&sources());
    assert!(
        problems.is_empty(),
        "the blocking and async APIs differ (add the method to the other side, or to \
         ALLOWED in src/blocking/parity.rs with the reason):\n{}",
        problems.join("\n")
    );
}

/// The scanner sees a method added to one side only.
#[test]
fn a_setter_on_one_builder_only_is_found() {
    let mut files = sources();
    files.push((
        false,
        strip("impl ClientBuilder {\n    /// New.\n    pub fn brand_new(self) -> Self { self }\n}"),
    ));
    let problems = differences(&files);
    assert_eq!(
        problems,
        ["ClientBuilder::brand_new: only on the Async side"],
        "{problems:?}"
    );
}

/// An alias of a generic guard has the verbs of the generic impls and of its own kind's,
/// not another kind's: `downgrade` is the write guard's alone, on both sides.
#[test]
fn an_alias_has_its_kinds_verbs_only() {
    let files = sources();
    for blocking in [false, true] {
        let side = methods_of(&files, blocking);
        for ty in [
            "LockGuard",
            "FairLockGuard",
            "RwLockReadGuard",
            "RwLockWriteGuard",
        ] {
            let verbs = &side[ty];
            assert!(
                verbs.contains("reenter"),
                "{ty} (blocking {blocking}): {verbs:?}"
            );
            assert_eq!(
                verbs.contains("downgrade"),
                ty == "RwLockWriteGuard",
                "{ty} (blocking {blocking}): {verbs:?}"
            );
        }
    }
}

/// The scanner sees a verb added to one side's generic guard, under each of its aliases.
#[test]
fn a_verb_on_one_generic_guard_only_is_found() {
    let mut files = sources();
    files.push((
        false,
        strip("impl<K: HoldKind> HoldGuard<K> {\n    /// New.\n    pub fn brand_new(&self) {}\n}"),
    ));
    let problems = differences(&files);
    assert_eq!(
        problems,
        [
            "LockGuard::brand_new: only on the Async side",
            "FairLockGuard::brand_new: only on the Async side",
            "RwLockReadGuard::brand_new: only on the Async side",
            "RwLockWriteGuard::brand_new: only on the Async side",
        ],
        "{problems:?}"
    );
}
