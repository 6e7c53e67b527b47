#!/usr/bin/env python3
"""SPSS portable (.por) import beside its peers, side by side in one run:
`microtab import FILE.por`, pyreadstat's `read_por` into pandas, R
foreign's `read.spss(…, to.data.frame=TRUE)`, and microtab's import of the
same data as the `.sav` PSPP saves beside it. (R haven cannot read PSPP's
portable files.)

    python3 bench/por.py [--rows 2000000] [--runs 3]

The data (census-like: serial, codes, a weight with two decimals, income,
a two-letter state, a DATE11 birth date; value labels on SEX) are written
once by GNU PSPP (`EXPORT`, and `SAVE` for the `.sav`) under
bench/data/por/ (ignored by git). Results: docs/BENCHMARKS.md."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from readers import compare

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "bench" / "data" / "por"

SYNTAX = """
SET SEED=30.
INPUT PROGRAM.
LOOP #i = 1 TO {rows}.
COMPUTE SERIAL = #i.
COMPUTE AGE = TRUNC(RV.UNIFORM(0, 95)).
COMPUTE SEX = TRUNC(RV.UNIFORM(1, 3)).
COMPUTE EDUC = TRUNC(RV.UNIFORM(0, 12)).
COMPUTE INCTOT = TRUNC(RV.UNIFORM(-9000, 900000)).
COMPUTE PERWT = RND(RV.UNIFORM(1, 300) * 100) / 100.
STRING STATEFIP (A2).
COMPUTE STATEFIP = SUBSTR("CANYTXWAOH", 2 * TRUNC(RV.UNIFORM(0, 5)) + 1, 2).
COMPUTE BIRTH = DATE.DMY(1, 1, 1930) + TRUNC(RV.UNIFORM(0, 30000)) * 86400.
END CASE.
END LOOP.
END FILE.
END INPUT PROGRAM.
FORMATS SERIAL (F8.0) AGE SEX EDUC (F2.0) INCTOT (F8.0) PERWT (F8.2) BIRTH (DATE11).
VALUE LABELS SEX 1 'Male' 2 'Female'.
EXPORT OUTFILE='{por}'.
SAVE OUTFILE='{sav}'.
"""


def make(rows: int) -> tuple[Path, Path]:
    DATA.mkdir(parents=True, exist_ok=True)
    por, sav = DATA / f"census_{rows}.por", DATA / f"census_{rows}.sav"
    if por.exists() and sav.exists():
        return por, sav
    sps = DATA / f"census_{rows}.sps"
    sps.write_text(SYNTAX.format(rows=rows, por=por, sav=sav))
    p = subprocess.run(["pspp", str(sps)], capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"pspp failed:\n{p.stdout}{p.stderr}")
    return por, sav


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--bin", default=str(REPO / "target" / "release" / "microtab"))
    a = ap.parse_args()
    por, sav = make(a.rows)
    out = DATA / "out.mtab"
    tools = {
        "microtab .por": [a.bin, "import", str(por), str(out), "--force"],
        "microtab same data as .sav (PSPP)": [a.bin, "import", str(sav), str(out), "--force"],
        "pyreadstat read_por": [sys.executable, "-c",
                                f"import pyreadstat; pyreadstat.read_por({str(por)!r})"],
        "R foreign read.spss": ["Rscript", "-e",
                                f"invisible(foreign::read.spss({str(por)!r}, to.data.frame=TRUE))"],
    }
    print(f"{a.rows:,} records; .por {por.stat().st_size / 1e6:.0f} MB, .sav {sav.stat().st_size / 1e6:.0f} MB")
    compare(tools, a.runs, {"microtab .por": por, "microtab same data as .sav (PSPP)": sav}, "microtab .por")


if __name__ == "__main__":
    main()
