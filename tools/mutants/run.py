#!/usr/bin/env python3
"""Mutation check: plant each bug of mutants.txt alone and require its tests to fail.

Usage: tools/mutants/run.py [--only unit | --first] [ID ...]   (no ID: every mutant)
       tools/mutants/run.py --check             (every mutant still applies: seconds)
       tools/mutants/run.py --update-doc LOG ...

For each mutant: replace its `find` text (which must occur exactly once) in its file, run the
fault suite's short profile on its `chaos` scenarios, `cargo test -p distlock --lib -- <unit>`,
`cargo test -p distlock-cli --test cli -- <cli>`, `cargo test -p distlock --doc -- <doc>`
and `cargo test -p distlock --test it -- <tests>` (each where given), and put the file back whatever happens. A mutant is caught when any of them fails (and, when it names the
model check, `unit: model::check`, when the model check fails). Prints one line per mutant and exits 1 if any survived (or did
not apply), 0 when every one was caught. The tree must be clean of edits to the mutated files.

`--only unit` runs each mutant's `unit:` filters alone (the model check, `unit: model::check`,
among them), skipping mutants without one: a quick check of what the model catches. Each
line it prints ends with `[unit only]`.

`--first` stops at each mutant's first catcher (the library's unit tests, the CLI's, the
doctests, then the integration tests): a mutant a unit test catches builds no integration
test binary. CI runs it so; its lines end with `[first catcher]`, and give the table its
"model" cells but not its "caught by" (a full run lists every catcher).

`--update-doc LOG ...` rewrites the mutation table of doc/reliability.md from the lines that
runs printed (saved with `tee`): per mutant, "caught by" from a full run's line (the model's
tests apart), and "model" — the model tests that failed, from any run's line, or, for a
mutant the model does not catch, its `model:` note (why: outside the model's scope). Rows of
mutants no log names keep their cells; mutants gone from mutants.txt lose their row.
"""
import os
import pathlib
import signal
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
LIST = pathlib.Path(__file__).resolve().parent / "mutants.txt"


def parse(text):
    mutants, cur = [], {}
    for line in text.splitlines() + [""]:
        if line.startswith("#"):
            continue
        if not line.strip():
            if cur:
                mutants.append(cur)
                cur = {}
            continue
        key, _, value = line.partition(": ")
        if key.strip() in cur:
            # Two blocks run together (a blank line lost in a merge) would hide one mutant.
            sys.exit(f"mutants.txt: {cur.get('id', '?')} has {key.strip()!r} twice")
        cur[key.strip()] = value.replace("\\n", "\n")
    for m in mutants:
        missing = {"id", "what", "file", "find", "replace"} - m.keys()
        if missing or not ({"tests", "unit", "cli", "doc", "chaos"} & m.keys()):
            sys.exit(f"mutants.txt: {m.get('id', '?')} lacks {sorted(missing) or 'tests, unit, cli, doc or chaos'}")
    return mutants


def failures(out):
    """The names under cargo test's "failures:" list (printed twice; the last list)."""
    lines = out.splitlines()
    starts = [i for i, l in enumerate(lines) if l.strip() == "failures:"]
    failed = []
    if starts:
        for l in lines[starts[-1] + 1:]:
            if not l.startswith("    "):
                break
            failed.append(l.strip())
    return failed


def cargo(cmd):
    """Run a cargo command at the root: its exit status and its output (stdout then stderr).

    It runs in a process group of its own, its output in files rather than pipes, and every
    process left in the group when it ends is killed: a test that a mutant makes fail can
    leave a child behind (a waiter of a server that is gone) that would hold a pipe open, and
    the run with it."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        p = subprocess.Popen(cmd, cwd=ROOT, stdout=out, stderr=err, start_new_session=True)
        try:
            status = p.wait(timeout=1800)
        except subprocess.TimeoutExpired:
            status = -1
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        if status == -1:
            p.wait()
        out.seek(0)
        err.seek(0)
        text = out.read().decode(errors="replace") + err.read().decode(errors="replace")
    return status, text


def broken(out):
    """Whether cargo's output says the mutated tree does not compile."""
    return "error[" in out or "could not compile" in out


def run(m, only=None, first=False):
    unapplied = unappliable([m])
    if unapplied:
        return "NOT APPLIED", unapplied[0]
    path = ROOT / m["file"]
    original = path.read_text()
    path.write_text(original.replace(m["find"], m["replace"], 1))
    try:
        started = time.monotonic()
        caught = []
        def chaos_stage():
            """The fault suite's short profile on the named scenarios: exit 1 on a violation;
            `False` when the mutant does not compile."""
            cmd = ["cargo", "run", "-q", "-p", "distlock-chaos", "--", "--profile", "short",
                   "--scenario", m["chaos"]]
            status, out = cargo(cmd)
            if broken(out):
                return False
            if status != 0:
                found = sorted({l.split("violation (")[1].split(")")[0] for l in out.splitlines()
                                if "violation (" in l})
                caught.append(f"the fault suite ({m['chaos']}: {', '.join(found) or 'failed'})")
            return True

        # The fault suite is the slowest catcher: with --first it runs after the others, and
        # only when they missed.
        if "chaos" in m and not only and not first and not chaos_stage():
            return "NOT APPLIED", "the mutant does not compile"
        for key, target, label in [("unit", ["-p", "distlock", "--lib"], "unit"),
                                   ("cli", ["-p", "distlock-cli", "--test", "cli"], "cli"),
                                   ("doc", ["-p", "distlock", "--doc"], "doc")]:
            # With --first, a later catcher is skipped, but for a mutant that names the
            # model check, which must catch it whatever else did.
            names_model = key == "unit" and any(is_model(f"unit {f}") for f in m[key].split()) \
                if key in m else False
            if key not in m or (only and key != only) or (first and caught and not names_model):
                continue
            # The library's unit tests (`unit`), the CLI's tests (`cli`) or the library's
            # doctests (`doc`) named by the key.
            cmd = ["cargo", "test", "-q"] + target + ["--"] + m[key].split()
            status, out = cargo(cmd)
            # A doctest that no longer compiles is a failing doctest, named in the list.
            if key == "doc" and status != 0 and failures(out):
                caught += [f"{label} {name}" for name in failures(out)]
                continue
            if broken(out):
                return "NOT APPLIED", "the mutant does not compile"
            if status != 0:
                caught += [f"{label} {name}" for name in failures(out)] or [f"the {label} tests"]
        if "chaos" in m and not only and first and not caught and not chaos_stage():
            return "NOT APPLIED", "the mutant does not compile"
        # A mutant that names the model check must be caught by it, whatever else fails.
        if any(is_model(f"unit {f}") for f in m.get("unit", "").split()) and \
                not any(is_model(c) for c in caught):
            took = time.monotonic() - started
            return "SURVIVED", f"{took:.0f} s: the model check passed (the mutant names it)"
        if "tests" not in m or only or (first and caught):
            took = time.monotonic() - started
            if caught:
                return "caught", f"{took:.0f} s by {', '.join(caught)}"
            return "SURVIVED", f"{took:.0f} s: the fault suite passed"
        cmd = ["cargo", "test", "-q", "-p", "distlock", "--test", "it", "--"] + m["tests"].split()
        status, out = cargo(cmd)
        took = time.monotonic() - started
        if status == 0:
            if caught:
                return "caught", f"{took:.0f} s by {', '.join(caught)}; the tests passed"
            return "SURVIVED", f"{took:.0f} s: the tests passed"
        if broken(out):
            return "NOT APPLIED", "the mutant does not compile"
        failed = failures(out)
        if not failed:
            tail = " | ".join(out.splitlines()[-5:])
            return "UNCLEAR", f"{took:.0f} s: the run failed without a failing test: {tail}"
        return "caught", f"{took:.0f} s by {', '.join(caught + failed)}"
    finally:
        path.write_text(original)


DOC = ROOT / "doc" / "reliability.md"
TABLE_HEAD = "| mutant | the planted bug | caught by | model |"
UNIT_ONLY = "[unit only]"
FIRST = "[first catcher]"


def split_top(text):
    """`text` split at the ", " outside parentheses (a catcher may hold a comma)."""
    parts, depth, cur = [], 0, ""
    i = 0
    while i < len(text):
        c = text[i]
        depth += c == "("
        depth -= c == ")"
        if depth == 0 and text.startswith(", ", i):
            parts.append(cur)
            cur, i = "", i + 2
            continue
        cur += c
        i += 1
    return parts + [cur] if cur else parts


def catchers(detail):
    """What caught a mutant, from a line's detail: `N s by A, B[; the tests passed]`."""
    if " by " not in detail:
        return []
    by = detail.split(" by ", 1)[1].replace(" " + UNIT_ONLY, "")
    by = by.split("; the tests passed")[0]
    return [c.strip() for c in split_top(by) if c.strip()]


def cell(names):
    """Catchers as the table shows them: test names in backticks, the fault suite as is, the
    first four and how many more."""
    shown = [n if n.startswith("the fault suite") else f"`{n}`" for n in names]
    if len(shown) > 4:
        return ", ".join(shown[:4]) + f" and {len(shown) - 4} more"
    return ", ".join(shown)


def is_model(name):
    return name.startswith("unit model::")


def update_doc(logs):
    mutants = parse(LIST.read_text())
    full, model = {}, {}
    for log in logs:
        for line in pathlib.Path(log).read_text().splitlines():
            verdict, _, rest = line.partition(" ")
            mid, sep, detail = rest.strip().partition(": ")
            if not sep or verdict not in ("caught", "SURVIVED", "UNCLEAR"):
                continue
            names = catchers(detail) if verdict == "caught" else []
            model[mid] = [n.removeprefix("unit ") for n in names if is_model(n)]
            if UNIT_ONLY not in line and FIRST not in line:
                full[mid] = [n for n in names if not is_model(n)]
    text = DOC.read_text()
    lines = text.splitlines()
    try:
        start = next(i for i, l in enumerate(lines)
                     if l.startswith("| mutant | the planted bug | caught by"))
    except StopIteration:
        sys.exit("doc/reliability.md has no mutation table")
    end = start + 2
    while end < len(lines) and lines[end].startswith("| `"):
        end += 1
    old = {}
    for row in lines[start + 2:end]:
        cells = [c.strip() for c in split_cells(row)]
        old[cells[0].strip("`")] = cells
    rows = [TABLE_HEAD, "|---|---|---|---|"]
    for m in mutants:
        mid = m["id"]
        before = old.get(mid, [])
        if mid in full:
            caught_by = cell(full[mid])
        else:
            # The last full run's cell, the model's tests apart (they have their column).
            kept = before[2] if len(before) > 2 else ""
            caught_by = ", ".join(c for c in split_top(kept) if not c.startswith("`unit model::"))
        if model.get(mid):
            names = [n.removeprefix("model::").removeprefix("check::tests::") for n in model[mid]]
            model_cell = "caught: " + ", ".join(f"`{n}`" for n in names)
        elif mid in model or len(before) < 4:
            model_cell = f"missed: {m['model']}" if "model" in m else "—"
        else:
            model_cell = before[3]
        caught_by = caught_by or ("only the model" if model_cell.startswith("caught") else "—")
        rows.append(f"| `{mid}` | {m['what']} | {caught_by} | {model_cell} |")
    DOC.write_text("\n".join(lines[:start] + rows + lines[end:]) + "\n")
    print(f"doc/reliability.md: {len(mutants)} rows, {sum(1 for v in model.values() if v)} "
          f"caught by the model in these logs")


def split_cells(row):
    """A table row's cells (a `|` inside backticks is text)."""
    cells, cur, code = [], "", False
    for c in row.strip().strip("|"):
        if c == "`":
            code = not code
        if c == "|" and not code:
            cells.append(cur)
            cur = ""
            continue
        cur += c
    return cells + [cur]


def unappliable(mutants):
    """The mutants whose `find` text does not occur exactly once in their file (a missing
    file counts as none), each with what was found."""
    out = []
    for m in mutants:
        path = ROOT / m["file"]
        n = path.read_text().count(m["find"]) if path.exists() else 0
        if n != 1:
            where = m["file"] if path.exists() else f"{m['file']} (no such file)"
            out.append(f"{m['id']}: `find` occurs {n} times in {where}")
    return out


def main():
    args = sys.argv[1:]
    if args[:1] == ["--update-doc"]:
        update_doc(args[1:])
        return
    if args[:1] == ["--check"]:
        # Seconds, not minutes: every mutant still applies to the tree (a file moved or a
        # line rewritten since it was written is found before the long run starts).
        bad = unappliable(parse(LIST.read_text()))
        for line in bad:
            print(line)
        sys.exit(1 if bad else 0)
    only, first = None, False
    if args[:1] == ["--first"]:
        first, args = True, args[1:]
    if args[:1] == ["--only"]:
        if args[1:2] != ["unit"]:
            sys.exit("--only takes `unit`")
        only, args = "unit", args[2:]
    mutants = parse(LIST.read_text())
    wanted = set(args)
    unknown = wanted - {m["id"] for m in mutants}
    if unknown:
        sys.exit(f"unknown mutant(s): {sorted(unknown)}")
    bad = ran = 0
    for m in mutants:
        if wanted and m["id"] not in wanted:
            continue
        if only and only not in m:
            continue
        ran += 1
        verdict, detail = run(m, only, first)
        bad += verdict != "caught"
        tail = f" {UNIT_ONLY}" if only else f" {FIRST}" if first else ""
        print(f"{verdict:12} {m['id']}: {detail}{tail}", flush=True)
    print(f"{bad} of {ran} mutants not caught")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
