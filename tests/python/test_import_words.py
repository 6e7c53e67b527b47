"""One vocabulary of import options (issue 28, items 3 and 4): the CLI's
flags and Python's keywords take the same words (``latin_1``,
``integer``, ``all`` …) and give the same dataset, which pandas reads the
same way from the same file; and every note or error that says which
option would read the input otherwise names an option that exists in the
front end that shows it (a flag in the CLI, a keyword in Python), and
giving it reads what pandas (or a count by hand) reads."""

import math
import os
import re
import subprocess
import warnings
from pathlib import Path

import pandas as pd
import pytest

import microtab as mt

REPO = Path(__file__).resolve().parents[2]
BIN = Path(os.environ.get("MICROTAB_BIN", REPO / "target" / "release" / "microtab"))


def cli(*args, ok=True):
    p = subprocess.run([str(BIN), *map(str, args)], capture_output=True, text=True)
    if ok is not None:
        assert (p.returncode == 0) == ok, p.stderr
    return p


def py_import(fn, *args, **kw):
    """The dataset and the notes (as warnings) of a Python import."""
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        ds = fn(*args, progress=False, **kw)
    return ds, [str(x.message) for x in w if issubclass(x.category, mt.ImportNote)]


def cells(frame):
    """A frame's values by column, NA as None, numbers as floats."""
    def one(x):
        if x is None or (not isinstance(x, str) and pd.isna(x)):
            return None
        return x if isinstance(x, str) else float(x)
    return {c: [one(x) for x in frame[c].tolist()] for c in frame.columns}


def same(ds, oracle):
    got, want = cells(mt.open(ds).to_pandas()), cells(oracle)
    assert list(got) == list(want)
    for c in want:
        for a, b in zip(got[c], want[c], strict=True):
            if isinstance(b, float) and a is not None:
                assert math.isclose(a, b, rel_tol=1e-12), (c, a, b)
            else:
                assert a == b, (c, a, b)


#: A keyword as Python's hints spell it: `types={"ZIP": "int"}`,
#: `encoding="latin1"`, `na_text=[]`, `keep_niu=True`, `missing={...}`.
KEYWORD = re.compile(r'\b([a-z_]+)=(\{[^}]*\}|"[^"]*"|\[[^\]]*\]|True)')


def keywords(text):
    """The keyword arguments a Python hint names, evaluated."""
    found = {k: v for k, v in KEYWORD.findall(text)}
    assert found, f"no keyword in: {text}"
    return {k: (True if v == "True" else eval(v)) for k, v in found.items()}  # noqa: S307 - our own hint


#: The flags of `microtab import` that take a value.
VALUED = {"--type", "--encoding", "--infer-rows", "-d", "--na-text", "--rectype", "--missing"}


def flags(text):
    """The flags a CLI hint names, with their values, as arguments."""
    out = []
    for m in re.finditer(r"(--[a-z-]+|-d)(?: (\S+))?", text):
        out.append(m.group(1))
        if m.group(1) in VALUED:
            out.append("" if m.group(2) == "''" else m.group(2))
    return out


def assert_keywords_exist(fn, kw):
    import inspect
    params = inspect.signature(fn).parameters
    assert set(kw) <= set(params), (fn.__name__, kw)


# --------------------------------------------------------------------------
# the same words in both front ends
# --------------------------------------------------------------------------

LATIN = "CITY,ZIP,INC,W\nZürich,01234,52000,1.5\nSão Paulo,10001,9999,2.25\nKöln,00501,-300,NA\nNA,02139,41000,3\n"


@pytest.mark.parametrize("enc,int_word,str_word,float_word,rows", [
    ("latin1", "int", "string", "float", "all"),
    ("latin_1", "integer", "str", "double", "2"),
    ("ISO-8859-1", "INT", "text", "Float", "all"),
    ("Latin-1", "Integer", "STRING", "DOUBLE", "100"),
])
def test_same_words_same_dataset_as_pandas(tmp_path, enc, int_word, str_word, float_word, rows):
    csv = tmp_path / "c.csv"
    csv.write_bytes(LATIN.encode("latin-1"))
    a, b = tmp_path / "a.mtab", tmp_path / "b.mtab"
    cli("import", csv, a, "--encoding", enc, "--type", f"ZIP={str_word}", "--type", f"INC={int_word}",
        "--type", f"W={float_word}", "--missing", "INC=9999", "--na-text", "", "--infer-rows", rows)
    py_import(mt.import_csv, csv, b, encoding=enc, types={"ZIP": str_word, "INC": int_word, "W": float_word},
              missing={"INC": [9999]}, na_text=[], infer_rows=int(rows) if rows.isdigit() else rows)
    oracle = pd.read_csv(csv, encoding="latin-1", dtype={"ZIP": str, "CITY": str},
                         keep_default_na=False, na_values={"INC": ["9999"], "W": ["NA"]})
    oracle["W"] = oracle["W"].astype(float)
    same(a, oracle)
    same(b, oracle)


@pytest.mark.parametrize("option,word", [("encoding", "ebcdic"), ("infer_rows", "0"), ("types", "decimal")])
def test_same_words_refused_by_both(tmp_path, option, word):
    csv = tmp_path / "c.csv"
    csv.write_text("A\n1\n")
    flag = {"encoding": ["--encoding", word], "infer_rows": ["--infer-rows", word],
            "types": ["--type", f"A={word}"]}[option]
    p = cli("import", csv, tmp_path / "a.mtab", *flag, ok=False)
    kw = {"encoding": {"encoding": word}, "infer_rows": {"infer_rows": word},
          "types": {"types": {"A": word}}}[option]
    with pytest.raises(mt.QueryError) as e:
        mt.import_csv(csv, tmp_path / "b.mtab", progress=False, **kw)
    # The same facts: the word and what the option accepts.
    expected = p.stderr.split("expected ", 1)[1].split(",", 1)[0]
    assert f"'{word}'" in p.stderr and f"'{word}'" in str(e.value)
    assert expected in str(e.value)


# --------------------------------------------------------------------------
# every hint names an option of its front end, and giving it reads as
# pandas does
# --------------------------------------------------------------------------

CASES = {
    # name: (csv text, extra words for both, pandas reading once the hint is followed)
    "leading zeros read as text": (
        "FIPS,N\n01,1\n02,2\n10,3\n", {}, lambda f: pd.read_csv(f)),
    "leading zeros after the sample": (
        "A,N\n5,1\n6,2\n07,3\n", {"infer_rows": "2"}, lambda f: pd.read_csv(f, dtype={"A": str})),
    "an integer beyond 64 bits": (
        "ID,N\n123456789012345678901,1\n7,2\n", {}, lambda f: pd.read_csv(f, dtype={"ID": float})),
    "NA in a text column": (
        "S,N\nNA,1\nb,2\n", {}, lambda f: pd.read_csv(f, keep_default_na=False)),
    "delimiter that finds one column": (
        "A\tB\n1\t2\n3\t4\n", {"delimiter": ","}, lambda f: pd.read_csv(f, sep="\t")),
}


def _cli_words(extra):
    out = []
    for k, v in extra.items():
        out += {"infer_rows": ["--infer-rows", v], "delimiter": ["-d", v]}[k]
    return out


def _py_words(extra):
    return {k: int(v) if k == "infer_rows" else v for k, v in extra.items()}


@pytest.mark.parametrize("case", list(CASES))
def test_note_hints_name_existing_options(tmp_path, case):
    text, extra, oracle = CASES[case]
    csv = tmp_path / "n.csv"
    csv.write_text(text)
    want = oracle(csv)
    # CLI: the note's flag, given, reads what pandas reads.
    p = cli("import", csv, tmp_path / "a.mtab", *_cli_words(extra))
    notes = [n for n in p.stderr.splitlines() if n.startswith("note: ") and "--" in n or " -d " in n]
    assert notes, p.stderr
    args = flags(notes[0].split("; ")[-1])
    base = [w for w in _cli_words(extra) if not (extra.get("delimiter") and w in ("-d", extra["delimiter"]))]
    cli("import", csv, tmp_path / "a2.mtab", *base, *args)
    same(tmp_path / "a2.mtab", want)
    # Python: the note's keyword exists, and given it reads the same.
    _, notes = py_import(mt.import_csv, csv, tmp_path / "b.mtab", **_py_words(extra))
    hinted = [n for n in notes if KEYWORD.search(n.split("; ")[-1])]
    assert hinted, notes
    kw = keywords(hinted[0].split("; ")[-1])
    assert_keywords_exist(mt.import_csv, kw)
    words = {k: v for k, v in _py_words(extra).items() if k not in kw}
    py_import(mt.import_csv, csv, tmp_path / "b2.mtab", **words, **kw)
    same(tmp_path / "b2.mtab", want)


def test_text_token_note_names_na_text(tmp_path):
    """A text column that keeps "." as a value: the hint names the option
    listing the texts read as missing; giving it "." reads as pandas with
    "." as a missing value."""
    csv = tmp_path / "t.csv"
    csv.write_text("S,N\n.,1\nb,2\n")
    p = cli("import", csv, tmp_path / "a.mtab")
    assert "--na-text lists the texts read as missing" in p.stderr
    _, notes = py_import(mt.import_csv, csv, tmp_path / "b.mtab")
    assert any("na_text=[...] lists the texts read as missing" in n for n in notes), notes
    want = pd.read_csv(csv, keep_default_na=False, na_values={"S": ["."]})
    cli("import", csv, tmp_path / "a2.mtab", "--na-text", ".")
    py_import(mt.import_csv, csv, tmp_path / "b2.mtab", na_text=["."])
    same(tmp_path / "a2.mtab", want)
    same(tmp_path / "b2.mtab", want)


ERRORS = {
    # name: (bytes, extra words, hint that is followed, pandas reading)
    "latin-1 text": (
        "CITY,N\nZürich,1\nKöln,2\n".encode("latin-1"), {}, "encoding",
        lambda f: pd.read_csv(f, encoding="latin-1")),
    "text after the sample": (
        ("Q,K\n" + "".join(f"{i},1\n" for i in range(30)) + "n/k,1\n").encode(), {"infer_rows": "5"}, "infer_rows",
        lambda f: pd.read_csv(f, dtype={"Q": str})),
    "text after the sample, as text": (
        ("Q,K\n" + "".join(f"{i},1\n" for i in range(30)) + "n/k,1\n").encode(), {"infer_rows": "5"}, "types",
        lambda f: pd.read_csv(f, dtype={"Q": str})),
    "big integer after the sample": (
        ("ID,K\n" + "".join(f"{i},1\n" for i in range(30)) + "123456789012345678901,1\n").encode(),
        {"infer_rows": "5"}, "types", lambda f: pd.read_csv(f, dtype={"ID": str})),
}

CLI_OF = {"encoding": "--encoding", "infer_rows": "--infer-rows", "types": "--type"}


@pytest.mark.parametrize("case", list(ERRORS))
def test_error_hints_name_existing_options(tmp_path, case):
    data, extra, follow, oracle = ERRORS[case]
    csv = tmp_path / "e.csv"
    csv.write_bytes(data)
    want = oracle(csv)
    p = cli("import", csv, tmp_path / "a.mtab", *_cli_words(extra), ok=False)
    msg = p.stderr.strip().splitlines()[-1]
    hint = msg.split("; ")[-1]
    # Each alternative of the hint is a flag of the CLI; the one followed
    # reads what pandas reads.
    for alt in hint.split(", or "):
        assert alt.startswith(("--", "-d ")), msg
    alt = next(a for a in hint.split(", or ") if a.startswith(CLI_OF[follow]))
    base = [w for w in _cli_words(extra) if follow != "infer_rows"]
    cli("import", csv, tmp_path / "a2.mtab", *base, *flags(alt))
    same(tmp_path / "a2.mtab", want)
    with pytest.raises(mt.InputError) as e:
        mt.import_csv(csv, tmp_path / "b.mtab", progress=False, **_py_words(extra))
    hint = str(e.value).split("; ")[-1]
    # The hint is also the exception's `hint`, and `option` names its first
    # remedy's kind, as for a query's errors.
    assert e.value.hint == hint
    assert e.value.option in {"encoding", "infer_all_rows", "column_type", "delimiter"}
    alts = hint.split(", or ")
    for a in alts:
        assert_keywords_exist(mt.import_csv, keywords(a))
    kw = keywords(next(a for a in alts if a.startswith(follow + "=")))
    words = {k: v for k, v in _py_words(extra).items() if k not in kw}
    py_import(mt.import_csv, csv, tmp_path / "b2.mtab", **words, **kw)
    same(tmp_path / "b2.mtab", want)


# --------------------------------------------------------------------------
# fixed-width: keep-niu, missing codes, record types (counted by hand)
# --------------------------------------------------------------------------

RECT_DDI = """<?xml version="1.0" encoding="UTF-8"?>
<codeBook xmlns="ddi:codebook:2_5"><fileDscr><fileTxt><fileStrc type="rectangular"/></fileTxt></fileDscr><dataDscr>
<var name="WORK"><location StartPos="1" EndPos="2"/>
  <catgry><catValu>00</catValu><labl>N.I.U.</labl></catgry><catgry><catValu>10</catValu><labl>Yes</labl></catgry></var>
<var name="COST"><location StartPos="3" EndPos="6"/></var>
</dataDscr></codeBook>
"""


def test_fixed_note_hints_name_existing_options(tmp_path):
    rows = [("00", 9999), ("10", 120), ("10", 9999), ("00", 80), ("10", 45)]
    dat = tmp_path / "r.dat"
    dat.write_text("".join(f"{w}{c:04d}\n" for w, c in rows))
    xml = tmp_path / "r.xml"
    xml.write_text(RECT_DDI)
    want_all = pd.DataFrame({"WORK": [float(r[0]) for r in rows], "COST": [float(r[1]) for r in rows]})
    p = cli("import", dat, tmp_path / "a.mtab", "--ddi", xml)
    cli_notes = [n for n in p.stderr.splitlines() if n.startswith("note: ")]
    _, py_notes = py_import(mt.import_fixed, dat, xml, tmp_path / "b.mtab")
    # The not-in-universe code of WORK: --keep-niu / keep_niu=True keep it.
    niu_cli = next(n for n in cli_notes if "variable WORK" in n)
    niu_py = next(n for n in py_notes if "variable WORK" in n)
    assert flags(niu_cli.split("; ")[-1]) == ["--keep-niu"]
    kw = keywords(niu_py.split("; ")[-1])
    assert kw == {"keep_niu": True}
    assert_keywords_exist(mt.import_fixed, kw)
    cli("import", dat, tmp_path / "a2.mtab", "--ddi", xml, "--keep-niu")
    py_import(mt.import_fixed, dat, xml, tmp_path / "b2.mtab", **kw)
    same(tmp_path / "a2.mtab", want_all)
    same(tmp_path / "b2.mtab", want_all)
    # COST's run of 9s: Python's hint is the import's missing= keyword.
    nines = next(n for n in py_notes if "variable COST" in n)
    kw = keywords(nines.split("; ")[-1])
    assert kw == {"missing": {"COST": ["9999"]}}
    assert_keywords_exist(mt.import_fixed, kw)
    assert "`microtab missing DATASET COST 9999`" in next(n for n in cli_notes if "variable COST" in n)
    py_import(mt.import_fixed, dat, xml, tmp_path / "b3.mtab", keep_niu=True, **kw)
    want = want_all.copy()
    want.loc[want["COST"] == 9999, "COST"] = None
    same(tmp_path / "b3.mtab", want)


HIER_DDI = """<?xml version="1.0" encoding="UTF-8"?>
<codeBook xmlns="ddi:codebook:2_5"><fileDscr><fileTxt><fileStrc type="hierarchical">
<recGrp recidvar="RT" rectype="1"><labl>Household Record</labl></recGrp>
<recGrp recidvar="RT" rectype="2" keyvar="ID"><labl>Trip Record</labl></recGrp>
<recGrp recidvar="RT" rectype="3" keyvar="ID"><labl>Car Record</labl></recGrp>
</fileStrc></fileTxt></fileDscr><dataDscr>
<var name="RT" rectype="1 2 3"><location StartPos="1" EndPos="1"/><varFormat type="character"/></var>
<var name="ID" rectype="1 2 3"><location StartPos="2" EndPos="3"/></var>
<var name="KM" rectype="2"><location StartPos="4" EndPos="6"/></var>
<var name="AGE" rectype="3"><location StartPos="4" EndPos="5"/></var>
</dataDscr></codeBook>
"""


def test_record_type_error_hint_names_existing_option(tmp_path):
    lines = ["101", "201012", "201340", "30107", "102", "202005", "30212", "30203"]
    dat = tmp_path / "h.dat"
    dat.write_text("\n".join(lines) + "\n")
    xml = tmp_path / "h.xml"
    xml.write_text(HIER_DDI)
    p = cli("import", dat, tmp_path / "a.mtab", "--ddi", xml, ok=False)
    hint = p.stderr.strip().splitlines()[-1].split("; ")[-1]
    assert flags(hint) == ["--rectype", "TYPE"]
    with pytest.raises(mt.InputError) as e:
        mt.import_fixed(dat, xml, tmp_path / "b.mtab", progress=False)
    kw = keywords(str(e.value).split("; ")[-1])
    assert kw == {"rectype": "TYPE"}
    assert_keywords_exist(mt.import_fixed, kw)
    # Given type 3 (cars), one row per car record, with its household's
    # variables: counted by hand from the lines.
    cli("import", dat, tmp_path / "a2.mtab", "--ddi", xml, "--rectype", "3")
    py_import(mt.import_fixed, dat, xml, tmp_path / "b2.mtab", rectype="3")
    want = pd.DataFrame({"RT": ["3", "3", "3"], "ID": [1.0, 2.0, 2.0], "AGE": [7.0, 12.0, 3.0]})
    same(tmp_path / "a2.mtab", want)
    same(tmp_path / "b2.mtab", want)
