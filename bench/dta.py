#!/usr/bin/env python3
"""Stata (.dta) import beside its peers, side by side in one run:
`microtab import FILE.dta`, pyreadstat's `read_dta` and
`read_file_multiprocessing` into pandas, R haven's `read_dta`, and
microtab's import of the same data as CSV (the issue's target: ≥ 10× the
readers at ≤ 1/10 of their peak memory, within 2× of the CSV import per
MB).

    python3 bench/dta.py [--rows 2000000] [--runs 3] [--version 118]

The data (census-like columns in Stata's types: `long` serial and income,
`byte` codes, a `double` weight with two decimals, a `str2` state, a
`%td` birth date, value labels on SEX) are written once by pandas under
bench/data/dta/ (ignored by git). Wall time and peak memory (RSS,
`/usr/bin/time`), each tool a fresh process, warm cache, the tools
alternating; median [range] of `runs`. Results: docs/BENCHMARKS.md."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from readers import compare

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "bench" / "data" / "dta"


def make(rows: int, version: int) -> tuple[Path, Path]:
    import numpy as np
    import pandas as pd

    DATA.mkdir(parents=True, exist_ok=True)
    dta, csv = DATA / f"census_{rows}_{version}.dta", DATA / f"census_{rows}.csv"
    if dta.exists() and csv.exists():
        return dta, csv
    rng = np.random.default_rng(30)
    df = pd.DataFrame({
        "SERIAL": np.arange(1, rows + 1, dtype="int32"),
        "AGE": rng.integers(0, 95, rows).astype("int8"),
        "SEX": rng.integers(1, 3, rows).astype("int8"),
        "EDUC": rng.integers(0, 12, rows).astype("int8"),
        "EMPSTAT": rng.integers(0, 4, rows).astype("int8"),
        "INCTOT": rng.integers(-9000, 900_000, rows).astype("int32"),
        "PERWT": np.round(rng.uniform(1, 300, rows), 2),
        "STATEFIP": rng.choice(["CA", "NY", "TX", "WA", "OH"], rows),
        "BIRTH": pd.to_datetime("1930-01-01") + pd.to_timedelta(rng.integers(0, 30000, rows), unit="D"),
    })
    df.to_stata(dta, version=version, write_index=False, convert_dates={"BIRTH": "td"},
                value_labels={"SEX": {1: "Male", 2: "Female"}})
    df.assign(BIRTH=df.BIRTH.dt.strftime("%Y-%m-%d")).to_csv(csv, index=False)
    return dta, csv


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--version", type=int, default=118)
    ap.add_argument("--bin", default=str(REPO / "target" / "release" / "microtab"))
    a = ap.parse_args()
    src, csv = make(a.rows, a.version)
    out = DATA / "out.mtab"
    procs = 2
    tools = {
        "microtab .dta": [a.bin, "import", str(src), str(out), "--force"],
        "microtab same data as .csv": [a.bin, "import", str(csv), str(out), "--force"],
        "pyreadstat read_dta": [sys.executable, "-c",
                                f"import pyreadstat; pyreadstat.read_dta({str(src)!r})"],
        f"pyreadstat read_file_multiprocessing ({procs} processes)": [
            sys.executable, "-c",
            "import pyreadstat\nif __name__ == '__main__':\n"
            f"    pyreadstat.read_file_multiprocessing(pyreadstat.read_dta, {str(src)!r}, num_processes={procs})"],
        "R haven read_dta": ["Rscript", "-e", f"invisible(haven::read_dta({str(src)!r}))"],
    }
    print(f"{a.rows:,} records; .dta (release {a.version}) {src.stat().st_size / 1e6:.0f} MB, .csv {csv.stat().st_size / 1e6:.0f} MB")
    compare(tools, a.runs, {"microtab .dta": src, "microtab same data as .csv": csv}, "microtab .dta")

if __name__ == "__main__":
    main()
