#!/usr/bin/env python3
"""Docs that say each thing once: no doc block whose body's first sentence restates its
summary paragraph (most of the summary's words again, in a sentence made mostly of them, or
the summary's opening words again).

Usage: tools/house/docs.py [PATH ...]   (files or directories of .rs files; default: crates)
       tools/house/docs.py --self-test  (the check fails where it should)
Exit status 1, with each doubled block listed, when one is found.
"""
import pathlib, re, sys

STOP = set("a an the of to and or in on by for is it its as at be with that this from".split())

def words(text):
    text = re.sub(r"\]\([^)]*\)", "]", text)          # link targets
    text = re.sub(r"[`*\[\]_]", " ", text)
    ws = re.findall(r"[a-z0-9']+", text.lower())
    # A light stem: `Sets`/`Set`, `Releases`/`Release`, `waits`/`wait` count as one word.
    return [re.sub(r"(es|s)$", "", w) if len(w) > 3 else w for w in ws if w not in STOP]

def first_sentence(text):
    # A sentence ends at '. ' / ': '? Keep to '.', '!' or '?' followed by space or end,
    # not inside backticks.
    out, tick = [], False
    for i, ch in enumerate(text):
        if ch == "`":
            tick = not tick
        out.append(ch)
        if not tick and ch in ".!?" and (i + 1 == len(text) or text[i + 1] == " "):
            prev = text[max(0, i - 4):i]
            if prev.endswith(("e.g", "i.e", "etc", "vs")):
                continue
            break
    return "".join(out).strip()

def blocks(path):
    lines = path.read_text().splitlines()
    i = 0
    while i < len(lines):
        m = re.match(r"\s*(///|//!)( ?)(.*)$", lines[i])
        if not m:
            i += 1
            continue
        kind = m.group(1)
        start = i
        body = []
        while i < len(lines):
            m2 = re.match(r"\s*(///|//!)(?!/)( ?)(.*)$", lines[i])
            if not m2 or m2.group(1) != kind:
                break
            body.append(m2.group(3))
            i += 1
        yield start + 1, body

def paragraphs(body):
    paras, cur, fence = [], [], False
    for line in body:
        if line.strip().startswith("```"):
            fence = not fence
            if cur: paras.append(cur); cur = []
            paras.append(None)      # code block marker
            continue
        if fence:
            continue
        if not line.strip():
            if cur: paras.append(cur); cur = []
        else:
            cur.append(line.strip())
    if cur: paras.append(cur)
    return paras

def check(path, threshold):
    hits = []
    for line, body in blocks(path):
        paras = paragraphs(body)
        if len(paras) < 2 or paras[0] is None or paras[1] is None:
            continue
        summary = " ".join(paras[0])
        second = paras[1]
        if second[0].startswith("#"):
            continue
        sent = first_sentence(" ".join(second))
        sw, bw = words(summary), words(sent)
        if not sw or not bw:
            continue
        sset, bset = set(sw), set(bw)
        cover = len(sset & bset) / len(sset)          # summary's words found in the sentence
        back = len(sset & bset) / len(bset)           # sentence's words found in the summary
        starts = " ".join(bw).startswith(" ".join(sw[: max(3, len(sw) // 2)]))
        # Both ways: a short summary's words inside a long body that goes on to say more is
        # no repetition.
        if (cover >= threshold and back >= 0.5) or starts:
            hits.append((line, cover, back, starts, summary, sent))
    return hits

SELF_TEST = """
/// Returns the lock's name.
///
/// Returns the lock's name, as given.
fn doubled() {}

/// Returns the lock's name.
///
/// The one given to `Client::lock`, without the key prefix.
fn said_once() {}
"""


def self_test():
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        f = pathlib.Path(d) / "a.rs"
        f.write_text(SELF_TEST)
        hits = check(f, 0.7)
        assert [h[0] for h in hits] == [2], hits
    print("docs.py self-test: a doubled summary is found, a body that adds is not")


def main():
    args = sys.argv[1:]
    if args == ["--self-test"]:
        return self_test()
    threshold = 0.7
    files = []
    for a in args or ["crates"]:
        p = pathlib.Path(a)
        files += sorted(p.rglob("*.rs")) if p.is_dir() else [p]
    n = 0
    for f in files:
        if "target" in f.parts:
            continue
        for line, cover, back, starts, s, b in check(f, threshold):
            n += 1
            print(f"{f}:{line}: the body's first sentence says the summary again")
            print(f"    summary: {s}")
            print(f"    body:    {b}")
    if n:
        sys.exit(f"{n} doc blocks say their summary twice")


main()
