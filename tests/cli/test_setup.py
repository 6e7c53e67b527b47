"""`microtab import DATA --setup FILE OUT`: text data described by Stata
dictionaries and do-files, SPSS syntax and SAS programs.

Oracles: GNU PSPP runs the SPSS syntax itself (its .sav read back by
pyreadstat); IPUMS-layout setups generated from the shared extracts' DDI
codebooks must give what the DDI import gives (itself checked against
ipumspy); pandas.read_fwf reads the same columns for the Stata and SAS
setups, with hand-written expectations for labels and missing codes; and
the setups `microtab subset` writes must bring back the dataset they came
from."""

import gzip
import math
import random
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pandas as pd
import pyreadstat
import pytest

from conftest import assert_one_error, run, run_json

IPUMS = Path(__file__).resolve().parents[3] / "shared" / "data" / "ipums"


def records(ds, names=None):
    if names is None:
        names = [v["name"] for v in run_json("info", ds)["variables"]]
    return run_json("list", ds, *names, "--all")["records"]


def variables(ds):
    return {v["name"]: v for v in run_json("info", ds)["variables"]}


def labels(ds, var):
    return variables(ds)[var].get("value_labels") or {}


# ---------------------------------------------------------------- data


def people(tmp_path, n=5000, seed=3):
    """Fixed-width records: SEX(1) AGE(3-4) INC(5-12, 2 implied decimals)
    NAME(13-20, text with UTF-8) REGION(21-22) SCORE(23-27, explicit
    decimals)."""
    rng = np.random.default_rng(seed)
    sex = rng.choice([1, 2, 9], n)
    age = rng.integers(0, 100, n)
    inc = rng.integers(-99999, 9999999, n)
    names = rng.choice(["Anna", "Bob", "Cé", "Zoë", "", "O'Neil"], n)
    region = rng.choice([1, 2, 3, 98, 99], n)
    score = np.round(rng.uniform(-9, 99, n), 1)
    lines = []
    for i in range(n):
        name = names[i].encode("utf-8").ljust(8)[:8].decode("utf-8")
        lines.append(f"{sex[i]:1d} {age[i]:2d}{inc[i]:8d}{name}{region[i]:2d}{score[i]:5.1f}")
    data = tmp_path / "people.dat"
    data.write_text("\n".join(lines) + "\n", encoding="utf-8")
    want = pd.DataFrame({"SEX": sex, "AGE": age, "INC": inc / 100, "NAME": names,
                         "REGION": region, "SCORE": score})
    return data, want


SPS = """* SPSS setup for people.dat: a comment with an apostrophe, don't stop.
DATA LIST FILE='people.dat' FIXED RECORDS=1
  /1 SEX 1 AGE 3-4 INC 5-12 (2)
     NAME 13-20 (A) REGION 21-22
     SCORE 23-27 (1).
VARIABLE LABELS SEX 'Sex of person'
  /AGE "Age in years" + " at the interview"
  /INC 'Income (dollars)'.
VALUE LABELS SEX 1 'Male' 2 'Female' 9 "Not stated"
  /REGION 1 'North' 2 'South' 3 'West' 98 'Refused' 99 'Don''t know'
  /NAME 'Bob' 'Robert'.
ADD VALUE LABELS SEX 2 'Woman'.
MISSING VALUES SEX (9) /REGION (98 THRU HI) /INC (LO THRU -500).
EXECUTE.
"""


def pspp_sav(tmp_path, syntax, data):
    """Runs `syntax` in PSPP beside `data`, saving a .sav."""
    run_dir = tmp_path / "pspp"
    run_dir.mkdir(exist_ok=True)
    shutil.copy(data, run_dir / data.name)
    out = run_dir / "out.sav"
    (run_dir / "s.sps").write_text(syntax + f"\nSAVE OUTFILE='{out}'.\n", encoding="utf-8")
    subprocess.run(["pspp", "-b", "s.sps"], cwd=run_dir, check=True, capture_output=True, timeout=300)
    return pyreadstat.read_sav(str(out), user_missing=True)


# The same layout in the other ways SPSS syntax gives columns: GET DATA
# (columns from 0, a format per variable) and FORTRAN-like formats.
LABELS = SPS[SPS.index("VARIABLE LABELS"):]
GET_DATA = """GET DATA /TYPE=TXT /FILE='people.dat' /ENCODING='UTF8' /ARRANGEMENT=FIXED
  /VARIABLES= SEX 0-1 F1.0 AGE 2-3 F2.0 INC 4-11 F8.2 NAME 12-19 A8
  REGION 20-21 F2.0 SCORE 22-26 F5.1.
""" + LABELS
FORTRAN = """DATA LIST FILE='people.dat' NOTABLE
  /SEX (F1) AGE (1X, F2) INC (F8.2) NAME (A8) REGION SCORE (F2, F5.1).
""" + LABELS


@pytest.mark.parametrize("syntax", [SPS, GET_DATA, FORTRAN], ids=["data-list", "get-data", "fortran"])
def test_spss_data_list_matches_what_pspp_reads(tmp_path, syntax):
    data, want = people(tmp_path)
    sps = tmp_path / "people.sps"
    sps.write_text(syntax, encoding="utf-8")
    ds = tmp_path / "p.mtab"
    run("import", data, "--setup", sps, ds)
    got, meta = pspp_sav(tmp_path, syntax, data)
    ours = records(ds)
    assert len(ours) == len(got) == len(want)
    for i, r in enumerate(ours):
        for n in ["SEX", "AGE", "INC", "REGION", "SCORE"]:
            assert float(r[n]) == pytest.approx(float(got[n].iloc[i]), abs=1e-9), (n, i)
        g = got["NAME"].iloc[i].rstrip()
        assert (r["NAME"] or "") == g, (i, r["NAME"], g)
    info = variables(ds)
    for n, lab in meta.column_names_to_labels.items():
        assert info[n].get("label") == lab, n
    for n, vl in meta.variable_value_labels.items():
        ours_l = labels(ds, n)
        want_l = {(str(int(k)) if isinstance(k, float) else k): v for k, v in vl.items()}
        assert ours_l == want_l, n
    # Missing values: PSPP's (SEX 9; REGION 98 THRU HI; INC LO THRU -500)
    # are microtab's missing codes, ranges as the codes the data hold.
    assert meta.missing_ranges["SEX"] == [{"lo": 9.0, "hi": 9.0}]
    assert info["SEX"]["missing_codes"] == [9]
    assert sorted(info["REGION"]["missing_codes"]) == [98, 99]
    inc_codes = sorted(info["INC"]["missing_codes"])
    assert inc_codes == sorted(set(float(x) for x in got["INC"] if x <= -500))
    assert meta.missing_ranges["INC"][0]["hi"] == -500
    # A mean with those codes left out, against pandas on PSPP's values.
    m = run_json("means", ds, "AGE", "--by", "SEX")["total"]["mean"]
    keep = got["SEX"] != 9
    assert m == pytest.approx(got["AGE"][keep].mean(), rel=1e-12)


# ------------------------------------------------- IPUMS layouts vs DDI


def ddi_vars(xml):
    ns = {"d": "ddi:codebook:2_5"}
    root = ET.parse(xml).getroot()
    out = []
    for v in root.iter():
        if not v.tag.endswith("}var"):
            continue
        loc = next(x for x in v if x.tag.endswith("location"))
        fmt = next(x for x in v if x.tag.endswith("varFormat"))
        lab = next((x.text for x in v if x.tag.endswith("labl")), None)
        cats = []
        for c in v:
            if c.tag.endswith("catgry"):
                val = next(x.text for x in c if x.tag.endswith("catValu"))
                cl = next((x.text for x in c if x.tag.endswith("labl")), "") or ""
                cats.append((val, cl))
        out.append({
            "name": v.get("name"), "start": int(loc.get("StartPos")), "end": int(loc.get("EndPos")),
            "dec": int(v.get("dcml") or 0), "text": fmt.get("type") == "character",
            "label": lab, "cats": cats,
        })
    return out


def q(s):
    return '"' + s.replace('"', '""') + '"'


def ipums_sps(vs, dat):
    out = ["* NOTE: You need to edit the `cd` command to specify the path to the directory",
           '* where the data file is located. For example: "C:\\ipums_directory".', "* .", "",
           'cd ".".', "", f'data list file = "{dat}" /']
    for v in vs:
        fmt = " (a)" if v["text"] else (f" ({v['dec']})" if v["dec"] else "")
        out.append(f"  {v['name']:<10} {v['start']}-{v['end']}{fmt}")
    out += [".", "", "variable labels"]
    out += [f"  {v['name']:<10} {q(v['label'])}" for v in vs if v["label"]]
    out += [".", "", "value labels"]
    for v in vs:
        if v["cats"]:
            out.append(f"  /{v['name']}")
            for val, lab in v["cats"]:
                out.append(f"    {q(val) if v['text'] else val}   {q(lab)}")
    out += [".", "", "execute.", ""]
    return "\n".join(out)


def ipums_sas(vs, dat, member):
    out = ["/* NOTE: You need to edit the `libname` command to specify the path to the directory",
           'where the data file is located. For example: "C:\\ipums_directory".',
           "Edit the `filename` command similarly to include the full path (the directory and the data file name).",
           "*/", "", 'libname IPUMS ".";', f'filename ASCIIDAT "{dat}";', "",
           f"proc format cntlout = IPUMS.{member}_f;", ""]
    for v in vs:
        if v["cats"]:
            out.append(f"value {'$' if v['text'] else ''}{v['name']}_f")
            for val, lab in v["cats"]:
                out.append(f"  {q(val) if v['text'] else val} = {q(lab)}")
            out += [";", ""]
    out += ["run;", "", f"data IPUMS.{member};", "infile ASCIIDAT pad missover lrecl=200;", "", "input"]
    for v in vs:
        dollar = "$ " if v["text"] else "  "
        dec = f" .{v['dec']}" if v["dec"] else ""
        out.append(f"  {v['name']:<10} {dollar}{v['start']}-{v['end']}{dec}")
    out += [";", "", "label"]
    out += [f"  {v['name']:<10} = {q(v['label'])}" for v in vs if v["label"]]
    out += [";", "", "format"]
    for v in vs:
        if v["cats"]:
            out.append(f"  {v['name']:<10} {'$' if v['text'] else ''}{v['name']}_f.")
    out += [";", "", "format"]
    for v in vs:
        if v["dec"]:
            out.append(f"  {v['name']:<10} {v['end'] - v['start'] + 2}.{v['dec']}")
    out += [";", "", "run;", "", f"proc print data = IPUMS.{member} (obs = 10);", "run;", ""]
    return "\n".join(out)


def ipums_do(vs, dat):
    out = ["* NOTE: You need to set the Stata working directory to the path",
           "* where the data file is located.", "", "set more off", "", "clear",
           "quietly infix                ///"]
    for v in vs:
        w = v["end"] - v["start"] + 1
        ty = "str" if v["text"] else ("double" if v["dec"] or w > 9 else ("long" if w > 4 else ("int" if w > 2 else "byte")))
        out.append(f"  {ty:<7} {v['name'].lower():<10} {v['start']}-{v['end']}    ///")
    out += [f'  using `"{dat}"\'', ""]
    for v in vs:
        if v["dec"]:
            out.append(f"replace {v['name'].lower():<10} = {v['name'].lower():<10} / {10 ** v['dec']}")
    out.append("")
    for v in vs:
        if v["dec"]:
            out.append(f"format {v['name'].lower():<10} %{v['end'] - v['start'] + 2}.{v['dec']}f")
    out.append("")
    for v in vs:
        if v["label"]:
            out.append(f"label var {v['name'].lower():<10} `\"{v['label']}\"'")
    out.append("")
    for v in vs:
        if v["cats"] and not v["text"]:
            for k, (val, lab) in enumerate(v["cats"]):
                out.append(f"label define {v['name'].lower()}_lbl {int(val)} `\"{lab}\"'{', add' if k else ''}")
            out.append("")
    for v in vs:
        if v["cats"] and not v["text"]:
            out.append(f"label values {v['name'].lower()} {v['name'].lower()}_lbl")
    return "\n".join(out) + "\n"


@pytest.mark.parametrize("extract", ["cps_00006", "cps_00361"])
@pytest.mark.parametrize("lang", ["sps", "sas", "do"])
def test_ipums_setups_give_what_the_ddi_gives(tmp_path, extract, lang):
    xml = IPUMS / f"{extract}.xml"
    data = IPUMS / f"{extract}.dat.gz"
    vs = ddi_vars(xml)
    dat = f"{extract}.dat"
    text = {"sps": lambda: ipums_sps(vs, dat), "sas": lambda: ipums_sas(vs, dat, extract),
            "do": lambda: ipums_do(vs, dat)}[lang]()
    setup = tmp_path / f"{extract}.{lang}"
    setup.write_text(text, encoding="utf-8")
    by_ddi, by_setup = tmp_path / "ddi.mtab", tmp_path / "setup.mtab"
    run("import", data, by_ddi, "--ddi", xml, "--keep-niu")
    p = run("import", data, "--setup", setup, by_setup, "--keep-niu")
    assert "not run" not in p.stderr, p.stderr
    a, b = variables(by_ddi), variables(by_setup)
    names = [v["name"] for v in vs]
    # Stata's names are lower case.
    bname = {n: (n.lower() if lang == "do" else n) for n in names}
    assert sorted(b) == sorted(bname.values())
    for n in names:
        va, vb = a[n], b[bname[n]]
        assert vb.get("label") == va.get("label"), n
        assert vb["decimals"] == va["decimals"], n
        la, lb = labels(by_ddi, n), labels(by_setup, bname[n])
        assert lb == la, n
    ra = records(by_ddi, names)
    rb = records(by_setup, [bname[n] for n in names])
    assert len(ra) == len(rb) > 1000
    for x, y in zip(ra, rb):
        for n in names:
            assert x[n] == y[bname[n]], (n, x[n], y[bname[n]])


# ---------------------------------------------------- Stata dictionaries


def fwf(data, spec):
    """pandas.read_fwf over `spec`: [(name, start, end, kind)] with 1-based
    inclusive columns counted in bytes (as Stata, SPSS and SAS count them):
    read as Latin-1, each field then decoded as UTF-8."""
    df = pd.read_fwf(data, colspecs=[(a - 1, b) for _, a, b, _ in spec],
                     names=[n for n, *_ in spec], header=None,
                     dtype={n: str for n, *_ in spec}, encoding="latin-1", keep_default_na=False,
                     delimiter="\n")
    for n, *_ in spec:
        df[n] = [x.encode("latin-1").decode("utf-8") for x in df[n]]
    return df


PEOPLE = [("SEX", 1, 1, int), ("AGE", 3, 4, int), ("INC", 5, 12, int), ("NAME", 13, 20, str),
          ("REGION", 21, 22, int), ("SCORE", 23, 27, float)]


def check_people(ds, data, names, inc_scale=100):
    """Every value against pandas.read_fwf of the same columns."""
    df = fwf(data, PEOPLE)
    ours = records(ds, names)
    assert len(ours) == len(df)
    for (n, *_rest, kind), m in zip(PEOPLE, names):
        for i, r in enumerate(ours):
            raw = df[n].iloc[i].strip()
            if kind is str:
                assert (r[m] or "") == raw, (m, i)
            elif n == "INC":
                assert float(r[m]) == pytest.approx(int(raw) / inc_scale, abs=1e-9), (m, i)
            else:
                assert float(r[m]) == float(raw), (m, i)


def test_stata_infix_dictionary_and_do_file(tmp_path):
    data, _ = people(tmp_path, n=3000)
    dct = tmp_path / "people.dct"
    dct.write_text("""infix dictionary using people.dat {
* DHS-style: the line number before each field's columns
  1 lines
  byte sex     1: 1
  byte age     1: 3-4
  double inc   1: 5-12
  str8 name    1: 13-20
  byte region  21-22
  float score  23-27
}
""", encoding="utf-8")
    do = tmp_path / "people.do"
    do.write_text("""#delimit ;
* A comment ;
infix using "people.dct" ;
#delimit cr
replace inc = inc / 100
label variable sex "Sex of person"
lab var age `"Age "in years""'
label define sexlbl 1 "Male" 2 "Female" 9 "Not stated"
label define reglbl 1 "North" 2 "South" ///
   3 "West" 98 "Refused" 99 "Don't know"
label values sex sexlbl
label values region reglbl
replace sex = .a if sex == 9
mvdecode region, mv(98 99 = .b)
gen agesq = age^2
""", encoding="utf-8")
    ds = tmp_path / "s.mtab"
    p = run("import", data, "--setup", do, ds)
    assert "gen agesq" in p.stderr and "not run" in p.stderr
    check_people(ds, data, ["sex", "age", "inc", "name", "region", "score"])
    info = variables(ds)
    assert info["sex"]["label"] == "Sex of person"
    assert info["age"]["label"] == 'Age "in years"'
    assert info["inc"]["decimals"] == 2
    assert labels(ds, "sex") == {"1": "Male", "2": "Female", "9": "Not stated"}
    assert labels(ds, "region")["99"] == "Don't know"
    assert info["sex"]["missing_codes"] == [9]
    assert sorted(info["region"]["missing_codes"]) == [98, 99]
    # The same columns from the dictionary alone: no labels.
    ds2 = tmp_path / "d.mtab"
    run("import", data, "--setup", dct, ds2)
    check_people(ds2, data, ["sex", "age", "inc", "name", "region", "score"], inc_scale=1)


def test_stata_infile_dictionary_with_columns_formats_and_labels(tmp_path):
    data, _ = people(tmp_path, n=2000)
    dct = tmp_path / "p.dct"
    dct.write_text("""dictionary using people.dat {
    _column(1)  byte   sex     :sexl  %1f   "Sex of person"
    _column(3)  byte   age            %2f   "Age"
                double inc            %8.2f "Income"
                str8   name           %8s
    _column(21) byte   region         %2f
    _skip(0)    float  score          %5f
}
""", encoding="utf-8")
    do = tmp_path / "labels.do"
    do.write_text('label define sexl 1 "Male" 2 "Female"\n', encoding="utf-8")
    ds = tmp_path / "s.mtab"
    run("import", data, "--setup", dct, "--setup", do, ds)
    check_people(ds, data, ["sex", "age", "inc", "name", "region", "score"])
    assert variables(ds)["inc"]["label"] == "Income"
    assert labels(ds, "sex") == {"1": "Male", "2": "Female"}


# ------------------------------------------------------------ SAS


def test_sas_program_column_formatted_and_pointer_input(tmp_path):
    data, _ = people(tmp_path, n=3000)
    sas = tmp_path / "people.sas"
    sas.write_text("""/* A SAS setup; an apostrophe in a comment: don't stop */
* another comment;
PROC FORMAT;
  VALUE sexf 1 = 'Male' 2 = 'Female' 9 = 'Not stated';
  VALUE regf 1 = 'North' 2 = 'South' 3-3 = 'West' 98, 99 = 'No answer' OTHER = 'Other';
  VALUE $namef 'Bob' = 'Robert';
  VALUE agef 0-17 = 'Child' low-0 = 'Never';
RUN;
FILENAME raw "people.dat";
DATA work.people;
  INFILE raw LRECL=100 PAD MISSOVER;
  INPUT SEX 1 AGE 3-4
        @5 INC 8.2 NAME $CHAR8.
        @21 REGION 2. +0 SCORE 23-27 .1;
  LABEL SEX = 'Sex of person' AGE = "Age in years";
  FORMAT SEX sexf. REGION regf2. NAME $namef. INC 10.2 AGE agef.;
  IF SEX = 9 THEN SEX = .A;
  IF REGION IN (98, 99) THEN REGION = .;
  INCOME2 = INC * 2;
RUN;
""", encoding="utf-8")
    ds = tmp_path / "s.mtab"
    p = run("import", data, "--setup", sas, ds)
    assert "INCOME2 = INC * 2" in p.stderr
    check_people(ds, data, ["SEX", "AGE", "INC", "NAME", "REGION", "SCORE"])
    info = variables(ds)
    assert info["SEX"]["label"] == "Sex of person"
    assert info["SEX"]["missing_codes"] == [9]
    assert sorted(info["REGION"]["missing_codes"]) == [98, 99]
    assert labels(ds, "REGION") == {"1": "North", "2": "South", "3": "West", "98": "No answer",
                                    "99": "No answer"}
    assert labels(ds, "NAME") == {"Bob": "Robert"}
    # 0-17 = 'Child': each age of the range labelled; low-0 is noted.
    assert labels(ds, "AGE")["17"] == "Child" and "18" not in labels(ds, "AGE")
    assert "low" in p.stderr.lower()


# ------------------------------------------- what subset writes, read back


def test_reads_the_setups_subset_writes(tmp_path):
    rng = np.random.default_rng(1)
    n = 2000
    df = pd.DataFrame({
        "AGE": rng.integers(0, 99, n),
        "SEX": rng.choice([1, 2, 9], n),
        "PERWT": np.round(rng.uniform(1, 400, n), 2),
        "STATE": rng.choice(["Ohio", "Texas", "Unknown", "Nueva León"], n),
        "X": rng.normal(size=n),
    })
    src = tmp_path / "c.csv"
    df.to_csv(src, index=False)
    ds = tmp_path / "c.mtab"
    run("import", src, ds, "--missing", "SEX=9", "--missing", "STATE=Unknown")
    run("label", ds, "SEX", "1=Male", "2=Female", "9=Not stated", "--var-label", "Sex of person")
    run("label", ds, "STATE", "Ohio=Buckeye State")
    out = tmp_path / "sub.csv"
    run("subset", ds, out)
    names = ["AGE", "SEX", "PERWT", "STATE", "X"]
    want = records(ds, names)
    for ext in ["sps", "sas", "do"]:
        setup = tmp_path / f"sub.{ext}"
        assert setup.exists(), ext
        back = tmp_path / f"back_{ext}.mtab"
        run("import", out, "--setup", setup, back)
        got = records(back, names)
        assert got == want, ext
        info = variables(back)
        assert info["SEX"]["label"] == "Sex of person", ext
        assert info["SEX"]["missing_codes"] == [9], ext
        assert labels(back, "SEX") == {"1": "Male", "2": "Female", "9": "Not stated"}, ext
        assert info["PERWT"]["decimals"] == 2, ext
        if ext != "do":  # Stata labels numbers only
            assert labels(back, "STATE") == {"Ohio": "Buckeye State"}, ext
        # STATE's missing code: the text "Unknown".
        f = run_json("freq", back, "STATE", "--include-missing")
        assert any("Unknown" in str(r) for r in f["rows"]), ext


# ---------------------------------------------------------------- errors


def test_bad_setups_are_clear_errors_and_write_nothing(tmp_path):
    data, _ = people(tmp_path, n=10)
    cases = {
        "a.sps": ("DATA LIST FILE='x' /A 1-2 B 3-4 (A).\nVALUE LABELS A 1 'x' 2.\n", "line 2"),
        "b.sps": ("DATA LIST /A 1-3 B C 4-8.\n", "cannot be shared equally"),
        "c.sps": ("DATA LIST /A 5-3.\n", "line 1: columns 5-3"),
        "e.sps": ("FILE TYPE MIXED RECORD=RECTYPE 1-1 (A).\n", "gives no variables' columns"),
        "f.sps": ("DATA LIST FREE / A B C.\n", "DATA LIST FREE"),
        "g.sas": ("DATA x; INFILE 'd'; INPUT A 1-2 A 3-4; RUN;", "declared twice"),
        "h.sas": ("DATA x; INFILE 'd'; INPUT A 1-2 B (3.); RUN;", "line 1"),
        "i.dct": ("infix dictionary { str a 1-2 b 3 \n", "not closed"),
        "j.dct": ("infile dictionary {\n byte a\n}\n", "line 2: a has no input format"),
        "k.do": ('label variable a "x\n', "not closed"),
        "l.txt": ("hello world\n", "not a setup file"),
        "m.sas": ("DATA x; INFILE 'd' FIRSTOBS=3; INPUT A 1-2; RUN;", "FIRSTOBS=3"),
        "n.do": ("infix using people.dct if rectype == 1\n", "reads only some records"),
        "o.sas": ("DATA x; INFILE 'd'; INPUT T $ 1 @; INPUT A 2-3; RUN;", "second INPUT"),
    }
    for name, (text, needle) in cases.items():
        s = tmp_path / name
        s.write_text(text, encoding="utf-8")
        ds = tmp_path / f"{name}.mtab"
        p = run("import", data, "--setup", s, ds, ok=False)
        assert p.returncode == 1 and "panicked" not in p.stderr, (name, p.stderr)
        assert needle in p.stderr, (name, p.stderr)
        assert name in p.stderr, (name, p.stderr)
        assert not ds.exists(), name
    # A field beyond the records' end is missing, as the packages read it.
    s = tmp_path / "wide.sps"
    s.write_text("DATA LIST /A 1-2 B 40-45.\n", encoding="utf-8")
    run("import", data, "--setup", s, tmp_path / "w.mtab")
    assert all(r["B"] is None for r in records(tmp_path / "w.mtab", ["B"]))


def test_mutated_setups_never_panic(tmp_path):
    data, _ = people(tmp_path, n=50)
    sources = {"s.sps": SPS, "s.sas": (Path(__file__).read_text().split('sas.write_text("""')[1].split('"""')[0]),
               "s.dct": "infix dictionary using people.dat {\n byte sex 1: 1\n str8 name 13-20\n double inc 5-12\n}\n"}
    rng = random.Random(7)
    alphabet = "()/-.;:=$@#'\"` \n0123456789ABXYZabtolhi{}%*+,"
    k = 0
    for name, text in sources.items():
        for _ in range(70):
            t = list(text)
            for _ in range(rng.randint(1, 4)):
                op = rng.random()
                i = rng.randrange(len(t))
                if op < 0.4:
                    t[i] = rng.choice(alphabet)
                elif op < 0.7:
                    del t[i]
                else:
                    t.insert(i, rng.choice(alphabet))
            s = tmp_path / name
            s.write_text("".join(t), encoding="utf-8")
            ds = tmp_path / f"m{k}.mtab"
            k += 1
            p = run("import", data, "--setup", s, ds, ok=None, timeout=60)
            assert "panicked" not in p.stderr, (name, "".join(t), p.stderr)
            assert p.returncode in (0, 1), (name, p.returncode, p.stderr)
            if p.returncode == 1:
                assert not ds.exists()
                assert p.stderr.strip().splitlines()[-1].startswith("error:"), p.stderr


# ------------------------------------------------ the review's cases


def small(tmp_path, lines, name="d.dat"):
    p = tmp_path / name
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return p


REVIEW_SPSS = {
    # Skips inside a format list move between the fields they separate.
    "fortran-skips": ("DATA LIST FILE='d.dat' /A B (F2, 1X, F2) C (T8, F1).\n",
                      ["12 34 57", "-1 99 08"]),
    # A second MISSING VALUES replaces the first; () clears; VALUE LABELS
    # replaces, ADD VALUE LABELS adds.
    "replacing": ("DATA LIST FILE='d.dat' /X 1-2 Y 3-4.\nMISSING VALUES X (1) Y (2).\n"
                  "MISSING VALUES X (3).\nMISSING VALUES Y ().\n"
                  "VALUE LABELS X 1 'one' 2 'two'.\nVALUE LABELS X 3 'three'.\n"
                  "ADD VALUE LABELS X 4 'four'.\n",
                  [" 1 2", " 3 2", " 4 5"]),
    # Short lines (trailing blanks cut), `.` and E notation, as PSPP reads
    # them: missing, missing, the number.
    "short-lines": ("DATA LIST FILE='d.dat' /A 1-2 B 3-5 C 6-10 (A) D 11-15.\n",
                    ["12", "123  .", "12  1e3abc    .", " 7 2.5E1"]),
    # A division applies to every value, written with a point or not.
    "division": ("DATA LIST FILE='d.dat' /W 1-5.\nCOMPUTE W = W / 100.\n",
                 ["12.5 ", "  125", "-1.25"]),
}


@pytest.mark.parametrize("case", sorted(REVIEW_SPSS))
def test_review_cases_match_pspp(tmp_path, case):
    syntax, lines = REVIEW_SPSS[case]
    data = small(tmp_path, lines)
    sps = tmp_path / "s.sps"
    sps.write_text(syntax, encoding="utf-8")
    ds = tmp_path / "s.mtab"
    run("import", data, "--setup", sps, ds)
    got, meta = pspp_sav(tmp_path, syntax, data)
    ours = records(ds, list(got.columns))
    for i, r in enumerate(ours):
        for n in got.columns:
            g = got[n].iloc[i]
            if isinstance(g, str):
                assert (r[n] or "") == g.strip(), (case, n, i)
            elif math.isnan(g):
                assert r[n] is None, (case, n, i, r[n])
            else:
                assert float(r[n]) == pytest.approx(float(g), abs=1e-12), (case, n, i)
    info = variables(ds)
    for n in got.columns:
        want = sorted(x["lo"] for x in meta.missing_ranges.get(n, []))
        assert sorted(info[n]["missing_codes"]) == want, (case, n)
        wl = {str(int(k)): v for k, v in meta.variable_value_labels.get(n, {}).items()}
        assert labels(ds, n) == wl, (case, n)


def test_review_cases_stata_and_sas(tmp_path):
    data = small(tmp_path, ["01 2 3 9999999", "02-1 5 0012345", "03 4 1 9999999"])
    (tmp_path / "d.dct").write_text(
        "infix dictionary using d.dat {\n int v1 1-2\n int v2 3-4\n int v3 5-6\n long inc 8-14\n}\n")
    (tmp_path / "d.do").write_text(
        "* a macro in a line that is not read: `c(pwd)'\n"
        "local x `\"y\"'\n"
        'label define Lab 1 "upper"\nlabel define lab 1 "lower"\n'
        "label values v1-v3 lab\n"
        "mvdecode v2, mv(-9/-1)\n"
        "replace inc = .a if inc == 9999999\n"
        "replace inc = inc / 100\n")
    ds = tmp_path / "s.mtab"
    run("import", data, "--setup", tmp_path / "d.dct", "--setup", tmp_path / "d.do", ds)
    info = variables(ds)
    # A range of variables named in the do-file, whose columns the
    # dictionary gives; label names are case-sensitive.
    for v in ["v1", "v2", "v3"]:
        assert labels(ds, v) == {"1": "lower"}, v
    # mvdecode's numlist range; the code declared before the division is in
    # the undivided units.
    assert info["v2"]["missing_codes"] == [-1]
    assert info["inc"]["missing_codes"] == [99999.99]
    assert [r["inc"] for r in records(ds, ["inc"])] == [99999.99, 123.45, 99999.99]
    # SAS: exclusive range ends; list input in a fixed-width file refused.
    sas = tmp_path / "s.sas"
    sas.write_text("PROC FORMAT; VALUE f 1 <- 3 = 'above one' 5 -< 7 = 'below seven'; RUN;\n"
                   "DATA x; INFILE 'd.dat'; INPUT V 1-2; FORMAT V f.; RUN;\n")
    run("import", data, "--setup", sas, tmp_path / "sas.mtab")
    assert labels(tmp_path / "sas.mtab", "V") == {"2": "above one", "3": "above one",
                                                  "5": "below seven", "6": "below seven"}
    # A CSV whose header names the columns in another order than INPUT
    # reads them: an error, not a silent swap.
    csv = small(tmp_path, ["id,age,sex", "1,45,2"], "c.csv")
    sas.write_text("DATA x; INFILE 'c.csv' DSD FIRSTOBS=2; INPUT ID SEX AGE; RUN;\n")
    p = run("import", csv, "--setup", sas, tmp_path / "csv.mtab", ok=False)
    assert 'column 2 of the header is "age"' in p.stderr and "SEX" in p.stderr, p.stderr
    sas.write_text("DATA x; INFILE 'd.dat'; INPUT ID 1-2 AGE NAME $; RUN;\n")
    p = run("import", data, "--setup", sas, tmp_path / "bad.mtab", ok=False)
    assert "line 1: AGE is read by list input" in p.stderr


def test_review_crashes_are_errors(tmp_path):
    data = small(tmp_path, ["1234", "5678"])
    cases = {
        "a.sas": "DATA x; INFILE 'd'; INPUT @0 A 2.; RUN;",
        "b.dct": "infile dictionary {\n _column(0) byte a %2f\n}\n",
        "c.sps": "DATA LIST /A (T0, F2).\n",
        "d.sas": "DATA x; INFILE 'd'; INPUT +99999999999999999 A 2.; RUN;",
        "e.sps": "DATA LIST /A (999999999999F1).\n",
        "f.sps": "DATA LIST /A 1-99999999999.\n",
        "g.do": "infix using g.do\n",
    }
    for name, text in cases.items():
        s = tmp_path / name
        s.write_text(text, encoding="utf-8")
        p = run("import", data, "--setup", s, tmp_path / f"{name}.mtab", ok=None, timeout=60)
        assert p.returncode in (0, 1) and "panicked" not in p.stderr, (name, p.returncode, p.stderr)
        if p.returncode == 1:
            assert name in p.stderr or "record" in p.stderr, (name, p.stderr)
