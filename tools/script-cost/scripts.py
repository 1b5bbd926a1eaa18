"""distlock's scripts as the library joins them, for the cost tools (pairs.py, bodies.py):
each script's helpers read from crates/distlock/src/scripts/mod.rs (publish.lua unless it is
marked `(no_publish)`, then those its `with` clause names), and which of them a Redis
Functions library defines once (scripts/functions.rs: publish.lua, kinds.lua, shapes.lua,
fast.lua), so a tool measures the scripts the client sends, not a copy that drifted."""
import os
import re
import sys

DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), '../../crates/distlock/src/scripts')


def read(f, src=DIR):
    return open(os.path.join(src, f)).read()


def helpers(f, src=DIR):
    """The helper files joined in front of script `f`, in order."""
    m = re.search(r'=> "%s"((?:\s+with)?(?:\s+"[^"]+")*)\s*(\(no_publish\))?\s*,' % re.escape(f),
                  read('mod.rs', src))
    if not m:
        sys.exit(f"{f}: not in mod.rs")
    return ([] if m.group(2) else ['publish.lua']) + re.findall(r'"([^"]+)"', m.group(1))


def joined(f, src=DIR):
    """Script `f` as EVALSHA runs it: its helpers, then its text."""
    return ''.join(read(h, src) for h in helpers(f, src)) + read(f, src)


def shared(src=DIR):
    """The helpers a Redis Functions library defines once, by file name, in its order."""
    block = re.search(r'const SHARED: &\[&str\] = &\[(.*?)\];', read('functions.rs', src), re.S)
    return ['publish.lua'] + re.findall(r'include_str!\("([^"]+)"\)', block.group(1))


def own_part(f, src=DIR):
    """Script `f` as a function of the library runs it: the helpers the library does not
    define once (prelude.lua, …), then its text."""
    once = shared(src)
    return ''.join(read(h, src) for h in helpers(f, src) if h not in once) + read(f, src)
