#!/usr/bin/env bash
# All tests: style checks, Rust unit/integration tests, and the end-to-end
# suite that checks every printed number against DuckDB / numpy / scipy.
# Installs what it needs (Python packages from PyPI; crates via cargo;
# R's survey package from Debian, the oracle of standard errors).
set -euo pipefail
cd "$(dirname "$0")/.."
# pyo3's build script reruns when this changes: the same value for every step.
export PYO3_PYTHON="$(command -v python3)"

echo "== architecture: import cycles, functions over 150 lines, CLI flags in library strings (scripts/check_arch.py)"
# A finding fails the run (ARCH_CHECK=warn prints it and goes on, for a
# work-in-progress tree).
if ! python3 scripts/check_arch.py --quiet; then
    if [ "${ARCH_CHECK:-enforce}" = enforce ]; then
        echo "check_arch found the problems above (ARCH_CHECK=enforce)" >&2
        exit 1
    fi
    echo "warning: check_arch found the problems above (ARCH_CHECK=warn; ARCH_CHECK=enforce fails the run)" >&2
fi

echo "== Python test dependencies"
python3 -m pip install --quiet --disable-pip-version-check -r tests/requirements.txt

echo "== R survey (the oracle of standard errors) and haven (writes SAS transport files), PSPP (runs the SPSS setup files subset writes), chromium (the analysis page's browser tests)"
NEED=""
Rscript -e 'library(survey)' >/dev/null 2>&1 || NEED="$NEED r-cran-survey"
# haven writes the SAS transport files the import is checked against.
Rscript -e 'library(haven)' >/dev/null 2>&1 || NEED="$NEED r-cran-haven"
command -v pspp >/dev/null 2>&1 || NEED="$NEED pspp"
command -v chromium >/dev/null 2>&1 || NEED="$NEED chromium"
command -v chromedriver >/dev/null 2>&1 || NEED="$NEED chromium-driver"
if [ -n "$NEED" ]; then
    SUDO=""
    if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $NEED >/dev/null
fi

echo "== cargo fmt / clippy"
cargo fmt --all -- --check
cargo clippy --release --workspace --all-targets --quiet -- -D warnings

echo "== cargo test"
cargo build --release --quiet
cargo test --release --workspace --exclude microtab-python --quiet

echo "== the Python package: one wheel (maturin, the workspace's target/), installed here and in the smoke test's environment"
rm -rf target/wheels/ci
python3 -m pip wheel --quiet --disable-pip-version-check --no-deps -w target/wheels/ci ./crates/python
WHEEL="$(ls target/wheels/ci/microtab-*.whl)"
python3 -m pip install --quiet --disable-pip-version-check --force-reinstall --no-deps "$WHEEL"

echo "== end-to-end tests (pytest, oracles: DuckDB, numpy, scipy, R survey; the page in headless chromium)"
# The page's browser tests must run here, not skip; screenshots: target/test-artifacts/page/.
MICROTAB_REQUIRE_BROWSER=1 MICROTAB_BIN="$PWD/target/release/microtab" python3 -m pytest -q tests/cli tests/python "$@"

echo "== notebook smoke test: the wheel with [pandas,arrow,polars] in a fresh virtual environment"
rm -rf target/smoke-venv
python3 -m venv target/smoke-venv
target/smoke-venv/bin/python -m pip install --quiet --disable-pip-version-check "$WHEEL[pandas,arrow,polars]" duckdb
SMOKE="$(mktemp -d)"
target/smoke-venv/bin/python tests/smoke/notebook.py "$SMOKE"
rm -rf "$SMOKE"
