#!/usr/bin/env python3
"""Stata (.dta) and SPSS (.sav) export beside their peers, side by side
in one run: `microtab export DS OUT.dta|OUT.sav` (a fresh process: it
opens the dataset and writes the file) against pyreadstat's
`write_dta`/`write_sav`, pandas' `to_stata` and R haven's
`write_dta`/`write_sav` writing the same records from a data frame
already in memory (their load is not timed). The issue's target: ≥ 5×
pyreadstat.

    python3 bench/export.py [--rows 2000000] [--runs 3] [--format dta|sav]

The dataset is the Stata benchmark's census-like records (bench/dta.py),
imported once under bench/data/dta/. Results: docs/BENCHMARKS.md."""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "bench" / "data" / "dta"

PEERS = r"""
import sys, time, pandas as pd, pyreadstat
src, out, runs, fmt = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
df, _ = pyreadstat.read_dta(src)
dp = df.assign(BIRTH=pd.to_datetime(df["BIRTH"]))
for _ in range(runs):
    t = time.perf_counter()
    if fmt == "dta":
        pyreadstat.write_dta(df, out)
    else:
        pyreadstat.write_sav(df, out, row_compress=True)
    a = time.perf_counter() - t
    t = time.perf_counter()
    if fmt == "dta":
        dp.to_stata(out, write_index=False, version=118)
    b = time.perf_counter() - t
    print(a, b, flush=True)
"""

HAVEN = r"""
args <- commandArgs(TRUE); d <- haven::read_dta(args[1])
for (i in seq_len(as.integer(args[3]))) { t <- Sys.time()
  if (args[4] == "dta") haven::write_dta(d, args[2]) else haven::write_sav(d, args[2], compress = "byte")
  cat(as.numeric(Sys.time() - t, units = "secs"), "\n") }
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--format", choices=["dta", "sav"], default="dta")
    ap.add_argument("--bin", default=str(REPO / "target" / "release" / "microtab"))
    a = ap.parse_args()
    sys.path.insert(0, str(REPO / "bench"))
    import dta as dta_bench  # noqa: E402

    src, _ = dta_bench.make(a.rows, 118)
    ds = DATA / f"census_{a.rows}.mtab"
    if not ds.exists():
        subprocess.run([a.bin, "import", str(src), str(ds)], check=True, capture_output=True)
    out = DATA / f"export.{a.format}"
    ours = []
    for _ in range(a.runs):
        t = time.perf_counter()
        subprocess.run([a.bin, "export", str(ds), str(out), "--force"], check=True, capture_output=True)
        ours.append(time.perf_counter() - t)
    size = out.stat().st_size / 1e6
    p = subprocess.run([sys.executable, "-c", PEERS, str(src), str(out), str(a.runs), a.format],
                       check=True, capture_output=True, text=True)
    rows = [list(map(float, line.split())) for line in p.stdout.split("\n") if line.strip()]
    prs, pds = [r[0] for r in rows], [r[1] for r in rows]
    h = subprocess.run(["Rscript", "-e", HAVEN, str(src), str(out), str(a.runs), a.format],
                       check=True, capture_output=True, text=True)
    hav = [float(x) for x in h.stdout.split()]
    base = statistics.median(ours)
    print(f"{a.rows:,} records; the .{a.format} is {size:.0f} MB")
    print("| writer | wall s, median [range] | × microtab |")
    print("| --- | ---: | ---: |")
    rows = [("microtab export (process, opens the dataset)", ours),
            (f"pyreadstat write_{a.format} (frame in memory)", prs),
            ("pandas to_stata, version 118 (frame in memory)", pds),
            (f"R haven write_{a.format} (tibble in memory)", hav)]
    for name, ts in rows:
        if a.format == "sav" and name.startswith("pandas"):
            continue
        m = statistics.median(ts)
        print(f"| {name} | {m:.2f} [{min(ts):.2f}–{max(ts):.2f}] | {m / base:.1f} |")


if __name__ == "__main__":
    main()
