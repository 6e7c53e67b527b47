"""CSV files as real tools write them (issue 10, defects 5, 6, 11, 12).

Missing-value tokens (R's NA, Stata's ., pandas' NaN), zero-padded codes,
integers beyond 64 bits, delimiters other than commas, Latin-1 and
Windows-1252 text, a type guess that a later row contradicts, missing
codes given as text. Oracles: values computed here by hand, and DuckDB on
the same file where it reads it the same way.
"""

from __future__ import annotations

import collections
import json
import os

import duckdb
import pytest

from conftest import approx, assert_one_error, disp, run, run_json, write

SMALL_CHUNKS = {**os.environ, "MICROTAB_CHUNK_BYTES": "4096"}


def imported(tmp_path, name, text, *args, env=None):
    csv = write(tmp_path / f"{name}.csv", text)
    ds = tmp_path / f"{name}.mtab"
    p = run("import", csv, ds, *args, env=env)
    return ds, p.stderr


def kinds(ds):
    return {v["name"]: v["kind"] for v in run_json("info", ds)["variables"]}


def freq(ds, var, *args):
    return {disp(r): r["count"] for r in run_json("freq", ds, var, *args)["rows"]}


@pytest.mark.parametrize("token", ["NA", "NaN", "nan", ".", "N/A", "NULL", "#N/A", ".a", "<NA>"])
def test_missing_tokens_in_numeric_columns(tmp_path, token):
    """R, pandas, Stata, SAS and spreadsheets write missing numbers as these:
    the column stays numeric, the token is system-missing, and filters
    compare numbers (AGE(25-64) does not match 3)."""
    rows = [("3", "1.5"), (token, "2.5"), ("30", token), ("64", "0.5"), ("65", token)]
    text = "AGE,X\n" + "".join(f"{a},{x}\n" for a, x in rows)
    ds, _ = imported(tmp_path, "na", text)
    assert kinds(ds) == {"AGE": "int", "X": "int"}  # X: exact decimals
    info = {v["name"]: v for v in run_json("info", ds)["variables"]}
    assert info["AGE"]["nulls"] == 1 and info["X"]["nulls"] == 2
    assert freq(ds, "AGE", "--filter", "AGE(25-64)") == {30: 1, 64: 1}
    assert freq(ds, "AGE", "--filter", "X>1") == {3: 1}


def test_missing_tokens_beyond_the_sample(tmp_path):
    """A token first seen long after the rows sampled for types."""
    vals = [str(i % 90) for i in range(60_000)] + ["NA", "."] + ["7"] * 10
    ds, _ = imported(tmp_path, "late", "AGE,K\n" + "".join(f"{v},1\n" for v in vals), env=SMALL_CHUNKS)
    assert kinds(ds)["AGE"] == "int"
    assert run_json("info", ds)["variables"][0]["nulls"] == 2


def test_na_option(tmp_path):
    text = "A,S\n1,NA\n-99,x\nNA,NA\n2,y\n"
    # Default: NA missing in numeric A and in text S (as R and pandas read
    # it), with a note naming the column, the count and the first line.
    ds, err = imported(tmp_path, "d", text)
    assert freq(ds, "S") == {"x": 1, "y": 1}
    assert 'column S is text: 2 fields such as "NA" (first on line 2) read as missing' in err
    # --na-text '': text columns keep the tokens as values (the earlier
    # default); numeric columns still read them as missing.
    ds, err = imported(tmp_path, "d0", text, "--na-text", "")
    assert freq(ds, "S") == {"NA": 2, "x": 1, "y": 1}
    assert freq(ds, "A") == {-99: 1, 1: 1, 2: 1}
    assert "read as missing" not in err
    # "." is missing in numeric columns only: a text column keeps it, and
    # says so.
    ds, err = imported(tmp_path, "dot", "A,S\n1,.\n.,x\n")
    assert freq(ds, "S") == {".": 1, "x": 1} and freq(ds, "A") == {1: 1}
    assert 'column S is text and keeps "." (first on line 2) as a value' in err
    # --na replaces the list and applies to every column.
    ds, _ = imported(tmp_path, "e", text, "--na", "NA,-99")
    assert freq(ds, "A") == {1: 1, 2: 1}
    assert freq(ds, "S") == {"x": 1, "y": 1}
    # --na '': only empty fields are missing; A becomes text.
    ds, _ = imported(tmp_path, "f", text, "--na", "")
    assert kinds(ds)["A"] == "string"


def test_numeric_comparison_on_text_is_an_error(tmp_path):
    """A text column never gets a string comparison: AGE(25-64) would match
    "3" and "100" ("100" < "25" < "3" < "64" as text)."""
    ds, _ = imported(tmp_path, "t", "AGE\n3\n100\n30\nabc\n", )
    assert kinds(ds)["AGE"] == "string"
    for flt in ["AGE(25-64)", "AGE>25", "AGE<=3", "AGE(*-5)"]:
        p = run("freq", ds, "AGE", "--filter", flt, ok=False)
        assert_one_error(p, "AGE is a text variable", "--type AGE=int")
    # Values and lists of values are text comparisons by equality: fine.
    assert freq(ds, "AGE", "--filter", "AGE(3,abc)") == {"3": 1, "abc": 1}
    assert freq(ds, "AGE", "--filter", "AGE!=3") == {"100": 1, "30": 1, "abc": 1}


@pytest.mark.parametrize("flt", ["AGE=nan", "AGE>=nan", "AGE(nan)", "AGE<inf", "AGE(1-infinity)", "AGE=-inf", "X=NaN"])
def test_nan_and_infinity_in_filters_are_refused(tmp_path, flt):
    ds, _ = imported(tmp_path, "n", "AGE,X\n1,0.5\n2,1.5\n")
    p = run("freq", ds, "AGE", "--filter", flt, ok=False)
    assert_one_error(p, "expected a finite number")


def test_leading_zeros(tmp_path):
    """Zero-padded codes stay text when the sample shows them (01 and 1 stay
    apart, print as written); seen only later they are read as numbers,
    and the import says so."""
    ds, err = imported(tmp_path, "z", "FIPS,N\n01,1\n1,2\n06,3\n36,4\n")
    assert kinds(ds)["FIPS"] == "string"
    assert freq(ds, "FIPS") == {"01": 1, "06": 1, "1": 1, "36": 1}
    assert "leading zeros" in err and "--type FIPS=int" in err
    ds, _ = imported(tmp_path, "z2", "FIPS,N\n01,1\n1,2\n", "--type", "FIPS=int")
    assert freq(ds, "FIPS") == {1: 2}
    # Not leading zeros: 0, 0.5, -0.25, 10.
    ds, err = imported(tmp_path, "z3", "A\n0\n0.5\n-0.25\n10\n")
    assert kinds(ds)["A"] == "int" and "leading zeros" not in err
    # Beyond the sample: numbers, and a note with the count and first line.
    vals = [str(10 + i % 80) for i in range(60_000)] + ["007", "08"]
    ds, err = imported(tmp_path, "z4", "C\n" + "".join(f"{v}\n" for v in vals), env=SMALL_CHUNKS)
    assert kinds(ds)["C"] == "int"
    assert "column C: 2 numbers written with leading zeros (first \"007\" on line 60002)" in err


def test_integers_beyond_64_bits(tmp_path):
    """Identifiers past i64 are kept exactly as text (seen in the sample) or
    refused (seen later); never merged as floats."""
    big = ["18446744073709551615", "18446744073709551614", "-9223372036854775809"]
    ds, err = imported(tmp_path, "b", "ID,N\n" + "".join(f"{v},1\n" for v in big))
    assert kinds(ds)["ID"] == "string"
    assert freq(ds, "ID") == {v: 1 for v in big}
    assert "beyond 64 bits" in err
    # The largest exact integers stay integers.
    ok = ["9223372036854775807", "-9223372036854775807", "9007199254740993"]
    ds, _ = imported(tmp_path, "b2", "ID\n" + "\n".join(ok) + "\n")
    assert kinds(ds)["ID"] == "int"
    assert sorted(freq(ds, "ID")) == sorted(int(v) for v in ok)
    # Past the sample: a clear error naming line and column.
    vals = [str(i) for i in range(60_000)] + [big[0]]
    csv = write(tmp_path / "b3.csv", "ID\n" + "".join(f"{v}\n" for v in vals))
    p = run("import", csv, tmp_path / "b3.mtab", ok=False, env=SMALL_CHUNKS)
    assert_one_error(p, "b3.csv", "line 60002", "ID", "--type ID=string", big[0])
    # As asked: approximate floats.
    run("import", csv, tmp_path / "b4.mtab", "--type", "ID=float", env=SMALL_CHUNKS)


@pytest.mark.parametrize("sep,name", [("\t", "tab"), (";", "';'"), ("|", "'|'")])
def test_delimiter_is_detected(tmp_path, sep, name):
    text = sep.join(["A", "B", "C"]) + "\n" + "".join(sep.join([str(i), str(i % 3), "x y"]) + "\n" for i in range(50))
    ds, err = imported(tmp_path, "d", text)
    assert list(kinds(ds)) == ["A", "B", "C"]
    assert f"separated by {name}" in err
    assert freq(ds, "B") == {0: 17, 1: 17, 2: 16}
    # Comma files with tabs or semicolons inside fields stay comma files.
    ds, err = imported(tmp_path, "c", "A,B\n1,a;b\n2,c;d\n")
    assert list(kinds(ds)) == ["A", "B"] and "separated" not in err


def test_explicit_delimiter_that_finds_one_column_warns(tmp_path):
    text = "A\tB\n1\t2\n3\t4\n"
    ds, err = imported(tmp_path, "w", text, "-d", ",")
    assert list(kinds(ds)) == ["A\tB"]
    assert "-d tab" in err


@pytest.mark.parametrize("enc,flag", [("latin-1", "latin1"), ("cp1252", "windows-1252")])
def test_encodings(tmp_path, enc, flag):
    names = ["Zürich", "São Paulo", "Göteborg", "Kraków" if enc == "cp1252" else "Köln", "naïve “quoted”" if enc == "cp1252" else "naïve"]
    names = [n for n in names if _encodable(n, enc)]
    text = "CITY,N\n" + "".join(f"{n},{i}\n" for i, n in enumerate(names))
    csv = tmp_path / "e.csv"
    csv.write_bytes(text.encode(enc))
    # Without --encoding: a clear error naming the line and the remedy.
    p = run("import", csv, tmp_path / "e.mtab", ok=False)
    assert_one_error(p, "e.csv", "CITY", "--encoding latin1")
    run("import", csv, tmp_path / "e.mtab", "--encoding", flag)
    assert freq(tmp_path / "e.mtab", "CITY") == {n: 1 for n in names}


def _encodable(s, enc):
    try:
        s.encode(enc)
        return True
    except UnicodeEncodeError:
        return False


def test_infer_rows(tmp_path):
    """The type guess says what it sampled; a later contradiction is a
    clear error that names line, column and the remedies; --infer-rows all
    reads the whole file first."""
    vals = [str(i % 50) for i in range(70_000)] + ["n/k"]
    csv = write(tmp_path / "i.csv", "Q,K\n" + "".join(f"{v},1\n" for v in vals))
    p = run("import", csv, tmp_path / "i.mtab", ok=False, env=SMALL_CHUNKS)
    assert_one_error(p, "i.csv", "line 70002", "(Q)", "50000 records sampled", "--infer-rows all",
                     "--type Q=string")
    p = run("import", csv, tmp_path / "i.mtab", "--infer-rows", "all", env=SMALL_CHUNKS)
    assert kinds(tmp_path / "i.mtab")["Q"] == "string"
    assert freq(tmp_path / "i.mtab", "Q")["n/k"] == 1
    clean = write(tmp_path / "c.csv", "Q,K\n" + "".join(f"{v},1\n" for v in vals[:-1]))
    p = run("import", clean, tmp_path / "j.mtab", "--infer-rows", "1000")
    assert "column types chosen from the first 1000 records" in p.stderr
    run("import", csv, tmp_path / "k.mtab", "--infer-rows", "70001", env=SMALL_CHUNKS)
    assert kinds(tmp_path / "k.mtab")["Q"] == "string"
    p = run("import", csv, tmp_path / "l.mtab", "--infer-rows", "zero", ok=False)
    assert_one_error(p, "--infer-rows")


def test_missing_codes_as_written(tmp_path):
    """--missing takes values as written: text codes, and exact decimals
    (-0.5 in an integer column is not a value, never rounded to -1)."""
    text = "S,I,D\nUnknown,-1,-0.5\nOhio,2,1.5\nUtah,-1,-0.5\nUnknown,3,2.0\n"
    ds, _ = imported(tmp_path, "m", text, "--missing", "S=Unknown", "--missing", "D=-0.5", "--missing", "I=-1")
    assert freq(ds, "S") == {"Ohio": 1, "Utah": 1}
    assert freq(ds, "D") == {1.5: 1, 2.0: 1}
    assert freq(ds, "I") == {2: 1, 3: 1}
    p = run("import", write(tmp_path / "m.csv", text), tmp_path / "m2.mtab", "--missing", "I=-0.5", ok=False)
    assert_one_error(p, "missing codes of I", "'-0.5' is not a value of I", "an integer")
    p = run("import", tmp_path / "m.csv", tmp_path / "m3.mtab", "--missing", "S=Nowhere")
    assert 'missing code "Nowhere" does not occur' in p.stderr


def test_header_only_and_empty_files_say_so(tmp_path):
    ds, err = imported(tmp_path, "h", "A,B\n")
    assert run_json("info", ds)["rows"] == 0
    assert "no records" in err
    dat = write(tmp_path / "z.dat", b"")
    xml = write(tmp_path / "z.xml", """<codeBook><dataDscr><var name="A"><location StartPos="1" EndPos="2"/></var></dataDscr></codeBook>""")
    p = run("import", dat, "--ddi", xml, tmp_path / "z.mtab")
    assert "no records" in p.stderr
