#!/usr/bin/env bash
# All tests: style checks, Rust unit/integration tests, and the end-to-end
# suite that checks every printed number against DuckDB / numpy / scipy.
# Installs what it needs (Python packages from PyPI; crates via cargo).
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== Python test dependencies"
python3 -m pip install --quiet --disable-pip-version-check -r tests/requirements.txt

echo "== cargo fmt / clippy"
cargo fmt --all -- --check
cargo clippy --release --workspace --all-targets --quiet -- -D warnings

echo "== cargo test"
cargo build --release --quiet
cargo test --release --workspace --quiet

echo "== end-to-end tests (pytest, oracles: DuckDB, numpy, scipy)"
MICROTAB_BIN="$PWD/target/release/microtab" python3 -m pytest -q tests/python "$@"
