//! The parity test's scanner: reads the crate's sources as text and lists the public methods
//! of each type in [`TYPES`] on one side (the rules are in the [parent's docs](super)).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use super::TYPES;

/// `text` with comments removed and string and character literals emptied, so that braces
/// inside them do not count.
pub(super) fn strip(text: &str) -> String {
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

/// `s` split at each `sep` outside `<…>` and `(…)`.
fn top_level(s: &str, sep: char) -> Vec<&str> {
    let (mut out, mut depth, mut from) = (Vec::new(), 0i32, 0);
    for (i, c) in s.char_indices() {
        match c {
            '<' | '(' => depth += 1,
            '>' | ')' => depth -= 1,
            c if c == sep && depth == 0 => {
                out.push(&s[from..i]);
                from = i + c.len_utf8();
            }
            _ => {}
        }
    }
    out.push(&s[from..]);
    out
}

/// A type as written, parsed: `crate::HoldGuard<kind::Write>` is `HoldGuard`, named through
/// `crate::`, with the argument `Write`. Of a path only that start is kept: in a blocking file
/// it names the async side's type (`Guard<crate::JobGuard>`).
#[derive(Clone, Debug, PartialEq)]
struct Ty {
    name: String,
    from_crate: bool,
    args: Vec<Ty>,
}

impl Ty {
    fn parse(ty: &str) -> Ty {
        let ty = ty.trim();
        let (path, args) = match ty.find('<') {
            Some(k) => (&ty[..k], generics(&ty[k..]).map_or("", |(a, _)| a)),
            None => (ty, ""),
        };
        let path = path.trim();
        Ty {
            name: path.rsplit("::").next().unwrap_or(path).trim().to_string(),
            from_crate: path.starts_with("crate::") && !path.starts_with("crate::blocking::"),
            args: top_level(args, ',')
                .into_iter()
                .filter(|a| !a.trim().is_empty())
                .map(Ty::parse)
                .collect(),
        }
    }
}

/// The aliases of the types in `TYPES`, per side (`[async, blocking]`):
/// `pub type LockGuard = Guard<crate::LockGuard>;` is `LockGuard` for that type.
type Aliases = [BTreeMap<String, Ty>; 2];

fn aliases(files: &[(bool, String)]) -> Aliases {
    let mut out = Aliases::default();
    for (blocking, text) in files {
        for i in words(text, "type") {
            let rest = &text[i + "type".len()..];
            let name = ident(rest);
            if let (true, Some((_, def))) =
                (text[..i].trim_end().ends_with("pub"), rest.split_once('='))
            {
                if TYPES.contains(&name) {
                    let def = Ty::parse(def.split(';').next().unwrap_or(def));
                    out[usize::from(*blocking)].insert(name.to_string(), def);
                }
            }
        }
    }
    out
}

/// `ty`, written on the blocking side (`blocking`) or the async one, with every alias in it
/// replaced by what it stands for.
fn resolve(ty: &Ty, blocking: bool, aliases: &Aliases, depth: usize) -> Ty {
    let side = blocking && !ty.from_crate;
    match aliases[usize::from(side)].get(&ty.name) {
        Some(def) if ty.args.is_empty() && depth < 8 => resolve(def, side, aliases, depth + 1),
        _ => Ty {
            name: ty.name.clone(),
            from_crate: false,
            args: ty
                .args
                .iter()
                .map(|a| resolve(a, blocking, aliases, depth + 1))
                .collect(),
        },
    }
}

/// An impl's generic parameters with the names of their bounds' traits:
/// `<G: Release + Lease>` is `[("G", ["Release", "Lease"])]`.
type Params = Vec<(String, Vec<String>)>;

/// One `impl` block: its parameters, trait (if any), type (aliases resolved) and where its
/// body opens.
struct Impl {
    params: Params,
    trait_: Option<String>,
    ty: Ty,
    open: usize,
}

/// The `impl` blocks of `text`, a file of the blocking side (`blocking`) or the async one.
fn impls(text: &str, blocking: bool, aliases: &Aliases) -> Vec<Impl> {
    let mut out = Vec::new();
    for i in words(text, "impl") {
        let open = match text[i..].find(['{', ';']) {
            Some(k) if text.as_bytes()[i + k] == b'{' => i + k,
            _ => continue,
        };
        let head = &text[i + 4..open];
        // `impl<…> Trait for Type`, `impl Type`, `impl $crate::Release for $guard`.
        let (params, head) = match generics(head.trim_start()) {
            Some((params, rest)) => (params, rest),
            None => ("", head),
        };
        let params = top_level(params, ',')
            .into_iter()
            .map(|p| {
                let (name, bounds) = p.split_once(':').unwrap_or((p, ""));
                let bounds = top_level(bounds, '+')
                    .into_iter()
                    .filter(|b| !b.trim().is_empty())
                    .map(|b| Ty::parse(b).name)
                    .collect();
                (name.trim().to_string(), bounds)
            })
            .collect();
        let head = head.split(" where ").next().unwrap_or(head);
        let (trait_, ty) = match head.split_once(" for ") {
            Some((t, ty)) => (Some(Ty::parse(t).name), ty),
            None => (None, head),
        };
        out.push(Impl {
            params,
            trait_,
            ty: resolve(&Ty::parse(ty), blocking, aliases, 0),
            open,
        });
    }
    out
}

/// The types each trait is implemented for, as impl patterns: trait name → (type, params).
type TraitImpls = BTreeMap<String, Vec<(Ty, Params)>>;

/// Whether `ty` is an instance of `pattern`, whose `params` stand for any type that
/// implements each of their bounds (by `traits`; a trait with no impl seen, as a std trait,
/// is not checked).
fn instance(pattern: &Ty, params: &Params, ty: &Ty, traits: &TraitImpls) -> bool {
    if let Some((_, bounds)) = params.iter().find(|(p, _)| *p == pattern.name) {
        if pattern.args.is_empty() {
            return bounds.iter().all(|b| {
                traits
                    .get(b)
                    .is_none_or(|impls| impls.iter().any(|(pat, ps)| instance(pat, ps, ty, traits)))
            });
        }
    }
    pattern.name == ty.name
        && pattern.args.len() == ty.args.len()
        && pattern
            .args
            .iter()
            .zip(&ty.args)
            .all(|(p, t)| instance(p, params, t, traits))
}

/// Public methods of every type named in `TYPES`, on one side.
pub(super) fn methods_of(
    files: &[(bool, String)],
    blocking: bool,
) -> BTreeMap<String, BTreeSet<String>> {
    let macros = macros(files);
    let aliases = aliases(files);
    let mut traits = TraitImpls::new();
    for (side, text) in files {
        for imp in impls(text, *side, &aliases) {
            if let Some(t) = imp.trait_ {
                traits.entry(t).or_default().push((imp.ty, imp.params));
            }
        }
    }
    // Each type of `TYPES` as this side has it: itself, or what its alias stands for.
    let types: Vec<(&str, Ty)> = TYPES
        .iter()
        .map(|t| (*t, resolve(&Ty::parse(t), blocking, &aliases, 0)))
        .collect();
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let add_impls = |text: &str, out: &mut BTreeMap<String, BTreeSet<String>>| {
        for imp in impls(text, blocking, &aliases) {
            // The types this impl applies to: those of which its type is the pattern (an
            // impl's parameter stands for any type that has its bounds).
            let names: Vec<&str> = types
                .iter()
                .filter(|(_, ty)| instance(&imp.ty, &imp.params, ty, &traits))
                .map(|(name, _)| *name)
                .collect();
            if names.is_empty() {
                continue;
            }
            let any_fn = match &imp.trait_ {
                None => false,
                Some(t) if t == "Lease" || t == "Release" => true,
                Some(_) => continue,
            };
            let found = methods(block(text, imp.open), any_fn, &macros);
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

/// The crate's sources but the parity test's own (`blocking/parity.rs`, `blocking/parity/`):
/// (under `src/blocking/`, text without comments and literals).
pub(super) fn sources() -> Vec<(bool, String)> {
    fn walk(dir: &Path, out: &mut Vec<(bool, String)>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let own = path.file_stem().is_some_and(|n| n == "parity");
            if path.is_dir() && !own {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") && !own {
                let blocking = path.components().any(|c| c.as_os_str() == "blocking");
                out.push((blocking, strip(&std::fs::read_to_string(&path).unwrap())));
            }
        }
    }
    let mut out = Vec::new();
    walk(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"), &mut out);
    out
}
