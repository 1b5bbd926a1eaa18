#!/usr/bin/env python3
"""Mutation check: plant each bug of mutants.txt alone and require its tests to fail.

Usage: tools/mutants/run.py [ID ...]   (no ID: every mutant)

For each mutant: replace its `find` text (which must occur exactly once) in its file, run the
fault suite's short profile on its `chaos` scenarios, `cargo test -p distlock --lib -- <unit>`,
`cargo test -p distlock-cli --test cli -- <cli>`, `cargo test -p distlock --doc -- <doc>`
and `cargo test -p distlock --test it -- <tests>` (each where given), and put the file back whatever happens. A mutant is caught when any of them fails. Prints one line per mutant and exits 1 if any survived (or did
not apply), 0 when every one was caught. The tree must be clean of edits to the mutated files.
"""
import pathlib
import subprocess
import sys
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


def run(m):
    path = ROOT / m["file"]
    original = path.read_text()
    if original.count(m["find"]) != 1:
        return "NOT APPLIED", f"`find` occurs {original.count(m['find'])} times in {m['file']}"
    path.write_text(original.replace(m["find"], m["replace"], 1))
    try:
        started = time.monotonic()
        caught = []
        if "chaos" in m:
            # The fault suite's short profile on the named scenarios: exit 1 on a violation.
            cmd = ["cargo", "run", "-q", "-p", "distlock-chaos", "--", "--profile", "short",
                   "--scenario", m["chaos"]]
            r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=1800)
            out = r.stdout + r.stderr
            if "error[" in out or "could not compile" in out:
                return "NOT APPLIED", "the mutant does not compile"
            if r.returncode != 0:
                found = sorted({l.split("violation (")[1].split(")")[0] for l in out.splitlines()
                                if "violation (" in l})
                caught.append(f"the fault suite ({m['chaos']}: {', '.join(found) or 'failed'})")
        for key, target, label in [("unit", ["-p", "distlock", "--lib"], "unit"),
                                   ("cli", ["-p", "distlock-cli", "--test", "cli"], "cli"),
                                   ("doc", ["-p", "distlock", "--doc"], "doc")]:
            if key not in m:
                continue
            # The library's unit tests (`unit`), the CLI's tests (`cli`) or the library's
            # doctests (`doc`) named by the key.
            cmd = ["cargo", "test", "-q"] + target + ["--"] + m[key].split()
            r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=1800)
            out = r.stdout + r.stderr
            # A doctest that no longer compiles is a failing doctest, named in the list.
            if key == "doc" and r.returncode != 0 and failures(out):
                caught += [f"{label} {name}" for name in failures(out)]
                continue
            if "error[" in out or "could not compile" in out:
                return "NOT APPLIED", "the mutant does not compile"
            if r.returncode != 0:
                caught += [f"{label} {name}" for name in failures(out)] or [f"the {label} tests"]
        if "tests" not in m:
            took = time.monotonic() - started
            if caught:
                return "caught", f"{took:.0f} s by {', '.join(caught)}"
            return "SURVIVED", f"{took:.0f} s: the fault suite passed"
        cmd = ["cargo", "test", "-q", "-p", "distlock", "--test", "it", "--"] + m["tests"].split()
        r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=1800)
        took = time.monotonic() - started
        out = r.stdout + r.stderr
        if r.returncode == 0:
            if caught:
                return "caught", f"{took:.0f} s by {', '.join(caught)}; the tests passed"
            return "SURVIVED", f"{took:.0f} s: the tests passed"
        if "error[" in out or "could not compile" in out:
            return "NOT APPLIED", "the mutant does not compile"
        failed = failures(out)
        if not failed:
            tail = " | ".join(lines[-5:])
            return "UNCLEAR", f"{took:.0f} s: the run failed without a failing test: {tail}"
        return "caught", f"{took:.0f} s by {', '.join(caught + failed)}"
    finally:
        path.write_text(original)


def main():
    mutants = parse(LIST.read_text())
    wanted = set(sys.argv[1:])
    unknown = wanted - {m["id"] for m in mutants}
    if unknown:
        sys.exit(f"unknown mutant(s): {sorted(unknown)}")
    bad = 0
    for m in mutants:
        if wanted and m["id"] not in wanted:
            continue
        verdict, detail = run(m)
        bad += verdict != "caught"
        print(f"{verdict:12} {m['id']}: {detail}", flush=True)
    print(f"{bad} of {len(wanted) or len(mutants)} mutants not caught")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
