"""Setup files whose records span several lines (card images: SPSS
`RECORDS=`, SAS `#n` and `/`, Stata `_line()` and `n lines`) or come in
several types (SPSS `FILE TYPE MIXED`, SAS `IF RECTYPE = 'P' THEN DO;
INPUT …`, the `infix … drop if rectype != "P"` do-files IPUMS writes).

Oracles: GNU PSPP runs the SPSS syntax (read back by pyreadstat); PSPP has
no FILE TYPE, so the hierarchical oracle is PSPP reading every layout from
every line, the rows and the household's values chosen by pandas. The
hierarchical setups are those IPUMS's own generator writes (its test
fixtures, tests/fixtures/setup)."""

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pyreadstat
import pytest

from conftest import REPO, run, run_json

FIX = REPO / "tests" / "fixtures" / "setup"
DAT = FIX / "xx9999a.dat"


def records(ds, names=None):
    if names is None:
        names = [v["name"] for v in run_json("info", ds)["variables"]]
    return pd.DataFrame(run_json("list", ds, *names, "--all")["records"])


def variables(ds):
    return {v["name"]: v for v in run_json("info", ds)["variables"]}


def pspp(tmp_path, syntax, name="out"):
    """Runs `syntax` in PSPP, saving a .sav; its data and metadata."""
    out = tmp_path / f"{name}.sav"
    s = tmp_path / f"{name}.sps"
    s.write_text("SET MXWARNS=1000000.\n" + syntax + f"\nSAVE OUTFILE='{out}'.\n", encoding="utf-8")
    p = subprocess.run(["pspp", "-b", str(s)], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert out.exists(), p.stdout
    return pyreadstat.read_sav(str(out))


def same(got: pd.Series, want: pd.Series, name):
    """Values equal, missing where missing (text: empty is missing)."""
    assert len(got) == len(want), name
    if not pd.api.types.is_numeric_dtype(want):
        w = want.fillna("").astype(str).str.rstrip()
        g = got.fillna("").astype(str)
        bad = np.flatnonzero(w.values != g.values)
    else:
        w = want.astype(float).values
        g = pd.to_numeric(got, errors="coerce").astype(float).values
        bad = np.flatnonzero(~((np.isnan(w) & np.isnan(g)) | np.isclose(w, g, rtol=0, atol=1e-9)))
    assert len(bad) == 0, (name, bad[:5], list(g[bad[:5]]) if len(bad) else None, list(w[bad[:5]]) if len(bad) else None)


# ------------------------------------------------ records of several types


def layouts():
    """The per-type DATA LIST bodies of IPUMS's hierarchical .sps, and the
    label commands after END FILE TYPE."""
    t = (FIX / "_hier_xx9999a.sps").read_text()
    body = {rt: re.search(r'record type "%s"\.\s*data list /(.*?)\n\.' % rt, t, re.S).group(1).strip()
            for rt in "HP"}
    names = {rt: [ln.split()[0] for ln in b.splitlines()] for rt, b in body.items()}
    return body, names, t[t.index("end file type.") + len("end file type."):]


@pytest.fixture(scope="module")
def oracle(tmp_path_factory):
    """PSPP reads every variable of both layouts from every line (the
    columns overlap); pandas keeps each type's own variables."""
    tmp = tmp_path_factory.mktemp("hier")
    body, names, labels = layouts()
    extra = [ln for ln in body["P"].splitlines() if ln.split()[0] not in names["H"]]
    syntax = f"DATA LIST FILE='{DAT}' /\n {body['H']}\n" + "\n".join(extra) + f".\n{labels}"
    df, meta = pspp(tmp, syntax)
    h_only = [n for n in names["H"] if n not in names["P"]]
    is_h = df.RECTYPE == "H"
    person = df.copy()
    person[h_only] = df[h_only].where(is_h).ffill()
    person = person[~is_h].reset_index(drop=True)
    house = df[is_h].reset_index(drop=True)[names["H"]]
    p_cols = [n for n in df.columns if n in names["P"] or n in h_only]
    return person[p_cols], house, meta, names


@pytest.mark.parametrize("lang", ["sps", "sas", "do"])
def test_ipums_hierarchical_setups_rows_are_persons_with_their_household(tmp_path, oracle, lang):
    person, house, meta, names = oracle
    setup = FIX / f"_hier_xx9999a.{lang}"
    ds = tmp_path / "p.mtab"
    p = run("import", DAT, "--setup", setup, "--keep-niu", ds)
    assert "records of types H, P: each row is a record of type P" in p.stderr
    # BIGDEC's 'B's: missing, as the packages (and PSPP) read them.
    assert re.search(r"(?i)bigdec: 1244 values that are not a number \(the first on line 3", p.stderr)
    got = records(ds)
    got.columns = [c.upper() for c in got.columns]
    assert len(got) == len(person) == 1777
    assert set(got.columns) - {"RECORD"} == set(person.columns)
    for c in person.columns:
        same(got[c], person[c], (lang, c))
    v = {k.upper(): x for k, x in variables(ds).items()}
    for c in person.columns:
        # (IPUMS cuts a long label at each package's own limit.)
        mine, want = v[c].get("label"), meta.column_names_to_labels[c]
        assert mine == want or (lang != "sps" and len(mine) >= 80 and (
            mine.startswith(want) or want.startswith(mine))), (lang, c)
    for c, labs in meta.variable_value_labels.items():
        # (Stata labels no text: the do-file has no RECTYPE labels.)
        if c not in person.columns or c == "RENT" or (lang == "do" and c == "RECTYPE"):
            continue
        mine = {float(k) if c != "RECTYPE" else k: x for k, x in (v[c].get("value_labels") or {}).items()}
        want = {(float(k) if c != "RECTYPE" else k): x for k, x in labs.items()}
        assert mine.keys() == want.keys(), (lang, c)
        for k in want:
            assert mine[k] == want[k] or (lang != "sps" and len(mine[k]) >= 80 and (
                mine[k].startswith(want[k]) or want[k].startswith(mine[k]))), (lang, c, k)
    # --rectype H: a row per household record, its own variables only.
    hh = tmp_path / "h.mtab"
    run("import", DAT, "--setup", setup, "--keep-niu", "--rectype", "H", hh)
    got = records(hh)
    got.columns = [c.upper() for c in got.columns]
    assert [c.upper() for c in variables(hh)] == names["H"]
    for c in names["H"]:
        same(got[c], house[c], (lang, "H", c))


def test_record_types_errors_and_options(tmp_path):
    data = tmp_path / "t.dat"
    data.write_text("H01 5\nP01 37\nP01 41\nX01 9\n")
    s = tmp_path / "t.sps"
    s.write_text("FILE TYPE MIXED RECORD=RT 1-1 (A).\nRECORD TYPE 'H'.\nDATA LIST / SERIAL 2-3 SIZE 5.\n"
                 "RECORD TYPE 'P'.\nDATA LIST / SERIAL 2-3 AGE 5-6.\nEND FILE TYPE.\n")
    ds = tmp_path / "t.mtab"
    p = run("import", data, "--setup", s, ds, ok=False)
    # A type the setup does not name is an error naming the line.
    assert p.returncode == 1 and 'record 4: record type "X" (variable RT)' in p.stderr, p.stderr
    assert not ds.exists()
    data.write_text("H01 5\nP01 37\nP01 41\nH02 1\nP02 80\n")
    run("import", data, "--setup", s, ds)
    got = records(ds)
    assert got[["RT", "SERIAL", "SIZE", "AGE"]].values.tolist() == [
        ["P", 1, 5, 37], ["P", 1, 5, 41], ["P", 2, 1, 80]]
    # A person before any household: an error naming its line.
    data.write_text("P01 37\nH01 5\n")
    p = run("import", data, "--setup", s, tmp_path / "o.mtab", ok=False)
    assert "record 1" in p.stderr and "comes before any record of type" in p.stderr, p.stderr
    # One variable in two places, RECORD TYPE outside FILE TYPE, GROUPED.
    bad = {
        "a.sps": ("FILE TYPE MIXED /RECORD=RT 1-1 (A).\nRECORD TYPE 'H'.\nDATA LIST / SERIAL 2-3.\n"
                  "RECORD TYPE 'P'.\nDATA LIST / SERIAL 2-4.\nEND FILE TYPE.\n", "one place in every record type"),
        "b.sps": ("RECORD TYPE 'H'.\nDATA LIST / A 2-3.\n", "outside FILE TYPE"),
        "c.sps": ("FILE TYPE GROUPED /RECORD=RT 1 /CASE=ID 2-3.\n", "GROUPED"),
        "d.sas": ("DATA x; INFILE 'd'; INPUT T $ 1 @; IF T = 'H' THEN DO; INPUT A 2-3; END;"
                  " ELSE IF T = 'P' THEN DO; INPUT A 2-4; END; RUN;", "one place in every record type"),
        "e.do": ('infix str rt 1 a 2-3 using t.dat\ndrop if rt != "H"\ninfix str rt 1 b 2-3 using t.dat\n'
                 'drop if rt != "P"\ninfix str rt 1 c 2-3 using t.dat\n', "line 5: this infix reads records of every type"),
        # Formats whose numbers would be read wrong are refused.
        "f.sas": ("DATA x; INFILE 'd'; INPUT @1 A BZ4.; RUN;", "BZ4.: blanks read as zeros"),
        "g.sps": ("DATA LIST / A 1-5 (Z).\n", "zoned decimal"),
    }
    for name, (text, needle) in bad.items():
        f = tmp_path / name
        f.write_text(text)
        out = tmp_path / f"{name}.mtab"
        p = run("import", data, "--setup", f, out, ok=False)
        assert p.returncode == 1 and needle in p.stderr and name in p.stderr, (name, p.stderr)
        assert not out.exists()


# ------------------------------------------------ records of several lines


def cards(tmp_path, n=3000, seed=5):
    """Three lines a record: ID, SEX and AGE on the first; INC (2 implied
    decimals) on the second; NAME on the third (sometimes an empty line)."""
    rng = np.random.default_rng(seed)
    lines = []
    for i in range(n):
        inc = rng.integers(-9999, 999999)
        name = rng.choice(["Anna", "Bob", "", "Zed  x"])
        lines += [f"{i + 1:05d}{rng.integers(1, 3)} {rng.integers(0, 99):2d}   trailing text",
                  f"{inc:7d}" if rng.random() > 0.05 else "",
                  name]
    data = tmp_path / "cards.dat"
    data.write_text("\n".join(lines) + "\n")
    return data


SPS = """DATA LIST FILE='cards.dat' RECORDS=3
 /1 ID 1-5 SEX 6 AGE 8-9
 /2 INC 1-7 (2)
 /3 NAME 1-8 (A).
VARIABLE LABELS INC 'Income'.
VALUE LABELS SEX 1 'Male' 2 'Female'.
"""
SAS = """DATA cards; INFILE 'cards.dat' PAD MISSOVER;
INPUT #1 ID 1-5 SEX 6 AGE 8-9 #2 INC 1-7 .2 / NAME $ 1-8;
LABEL INC = 'Income';
RUN;
"""
DCT = """infix dictionary using cards.dat {
3 lines
1: id 1-5 sex 6 age 8-9
2: inc 1-7
3: str name 1-8
}
"""
INFILE_DCT = """infile dictionary using cards.dat {
_lines(3)
_line(1) long id %5f byte sex %1f _column(8) byte age %2f
_line(2) double inc %7.2f "Income"
_line(3) str8 name %8s
}
"""


@pytest.mark.parametrize("lang", ["sps", "sas", "dct", "infile"])
def test_records_of_several_lines_match_pspp(tmp_path, lang):
    data = cards(tmp_path)
    (tmp_path / "p").mkdir()
    shutil.copy(data, tmp_path / "p" / data.name)
    want, _ = pspp(tmp_path / "p", SPS)
    text = {"sps": SPS, "sas": SAS, "dct": DCT, "infile": INFILE_DCT}[lang]
    setup = tmp_path / f"cards.{'dct' if lang == 'infile' else lang}"
    setup.write_text(text)
    ds = tmp_path / "c.mtab"
    run("import", data, "--setup", setup, ds)
    got = records(ds)
    got.columns = [c.upper() for c in got.columns]
    assert len(got) == len(want) == 3000
    for c in want.columns:
        w = want[c]
        if c == "INC" and lang == "dct":
            w = w * 100  # infix reads the digits; no implied decimals
        same(got[c], w, (lang, c))
    if lang != "dct":
        assert variables(ds)["INC" if lang in ("sps", "sas") else "inc"].get("label") == "Income"


def test_several_lines_errors(tmp_path):
    s = tmp_path / "c.sps"
    s.write_text(SPS)
    # The file ends within a record: an error naming its first line.
    data = tmp_path / "short.dat"
    data.write_text("000011 20\n   100\nAnna\n000022 30\n")
    p = run("import", data, "--setup", s, tmp_path / "a.mtab", ok=False)
    assert "short.dat: line 4: the file ends after line 1 of a record of 3 lines" in p.stderr, p.stderr
    assert not (tmp_path / "a.mtab").exists()
    # Blank lines closing the file are not a record.
    data.write_text("000011 20\n   100\nAnna\n\n\n")
    run("import", data, "--setup", s, tmp_path / "b.mtab")
    assert len(records(tmp_path / "b.mtab")) == 1
    # A non-number is missing, as the packages read it, noted with its
    # own line.
    data.write_text("000011 20\n   100\nAnna\n000022 30\n  12x45\nBob\n")
    got = run("import", data, "--setup", s, tmp_path / "c.mtab")
    assert 'INC: 1 value that is not a number (the first on line 5: "12x45")' in got.stderr, got.stderr
    assert pd.isna(records(tmp_path / "c.mtab")["INC"].tolist()[1])
    # Records of several types, each of several lines, are refused.
    s2 = tmp_path / "m.sps"
    s2.write_text("FILE TYPE MIXED /RECORD=RT 1 (A).\nRECORD TYPE 'H'.\nDATA LIST RECORDS=2 /1 A 2-3 /2 B 1-2.\nEND FILE TYPE.\n")
    p = run("import", data, "--setup", s2, tmp_path / "m.mtab", ok=False)
    assert "records of several types" in p.stderr and "m.sps" in p.stderr, p.stderr


def test_grouped_numbers_match_pspp_and_sas_pointers(tmp_path):
    """SPSS (COMMA), (DOLLAR) and (DOT) formats read as PSPP reads them;
    SAS COMMA, DOLLAR and COMMAX informats the same numbers; INFILE N=4
    makes records of four lines for #1/#3 pointers."""
    rows = [("1,234.5", "$12,000", "1.234,5"), ("-1,000.25", "$1,0", "12,5"), ("12.5", "99", "7")]
    data = tmp_path / "g.dat"
    data.write_text("".join(f"{a:>11}{b:>9}{c:>9}\n" for a, b, c in rows))
    sps = "DATA LIST FILE='g.dat' /A 1-11 (COMMA) B 12-20 (DOLLAR) C 21-29 (DOT).\n"
    (tmp_path / "p").mkdir()
    shutil.copy(data, tmp_path / "p" / data.name)
    want, _ = pspp(tmp_path / "p", sps)
    assert want.A.tolist() == [1234.5, -1000.25, 12.5]  # the oracle reads them
    for name, text in {"g.sps": sps,
                       "g.sas": "DATA g; INFILE 'g.dat'; INPUT @1 A COMMA11. @12 B DOLLAR9. @21 C COMMAX9.; RUN;"}.items():
        (tmp_path / name).write_text(text)
        ds = tmp_path / f"{name}.mtab"
        p = run("import", data, "--setup", tmp_path / name, ds)
        assert "not a number" not in p.stderr, p.stderr
        got = records(ds)
        for c in "ABC":
            same(got[c], want[c], (name, c))
    # INFILE N=4: #1 and #3 of records of four lines.
    data = tmp_path / "n.dat"
    data.write_text("".join(f"{i}1\n{i}2\n{i}3\n{i}4\n" for i in range(1, 4)))
    (tmp_path / "n.sas").write_text("DATA n; INFILE 'n.dat' N=4; INPUT #1 A 1-2 #3 B 1-2; RUN;")
    run("import", data, "--setup", tmp_path / "n.sas", tmp_path / "n.mtab")
    got = records(tmp_path / "n.mtab")
    assert got[["A", "B"]].values.tolist() == [[11, 13], [21, 23], [31, 33]]
    # A line pointer past 10000 is an error at once, not an allocation.
    (tmp_path / "h.sps").write_text("DATA LIST FILE='n.dat' /2000000000 A 1-2.\n")
    p = run("import", data, "--setup", tmp_path / "h.sps", tmp_path / "h.mtab", ok=False, timeout=30)
    assert "at most 10000" in p.stderr and "h.sps" in p.stderr, p.stderr
