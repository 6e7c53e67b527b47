#!/usr/bin/env bash
# Fails when a dependency is built with other features in one of the
# builds scripts/test.sh runs than in the workspace build (`cargo build
# --release`): the Python extension alone (maturin builds crates/python by
# itself) or with the tests' dependencies (`cargo test --workspace`). That
# build would compile the engine, analysis and arrow crates a second time.
# The fix is to ask for the missing features in crates/python/Cargo.toml
# (see the comment there).
set -euo pipefail
cd "$(dirname "$0")/.."
T="$(mktemp -d)"
trap 'rm -rf "$T"' EXIT
# Each into a file, so that a failing cargo tree fails this script.
tree() { local out="$1"; shift; cargo tree -f '{p} {f}' --prefix none --no-dedupe "$@" > "$T/$out"; sort -u -o "$T/$out" "$T/$out"; }
tree alone -e normal,build -p microtab-python
tree tests -e normal,build,dev --workspace
tree workspace -e normal,build --workspace
python3 - "$T/alone" "$T/tests" "$T/workspace" <<'PY'
import sys
def load(p):
    d = {}
    for line in open(p):
        parts = line.split()
        if len(parts) >= 2:
            d.setdefault(" ".join(parts[:2]), set()).add(" ".join(parts[2:]))
    return d
alone, tests, workspace = (load(a) for a in sys.argv[1:4])
if not (alone and tests and workspace):
    sys.exit("cargo tree listed no dependencies")
bad = [f"{k}: {what} {sorted(d[k])}, in the workspace build {sorted(workspace[k])}"
       for what, d in (("the Python extension alone", alone), ("with the tests", tests))
       for k in sorted(d) if k in workspace and d[k] != workspace[k]]
if bad:
    print("features of dependencies differ from the workspace build's:", *bad, sep="\n  ")
    sys.exit(1)
print(f"   the Python extension's {len(alone)} and the tests' {len(tests)} dependencies have the workspace build's features")
PY
