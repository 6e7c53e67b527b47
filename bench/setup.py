#!/usr/bin/env python3
"""Fixed-width text read through its setup file, beside its peers, side by
side in one run: `microtab import DATA --setup FILE.sps` (and the same
layout as a Stata .dct and a SAS program), GNU PSPP running the same SPSS
syntax (DATA LIST … then SAVE), pandas.read_fwf over the same columns, and
microtab's import of the same data through a DDI codebook.

    python3 bench/setup.py [--rows 2000000] [--runs 3] [--shape flat|cards|hier]

`--shape cards` spreads each record over three lines (card images: SPSS
`RECORDS=3`, SAS `#2`, Stata `3 lines`), PSPP as the peer; `--shape
hier` writes households and their persons (SPSS `FILE TYPE NESTED`, SAS
`IF RT = 'H' THEN DO`, IPUMS's Stata `drop if`), with pandas (read_fwf,
split by type, the household's columns carried down) as the peer, since
PSPP has no FILE TYPE.

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


# Card images: (name, line, start, end, decimals, text).
CARDS = [("SERIAL", 1, 1, 8, 0, False), ("AGE", 1, 9, 10, 0, False), ("SEX", 1, 11, 11, 0, False),
         ("EDUC", 2, 1, 2, 0, False), ("EMPSTAT", 2, 3, 3, 0, False), ("INCTOT", 2, 4, 10, 0, False),
         ("PERWT", 3, 1, 7, 2, False), ("STATE", 3, 8, 9, 0, True)]


def make_cards(rows: int) -> Path:
    """The flat file's records, each over three lines."""
    flat = make(rows)
    dat = DATA / f"cards_{rows}.dat"
    if not dat.exists():
        with open(flat) as f, open(dat, "w") as out:
            for line in f:
                out.write(f"{line[:11]}\n{line[11:21]}\n{line[21:30]}\n")
    spec = " ".join(f"{'/' + str(ln) + ' ' if k == 0 or CARDS[k - 1][1] != ln else ''}{n} {a}-{b}"
                    f"{' (A)' if t else f' ({d})' if d else ''}" for k, (n, ln, a, b, d, t) in enumerate(CARDS))
    (DATA / "cards.sps").write_text(f"DATA LIST FILE='{dat}' RECORDS=3 {spec}.\n")
    (DATA / "cards_pspp.sps").write_text((DATA / "cards.sps").read_text() + f"SAVE OUTFILE='{DATA / 'pspp.sav'}'.\n")
    (DATA / "cards.sas").write_text("DATA c; INFILE 'cards.dat';\nINPUT " + " ".join(
        f"{'#' + str(ln) + ' ' if k == 0 or CARDS[k - 1][1] != ln else ''}{n} {'$ ' if t else ''}{a}-{b}"
        f"{f' .{d}' if d else ''}" for k, (n, ln, a, b, d, t) in enumerate(CARDS)) + ";\nRUN;\n")
    (DATA / "cards.dct").write_text("infix dictionary using cards.dat {\n  3 lines\n" + "".join(
        f"  {'str' if t else 'double' if d else 'long'} {n} {ln}: {a}-{b}\n" for n, ln, a, b, d, t in CARDS) + "}\n")
    (DATA / "cards.do").write_text("infix using cards.dct\nreplace PERWT = PERWT / 100\n")
    return dat


def make_hier(persons: int) -> tuple[Path, list[str]]:
    """Households (H: serial, state, income) each followed by 1-5 persons
    (P: serial, person number, age, sex, income, weight with 2 decimals)."""
    import numpy as np

    DATA.mkdir(parents=True, exist_ok=True)
    dat = DATA / f"hier_{persons}.dat"
    if not dat.exists():
        rng = np.random.default_rng(7)
        size = rng.integers(1, 6, persons)
        size = size[np.cumsum(size) <= persons]
        with open(dat, "w") as f:
            p = 0
            for h, n in enumerate(size, 1):
                lines = [f"H{h:08d}{rng.choice(['CA', 'NY', 'TX'])}{rng.integers(0, 999999):7d}"]
                for k in range(n):
                    lines.append(f"P{h:08d}{k + 1:2d}{rng.integers(0, 95):2d}{rng.integers(1, 3)}"
                                 f"{rng.integers(-9000, 900000):7d}{rng.integers(100, 30000):07d}")
                p += n
                f.write("\n".join(lines) + "\n")
    h = "SERIAL 2-9 STATE 10-11 (A) HHINC 12-18"
    pv = "SERIAL 2-9 PERNUM 10-11 AGE 12-13 SEX 14 INCTOT 15-21 PERWT 22-28 (2)"
    (DATA / "hier.sps").write_text(f"FILE TYPE NESTED FILE='{dat}' RECORD=RECTYPE 1 (A).\nRECORD TYPE 'H'.\n"
                                   f"DATA LIST / {h}.\nRECORD TYPE 'P'.\nDATA LIST / {pv}.\nEND FILE TYPE.\n")
    sas = lambda v: " ".join(x if x != "(A)" else "" for x in v.replace("(2)", ".2").split()).replace(
        "STATE 10-11", "STATE $ 10-11")
    (DATA / "hier.sas").write_text(f"DATA h; INFILE 'hier.dat';\nINPUT RECTYPE $ 1 @;\nIF RECTYPE = 'H' THEN DO;"
                                   f" INPUT {sas(h)}; END;\nELSE IF RECTYPE = 'P' THEN DO; INPUT {sas(pv)}; OUTPUT; END;\nRUN;\n")
    (DATA / "hier.do").write_text(
        "infix str RECTYPE 1 long SERIAL 2-9 str STATE 10-11 long HHINC 12-18 using hier.dat\ndrop if RECTYPE != \"H\"\n"
        "infix str RECTYPE 1 long SERIAL 2-9 byte PERNUM 10-11 byte AGE 12-13 byte SEX 14 long INCTOT 15-21"
        " double PERWT 22-28 using hier.dat\ndrop if RECTYPE != \"P\"\nreplace PERWT = PERWT / 100\n")
    pandas = (
        "import pandas as pd\n"
        f"d = pd.read_fwf({str(dat)!r}, colspecs=[(0, 1), (1, 9), (9, 11), (11, 18), (9, 11), (11, 13), (13, 14), "
        "(14, 21), (21, 28)], names=['RT', 'SERIAL', 'A', 'B', 'PERNUM', 'AGE', 'SEX', 'INCTOT', 'PERWT'], header=None, "
        "dtype=str)\n"
        "h = d['RT'] == 'H'\n"
        "d['STATE'] = d['A'].where(h).ffill(); d['HHINC'] = pd.to_numeric(d['B'].where(h)).ffill()\n"
        "p = d[~h].drop(columns=['A', 'B']).copy()\n"
        "for c in ['SERIAL', 'PERNUM', 'AGE', 'SEX', 'INCTOT']: p[c] = pd.to_numeric(p[c])\n"
        "p['PERWT'] = pd.to_numeric(p['PERWT']) / 100\n"
        "assert len(p) > 0\n")
    return dat, [sys.executable, "-c", pandas]


def shapes(a: argparse.Namespace, out: Path) -> None:
    """The card-image and hierarchical benchmarks."""
    if a.shape == "cards":
        dat = make_cards(a.rows)
        tools = {f"microtab --setup .{x}": [a.bin, "import", str(dat), "--setup", str(DATA / f"cards.{x}"), str(out),
                                            "--force"] for x in ("sps", "sas", "do")}
        tools["PSPP (DATA LIST RECORDS=3, SAVE)"] = ["pspp", "-b", str(DATA / "cards_pspp.sps")]
        print(f"{a.rows:,} records of 3 lines; {dat.stat().st_size / 1e6:.0f} MB")
    else:
        dat, pandas = make_hier(a.rows)
        tools = {f"microtab --setup .{x}": [a.bin, "import", str(dat), "--setup", str(DATA / f"hier.{x}"), str(out),
                                            "--force", "--rectype", "P"] for x in ("sps", "sas", "do")}
        tools["pandas (read_fwf, split, ffill)"] = pandas
        n = sum(1 for _ in open(dat))
        print(f"{n:,} records (households and their persons); {dat.stat().st_size / 1e6:.0f} MB")
    compare(tools, a.runs, {"microtab --setup .sps": dat}, "microtab --setup .sps")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--bin", default=str(REPO / "target" / "release" / "microtab"))
    ap.add_argument("--shape", choices=["flat", "cards", "hier"], default="flat")
    a = ap.parse_args()
    out = DATA / "out.mtab"
    if a.shape != "flat":
        shapes(a, out)
        return
    dat = make(a.rows)
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
