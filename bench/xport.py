#!/usr/bin/env python3
"""SAS transport (.xpt) import beside its peers, side by side in one run:
`microtab import FILE.xpt`, pyreadstat's `read_xport` into pandas, R
haven's `read_xpt`, and microtab's import of the same data as CSV (the
issue's target: ≥ 10× the readers, within 2× of the CSV import per MB).

    python3 bench/xport.py [--rows 2000000] [--runs 3]

The data (census-like columns: integers, a weight with two decimals,
income, a text state) are written once by pyreadstat under
bench/data/xport/ (ignored by git). Wall time and peak memory (RSS,
`/usr/bin/time`), each tool a fresh process, warm cache, the tools
alternating; median [range] of `runs`. Results: docs/BENCHMARKS.md."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from readers import compare

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "bench" / "data" / "xport"


def make(rows: int) -> tuple[Path, Path]:
    import numpy as np
    import pandas as pd
    import pyreadstat

    DATA.mkdir(parents=True, exist_ok=True)
    xpt, csv = DATA / f"census_{rows}.xpt", DATA / f"census_{rows}.csv"
    if xpt.exists() and csv.exists():
        return xpt, csv
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
    })
    pyreadstat.write_xport(df, str(xpt), table_name="CENSUS", file_format_version=5)
    df.to_csv(csv, index=False)
    return xpt, csv


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--bin", default=str(REPO / "target" / "release" / "microtab"))
    a = ap.parse_args()
    xpt, csv = make(a.rows)
    out = DATA / "out.mtab"
    tools = {
        "microtab .xpt": [a.bin, "import", str(xpt), str(out), "--force"],
        "microtab same data as .csv": [a.bin, "import", str(csv), str(out), "--force"],
        "pyreadstat read_xport": [sys.executable, "-c",
                                  f"import pyreadstat; pyreadstat.read_xport({str(xpt)!r})"],
        "R haven read_xpt": ["Rscript", "-e", f"invisible(haven::read_xpt({str(xpt)!r}))"],
    }
    print(f"{a.rows:,} records; .xpt {xpt.stat().st_size / 1e6:.0f} MB, .csv {csv.stat().st_size / 1e6:.0f} MB")
    compare(tools, a.runs, {"microtab .xpt": xpt, "microtab same data as .csv": csv}, "microtab .xpt")

if __name__ == "__main__":
    main()
