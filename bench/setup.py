#!/usr/bin/env python3
"""Fixed-width text read through its setup file, beside its peers, side by
side in one run: `microtab import DATA --setup FILE.sps` (and the same
layout as a Stata .dct and a SAS program), GNU PSPP running the same SPSS
syntax (DATA LIST … then SAVE), pandas.read_fwf over the same columns, and
microtab's import of the same data through a DDI codebook.

    python3 bench/setup.py [--rows 2000000] [--runs 3]

The data (census-like: serial, codes, a weight with two implied decimals,
income, a text state) are written once under bench/data/setup/ (ignored by
git). Results: docs/BENCHMARKS.md."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from readers import compare

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "bench" / "data" / "setup"

# name, start, end (1-based, inclusive), implied decimals, text
LAYOUT = [("SERIAL", 1, 8, 0, False), ("AGE", 9, 10, 0, False), ("SEX", 11, 11, 0, False),
          ("EDUC", 12, 13, 0, False), ("EMPSTAT", 14, 14, 0, False), ("INCTOT", 15, 21, 0, False),
          ("PERWT", 22, 28, 2, False), ("STATE", 29, 30, 0, True)]


def make(rows: int) -> Path:
    import numpy as np

    DATA.mkdir(parents=True, exist_ok=True)
    dat = DATA / f"census_{rows}.dat"
    if not dat.exists():
        rng = np.random.default_rng(31)
        cols = [np.char.zfill(np.arange(1, rows + 1).astype(str), 8),
                np.char.rjust(rng.integers(0, 95, rows).astype(str), 2),
                rng.integers(1, 3, rows).astype(str),
                np.char.rjust(rng.integers(0, 12, rows).astype(str), 2),
                rng.integers(0, 4, rows).astype(str),
                np.char.rjust(rng.integers(-9000, 900_000, rows).astype(str), 7),
                np.char.zfill(rng.integers(100, 30000, rows).astype(str), 7),
                rng.choice(["CA", "NY", "TX", "WA", "OH"], rows)]
        lines = cols[0]
        for c in cols[1:]:
            lines = np.char.add(lines, c)
        with open(dat, "w") as f:
            for k in range(0, rows, 500_000):
                f.write("\n".join(lines[k:k + 500_000]) + "\n")
    spec = " ".join(f"{n} {a}-{b}{' (A)' if t else f' ({d})' if d else ''}" for n, a, b, d, t in LAYOUT)
    (DATA / "census.sps").write_text(
        f"DATA LIST FILE='{dat}' /{spec}.\nVARIABLE LABELS SEX 'Sex'.\n"
        "VALUE LABELS SEX 1 'Male' 2 'Female'.\nMISSING VALUES INCTOT (-9000).\n")
    (DATA / "pspp.sps").write_text((DATA / "census.sps").read_text() + f"SAVE OUTFILE='{DATA / 'pspp.sav'}'.\n")
    (DATA / "census.dct").write_text("infix dictionary using census.dat {\n" + "".join(
        f"  {'str' if t else 'double' if d else 'long'} {n} {a}-{b}\n" for n, a, b, d, t in LAYOUT) + "}\n"
        "")
    (DATA / "census.do").write_text("infix using census.dct\nreplace PERWT = PERWT / 100\n"
                                    'label define sexl 1 "Male" 2 "Female"\nlabel values SEX sexl\n')
    (DATA / "census.sas").write_text(
        "PROC FORMAT; VALUE sexf 1 = 'Male' 2 = 'Female'; RUN;\nDATA c; INFILE 'census.dat';\nINPUT " +
        " ".join(f"{n} {'$ ' if t else ''}{a}-{b}{f' .{d}' if d else ''}" for n, a, b, d, t in LAYOUT) +
        ";\nFORMAT SEX sexf.;\nRUN;\n")
    (DATA / "census.xml").write_text(
        '<?xml version="1.0" encoding="UTF-8"?>\n<codeBook xmlns="ddi:codebook:2_5"><fileDscr><fileTxt>'
        '<fileStrc type="rectangular"/><fileType charset="UTF-8"/></fileTxt></fileDscr><dataDscr>' + "".join(
            f'<var name="{n}" dcml="{d}"><location StartPos="{a}" EndPos="{b}" width="{b - a + 1}"/>'
            f'<varFormat type="{"character" if t else "numeric"}"/></var>' for n, a, b, d, t in LAYOUT) +
        "</dataDscr></codeBook>\n")
    return dat


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--bin", default=str(REPO / "target" / "release" / "microtab"))
    a = ap.parse_args()
    dat = make(a.rows)
    out = DATA / "out.mtab"
    specs = [(a_ - 1, b) for _, a_, b, _, _ in LAYOUT]
    names = [n for n, *_ in LAYOUT]
    tools = {
        "microtab --setup .sps": [a.bin, "import", str(dat), "--setup", str(DATA / "census.sps"), str(out), "--force"],
        "microtab --setup .dct + .do": [a.bin, "import", str(dat), "--setup", str(DATA / "census.do"), str(out),
                                        "--force"],
        "microtab --setup .sas": [a.bin, "import", str(dat), "--setup", str(DATA / "census.sas"), str(out), "--force"],
        "microtab --ddi (same layout)": [a.bin, "import", str(dat), "--ddi", str(DATA / "census.xml"), str(out),
                                         "--force"],
        "PSPP (DATA LIST, SAVE)": ["pspp", "-b", str(DATA / "pspp.sps")],
        "pandas.read_fwf": [sys.executable, "-c",
                            f"import pandas as pd; pd.read_fwf({str(dat)!r}, colspecs={specs!r}, names={names!r}, "
                            "header=None)"],
    }
    print(f"{a.rows:,} records; {dat.stat().st_size / 1e6:.0f} MB of fixed-width text")
    compare(tools, a.runs, {"microtab --setup .sps": dat}, "microtab --setup .sps")


if __name__ == "__main__":
    main()
