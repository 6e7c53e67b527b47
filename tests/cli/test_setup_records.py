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
    p = run("import", data, "--setup", s, ds)
    # A type the setup gives no layout for is skipped (SPSS's FILE TYPE
    # default, WILD=NOWARN), with a note naming its line.
    assert "1 record of types the setup gives no layout for was skipped (the first on line 4, of type X" in p.stderr, p.stderr
    assert records(ds)[["RT", "SERIAL", "SIZE", "AGE"]].values.tolist() == [["P", 1, 5, 37], ["P", 1, 5, 41]]
    # With a DDI codebook it is an error naming its line (test_ipums.py).
    data.write_text("H01 5\nP01 37\nP01 41\nH02 1\nP02 80\n")
    run("import", data, "--setup", s, ds, "--force")
    got = records(ds)
    assert got[["RT", "SERIAL", "SIZE", "AGE"]].values.tolist() == [
        ["P", 1, 5, 37], ["P", 1, 5, 41], ["P", 2, 1, 80]]
    # A person before any household: an error naming its line.
    data.write_text("P01 37\nH01 5\n")
    p = run("import", data, "--setup", s, tmp_path / "o.mtab", ok=False)
    assert "line 1" in p.stderr and "comes before any record of type" in p.stderr, p.stderr
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


# ------------------------------------------ the everyday forms of record types


def family_file(tmp_path, n=400, seed=11):
    """Households (type 1), families (2) and persons (3), the type written
    zero-padded or blank-padded in columns 1-2 (`01`, ` 2`, `3 `), some
    households without persons, a blank line now and then, and a few
    records of a type no setup reads (9). The truth: a row per person
    with its household's serial and income (hand-built)."""
    rng = np.random.default_rng(seed)
    pad = lambda t: rng.choice([f"0{t}", f" {t}", f"{t} "])
    lines, truth = [], []
    for h in range(1, n + 1):
        hinc = int(rng.integers(0, 99))
        lines.append(f"{pad(1)}{h:04d} {hinc:2d}")
        if rng.random() < 0.05:
            lines.append(rng.choice(["", "      "]))
        if rng.random() < 0.03:
            lines.append(f"{pad(9)}{h:04d} zz")
        for f in range(int(rng.integers(0, 3))):
            lines.append(f"{pad(2)}{h:04d} {f + 1} {int(rng.integers(0, 999)):3d}")
            for p in range(int(rng.integers(0, 4))):
                age = int(rng.integers(0, 99))
                lines.append(f"{pad(3)}{h:04d} {f + 1} {p + 1} {age:2d}")
                truth.append([3, h, hinc, p + 1, age])
    data = tmp_path / "fam.dat"
    data.write_text("\n".join(lines) + "\n")
    want = pd.DataFrame(truth, columns=["RT", "SERIAL", "HINC", "PNO", "AGE"])
    return data, want, sum(1 for l in lines if l[:2].strip().lstrip("0") == "9")


FAMILY = {
    # NBER's CPS March programs: the person block alone outputs.
    "nber.sas": """DATA cps; INFILE 'fam.dat';
INPUT @1 RT 2. @;
IF RT = 1 THEN DO; INPUT @3 SERIAL 4. @8 HINC 2.; END;
ELSE IF RT = 2 THEN DO; INPUT @3 SERIAL 4. @8 FNO 1. @10 FINC 3.; END;
ELSE IF RT = 3 THEN DO; INPUT @3 SERIAL 4. @8 FNO 1. @10 PNO 1. @12 AGE 2.; OUTPUT; END;
RUN;""",
    "select.sas": """DATA cps; INFILE 'fam.dat';
INPUT RT 1-2 @;
SELECT (RT);
  WHEN (1) DO; INPUT SERIAL 3-6 HINC 8-9; END;
  WHEN (3) DO; INPUT SERIAL 3-6 PNO 10 AGE 12-13; OUTPUT; END;
  OTHERWISE DELETE;
END;
RUN;""",
    "numeric.sps": """FILE TYPE NESTED FILE='fam.dat' RECORD=RT 1-2.
RECORD TYPE 1.
DATA LIST / SERIAL 3-6 HINC 8-9.
RECORD TYPE 3.
DATA LIST / SERIAL 3-6 PNO 10 AGE 12-13.
END FILE TYPE.
""",
    "byte.do": """infix byte RT 1-2 int SERIAL 3-6 byte HINC 8-9 using fam.dat
drop if RT != 1
infix byte RT 1-2 int SERIAL 3-6 byte PNO 10 byte AGE 12-13 using fam.dat
drop if RT != 3
""",
}


@pytest.mark.parametrize("name", sorted(FAMILY))
def test_numeric_record_types_padded_and_unread_types(tmp_path, name):
    """A numeric type variable is compared as a number (`01`, ` 1` and `1 `
    are type 1, as SAS, SPSS and Stata read it); records of types the
    setup reads no layout for (families here, and type 9) are skipped with a
    note; blank lines are no records. NBER's form picks the type its
    program outputs."""
    data, want, nines = family_file(tmp_path)
    s = tmp_path / name
    s.write_text(FAMILY[name])
    ds = tmp_path / "o.mtab"
    p = run("import", data, "--setup", s, ds, "--rectype", "3") if name != "nber.sas" else run(
        "import", data, "--setup", s, ds)
    got = records(ds, list(want.columns))[list(want.columns)]
    pd.testing.assert_frame_equal(got.astype("int64"), want, check_dtype=False)
    if name == "nber.sas":
        # The family type's variables are named as not imported.
        assert "not imported: FINC" in p.stderr, p.stderr
        assert "the person records (type 3) become the rows" in p.stderr, p.stderr
    else:
        fams = sum(1 for l in data.read_text().splitlines() if l[:2].strip().lstrip("0") == "2")
        assert f"{fams + nines} records of types the setup gives no layout for were skipped" in p.stderr, p.stderr
    # The households: --rectype 01 is type 1 too.
    run("import", data, "--setup", s, tmp_path / "h.mtab", "--rectype", "01")
    h = records(tmp_path / "h.mtab", ["SERIAL", "HINC"])[["SERIAL", "HINC"]]
    assert h["SERIAL"].tolist() == list(range(1, 401))


def test_several_codes_one_type_and_single_type_programs(tmp_path):
    """`RECORD TYPE 'A', 'B'` (SPSS) and `IN ('A', 'B')` / `OR` (SAS) are one
    type with one layout; `RECORD TYPE OTHER` and types no program reads
    are skipped; a program reading one type (`OUTPUT` in its block, a
    subsetting IF, `THEN DELETE`, Stata's lone `drop if`) imports that
    type's records. Hand-built truth."""
    data = tmp_path / "hy.dat"
    data.write_text("001 12   H\n001 1 34 A\n001 2 35 B\n002 55   H\n002 1 40 B\nzzzzzzzzzZ\n002 2 41 A\n")
    persons = [["A", 1, 12, 1, 34], ["B", 1, 12, 2, 35], ["B", 2, 55, 1, 40], ["A", 2, 55, 2, 41]]
    h = "IF RT = 'H' THEN DO; INPUT SERIAL 1-3 HINC 5-6; END;\n"
    person = "INPUT SERIAL 1-3 PNO 5 AGE 7-8;"
    setups = {
        "two.sps": ("FILE TYPE MIXED FILE='hy.dat' RECORD=RT 10 (A).\nRECORD TYPE 'H'.\nDATA LIST /SERIAL 1-3 HINC 5-6.\n"
                    "RECORD TYPE 'A', 'B'.\nDATA LIST /SERIAL 1-3 PNO 5 AGE 7-8.\nRECORD TYPE OTHER.\nEND FILE TYPE.\n", persons),
        "in.sas": (f"DATA x; INFILE 'hy.dat'; INPUT RT $ 10 @;\n{h}ELSE IF RT IN ('A', 'B') THEN DO; {person} OUTPUT; END;\nRUN;", persons),
        "or.sas": (f"DATA x; INFILE 'hy.dat'; INPUT RT $ 10 @;\n{h}ELSE IF RT = 'A' OR RT = 'B' THEN DO; {person} OUTPUT; END;\nRUN;", persons),
    }
    only_a = [["A", 1, 34], ["A", 2, 41]]
    singles = {
        "output.sas": f"DATA x; INFILE 'hy.dat'; INPUT RT $ 10 @;\nIF RT = 'A' THEN DO; {person} OUTPUT; END;\nRUN;",
        "subset.sas": f"DATA x; INFILE 'hy.dat'; INPUT RT $ 10 @;\nIF RT = 'A';\n{person}\nRUN;",
        "delete.sas": f"DATA x; INFILE 'hy.dat'; INPUT RT $ 10 @;\nIF RT NE 'A' THEN DELETE;\n{person}\nRUN;",
        "drop.do": 'infix str RT 10 int SERIAL 1-3 byte PNO 5 byte AGE 7-8 using hy.dat\ndrop if RT != "A"\n',
    }
    for name, (text, want) in setups.items():
        s = tmp_path / name
        s.write_text(text)
        ds = tmp_path / f"{name}.mtab"
        p = run("import", data, "--setup", s, ds, "--rectype", "A")
        cols = ["RT", "SERIAL", "HINC", "PNO", "AGE"]
        assert records(ds, cols)[cols].values.tolist() == want, name
        assert "1 record of types the setup gives no layout for was skipped (the first on line 6, of type Z" in p.stderr, (name, p.stderr)
        # --rectype B names the same type.
        run("import", data, "--setup", s, tmp_path / "b.mtab", "--rectype", "B", "--force")
        assert len(records(tmp_path / "b.mtab", ["RT"])) == 4
    for name, text in singles.items():
        s = tmp_path / name
        s.write_text(text)
        ds = tmp_path / f"{name}.mtab"
        p = run("import", data, "--setup", s, ds)
        assert records(ds, ["RT", "SERIAL", "AGE"])[["RT", "SERIAL", "AGE"]].values.tolist() == only_a, name
        assert "5 records of types the setup gives no layout for were skipped" in p.stderr, (name, p.stderr)
    # A plain ELSE (every other type) is refused, naming the line.
    s = tmp_path / "else.sas"
    s.write_text(f"DATA x; INFILE 'hy.dat'; INPUT RT $ 10 @;\n{h}ELSE DO; {person} OUTPUT; END;\nRUN;")
    p = run("import", data, "--setup", s, tmp_path / "e.mtab", ok=False)
    assert "else.sas: line 3: ELSE reads the records of every type not tested before" in p.stderr, p.stderr
    # A subsetting IF on an ordinary variable (no held line) is not a type.
    s = tmp_path / "plain.sas"
    s.write_text("DATA x; INFILE 'hy.dat'; INPUT SERIAL 1-3 RT $ 10;\nIF RT = 'A';\nRUN;")
    p = run("import", data, "--setup", s, tmp_path / "p.mtab")
    assert len(records(tmp_path / "p.mtab", ["SERIAL"])) == 7 and "IF … is not run" in p.stderr, p.stderr


def test_records_past_records_is_an_error_as_pspp(tmp_path):
    """`RECORDS=2` with a field on `/3`: PSPP refuses it, and so does the
    import (it would misalign every record after the first)."""
    data = tmp_path / "r.dat"
    data.write_text("01\nxx\n 5\n02\nyy\n 6\n")
    syntax = "DATA LIST FILE='{}' RECORDS=2 /1 id 1-2 /3 x 1-3.\n"
    s = tmp_path / "r.sps"
    s.write_text(syntax.format("r.dat"))
    p = run("import", data, "--setup", s, tmp_path / "r.mtab", ok=False)
    assert "r.sps: line 1: x is on line 3 of a record, but RECORDS=2" in p.stderr, p.stderr
    assert not (tmp_path / "r.mtab").exists()
    if shutil.which("pspp"):
        sps = tmp_path / "pspp.sps"
        sps.write_text(syntax.format(data) + "LIST.\n")
        out = subprocess.run(["pspp", "-b", str(sps)], capture_output=True, text=True, cwd=tmp_path)
        assert "Cannot place variable x on record 3 when RECORDS=2" in out.stdout + out.stderr


def test_hcup_user_informats(tmp_path):
    """AHRQ HCUP load programs read with informats of their own (`INVALUE
    N3PF '-99' = . '-88' = .A OTHER = (|3.|)`): the width and decimals
    come from OTHER, and the codes read as missing become missing codes.
    Hand-computed."""
    data = tmp_path / "core.asc"
    data.write_text(" 45123.45         1\n-99-99.99         2\n-88 12345         3\n  7-88.88         4\n")
    s = tmp_path / "core.sas"
    s.write_text("""PROC FORMAT;
  INVALUE N3PF
    '-99' = .
    '-88' = .A
    '-66' = .C
    OTHER = (|3.|)
  ;
  INVALUE N6P2F '-99.99' = . '-88.88' = .A '-66.66' = .C OTHER = (|6.2|) ;
  RUN;
DATA core;
INFILE 'core.asc' LRECL = 30;
INPUT
  @1  AGE   N3PF.
  @4  CHG   N6P2F.
  @10 KEY   14.
;
RUN;
""")
    ds = tmp_path / "core.mtab"
    run("import", data, "--setup", s, ds)
    v = variables(ds)
    assert v["AGE"]["missing_codes"] == [-99, -88, -66], v["AGE"]
    assert v["CHG"]["missing_codes"] == [-99.99, -88.88, -66.66], v["CHG"]
    got = records(ds, ["AGE", "CHG", "KEY"])[["AGE", "CHG", "KEY"]]
    assert got["KEY"].tolist() == [1, 2, 3, 4]
    assert got["CHG"].tolist()[::2] == [123.45, 123.45]
    # Tabulated, the codes are missing: one valid AGE of each 45 and 7.
    freq = run_json("freq", ds, "AGE")
    assert [(r["value"], r["count"]) for r in freq["rows"]] == [(7, 1), (45, 1)], freq
    # An informat the program does not define is an error naming it.
    s.write_text("DATA x; INFILE 'core.asc'; INPUT @1 AGE N3QF.; RUN;")
    p = run("import", data, "--setup", s, tmp_path / "x.mtab", ok=False)
    assert "line 1: AGE is read with N3QF., an informat that is neither SAS's own nor one the program defines" in p.stderr, p.stderr
