#!/usr/bin/env python3
"""SAS data set (.sas7bdat) import beside its peers, side by side in one
run: `microtab import FILE.sas7bdat`, pyreadstat's `read_sas7bdat` and
`read_file_multiprocessing` into pandas, R haven's `read_sas`, and
microtab's import of the same data as CSV (the issue's target: ≥ 10× the
readers at ≤ 1/10 of their peak memory, within 2× of the CSV import per
MB).

    python3 bench/sas7bdat.py [--rows 2000000] [--runs 3]

The data (census-like: serial, codes, a weight with two decimals, income,
a text state, a date) are written once by R haven's `write_sas`
(uncompressed: only SAS writes RLE or RDC) under bench/data/sas7bdat/
(ignored by git), and as CSV from pyreadstat's reading of that file.
Results: docs/BENCHMARKS.md."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from readers import compare

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "bench" / "data" / "sas7bdat"


def make(rows: int) -> tuple[Path, Path]:
    import pyreadstat

    DATA.mkdir(parents=True, exist_ok=True)
    src, csv = DATA / f"census_{rows}.sas7bdat", DATA / f"census_{rows}.csv"
    if src.exists() and csv.exists():
        return src, csv
    script = f"""
    set.seed(30); n <- {rows}
    df <- data.frame(SERIAL = as.numeric(seq_len(n)), AGE = as.numeric(sample(0:94, n, TRUE)),
                     SEX = as.numeric(sample(1:2, n, TRUE)), EDUC = as.numeric(sample(0:11, n, TRUE)),
                     EMPSTAT = as.numeric(sample(0:3, n, TRUE)),
                     INCTOT = as.numeric(sample(-9000:900000, n, TRUE)),
                     PERWT = round(runif(n, 1, 300), 2),
                     STATEFIP = sample(c("CA", "NY", "TX", "WA", "OH"), n, TRUE),
                     BIRTH = as.Date("1930-01-01") + sample(0:29999, n, TRUE),
                     stringsAsFactors = FALSE)
    suppressWarnings(haven::write_sas(df, "{src}"))
    """
    subprocess.run(["Rscript", "-e", script], check=True)
    df, _ = pyreadstat.read_sas7bdat(str(src))
    df.assign(BIRTH=[d.isoformat() for d in df.BIRTH]).to_csv(csv, index=False)
    return src, csv


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--bin", default=str(REPO / "target" / "release" / "microtab"))
    a = ap.parse_args()
    src, csv = make(a.rows)
    out = DATA / "out.mtab"
    procs = 2
    tools = {
        "microtab .sas7bdat": [a.bin, "import", str(src), str(out), "--force"],
        "microtab same data as .csv": [a.bin, "import", str(csv), str(out), "--force"],
        "pyreadstat read_sas7bdat": [sys.executable, "-c",
                                     f"import pyreadstat; pyreadstat.read_sas7bdat({str(src)!r})"],
        f"pyreadstat read_file_multiprocessing ({procs} processes)": [
            sys.executable, "-c",
            "import pyreadstat\nif __name__ == '__main__':\n"
            f"    pyreadstat.read_file_multiprocessing(pyreadstat.read_sas7bdat, {str(src)!r}, num_processes={procs})"],
        "R haven read_sas": ["Rscript", "-e", f"invisible(haven::read_sas({str(src)!r}))"],
    }
    print(f"{a.rows:,} records; .sas7bdat {src.stat().st_size / 1e6:.0f} MB, .csv {csv.stat().st_size / 1e6:.0f} MB")
    compare(tools, a.runs, {"microtab .sas7bdat": src, "microtab same data as .csv": csv}, "microtab .sas7bdat")


if __name__ == "__main__":
    main()
