#!/usr/bin/env python3
"""Architecture checks that CI runs (scripts/test.sh), standard library only:

1. imports: inside each crate, the module graph from `use crate::…`,
   `crate::x::…`, `super::…`, `self::…` paths and a parent's own use of its
   children (`child::f()`, a private `use child::X`; a parent's `mod child;`
   and `pub use child::…` re-exports are not edges). `crate::Name` and
   `super::Name` resolve through re-exports to the module that defines Name.
   A cycle fails, printed with its edges; each crate's layering (modules in
   topological order, leaves first) is printed.
2. long functions: a fn in crates/engine or crates/analysis longer than
   150 lines fails unless the comment just above it says `long:` why.
3. flag strings: a string literal in a library crate (io, store, ingest,
   engine, analysis, the lib part of arrow) naming a CLI flag (`--word`) or a
   command (`microtab tab`) fails: libraries carry facts and a typed
   `Remedy`, each front end words the hint (docs/ARCHITECTURE.md).

Test code (`#[cfg(test)]` modules, tests/ folders) is left out of 1 and 3.

    python3 scripts/check_arch.py            # all checks, exit 1 on a finding
    python3 scripts/check_arch.py --quiet    # findings and the summary only
"""

import argparse
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CRATES = REPO / "crates"
MAX_FN_LINES = 150
LONG_FN_CRATES = ("engine", "analysis")
# Library crates: their messages reach Python and HTTP users too, who have no
# command line (the binaries: cli, serve, arrow's main.rs, bench, python).
LIBRARY_CRATES = ("io", "store", "ingest", "engine", "analysis", "arrow")
BINARY_FILES = {("arrow", "main.rs")}
# A use declaration: at a line's start or after `;`, `{`, `}` or an attribute.
USE = re.compile(r"(?:^|(?<=[;{}\]]))[ \t\n]*(pub(?:\([^)]*\))?\s+)?use\s+([^;]+);", re.M)


# ---------------------------------------------------------------- lexing


def lex(text):
    """Return (code, strings): `code` is `text` with comments and the insides
    of string and char literals blanked (newlines kept, so offsets and line
    numbers are the source's); `strings` is [(line, literal contents)]."""
    out = list(text)
    strings = []
    n = len(text)
    i = 0
    line = 1

    def blank(a, b):
        for k in range(a, b):
            if out[k] != "\n":
                out[k] = " "

    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
            i += 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            blank(i, j)
            i = j
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            line += text.count("\n", i, j)
            blank(i, j)
            i = j
        elif c in "rb" and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")) and (
            m := re.match(r'(?:br|r)(#*)"', text[i:i + 300])
        ):
            hashes = m.group(1)
            start = i + m.end()
            end = text.find('"' + hashes, start)
            end = n if end < 0 else end
            strings.append((line, text[start:end]))
            line += text.count("\n", i, end)
            blank(start, end)
            i = end + 1 + len(hashes)
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            strings.append((line, text[i + 1:j]))
            line += text.count("\n", i, j)
            blank(i + 1, j)
            i = j + 1
        elif c == "'":
            # A char literal ('a', '\n', '\u{1F600}', b'x') or a lifetime ('a).
            if i + 1 < n and text[i + 1] == "\\":
                j = i + 2
                while j < n and text[j] != "'":
                    j += 1
                blank(i + 1, j)
                i = j + 1
            elif i + 2 < n and text[i + 2] == "'":
                blank(i + 1, i + 2)
                i += 3
            else:
                i += 1
        else:
            i += 1
    return "".join(out), strings


def match_brace(code, open_at):
    """Index of the `}` closing the `{` at `open_at` in lexed code."""
    depth = 0
    for k in range(open_at, len(code)):
        ch = code[k]
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return k
    return len(code) - 1


def strip_test_modules(code):
    """Blank `#[cfg(test)] mod name { … }` blocks (test code is not layering)."""
    out = code
    for m in reversed(list(re.finditer(r"#\[cfg\(test\)\]\s*(?:pub\s+)?mod\s+\w+\s*\{", code))):
        end = match_brace(code, m.end() - 1)
        out = out[:m.start()] + re.sub(r"[^\n]", " ", out[m.start():end + 1]) + out[end + 1:]
    return out


def line_of(code, pos):
    return code.count("\n", 0, pos) + 1


# ---------------------------------------------------------------- modules


class Module:
    def __init__(self, path, file, parent):
        self.path = path  # ("engine_mod", "sub") ; () is the crate root
        self.file = file
        self.parent = parent
        self.children = {}  # name -> Module (file modules and inline ones)
        text = file.read_text(encoding="utf-8")
        code, _ = lex(text)
        self.code = strip_test_modules(code)
        self.uses = []  # (is_pub, [segments]) from use declarations
        self.defined = set()
        for m in re.finditer(
            r"\b(?:fn|struct|enum|const|static|type|trait|union|macro_rules!)\s+(\w+)", self.code
        ):
            self.defined.add(m.group(1))

    @property
    def name(self):
        return "::".join(self.path) or "crate"


def use_paths(tree):
    """Expand a use tree (`a::{b, c::{d as e}, f::*}`) into segment lists."""
    tree = re.sub(r"\s+", "", tree)
    out = []

    def expand(prefix, t):
        if not t:
            return
        brace = t.find("{")
        if brace < 0:
            out.append(prefix + [s for s in re.sub(r"as\w+$", "", t).split("::") if s])
            return
        head = [s for s in t[:brace].split("::") if s]
        inner = t[brace + 1:t.rfind("}")]
        depth, start = 0, 0
        for k, ch in enumerate(inner + ","):
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            elif ch == "," and depth == 0:
                expand(prefix + head, inner[start:k])
                start = k + 1

    expand([], tree)
    # `use a::{self, b}` names a itself.
    return [p[:-1] if p and p[-1] == "self" else p for p in out]


def child_file(mod, name):
    f = mod.file
    base = f.parent if f.name in ("lib.rs", "main.rs", "mod.rs") else f.parent / f.stem
    for cand in (base / f"{name}.rs", base / name / "mod.rs"):
        if cand.exists():
            return cand
    return None


def load_tree(root_file):
    modules = {}

    def load(path, file, parent):
        mod = Module(path, file, parent)
        modules[path] = mod
        for m in re.finditer(r"^\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;", mod.code, re.M):
            cf = child_file(mod, m.group(1))
            if cf is not None:
                mod.children[m.group(1)] = load(path + (m.group(1),), cf, mod)
        for m in USE.finditer(mod.code):
            for segs in use_paths(m.group(2)):
                mod.uses.append((bool(m.group(1)), segs))
        return mod

    load((), root_file, None)
    return modules


def resolve(modules, mod, segs, seen=None):
    """The module that `segs` (a path as written inside `mod`) lands in, or
    None for an external crate or std."""
    seen = seen or set()
    key = (mod.path, tuple(segs))
    if key in seen or not segs:
        return mod if not segs else None
    seen.add(key)
    first, rest = segs[0], segs[1:]
    if first == "crate":
        return descend(modules, modules[()], rest, seen)
    if first == "super":
        return descend(modules, mod.parent, rest, seen) if mod.parent else None
    if first == "self":
        return descend(modules, mod, rest, seen)
    if first in mod.children:
        return descend(modules, mod, segs, seen)
    return None


def descend(modules, mod, segs, seen):
    """Walk `segs` down from `mod`; an item name resolves through `mod`'s
    use declarations to where it is defined."""
    while segs:
        s = segs[0]
        if s == "super" and mod.parent:
            mod, segs = mod.parent, segs[1:]
            continue
        if s in mod.children:
            mod, segs = mod.children[s], segs[1:]
            continue
        if s == "*" or s in mod.defined:
            return mod
        for _, u in mod.uses:
            if u and u[-1] == s:
                target = resolve(modules, mod, u, seen)
                return target if target is not None else mod
        for _, u in mod.uses:
            if u and u[-1] == "*":
                src = resolve(modules, mod, u[:-1], seen)
                if src is not None and s in src.defined:
                    return src
        return mod
    return mod


def graph(modules):
    edges = {}  # (from, to) -> first line seen
    for mod in modules.values():
        refs = []
        # use declarations: a parent's pub use of its own children re-exports,
        # it does not depend.
        for m in USE.finditer(mod.code):
            is_pub = bool(m.group(1))
            for segs in use_paths(m.group(2)):
                if not segs:
                    continue
                if segs[0] not in ("crate", "super", "self") and segs[0] not in mod.children:
                    continue  # another crate, or std
                target = resolve(modules, mod, segs)
                if is_pub and target is not None and target.path[:len(mod.path)] == mod.path:
                    continue  # re-exporting its own descendant
                refs.append((segs, line_of(mod.code, m.start(2))))
        body = USE.sub(lambda x: re.sub(r"[^\n]", " ", x.group(0)), mod.code)
        for m in re.finditer(r"(?<![\w:])((?:crate|super|self)(?:::\w+)+)", body):
            refs.append((m.group(1).split("::"), line_of(body, m.start())))
        if mod.children:
            names = "|".join(map(re.escape, mod.children))
            for m in re.finditer(rf"(?<![\w:])((?:{names})(?:::\w+)+)", body):
                refs.append((m.group(1).split("::"), line_of(body, m.start())))
        for segs, ln in refs:
            target = resolve(modules, mod, segs)
            if target is None or target is mod:
                continue
            # A module's own descendants re-exported or used by it through
            # `crate::` are still downward edges; only self-edges are dropped.
            edges.setdefault((mod.name, target.name), (mod.file, ln))
    return edges


def find_cycles(nodes, edges):
    """Strongly connected components of more than one node (Tarjan)."""
    adj = {n: [] for n in nodes}
    for a, b in edges:
        adj[a].append(b)
    index, low, stack, on, sccs = {}, {}, [], set(), []
    counter = [0]

    def strong(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in adj[v]:
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                sccs.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in nodes:
        if v not in index:
            strong(v)
    return sccs


def layers(nodes, edges, cycles):
    """Modules by layer, leaves first: layer 0 uses no other module of the
    crate, layer k only modules below k. The members of a cycle stand
    together as one node, printed `[a b c]`."""
    group = {n: n for n in nodes}
    for comp in cycles:
        name = "[" + " ".join(comp) + "]"
        for n in comp:
            group[n] = name
    gnodes = sorted(set(group.values()))
    deps = {g: set() for g in gnodes}
    for a, b in edges:
        if group[a] != group[b]:
            deps[group[a]].add(group[b])
    level, remaining, k = {}, set(gnodes), 0
    while remaining:
        ready = {g for g in remaining if deps[g] <= set(level)}
        for g in ready:
            level[g] = k
        remaining -= ready
        k += 1
    rows = {}
    for g, k in level.items():
        rows.setdefault(k, []).append(g)
    return [sorted(rows[k]) for k in sorted(rows)]


def check_imports(quiet):
    cycles_total = 0
    for crate in sorted(p for p in CRATES.iterdir() if (p / "Cargo.toml").exists()):
        for root_name in ("lib.rs", "main.rs"):
            root = crate / "src" / root_name
            if not root.exists():
                continue
            modules = load_tree(root)
            names = sorted(m.name for m in modules.values())
            edges = graph(modules)
            label = f"{crate.name} ({root_name})"
            cycles = find_cycles(names, edges)
            cycles_total += len(cycles)
            for comp in cycles:
                members = set(comp)
                print(f"IMPORT CYCLE in {label}: {', '.join(comp)}")
                for (a, b), (f, ln) in sorted(edges.items()):
                    if a in members and b in members:
                        print(f"    {a} -> {b}   ({f.relative_to(REPO)}:{ln})")
            if not quiet and len(names) > 1:
                print(f"layers {label}: " + " < ".join(
                    "{" + ", ".join(row) + "}" if len(row) > 1 else row[0]
                    for row in layers(names, edges, cycles)
                ))
    return cycles_total


# ---------------------------------------------------------------- long functions


def long_functions():
    found = []
    for crate in LONG_FN_CRATES:
        for f in sorted((CRATES / crate).rglob("*.rs")):
            if "target" in f.parts:
                continue
            text = f.read_text(encoding="utf-8")
            code, _ = lex(text)
            src_lines = text.split("\n")
            for m in re.finditer(r"\bfn\s+(\w+)", code):
                k = m.end()
                while k < len(code) and code[k] not in "{;":
                    k += 1
                if k >= len(code) or code[k] == ";":
                    continue
                start = line_of(code, m.start())
                end = line_of(code, match_brace(code, k))
                length = end - start + 1
                if length <= MAX_FN_LINES:
                    continue
                found.append((f, start, m.group(1), length, excused(src_lines, start)))
    return found


def excused(src_lines, start):
    """True when the comment block right above line `start` (attributes
    between are allowed) says `long:`."""
    i = start - 2
    while i >= 0:
        s = src_lines[i].strip()
        if s.startswith("//"):
            if "long:" in s:
                return True
        elif not s.startswith("#["):
            return False
        i -= 1
    return False


# ---------------------------------------------------------------- flag strings


def commands():
    """The CLI's subcommand names, from its `enum Command`."""
    main = (CRATES / "cli" / "src" / "main.rs").read_text(encoding="utf-8")
    m = re.search(r"enum\s+Command\s*\{", main)
    if not m:
        return set()
    body = main[m.end():match_brace(main, m.end() - 1)]
    return {v.lower() for v in re.findall(r"^\s*([A-Z]\w*)\s*[({,]", body, re.M)}


def flag_strings():
    cmds = commands()
    flag = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")
    command = re.compile(r"\bmicrotab\s+(" + "|".join(sorted(cmds)) + r")\b") if cmds else None
    found = []
    for crate in LIBRARY_CRATES:
        for f in sorted((CRATES / crate / "src").rglob("*.rs")):
            if (crate, f.name) in BINARY_FILES:
                continue
            text = f.read_text(encoding="utf-8")
            code, _ = lex(text)
            _, strings = lex(strip_test_modules_keep_strings(text, code))
            for ln, s in strings:
                hits = flag.findall(s) + ([f"microtab {c}" for c in command.findall(s)] if command else [])
                if hits:
                    found.append((f, ln, ", ".join(hits), s.strip()[:100]))
    return found


def strip_test_modules_keep_strings(text, code):
    """`text` with `#[cfg(test)] mod … { }` blocks cut to blank lines (found
    in the lexed `code`, so a brace in a string does not count)."""
    out = text
    for m in reversed(list(re.finditer(r"#\[cfg\(test\)\]\s*(?:pub\s+)?mod\s+\w+\s*\{", code))):
        end = match_brace(code, m.end() - 1)
        out = out[:m.start()] + "\n" * text.count("\n", m.start(), end + 1) + out[end + 1:]
    return out


# ---------------------------------------------------------------- main


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quiet", action="store_true", help="findings and the summary only")
    args = ap.parse_args()

    cycles = check_imports(args.quiet)

    longs = long_functions()
    bad_long = [x for x in longs if not x[4]]
    for f, ln, name, length, ok in longs:
        tag = "long fn (excused)" if ok else "LONG FN"
        if ok and args.quiet:
            continue
        print(f"{tag}: {f.relative_to(REPO)}:{ln} {name}: {length} lines")

    flags = flag_strings()
    for f, ln, hits, s in flags:
        print(f"FLAG STRING: {f.relative_to(REPO)}:{ln}: {hits}: \"{s}\"")

    print(
        f"check_arch: {cycles} import cycle(s); {len(bad_long)} function(s) over {MAX_FN_LINES} lines "
        f"in {'/'.join(LONG_FN_CRATES)} without a `long:` comment ({len(longs) - len(bad_long)} excused); "
        f"{len(flags)} library string(s) naming a CLI flag or command"
    )
    return 1 if cycles or bad_long or flags else 0


if __name__ == "__main__":
    sys.exit(main())
