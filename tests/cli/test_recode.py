"""Temporary recodes and restricted ranges in grouping arguments (issue
13, item 1): `AGE(r: 0-17 "Child"; 18-64 "Adult"; 65-*)` and
`EDUC(6-11)`, in tab rows/columns/controls, freq and means --by, against
DuckDB's CASE WHEN on the same CSV."""

import shutil

import duckdb
import pytest

from conftest import run, run_json


@pytest.fixture(scope="module")
def census(tmp_path_factory):
    d = tmp_path_factory.mktemp("recode")
    csv = d / "c.csv"
    run("gen", "census", "--rows", "60000", "--seed", "3", "--out", csv)
    ds = d / "c.mtab"
    run("import", csv, ds, "--missing", "INCTOT=9999999", "--missing", "EDUC=11")
    con = duckdb.connect()
    con.execute(f"CREATE TABLE c AS SELECT * FROM read_csv('{csv}', header=true)")
    return d, ds, con


AGE = 'AGE(r: 0-17 "Child"; 18-64 "Adult"; 65-90)'
AGE_SQL = "CASE WHEN AGE BETWEEN 0 AND 17 THEN 'Child' WHEN AGE BETWEEN 18 AND 64 THEN 'Adult' WHEN AGE BETWEEN 65 AND 90 THEN '65-90' END"


def test_recoded_rows_match_duckdb(census):
    _, ds, con = census
    t = run_json("tab", ds, AGE, "SEX", "--weight", "PERWT")["tables"][0]
    assert [r["label"] for r in t["rows"]] == ["Child", "Adult", "65-90"]
    assert [r["value"] for r in t["rows"]] == [1, 2, 3]
    want = {(a, s): (n, w) for a, s, n, w in con.execute(
        f"SELECT {AGE_SQL} a, SEX, count(*), sum(PERWT) FROM c WHERE a IS NOT NULL GROUP BY ALL").fetchall()}
    names = ["Child", "Adult", "65-90"]
    for i, _ in enumerate(t["rows"]):
        for j, cv in enumerate(t["cols"]):
            n, w = want[(names[i], cv["value"])]
            assert t["counts"][i][j] == n and abs(t["weighted"][i][j] - w) <= 1e-6 * w
    # Ages 91+ fall in no group: missing, like an excluded code.
    assert t["total"]["count"] == con.execute("SELECT count(*) FROM c WHERE AGE <= 90").fetchone()[0]


def test_recoded_by_groups_and_controls_match_duckdb(census):
    _, ds, con = census
    # A missing code inside a group's range stays missing (EDUC 11).
    spec = 'EDUC(r: 0-5 "low"; 6-8; 9-11 "high")'
    m = run_json("means", ds, "INCTOT", "--by", f"{spec}, SEX", "--weight", "PERWT")
    sql = ("SELECT CASE WHEN EDUC <= 5 THEN 1 WHEN EDUC <= 8 THEN 2 ELSE 3 END g, SEX, count(*), "
           "sum(PERWT * INCTOT) / sum(PERWT) FROM c WHERE INCTOT <> 9999999 AND EDUC <> 11 GROUP BY ALL")
    want = {(g, s): (n, mean) for g, s, n, mean in con.execute(sql).fetchall()}
    got = {(g["by"][0]["value"], g["by"][1]["value"]): (g["n"], g["mean"]) for g in m["groups"]}
    assert got.keys() == want.keys()
    for k, (n, mean) in want.items():
        assert got[k][0] == n and abs(got[k][1] - mean) <= 1e-9 * abs(mean), k
    x = run_json("tab", ds, "SEX", "MARST", "--control", "AGE(r: 0-29; 30-*)")
    assert [t["control"]["label"] for t in x["tables"]] == ["0-29", "30-*"]
    n30 = con.execute("SELECT count(*) FROM c WHERE AGE >= 30").fetchone()[0]
    assert x["tables"][1]["total"]["count"] == n30


def test_restricted_range_is_missing_outside(census):
    _, ds, con = census
    f = run_json("freq", ds, "EDUC(6-9)")
    got = {r["value"]: r["count"] for r in f["rows"]}
    want = dict(con.execute("SELECT EDUC, count(*) FROM c WHERE EDUC BETWEEN 6 AND 9 GROUP BY 1").fetchall())
    assert got == want
    assert abs(sum(r["percent"] for r in f["rows"]) - 100) < 1e-9


def test_recodes_over_several_datasets_and_bad_specs(census, tmp_path):
    d, ds, _ = census
    (tmp_path / "m").mkdir()
    # Two imports of one CSV: two datasets (a copied directory is the same
    # dataset twice, and refused).
    for n in ("a", "b"):
        run("import", d / "c.csv", tmp_path / "m" / f"{n}.mtab", "--missing", "INCTOT=9999999",
            "--missing", "EDUC=11")
    one = run_json("tab", ds, AGE, "SEX")["tables"][0]["counts"]
    two = run_json("tab", f"{tmp_path}/m/*.mtab", AGE, "SEX")["tables"][0]["counts"]
    assert two == [[2 * x for x in row] for row in one]
    for spec, needle in (("AGE(r: )", "at least one group"), ('AGE(r: "x")', "expected a finite number for AGE"),
                         ("AGE(r: 1-x)", "AGE")):
        p = run("freq", ds, spec, ok=False)
        assert needle in p.stderr, (spec, p.stderr)


def test_several_tables_in_one_request(census):
    """`tab DS SEX,MARST EDUC,AGE(r: 0-64; 65-*)`: every row variable by
    every column variable, one JSON line (CSV block) each, counts as
    DuckDB's."""
    import csv as csvmod
    import json
    _, ds, con = census
    p = run("tab", ds, "SEX,MARST", "EDUC,AGE(r: 0-64; 65-*)", "--format", "json")
    results = [json.loads(line) for line in p.stdout.splitlines()]
    assert [(r["row_var"], r["col_var"]) for r in results] == [
        ("SEX", "EDUC"), ("SEX", "AGE"), ("MARST", "EDUC"), ("MARST", "AGE")]
    for r in results:
        t = r["tables"][0]
        col_sql = "CASE WHEN AGE <= 64 THEN 1 ELSE 2 END" if r["col_var"] == "AGE" else "EDUC"
        where = "" if r["col_var"] == "AGE" else "WHERE EDUC <> 11"
        want = {(a, b): n for a, b, n in con.execute(
            f"SELECT {r['row_var']}, {col_sql}, count(*) FROM c {where} GROUP BY ALL").fetchall()}
        got = {(rv["value"], cv["value"]): t["counts"][i][j]
               for i, rv in enumerate(t["rows"]) for j, cv in enumerate(t["cols"]) if t["counts"][i][j]}
        assert got == want, (r["row_var"], r["col_var"])
    blocks = run("tab", ds, "SEX,MARST", "EDUC", "--format", "csv").stdout.split("\n\n")
    assert len(blocks) == 2 and all(b.startswith("control,") for b in blocks)
    assert sum(1 for _ in csvmod.DictReader(blocks[1].splitlines())) == 6 * 11


def test_recodes_with_missing_shown_and_spelling(census, tmp_path):
    """--include-missing shows the recoded variable's missing codes and
    empty values after its groups; `r :` with a space; clear errors."""
    from conftest import write
    lines = ["M,K"] + [f"{m},1" for m in ("1", "2", "3", "9", "9", "", "4")]
    path = write(tmp_path / "m.csv", "\n".join(lines) + "\n")
    ds = tmp_path / "m.mtab"
    run("import", path, ds, "--missing", "M=9")
    f = run_json("freq", ds, 'M(r: 1-2 "lo"; 3-*)', "--include-missing")
    got = [(r["label"], r["count"], r["missing"]) for r in f["rows"]]
    assert got == [("lo", 2, False), ("3-*", 2, False), (None, 2, True), (None, 1, True)], got
    assert [r["percent"] for r in f["rows"]][:2] == [50.0, 50.0]
    assert run_json("freq", ds, 'M(r : 1-2; 3-*)')["total"]["count"] == 4
    p = run("freq", ds, "M(r: 1-x)", ok=False)
    assert "bad grouping argument 'M(r: 1-x)': recode of M" in p.stderr and "1-x" in p.stderr


def test_recodes_of_floats_and_wide_ranges(census, tmp_path):
    """A float variable, and an integer one whose range is too wide for a
    table (a hash of its distinct values), recoded in a request."""
    _, ds, con = census
    work = tmp_path / "w.mtab"
    shutil.copytree(ds, work)
    run("compute", work, "MINC = INCTOT / 12")
    run("compute", work, "IPW = INCTOT * PERWT")
    spec = 'MINC(r: *-0 "none"; 0.01-999.99; 1000-* "1000+")'
    t = run_json("tab", work, spec, "SEX", "--weight", "PERWT")["tables"][0]
    sql = ("SELECT CASE WHEN m <= 0 THEN 1 WHEN m >= 0.01 AND m <= 999.99 THEN 2 WHEN m >= 1000 THEN 3 END g, "
           "SEX, count(*), sum(PERWT) FROM (SELECT INCTOT / 12 m, * FROM c WHERE INCTOT <> 9999999) "
           "WHERE g IS NOT NULL GROUP BY ALL")
    want = {(g, s): (n, w) for g, s, n, w in con.execute(sql).fetchall()}
    assert [r["label"] for r in t["rows"]] == ["none", "0.01-999.99", "1000+"]
    for i, _ in enumerate(t["rows"]):
        for j, c in enumerate(t["cols"]):
            n, w = want.get((i + 1, c["value"]), (0, 0))
            assert t["counts"][i][j] == n and abs(t["weighted"][i][j] - w) <= 1e-6 * max(w, 1)
    f = run_json("freq", work, "IPW(r: *-100000; 100000.01-*)", "--include-missing")
    got = {r["label"] if not r["missing"] else "missing": r["count"] for r in f["rows"]}
    lo, hi, na = con.execute(
        "SELECT count(*) FILTER (WHERE INCTOT * PERWT <= 100000), count(*) FILTER (WHERE INCTOT * PERWT > 100000 AND INCTOT <> 9999999), "
        "count(*) FILTER (WHERE INCTOT = 9999999) FROM c").fetchone()
    assert got == {"*-100000": lo, "100000.01-*": hi, "missing": na}


# --------------------------------------------------------------------------
# Text recodes and values that match nothing (issue 27, item 5): `*` is
# "every other value" in temporary recodes as in `recode`, for text and
# numbers; a text value no record has is an error naming the variable, the
# value and its close spellings — never an empty group or `Total 0`.
# Oracle: pandas on the same CSV.
# --------------------------------------------------------------------------

WRKSTAT = ["Full-Time", "Part-Time", "Temp Not Working", "Unemployed", "Retired", "School",
           "Keeping House", "Other"]


@pytest.fixture(scope="module")
def gss(tmp_path_factory):
    import random

    import pandas as pd
    d = tmp_path_factory.mktemp("gss")
    rnd = random.Random(27)
    lines = ["id,wrkstat,gender,age"]
    for i in range(1, 3001):
        w = "" if rnd.random() < 0.03 else rnd.choice(WRKSTAT)
        g = "" if rnd.random() < 0.02 else rnd.choice(["Male", "Female"])
        a = "" if rnd.random() < 0.02 else str(rnd.randint(18, 89))
        lines.append(f"{i},{w},{g},{a}")
    csv = d / "gss.csv"
    csv.write_text("\n".join(lines) + "\n")
    ds = d / "gss.mtab"
    run("import", csv, ds)
    df = pd.read_csv(csv, keep_default_na=False, na_values=[""])
    return d, csv, ds, df


def _freq(ds, spec, *args):
    r = run_json("freq", ds, spec, *args)
    return {row["label"] or row["value"]: row["count"] for row in r["rows"] if not row["missing"]}, r


def test_star_is_everything_else_in_a_text_recode(gss):
    _, _, ds, df = gss
    got, r = _freq(ds, 'wrkstat(r: "Full-Time","Part-Time" "working"; *)')
    w = df.wrkstat.dropna()
    working = int(w.isin(["Full-Time", "Part-Time"]).sum())
    assert got == {"working": working, "*": len(w) - working}
    assert r["total"]["count"] == len(w)  # every non-missing record, none dropped
    # `*` first takes every record (first match wins, as in `recode`).
    got, _ = _freq(ds, 'wrkstat(r: * "all"; Retired)')
    assert got.get("all") == len(w) and got.get("Retired", 0) == 0
    # The same rules as a permanent recode give the same groups.
    run("recode", ds, "WORKING", "--from", "wrkstat", '1 = "Full-Time","Part-Time" "working"; 2 = * "other"')
    perm, _ = _freq(ds, "WORKING")
    assert perm == {"working": working, "other": len(w) - working}


def test_star_is_everything_else_in_a_numeric_recode(gss):
    _, _, ds, df = gss
    got, _ = _freq(ds, 'age(r: 18-29 "young"; *)')
    a = df.age.dropna()
    young = int(((a >= 18) & (a <= 29)).sum())
    assert got == {"young": young, "*": len(a) - young}
    # As a filter list item too: `*` is every non-missing value.
    t = run_json("freq", ds, "gender", "--filter", "wrkstat(*)")
    assert t["total"]["count"] == int((df.gender.notna() & df.wrkstat.notna()).sum())


@pytest.mark.parametrize("args,var,value,close", [
    (["freq", "{ds}", "gender", "--filter", "gender(male)"], "gender", "male", "'Male'"),
    (["freq", "{ds}", "gender", "--filter", "gender=female"], "gender", "female", "'Female'"),
    (["freq", "{ds}", "gender", "--filter", 'gender(" Male")'], "gender", " Male", "'Male'"),
    (["freq", "{ds}", "gender", "--filter", "gender!=Mal"], "gender", "Mal", "'Male'"),
    (["freq", "{ds}", 'wrkstat(r: "Full time"; *)'], "wrkstat", "Full time", "'Full-Time'"),
    (["tab", "{ds}", "gender", "wrkstat(Retire,School)"], "wrkstat", "Retire", "'Retired'"),
    (["compute", "{ds}", 'X = gender == "male"'], "gender", "male", "'Male'"),
    (["compute", "{ds}", "X = wrkstat(retired)"], "wrkstat", "retired", "'Retired'"),
    (["recode", "{ds}", "X", "--from", "gender", "1 = male; 2 = Female"], "gender", "male", "'Male'"),
    (["list", "{ds}", "id", "--filter", "wrkstat(School,Nowhere)"], "wrkstat", "Nowhere", None),
])
def test_a_text_value_no_record_has_is_an_error(gss, args, var, value, close):
    _, _, ds, _ = gss
    p = run(*[a.replace("{ds}", str(ds)) for a in args], ok=False)
    assert p.returncode == 1 and p.stdout == ""
    assert f"{var} has no value '{value}'" in p.stderr, p.stderr
    if close:
        assert f"did you mean {close}" in p.stderr, p.stderr
    else:
        assert "did you mean" not in p.stderr


def test_numeric_values_absent_from_the_data_are_empty_not_errors(gss):
    _, _, ds, df = gss
    # An empty numeric range is a legitimate question: Total 0, no error.
    r = run_json("freq", ds, "gender", "--filter", "age(150-200)")
    assert r["total"]["count"] == 0
    got, _ = _freq(ds, 'age(r: 18-29; 200-300 "none")')
    assert got.get("none", 0) == 0
    assert got["18-29"] == int(((df.age >= 18) & (df.age <= 29)).sum())


def test_a_value_one_dataset_lacks_is_counted_from_the_others(gss, tmp_path):
    d, csv, ds, df = gss
    lines = csv.read_text().splitlines()
    # A second "year" without any "Other" record.
    b = tmp_path / "b.csv"
    b.write_text("\n".join([lines[0]] + [l for l in lines[1:] if ",Other," not in l]) + "\n")
    y = tmp_path / "years"
    y.mkdir()
    run("import", csv, y / "a.mtab")
    run("import", b, y / "b.mtab")
    r = run_json("freq", str(y / "*.mtab"), "gender", "--filter", "wrkstat(Other)")
    assert r["total"]["count"] == int(((df.wrkstat == "Other") & df.gender.notna()).sum()) > 0
    p = run("freq", str(y / "*.mtab"), "gender", "--filter", "wrkstat(other)", ok=False)
    assert "wrkstat has no value 'other' (did you mean 'Other'?)" in p.stderr


def test_the_error_reaches_python_as_an_exception(gss):
    mt = pytest.importorskip("microtab")
    _, _, ds, df = gss
    d = mt.open(str(ds))
    with pytest.raises(Exception) as e:
        d.freq("gender", filter="gender(male)")
    assert "gender has no value 'male' (did you mean 'Male'?)" in str(e.value)
    with pytest.raises(Exception) as e:
        d.tab("gender", 'wrkstat(r: "Full time"; *)')
    assert "wrkstat has no value 'Full time' (did you mean 'Full-Time'?)" in str(e.value)
    # And `*` means every other value there too.
    f = d.freq('wrkstat(r: "Full-Time","Part-Time" "working"; *)').to_pandas()
    w = df.wrkstat.dropna()
    assert int(f["count"].sum()) == len(w)
