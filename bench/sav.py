#!/usr/bin/env python3
"""SPSS (.sav) import beside its peers, side by side in one run:
`microtab import FILE.sav`, pyreadstat's `read_sav` and
`read_file_multiprocessing` into pandas, R haven's `read_sav`, and
microtab's import of the same data as CSV (the issue's target: ≥ 10× the
readers at ≤ 1/10 of their peak memory, within 2× of the CSV import per
MB).

    python3 bench/sav.py [--rows 2000000] [--runs 3] [--compress bytecode|none|zlib]

The data (census-like: serial, codes, a weight with two decimals, income,
a text state, a date) are written once by pyreadstat under
bench/data/sav/ (ignored by git). Results: docs/BENCHMARKS.md."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from readers import compare

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "bench" / "data" / "sav"


def make(rows: int, compress: str) -> tuple[Path, Path]:
    import numpy as np
    import pandas as pd
    import pyreadstat

    DATA.mkdir(parents=True, exist_ok=True)
    ext = "zsav" if compress == "zlib" else "sav"
    src, csv = DATA / f"census_{rows}_{compress}.{ext}", DATA / f"census_{rows}.csv"
    if src.exists() and csv.exists():
        return src, csv
    rng = np.random.default_rng(30)
    df = pd.DataFrame({
        "SERIAL": np.arange(1, rows + 1, dtype=float),
        "AGE": rng.integers(0, 95, rows).astype(float),
        "SEX": rng.integers(1, 3, rows).astype(float),
        "EDUC": rng.integers(0, 12, rows).astype(float),
        "EMPSTAT": rng.integers(0, 4, rows).astype(float),
        "INCTOT": rng.integers(-9000, 900_000, rows).astype(float),
        "PERWT": np.round(rng.uniform(1, 300, rows), 2),
        "STATEFIP": rng.choice(["CA", "NY", "TX", "WA", "OH"], rows),
        "BIRTH": pd.to_datetime("1930-01-01") + pd.to_timedelta(rng.integers(0, 30000, rows), unit="D"),
    })
    df["BIRTH"] = df.BIRTH.dt.date
    pyreadstat.write_sav(df, str(src), compress=compress == "zlib", row_compress=compress == "bytecode",
                         variable_value_labels={"SEX": {1: "Male", 2: "Female"}})
    if not csv.exists():
        df.assign(BIRTH=[d.isoformat() for d in df.BIRTH]).to_csv(csv, index=False)
    return src, csv


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--compress", choices=["bytecode", "none", "zlib"], default="bytecode")
    ap.add_argument("--bin", default=str(REPO / "target" / "release" / "microtab"))
    a = ap.parse_args()
    src, csv = make(a.rows, a.compress)
    out = DATA / "out.mtab"
    procs = 2
    tools = {
        "microtab .sav": [a.bin, "import", str(src), str(out), "--force"],
        "microtab same data as .csv": [a.bin, "import", str(csv), str(out), "--force"],
        "pyreadstat read_sav": [sys.executable, "-c",
                                f"import pyreadstat; pyreadstat.read_sav({str(src)!r})"],
        f"pyreadstat read_file_multiprocessing ({procs} processes)": [
            sys.executable, "-c",
            "import pyreadstat\nif __name__ == '__main__':\n"
            f"    pyreadstat.read_file_multiprocessing(pyreadstat.read_sav, {str(src)!r}, num_processes={procs})"],
        "R haven read_sav": ["Rscript", "-e", f"invisible(haven::read_sav({str(src)!r}))"],
    }
    print(f"{a.rows:,} records; .sav ({a.compress}) {src.stat().st_size / 1e6:.0f} MB, .csv {csv.stat().st_size / 1e6:.0f} MB")
    compare(tools, a.runs, {"microtab .sav": src, "microtab same data as .csv": csv}, "microtab .sav")


if __name__ == "__main__":
    main()
