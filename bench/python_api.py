#!/usr/bin/env python3
"""The Python package against the engine it wraps and the readers a
Python user would reach for, on the 14.1 M-record census, side by side in
one run (medians with min–max of --runs):

* `ds.tab("SEX", "EDUC", weight="PERWT")` in Python against the same query
  timed inside the CLI (`--repeat`, the engine's in-process median): the
  binding's overhead (target ≤ 1 ms);
* `ds.to_pandas(5 columns)` against `pandas.read_parquet` of the same
  columns from bench/data/census.parquet (target ≥ 3× faster).

    python3 bench/python_api.py [--runs 9]

Needs `pip install ./crates/python` and bench/data/census.{mtab,parquet}
(`python3 bench/run.py`). Results: docs/BENCHMARKS.md."""

import argparse
import re
import statistics
import subprocess
import time
from pathlib import Path

import pandas as pd

import microtab as mt

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "bench" / "data"
COLS = ["AGE", "SEX", "EDUC", "PERWT", "INCTOT"]


def timed(f, runs):
    out = []
    for _ in range(runs):
        t = time.perf_counter()
        f()
        out.append(time.perf_counter() - t)
    return out


def fmt(xs):
    return f"{statistics.median(xs) * 1e3:.2f} ms ({min(xs) * 1e3:.2f}–{max(xs) * 1e3:.2f})"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=9)
    a = ap.parse_args()
    ds_path = DATA / "census.mtab"
    ds = mt.open(ds_path)
    py = timed(lambda: ds.tab("SEX", "EDUC", weight="PERWT"), a.runs)
    p = subprocess.run([str(REPO / "target" / "release" / "microtab"), "tab", str(ds_path), "SEX", "EDUC",
                        "--weight", "PERWT", "--repeat", str(a.runs), "--format", "json"],
                       capture_output=True, text=True, check=True)
    m = re.search(r"median=([\d.]+)\s*(ms|µs|us|s)", p.stderr)
    unit = {"ms": 1e-3, "µs": 1e-6, "us": 1e-6, "s": 1.0}[m.group(2)]
    rust = float(m.group(1)) * unit
    print(f"tab SEX × EDUC weighted: Python {fmt(py)}, engine in the CLI {rust * 1e3:.2f} ms median; "
          f"overhead {(statistics.median(py) - rust) * 1e3:.2f} ms")
    tp = timed(lambda: ds.to_pandas(COLS), a.runs)
    pq = timed(lambda: pd.read_parquet(DATA / "census.parquet", columns=COLS), a.runs)
    print(f"5 columns × {ds.rows:,} rows into pandas: microtab {fmt(tp)}, read_parquet {fmt(pq)}, "
          f"{statistics.median(pq) / statistics.median(tp):.1f}×")


if __name__ == "__main__":
    main()
