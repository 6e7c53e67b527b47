#!/usr/bin/env bash
# All tests: style checks, Rust unit/integration tests, and the end-to-end
# suite that checks every printed number against DuckDB / numpy / scipy.
# Installs what it needs: crates via cargo; the Debian packages it lists
# (R's survey package, the oracle of standard errors, PSPP, Chromium);
# Python packages from PyPI into its own venv, target/test-venv, with the
# wheel scripts/wheel.sh builds once (nothing into the system's Python).
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

echo "== dependencies have the same features in the wheel's and the tests' builds as in the workspace build (scripts/check_features.sh: each reuses it)"
bash scripts/check_features.sh

echo "== Debian packages the tests need: r-cran-survey (the oracle of standard errors), r-cran-haven (writes SAS transport files), pspp (runs the SPSS setup files subset writes), chromium + chromium-driver (the page's browser tests), python3-venv (the tests' own Python environment)"
NEED=""
Rscript -e 'library(survey)' >/dev/null 2>&1 || NEED="$NEED r-cran-survey"
Rscript -e 'library(haven)' >/dev/null 2>&1 || NEED="$NEED r-cran-haven"
command -v pspp >/dev/null 2>&1 || NEED="$NEED pspp"
command -v chromium >/dev/null 2>&1 || NEED="$NEED chromium"
command -v chromedriver >/dev/null 2>&1 || NEED="$NEED chromium-driver"
python3 -c 'import ensurepip, venv' >/dev/null 2>&1 || NEED="$NEED python3-venv"
if [ -n "$NEED" ]; then
    echo "   installing with apt-get:$NEED"
    SUDO=""
    if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $NEED >/dev/null
else
    echo "   all present"
fi

echo "== cargo fmt / clippy"
cargo fmt --all -- --check
cargo clippy --release --workspace --all-targets --quiet -- -D warnings

echo "== cargo test"
cargo build --release --quiet
# The workspace (the Python extension has no Rust tests: tests/python), so
# the tests reuse the build's dependencies (scripts/check_features.sh).
cargo test --release --workspace --quiet

echo "== the wheel: the Python API and the three executables, built once (scripts/wheel.sh)"
WHEEL="$(bash scripts/wheel.sh | tail -1)"

echo "== the tests' Python environment (target/test-venv): the wheel and tests/requirements.txt; nothing goes into the system's Python"
VENV="$PWD/target/test-venv"
rm -rf "$VENV"
python3 -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "$WHEEL" -r tests/requirements.txt

echo "== end-to-end tests (pytest, oracles: DuckDB, numpy, scipy, R survey; the page in headless chromium), through the wheel's executables"
# The page's browser tests must run here, not skip; screenshots: target/test-artifacts/page/.
MICROTAB_REQUIRE_BROWSER=1 MICROTAB_BIN="$VENV/bin/microtab" "$VENV/bin/python" -m pytest -q -p no:cacheprovider tests/cli tests/python "$@"

echo "== a newcomer's install: the wheel with [pandas,arrow,polars] into a fresh virtual environment, timed; then the notebook"
rm -rf target/smoke-venv
python3 -m venv target/smoke-venv
START=$(date +%s%N)
target/smoke-venv/bin/python -m pip install --quiet --disable-pip-version-check "$WHEEL[pandas,arrow,polars]"
echo "   pip install of the wheel and its dependencies: $(( ($(date +%s%N) - START) / 1000000 )) ms"
target/smoke-venv/bin/python -m pip install --quiet --disable-pip-version-check duckdb
SMOKE="$(mktemp -d)"
PATH="$PWD/target/smoke-venv/bin:$PATH" target/smoke-venv/bin/python tests/smoke/install.py "$SMOKE"
target/smoke-venv/bin/python tests/smoke/notebook.py "$SMOKE"
rm -rf "$SMOKE"
