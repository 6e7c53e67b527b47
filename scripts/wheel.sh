#!/usr/bin/env bash
# Builds the one wheel: the Python API and the microtab, microtab-serve and
# microtab-arrow executables (installed on the PATH by pip), abi3 (CPython
# 3.11 and later), tagged manylinux. Prints the wheel's path on its last line.
#
#   bash scripts/wheel.sh                       # -> target/wheels/microtab-<v>-cp311-abi3-manylinux_…whl
#   python3 -m pip install "$(bash scripts/wheel.sh | tail -1)"
#
# A first build compiles the Rust workspace: 5-10 minutes on 2 cores, about
# 2 on 8; later builds reuse target/. Needs cargo and Python 3.11+ (pip
# fetches maturin into its isolated build environment).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-target/wheels}"
# pyo3's build script reruns when this changes: the same value as the tests'.
export PYO3_PYTHON="${PYO3_PYTHON:-$(command -v python3)}"
# The lowest manylinux tag the extension module's symbols allow (maturin's
# PEP 517 hook would tag the wheel plain linux, which PyPI refuses).
export MATURIN_PEP517_ARGS="${MATURIN_PEP517_ARGS:---compatibility pypi}"
mkdir -p "$OUT"
rm -f "$OUT"/microtab-*.whl
echo "microtab: compiling the wheel (a first build takes 5-10 minutes on 2 cores; later ones reuse target/)" >&2
START=$(date +%s)
python3 -m pip wheel --quiet --disable-pip-version-check --no-deps -w "$OUT" ./crates/python >&2
WHEEL="$(ls "$OUT"/microtab-*.whl)"
echo "microtab: built $WHEEL in $(( $(date +%s) - START )) s" >&2
echo "$WHEEL"
