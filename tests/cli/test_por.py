"""`microtab import FILE.por`: SPSS portable files against three readers
of their own — pyreadstat (ReadStat), R foreign and GNU PSPP (its reading
of the portable file, saved as a system file by `pspp-convert`) — and
against the same data PSPP saves as a system file (`.sav`, imported by
microtab's system-file reader, itself checked against pyreadstat in
test_sav.py): the file SPSS wrote (pyreadstat's fixture), files PSPP and
pyreadstat write here (user-missing values and the three kinds of ranges,
value labels of numbers and texts, dates, long and non-ASCII text, many
records), files written here character by character (value labels naming
several variables, each kind of range, line ends), and damaged files.

R haven is left out: it fails on PSPP's portable files ("Error parsing
double string")."""

import json
import math
import re
import shutil
import subprocess
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pyreadstat
import pytest

from conftest import mutated, run, run_json
from test_sav import frame as sav_frame
from test_sav import shown

FIX = Path(__file__).resolve().parent.parent / "fixtures" / "por"
needs_pspp = pytest.mark.skipif(shutil.which("pspp") is None, reason="GNU PSPP is not installed")


# --------------------------------------------------------------------------
# readers
# --------------------------------------------------------------------------

def ours(ds):
    """(variables by name, records) of the dataset `ds`."""
    info = {v["name"]: v for v in run_json("info", ds)["variables"]}
    return info, run_json("list", ds, *info, "--all")["records"]


def missing_code(info, name, value):
    """Whether `value` is one of the variable's user-missing codes."""
    return value is not None and value in info[name]["missing_codes"]


R_FOREIGN = r"""
suppressMessages({library(foreign); library(jsonlite)})
a <- commandArgs(trailingOnly=TRUE)
d <- suppressWarnings(read.spss(a[1], to.data.frame=TRUE, use.value.labels=FALSE))
vl <- lapply(d, function(x) {
  v <- attr(x, "value.labels")
  if (is.null(v)) list() else lapply(seq_along(v), function(i) list(unname(v[[i]]), names(v)[i]))
})
cols <- lapply(d, function(x) if (is.numeric(x)) x else as.character(x))
write_json(list(names=names(d), cols=cols, labels=as.list(attr(d, "variable.labels")),
                values=vl), a[2], digits=NA, auto_unbox=TRUE, na="null", null="null")
"""


def foreign(path, tmp):
    """R foreign's reading of `path`: names, columns (user-missing numbers
    as NA, texts padded), variable labels, value labels."""
    script, out = tmp / "foreign.R", tmp / "foreign.json"
    script.write_text(R_FOREIGN)
    p = subprocess.run(["Rscript", str(script), str(path), str(out)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return json.loads(out.read_text())


def pspp_reads(path, tmp, name="back.sav"):
    """GNU PSPP's reading of the portable file `path`, saved as a system
    file and imported by microtab: (variables, records)."""
    sav = tmp / name
    p = subprocess.run(["pspp-convert", str(path), str(sav)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    ds = tmp / (name + ".mtab")
    run("import", sav, ds, "--force")
    return ours(ds)


def num_close(a, b, rel):
    if a is None or b is None:
        return a is None and b is None
    return a == pytest.approx(b, rel=rel, abs=1e-300)


def same_as_pyreadstat(ds, path, *, skip_text=lambda s: False):
    """Every value, variable label and value label of `ds` equal
    pyreadstat's reading of `path` (which makes user-missing values
    missing, and each byte its table does not name U+FFFD: such texts are
    left to the other checks); dates by their SPSS numbers."""
    df, meta = pyreadstat.read_por(str(path), disable_datetime_conversion=True)
    info, got = ours(ds)
    assert list(info) == list(df.columns)
    assert len(got) == len(df)
    fmts = meta.original_variable_types
    for i, row in enumerate(df.itertuples(index=False)):
        for name, v in zip(df.columns, row):
            g = got[i][name]
            if missing_code(info, name, g):
                assert v is None or v != v or v == "", (i, name, g, v)
                continue
            if isinstance(v, str):
                if "\ufffd" in v or skip_text(v):
                    continue
                assert g == (v.rstrip(" ") or None), (i, name, g, v)
            elif v is None or v != v:
                assert g is None, (i, name, g)
            elif info[name]["kind"] == "string":
                assert g == shown(fmts[name], float(v)), (i, name, g, v)
            else:
                assert num_close(g, float(v), 1e-14), (i, name, g, v)
    for name, label in meta.column_names_to_labels.items():
        if label is None or "\ufffd" not in label:
            assert info[name]["label"] == (label or None), (name, info[name]["label"], label)
    for name, labels in meta.variable_value_labels.items():
        mine = info[name]["value_labels"]
        for key, lab in labels.items():
            if "\ufffd" in lab or "\ufffd" in str(key):
                continue
            if info[name]["kind"] == "string":
                assert mine.get(str(key).rstrip(" ")) == lab, (name, key, lab, mine)
            else:
                assert {float(k): x for k, x in mine.items()}.get(float(key)) == lab, (name, key, mine)
    return info, got


def same_as_foreign(ds, path, tmp):
    """Every value, variable label and value label of `ds` equal R
    foreign's reading of `path` (user-missing numbers NA, texts padded
    and without the bytes its table does not name: those left out)."""
    r = foreign(path, tmp)
    info, got = ours(ds)
    fmts = pyreadstat.read_por(str(path), metadataonly=True)[1].original_variable_types
    assert r["names"] == list(info)
    for name in info:
        col = r["cols"][name]
        col = col if isinstance(col, list) else [col]
        assert len(col) == len(got)
        for i, v in enumerate(col):
            g = got[i][name]
            if info[name]["kind"] == "string" and isinstance(v, str):
                if g is not None and not g.isascii():
                    continue
                assert g == (v.rstrip(" ") or None), (i, name, g, v)
            elif missing_code(info, name, g):
                assert v is None, (i, name, g, v)
            elif v is None:
                assert g is None, (i, name, g)
            elif info[name]["kind"] == "string":
                assert g == shown(fmts[name], float(v)), (i, name, g, v)
            else:
                assert num_close(g, float(v), 1e-14), (i, name, g, v)
        label = (r["labels"] or {}).get(name) or None
        if label is not None and (info[name]["label"] or "").isascii():
            assert info[name]["label"] == label.rstrip(" "), (name, label)
        for value, lab in (r["values"] or {}).get(name) or []:
            if not lab.isascii() or lab.endswith(" "):
                continue
            mine = info[name]["value_labels"]
            key = value.rstrip(" ") if isinstance(value, str) else value
            if isinstance(key, str):
                assert mine.get(key) == lab, (name, value, lab, mine)
            else:
                assert {float(k): x for k, x in mine.items()}.get(float(key)) == lab, (name, value, mine)
    return r


# --------------------------------------------------------------------------
# portable files written character by character
# --------------------------------------------------------------------------

DIGITS = "0123456789ABCDEFGHIJKLMNOPQRST"
#: The translation table of an ASCII file: the portable characters at
#: positions 64-188 as PSPP and SPSS write them ('0' where a character
#: is not in the file's set).
TABLE = (b"0" * 64 + b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
         + b" .<(+|&[]!$*);^-/|,%_>?`:#@'=\"" + b"000000~000000000000000000000{}\\")
TABLE = TABLE + b"0" * (256 - len(TABLE))


def b30(x):
    """A number as a portable file writes it: base 30, exactly (every
    binary fraction ends in base 30), `/` after it; `*.` for None."""
    if x is None:
        return "*."
    f = Fraction(x)
    out = "-" if f < 0 else ""
    f = abs(f)
    whole, frac = divmod(f, 1)
    digits = ""
    whole = int(whole)
    while whole:
        whole, d = divmod(whole, 30)
        digits = DIGITS[d] + digits
    out += digits or "0"
    if frac:
        out += "."
        while frac:
            frac *= 30
            d, frac = divmod(frac, 1)
            out += DIGITS[int(d)]
    return out + "/"


def s30(text):
    """A string field: its length, then its characters."""
    raw = text.encode("latin-1") if isinstance(text, str) else text
    return b30(len(raw)).encode() + raw


def portable(records, data, *, eol=b"\r\n", table=TABLE, label=b""):
    """A portable file: the splash (with `label` where SPSS puts the file
    label), `table`, the signature, the version and date, the dictionary
    `records` and the `data` (bytes), the end mark, in 80-column lines."""
    splash = (b"ASCII SPSS PORT FILE" + label).ljust(40)[:40] * 5
    body = (splash + table + b"SPSSPORT" + b"A" + s30("20240101") + s30("120000")
            + b"1" + s30("microtab tests") + records + b"F" + data + b"Z")
    lines = [body[i:i + 80] for i in range(0, len(body), 80)]
    lines[-1] = lines[-1].ljust(80, b"Z")
    return eol.join(lines) + eol


def var(width, name, fmt=(5, 8, 2)):
    """A variable record (tag 7): width (0 numeric), name, print and write
    formats."""
    f = "".join(b30(x) for x in fmt)
    return b"7" + b30(width).encode() + s30(name) + (f + f).encode()


def labels(names, pairs):
    """A value-label record (tag D) naming several variables."""
    out = b"D" + b30(len(names)).encode() + b"".join(s30(n) for n in names)
    out += b30(len(pairs)).encode()
    for v, lab in pairs:
        out += (s30(v) if isinstance(v, str) else b30(v).encode()) + s30(lab)
    return out


def row(*values):
    """A record of the data: numbers and strings."""
    return b"".join(s30(v) if isinstance(v, (str, bytes)) else b30(v).encode() for v in values)


# --------------------------------------------------------------------------
# the file SPSS wrote
# --------------------------------------------------------------------------

def test_the_file_spss_wrote_reads_as_pyreadstat_and_pspp_read_it(tmp_path):
    """pyreadstat's sample.por (IBM SPSS Statistics 25): dates of several
    formats, written with format types 82 higher (as ReadStat reads them;
    PSPP gives those variables its default format, so their numbers are
    compared as dates; R foreign refuses the file: "error reading
    portable-file dictionary"), value labels, labels."""
    ds = tmp_path / "s.mtab"
    run("import", FIX / "sample.por", ds)
    info, got = same_as_pyreadstat(ds, FIX / "sample.por")
    fmts = pyreadstat.read_por(str(FIX / "sample.por"), metadataonly=True)[1].original_variable_types
    ti, tg = pspp_reads(FIX / "sample.por", tmp_path)
    assert list(ti) == list(info)
    for name, a in ti.items():
        for k in ("label", "value_labels", "missing_codes"):
            assert a[k] == info[name][k], (name, k)
        for r, t in zip(got, tg):
            if a["kind"] != info[name]["kind"]:
                assert r[name] == (None if t[name] is None else shown(fmts[name], t[name])), name
            else:
                assert r[name] == t[name], name
    assert [r["MYDATE"] for r in got] == ["2018-05-06", "1880-05-06", "1960-01-01", "1583-01-01", None]
    assert [r["MYTIME"] for r in got] == ["10:10:10", "23:10:10", "00:00:00", "16:10:10", None]
    assert info["MYLABL"]["value_labels"] == {"1": "Male", "2": "Female"}
    assert info["MYCHAR"]["label"] == "character"


# --------------------------------------------------------------------------
# files PSPP writes
# --------------------------------------------------------------------------

PSPP_MAIN = r"""
DATA LIST LIST (",") / ID (F4) SCORE (F8.2) GRP (F2) LO (F6) HI (F6) MID (F6.1) TOWN (A12) CODE (A3)
  DAY (DATE11) ADATE (ADATE10) STAMP (DATETIME20) CLOCK (TIME8) BIG (F16.6).
BEGIN DATA
1,10.5,1,-5,100,2.5,Oslo,AB,01-JAN-2001,01/02/2001,01-JAN-2001 12:30:05,12:30:05,123456.789012
2,-3.25,2,0,1000,1,Bergen,XX,29-FEB-2000,12/31/1999,31-DEC-1999 23:59:59,00:00:01,-0.000123456789
3,99,9,99,5000,3,Tromsø,YY,15-OCT-1582,10/15/1582,15-OCT-1582 00:00:00,23:59:59,3.14159265358979
4,-99,1,-100,7,0.1,Zürich,,01-JAN-1900,01/01/1900,01-JAN-1900 06:00:00,06:00:00,1e15
5,,2,,,,café,AB,,,,,
6,-98,8,1,1001,2.9,Oslo,CD,31-DEC-9999,12/31/9999,31-DEC-9999 23:59:59,99:00:00,-1e-10
7,-97,,2,999,4,,AB,15-JUN-1960,06/15/1960,15-JUN-1960 00:00:00.5,00:00:00,0
END DATA.
STRING LONG (A300).
COMPUTE LONG = CONCAT("start ", RTRIM(TOWN), " ", "{digits} end").
VARIABLE LABELS SCORE 'Test score é' GRP 'Group' TOWN 'Town name' LONG 'A long text'.
VALUE LABELS GRP 1 'first' 2 'second ü' 9 'unknown' /LO HI -5 'minus five' 100 'hundred' 1000 'thousand'
  /TOWN 'Oslo' 'capital' 'Tromsø' 'north ø' /CODE 'AB' 'a b'.
MISSING VALUES SCORE (-99, -98, -97) GRP (9) LO (LO THRU 0, 99) HI (1000 THRU HI) MID (1 THRU 3)
  TOWN ('Bergen') CODE ('XX', 'YY').
EXPORT OUTFILE='{dir}/main.por'.
SAVE OUTFILE='{dir}/main.sav'.
""".replace("{digits}", "0123456789" * 28)


def pspp(tmp, syntax):
    (tmp / "w.sps").write_text(syntax.replace("{dir}", str(tmp)), encoding="utf-8")
    p = subprocess.run(["pspp", str(tmp / "w.sps")], capture_output=True, text=True, cwd=tmp)
    assert p.returncode == 0, p.stdout + p.stderr


@pytest.fixture(scope="module")
def main(tmp_path_factory):
    d = tmp_path_factory.mktemp("main")
    pspp(d, PSPP_MAIN)
    por, sav = d / "main.por", d / "main.sav"
    run("import", por, d / "p.mtab", "--encoding", "utf-8")
    run("import", sav, d / "s.mtab")
    return {"dir": d, "por": por, "sav": sav, "p": d / "p.mtab", "s": d / "s.mtab"}


@needs_pspp
def test_a_file_pspp_writes_holds_what_its_system_file_holds(main):
    """Values, labels, value labels (non-ASCII text read as UTF-8, which
    PSPP writes), missing codes of discrete values and ranges, dates: as
    PSPP's .sav of the same data gives them, but for what the portable
    format loses: texts beyond 255 bytes, digits beyond its precision
    (PSPP writes 10 or 11 base-30 digits: 1e15 becomes 999999999999990,
    1066.8334967524647 1066.8334967524463, within 5e-14), and
    the x of `x THRU HI`, which PSPP 1.6.2 writes as HI's value (its own
    reader shows "1.797693134862316e+308 THRU HIGHEST")."""
    pi, pg = ours(main["p"])
    si, sg = ours(main["s"])
    assert list(pi) == list(si)
    assert len(pg) == len(sg) == 7
    for name in pi:
        a, b = pi[name], si[name]
        assert a["kind"] == b["kind"], name
        assert a["label"] == b["label"], name
        assert a["value_labels"] == b["value_labels"], name
        if name != "HI":
            assert sorted(a["missing_codes"], key=str) == sorted(b["missing_codes"], key=str), name
        for i, (x, y) in enumerate(zip((r[name] for r in pg), (r[name] for r in sg))):
            if name == "LONG":
                assert x == y.encode()[:255].decode().rstrip(" "), i
            elif isinstance(y, float):
                assert num_close(x, y, 5e-14), (name, i, x, y)
            else:
                assert x == y, (name, i, x, y)
    assert pi["HI"]["missing_codes"] == []
    assert pi["MID"]["missing_codes"] == [1.0, 2.5, 2.9, 3.0]
    assert sorted(pi["LO"]["missing_codes"]) == [-100, -5, 0, 99]
    assert [r["TOWN"] for r in pg] == ["Oslo", "Bergen", "Tromsø", "Zürich", "café", "Oslo", None]
    assert pi["SCORE"]["label"] == "Test score é"


@needs_pspp
def test_a_file_pspp_writes_reads_as_pyreadstat_foreign_and_pspp_read_it(main, tmp_path):
    same_as_pyreadstat(main["p"], main["por"])
    same_as_foreign(main["p"], main["por"], tmp_path)
    # PSPP's reading drops the bytes its table does not name (Tromsø is
    # Troms, with a NUL for each), and reads the numbers as we do.
    ti, tg = pspp_reads(main["por"], tmp_path)
    pi, pg = ours(main["p"])
    assert [n.upper() for n in ti] == list(pi)
    for name, a in zip(pi, ti.values()):
        assert a["missing_codes"] == pi[name]["missing_codes"] or sorted(a["missing_codes"]) == sorted(
            pi[name]["missing_codes"]), name
        for i, (x, y) in enumerate(zip((r[name] for r in pg), (r[a["name"]] for r in tg))):
            if isinstance(x, str) and not x.isascii():
                # Each byte dropped as a NUL.
                assert y.replace("\x00", "") == "".join(c for c in x if c.isascii()), (name, i, x, y)
            elif isinstance(x, float):
                assert num_close(x, y, 1e-15), (name, i, x, y)
            else:
                assert x == y, (name, i, x, y)


@needs_pspp
def test_text_beyond_the_portable_characters_is_windows_1252_unless_told(main, tmp_path):
    ds = tmp_path / "d.mtab"
    p = run("import", main["por"], ds)
    assert "read as Windows-1252" in p.stderr, p.stderr
    info, got = ours(ds)
    assert [r["TOWN"] for r in got][2:5] == ["TromsÃ¸", "ZÃ¼rich", "cafÃ©"]
    assert info["SCORE"]["label"] == "Test score Ã©"
    # Read as what PSPP wrote: no note.
    p = run("import", main["por"], ds, "--force", "--encoding", "utf-8")
    assert "Windows-1252" not in p.stderr


BIG_ROWS = 150_000

PSPP_MANY = r"""
SET SEED=30.
INPUT PROGRAM.
LOOP #i = 1 TO {rows}.
COMPUTE SERIAL = #i.
COMPUTE AGE = TRUNC(RV.UNIFORM(0, 100)).
COMPUTE SEX = TRUNC(RV.UNIFORM(1, 3)).
COMPUTE INCTOT = TRUNC(RV.UNIFORM(-9000, 900000)).
IF (MOD(#i, 97) = 0) INCTOT = 9999999.
COMPUTE PERWT = RND(RV.UNIFORM(1, 300) * 100) / 100.
COMPUTE X = RV.NORMAL(0, 1000).
IF (MOD(#i, 13) = 0) X = $SYSMIS.
STRING STATE (A4) /NOTE (A20).
COMPUTE STATE = SUBSTR("CA  NY  TX  WA  OH  ", 4 * TRUNC(RV.UNIFORM(0, 5)) + 1, 4).
COMPUTE NOTE = CONCAT("n", STRING(MOD(#i, 1000), F3.0)).
IF (MOD(#i, 7) = 0) NOTE = "".
COMPUTE BIRTH = DATE.DMY(1, 1, 1930) + TRUNC(RV.UNIFORM(0, 30000)) * 86400.
END CASE.
END LOOP.
END FILE.
END INPUT PROGRAM.
FORMATS SERIAL (F8.0) AGE SEX (F3.0) INCTOT (F8.0) PERWT (F8.2) X (F12.6) BIRTH (DATE11).
VALUE LABELS SEX 1 'Male' 2 'Female' /STATE 'CA' 'California'.
MISSING VALUES INCTOT (9999999) AGE (98 THRU 99) STATE ('OH').
VARIABLE LABELS PERWT 'Person weight'.
EXPORT OUTFILE='{dir}/many.por'.
SAVE OUTFILE='{dir}/many.sav'.
""".replace("{rows}", str(BIG_ROWS))


@needs_pspp
def test_many_records_across_batches_hold_what_the_system_file_holds(tmp_path):
    """150,000 records (three batches): every record as PSPP's .sav gives
    it (the doubles of X within the digits PSPP writes, 5e-14); the same
    frequencies, means and codebook; pyreadstat's and foreign's values."""
    pspp(tmp_path, PSPP_MANY)
    p, s = tmp_path / "p.mtab", tmp_path / "s.mtab"
    run("import", tmp_path / "many.por", p)
    run("import", tmp_path / "many.sav", s)
    pi, pg = ours(p)
    si, sg = ours(s)
    assert len(pg) == len(sg) == BIG_ROWS
    assert list(pi) == list(si)
    for name in pi:
        if name == "X":
            assert all(num_close(a["X"], b["X"], 5e-14) for a, b in zip(pg, sg))
        else:
            assert [r[name] for r in pg] == [r[name] for r in sg], name
    for name in ("SEX", "AGE", "STATE", "BIRTH"):
        a = run_json("freq", p, name, "--include-missing")
        b = run_json("freq", s, name, "--include-missing")
        a.pop("dataset"), b.pop("dataset")
        assert a == b, name
    a = run_json("means", p, "INCTOT", "--by", "SEX", "--weight", "PERWT")
    b = run_json("means", s, "INCTOT", "--by", "SEX", "--weight", "PERWT")
    a.pop("dataset"), b.pop("dataset")
    assert a == b
    keep = [n for n in pi if n != "X"]
    a = run_json("codebook", p, *keep)
    b = run_json("codebook", s, *keep)
    assert a["variables"] == b["variables"]
    assert pi["INCTOT"]["missing_codes"] == [9999999]
    assert pi["AGE"]["missing_codes"] == [98, 99]
    same_as_pyreadstat(p, tmp_path / "many.por")
    same_as_foreign(p, tmp_path / "many.por", tmp_path)


# --------------------------------------------------------------------------
# files pyreadstat writes
# --------------------------------------------------------------------------

def frame(n):
    """test_sav's frame in what pyreadstat writes to a portable file: ASCII
    text within 255 characters; a datetime beside the date."""
    import datetime as dt
    df = sav_frame(n).drop(columns="long")
    df["name"] = df.name.replace("grüße", "Zed Z")
    df["when"] = [dt.datetime(2000, 1, 1) + dt.timedelta(seconds=37 * k * k) for k in range(n)]
    return df


def test_files_pyreadstat_writes(tmp_path):
    df = frame(3000)
    src = tmp_path / "w.por"
    pyreadstat.write_por(df, str(src), file_label="a label",
                         column_labels={"wt": "weight", "name": "a name"})
    ds = tmp_path / "d.mtab"
    p = run("import", src, ds)
    assert run_json("info", ds)["title"] == pyreadstat.read_por(str(src), metadataonly=True)[1].file_label == "a label"
    info, got = same_as_pyreadstat(ds, src)
    same_as_foreign(ds, src, tmp_path)
    assert info["WT"]["kind"] == "int" and info["WT"]["decimals"] == 2
    assert [r["WT"] for r in got] == [float(x) for x in df.wt]
    assert all(num_close(r["X"], None if math.isnan(x) else float(x), 1e-15) for r, x in zip(got, df.x))
    assert [r["NAME"] for r in got] == [x or None for x in df.name]
    assert [r["DAY"] for r in got] == [d.isoformat() for d in df.day]
    assert [r["WHEN"] for r in got] == [d.isoformat() for d in df.when]


# --------------------------------------------------------------------------
# files written here
# --------------------------------------------------------------------------

HAND_RECORDS = (
    b"45/5B/" + var(0, "A", (5, 8, 0)) + b"8" + b30(9).encode() + b"C" + s30("first")
    + var(0, "B", (5, 8, 2)) + b"9" + b30(-1).encode()
    + var(0, "C", (5, 8, 2)) + b"A" + b30(100).encode() + b"8" + b30(-9).encode()
    + var(0, "D", (5, 8, 1)) + b"B" + b30(Fraction(1, 2)).encode() + b30(2.5).encode()
    + var(6, "S", (1, 6, 0)) + b"8" + s30("none  ") + b"8" + s30("n/a   ")
    + labels(["A", "C", "D"], [(1, "one"), (2, "two"), (-9, "refused")])
    + labels(["S"], [("ZZ    ", "zed zed"), ("a b   ", "ab")])
)
# Texts padded to the width, as SPSS and PSPP write them (PSPP's reader
# leaves the rest of a shorter one undefined).
HAND_DATA = (
    row(1, 1.5, 100, 0.5, "a b   ")
    + row(2, -1, 150, 1.25, "ZZ    ")
    + row(9, -2.25, -9, 2.5, "none  ")
    + row(None, 0, 99.5, 3, "n/a   ")
    + row(1, 7, 101, None, "      ")
    + row(2, None, -1e-3, 0.1, "longer than six")
)


def test_a_file_written_here_reads_as_pyreadstat_foreign_and_pspp_read_it(tmp_path):
    """Value labels naming several variables, each kind of range (and a
    discrete value beside one), text missing values, a text holding Z
    (not the end), a text longer than its width (cut, noted)."""
    src = tmp_path / "h.por"
    src.write_bytes(portable(HAND_RECORDS, HAND_DATA))
    ds = tmp_path / "h.mtab"
    p = run("import", src, ds)
    assert "variable S: 1 values longer than its width (6 bytes) are cut" in p.stderr
    info, got = same_as_pyreadstat(ds, src, skip_text=lambda v: len(v) > 6)
    same_as_foreign(ds, src, tmp_path)
    assert [r["S"] for r in got] == ["a b", "ZZ", "none", "n/a", None, "longer"]
    assert info["A"]["label"] == "first"
    for v in "ACD":
        assert {float(k): x for k, x in info[v]["value_labels"].items()} == {1.0: "one", 2.0: "two", -9.0: "refused"}
    assert info["S"]["value_labels"] == {"ZZ": "zed zed", "a b": "ab"}
    assert info["A"]["missing_codes"] == [9]
    assert sorted(info["B"]["missing_codes"]) == [-2.25, -1]
    assert sorted(info["C"]["missing_codes"]) == [-9, 100, 101, 150]
    assert sorted(info["D"]["missing_codes"]) == [0.5, 1.25, 2.5]
    assert sorted(info["S"]["missing_codes"]) == ["n/a", "none"]
    # PSPP reads the same file the same way (its names in lower case).
    ti, tg = pspp_reads(src, tmp_path)
    for name, a in zip(info, ti.values()):
        for k in ("label", "missing_codes"):
            assert a[k] == info[name][k] or sorted(a[k], key=str) == sorted(info[name][k], key=str), (name, k)
        assert {float(k) if info[name]["kind"] != "string" else k: x for k, x in a["value_labels"].items()} == \
            {float(k) if info[name]["kind"] != "string" else k: x for k, x in info[name]["value_labels"].items()}
        for r, t in zip(got, tg):
            x, y = r[name], t[a["name"]]
            assert num_close(x, y, 1e-15) if isinstance(x, float) else x == y, (name, x, y)
    # Every double written with all its digits reads back as itself (PSPP
    # reads -0.001's 62 digits as -0.0009999999999999996).
    assert [r["C"] for r in got] == [100, 150, -9, 99.5, 101, -0.001]
    assert [r["D"] for r in got] == [0.5, 1.25, 2.5, 3, None, 0.1]


@pytest.mark.parametrize("how", ["lf", "cr", "none", "short", "named.dat"])
def test_line_ends_short_lines_and_names(tmp_path, how):
    """LF or CR line ends, no line ends at all, lines without their
    trailing blanks (read as padded to 80 columns), a name that is not
    .por: the same dataset, the file recognised by its content."""
    good = portable(HAND_RECORDS, HAND_DATA)
    lines = good.split(b"\r\n")
    body = {
        "lf": b"\n".join(lines),
        "cr": b"\r".join(lines),
        "none": b"".join(lines),
        "short": b"\r\n".join(x.rstrip(b" ") for x in lines),
        "named.dat": good,
    }[how]
    if how == "short":
        assert len(body) < len(good)
    a, b = tmp_path / "a.mtab", tmp_path / "b.mtab"
    (tmp_path / "good.por").write_bytes(good)
    src = tmp_path / ("x.dat" if how == "named.dat" else "x.por")
    src.write_bytes(body)
    run("import", tmp_path / "good.por", a)
    run("import", src, b)
    assert ours(a) == ours(b)


def test_text_that_does_not_decode_names_its_record_and_variable(tmp_path):
    src = tmp_path / "u.por"
    src.write_bytes(portable(b"42/" + var(0, "N") + var(8, "T", (1, 8, 0)), row(1, "ok") + row(2, b"caf\xe9")))
    ds = tmp_path / "u.mtab"
    p = run("import", src, ds, "--encoding", "utf-8", ok=False)
    assert re.search(r"byte \d+: record 2, variable T: .* is not valid UTF-8", p.stderr), p.stderr
    assert not ds.exists()
    run("import", src, ds, "--encoding", "latin1")
    assert [r["T"] for r in ours(ds)[1]] == ["ok", "café"]


# --------------------------------------------------------------------------
# damaged files
# --------------------------------------------------------------------------

def error_of(tmp_path, data, name="bad.por"):
    f = tmp_path / name
    f.write_bytes(data)
    new = tmp_path / "new.mtab"
    p = run("import", f, new, ok=False, timeout=30)
    assert p.returncode == 1 and "panicked" not in p.stderr, p.stderr
    assert not new.exists()
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and f.name in lines[0], p.stderr
    return lines[0]


def physical(pos):
    """The file offset of character `pos` of a file `portable` wrote (80
    characters, then CR LF)."""
    return pos + 2 * (pos // 80)


def test_damaged_files_are_errors_naming_the_byte_and_leave_the_target(tmp_path):
    good = portable(HAND_RECORDS, HAND_DATA)
    (tmp_path / "g.por").write_bytes(good)
    target = tmp_path / "t.mtab"
    run("import", tmp_path / "g.por", target)
    before = ours(target)
    end = len(good.rstrip(b"\r\n").rstrip(b"Z"))
    data_at = physical(portable(HAND_RECORDS, b"").index(b"FZ"))
    # Cut anywhere before the end mark: an error naming the byte (and,
    # inside the data, the record and variable); the dataset untouched.
    for cut in sorted(set(range(0, end, 37)) | {end - 1, data_at, data_at + 1, data_at + 2}):
        f = tmp_path / "bad.por"
        f.write_bytes(good[:cut])
        p = run("import", f, target, "--force", ok=False, timeout=30)
        msg = p.stderr.strip()
        assert p.returncode == 1 and "panicked" not in msg and re.search(r"byte \d+", msg), (cut, msg)
        assert "truncated" in msg or "not an SPSS portable file" in msg, (cut, msg)
        if cut > data_at:
            assert re.search(r"record \d+", msg), (cut, msg)
        assert ours(target) == before, cut
    # Cut inside the padding after the end mark: whole.
    f = tmp_path / "cut.por"
    f.write_bytes(good[:end + 3])
    run("import", f, tmp_path / "c.mtab")
    assert ours(tmp_path / "c.mtab") == before

    sig = good.index(b"SPSSPORT")
    records = HAND_RECORDS
    bad_b = b"1/1?F/" + HAND_DATA[len(row(1, 1.5)):]
    cases = {
        "signature": (good[:sig] + b"SPSSPORX" + good[sig + 8:], "not an SPSS portable file"),
        "bad number in the dictionary": (portable(b"4?/" + records[3:], HAND_DATA),
                                         "the variable count is not a base-30 number ending in /"),
        "huge count": (portable(b"4TTTTTT/" + records[3:], HAND_DATA), "the variable count is 728999999, more than"),
        "tag out of place": (portable(b"C1/x" + records, HAND_DATA),
                             "a record of tag C (a variable label) comes before any variable"),
        "unknown tag": (portable(records[:3] + b"G" + records[3:], HAND_DATA), "expected a record tag"),
        "too few variables": (portable(b"46/" + records[3:], HAND_DATA), "the data begin after 5 variables of the 6"),
        "bad number in the data": (portable(records, bad_b), "record 1, variable B: expected a number"),
        "huge text length": (portable(records, HAND_DATA.replace(b"6/a b", b"TTTTT/a b", 1)),
                             "record 1, variable S: the file ends inside the record"),
        "end inside a record": (portable(records, row(1)), "record 1, variable B: the data end (Z) inside the record"),
        "text length missing": (portable(records, HAND_DATA.replace(b"6/a b", b"*.a b", 1)),
                                "record 1, variable S: a text said to be missing"),
        "value labels of no variable": (portable(records + labels(["Q"], [(1, "x")]), HAND_DATA),
                                        'value labels name the variable "Q"'),
        "value labels of a number and a text": (portable(records + labels(["A", "S"], [(1, "x")]), HAND_DATA),
                                                "value labels name the numeric variable A and the string variable S"),
        "four missing values": (portable(records.replace(b"C5/first", b"81/81/81/C5/first", 1), HAND_DATA),
                                "variable A has more missing values than SPSS allows"),
    }
    for what, (data, needle) in cases.items():
        msg = error_of(tmp_path, data)
        assert needle in msg and re.search(r"byte \d+", msg), (what, msg)
    # The error names the byte where the field starts.
    data = portable(records, bad_b)
    at = physical(data.replace(b"\r\n", b"").index(b"F1/1?F/") + 3)
    assert f"byte {at}:" in error_of(tmp_path, data)


def test_mutated_files_are_read_or_refused_never_crash(tmp_path):
    rng = np.random.default_rng(30)
    files = [(FIX / "sample.por").read_bytes(), portable(HAND_RECORDS, HAND_DATA)]
    for good in files:
        for k in range(100):
            m = tmp_path / "m.por"
            m.write_bytes(mutated(good, rng, k))
            out = tmp_path / "m.mtab"
            p = run("import", m, out, "--force", ok=None, timeout=30)
            assert p.returncode in (0, 1), (k, p.returncode, p.stderr)
            assert "panicked" not in p.stderr, (k, p.stderr)
            if p.returncode == 1:
                assert p.stderr.startswith("error:") and len(p.stderr.strip().splitlines()) == 1, (k, p.stderr)
                assert not out.exists(), k
            shutil.rmtree(out, ignore_errors=True)
