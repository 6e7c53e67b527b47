"""--filter's operators (issue 31, item 2): `and`/`or`/`not`, parentheses,
spaced comparisons, BETWEEN, IN, hyphenated text values, checked against
DuckDB's WHERE on the same CSV (empty cells are NULL there and missing
here: SQL's three-valued logic, so `not AGE > 25` leaves out a missing AGE
in both).

The data is 100 000 records sorted by AGE, so the zone maps of AGE, INC
and of a mask of terms on several variables rule out whole stripes: a
wrong pruning would change the counts."""

import csv
import random

import duckdb
import pytest

from conftest import approx, run, run_json

N = 100_000
REGIONS = ["Nord-Norge", "Sør-Øst", "Vest", "Midt-Norge"]
GRADES = ["A-", "A", "B+", "B", "C-"]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("grammar")
    rng = random.Random(31)
    rows = []
    for i in range(N):
        age = i * 90 // N  # sorted: stripes hold narrow ranges of AGE
        rows.append({
            "ID": i + 1,
            "G": rng.randint(1, 5),
            "AGE": "" if rng.random() < 0.05 else age,
            "SEX": "" if rng.random() < 0.03 else rng.randint(1, 2),
            "INC": "" if rng.random() < 0.1 else f"{rng.uniform(-50, 5000):.2f}",
            "REGION": "" if rng.random() < 0.04 else rng.choice(REGIONS),
            "GRADE": "" if rng.random() < 0.04 else rng.choice(GRADES),
            "W": f"{rng.uniform(0.5, 3):.3f}",
        })
    src = tmp / "g.csv"
    with open(src, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    ds = tmp / "g.mtab"
    run("import", src, ds)
    con = duckdb.connect()
    con.execute(f"CREATE TABLE t AS SELECT * FROM read_csv('{src}', header=true, "
                "types={'REGION': 'VARCHAR', 'GRADE': 'VARCHAR', 'INC': 'DOUBLE', 'W': 'DOUBLE'})")
    return ds, con


# (microtab filter, DuckDB WHERE)
CASES = [
    ("AGE >= 25", "AGE >= 25"),
    ("AGE = 3", "AGE = 3"),
    ("AGE == 3", "AGE = 3"),
    ("AGE <> 3", "AGE <> 3"),
    ("AGE >= 25 SEX = 2", "AGE >= 25 AND SEX = 2"),
    ("AGE >= 25 and SEX = 2", "AGE >= 25 AND SEX = 2"),
    ("AGE >= 25 & SEX = 2", "AGE >= 25 AND SEX = 2"),
    ("AGE(25-64) AND SEX(2)", "AGE BETWEEN 25 AND 64 AND SEX = 2"),
    ("AGE < 10 or AGE > 80", "AGE < 10 OR AGE > 80"),
    ("AGE < 10 | SEX = 1", "AGE < 10 OR SEX = 1"),
    ("AGE < 10 OR SEX = 1", "AGE < 10 OR SEX = 1"),
    ("not AGE > 25", "NOT AGE > 25"),
    ("NOT AGE > 25", "NOT AGE > 25"),
    ("!(AGE > 25)", "NOT AGE > 25"),
    ("not SEX = 1", "NOT SEX = 1"),
    ("not (AGE > 25 and SEX = 1)", "NOT (AGE > 25 AND SEX = 1)"),
    ("not (AGE > 25 or SEX = 1)", "NOT (AGE > 25 OR SEX = 1)"),
    ("not (AGE > 85 or INC < 100)", "NOT (AGE > 85 OR INC < 100)"),
    ("AGE between 20 and 30", "AGE BETWEEN 20 AND 30"),
    ("AGE BETWEEN 20 AND 30 and SEX = 2", "AGE BETWEEN 20 AND 30 AND SEX = 2"),
    ("AGE not between 20 and 80", "AGE NOT BETWEEN 20 AND 80"),
    ("INC between -10.5 and 100.25", "INC BETWEEN -10.5 AND 100.25"),
    ("AGE in (1, 5, 7)", "AGE IN (1, 5, 7)"),
    ("AGE IN (1,5,7) or G in (2)", "AGE IN (1, 5, 7) OR G IN (2)"),
    ("AGE not in (1, 5, 7)", "AGE NOT IN (1, 5, 7)"),
    ("not AGE in (1, 5, 7)", "NOT AGE IN (1, 5, 7)"),
    ("SEX not in (1)", "SEX NOT IN (1)"),
    ("(AGE < 10 or AGE > 80) and (SEX = 1 or G = 5)",
     "(AGE < 10 OR AGE > 80) AND (SEX = 1 OR G = 5)"),
    ("((AGE < 10 or (SEX = 2 and not INC > 1000)) and G != 3) or AGE = 45",
     "((AGE < 10 OR (SEX = 2 AND NOT INC > 1000)) AND G <> 3) OR AGE = 45"),
    ("AGE(1-5) or SEX(2) and INC>4000", "AGE BETWEEN 1 AND 5 OR (SEX = 2 AND INC > 4000)"),
    ("INC > 4990 or AGE(0-1)", "INC > 4990 OR AGE BETWEEN 0 AND 1"),
    ("not (not AGE > 50)", "NOT (NOT AGE > 50)"),
    ("INC < 0, AGE(*-30)", "INC < 0 AND AGE <= 30"),
    ("REGION(Nord-Norge)", "REGION = 'Nord-Norge'"),
    ("REGION = Sør-Øst", "REGION = 'Sør-Øst'"),
    ("REGION in (Nord-Norge, Midt-Norge)", "REGION IN ('Nord-Norge', 'Midt-Norge')"),
    ("REGION not in (Nord-Norge, Midt-Norge)", "REGION NOT IN ('Nord-Norge', 'Midt-Norge')"),
    ("not REGION = Vest", "NOT REGION = 'Vest'"),
    ("GRADE(A-)", "GRADE = 'A-'"),
    ("GRADE(A-, C-) or REGION(Nord-Norge)", "GRADE IN ('A-', 'C-') OR REGION = 'Nord-Norge'"),
    ('GRADE = "B+" and not REGION(Vest)', "GRADE = 'B+' AND NOT REGION = 'Vest'"),
    ("not (GRADE(A-) or AGE < 40)", "NOT (GRADE = 'A-' OR AGE < 40)"),
]


def sql_freq(con, where):
    rows = con.execute(f"SELECT G, count(*), sum(W) FROM t WHERE {where} GROUP BY G ORDER BY G").fetchall()
    return {g: (n, w) for g, n, w in rows}


@pytest.mark.parametrize("flt,sql", CASES, ids=[c[0] for c in CASES])
def test_freq_matches_duckdb(data, flt, sql):
    ds, con = data
    exp = sql_freq(con, sql)
    assert exp, f"{flt} should match some records"
    res = run_json("freq", ds, "G", "--weight", "W", "--filter", flt)
    got = {r["value"]: (r["count"], r["weighted"]) for r in res["rows"] if not r.get("missing")}
    assert {g: n for g, (n, _) in got.items()} == {g: n for g, (n, _) in exp.items()}
    for g, (_, w) in exp.items():
        assert got[g][1] == approx(w, rel=1e-9)


@pytest.mark.parametrize("flt,sql", [c for c in CASES if " or " in c[0].lower() or "not" in c[0].lower()][:8])
def test_list_matches_duckdb(data, flt, sql):
    """`list` reads the filter as a program record by record."""
    ds, con = data
    exp = [r[0] for r in con.execute(f"SELECT ID FROM t WHERE {sql} ORDER BY ID").fetchall()]
    out = run("list", ds, "ID", "--all", "--format", "csv", "--filter", flt).stdout.split()
    assert [int(x.split(",")[-1]) for x in out[1:]] == exp


def test_tab_and_means_over_several_variables(data):
    ds, con = data
    flt = "(AGE < 20 or GRADE(A-)) and not SEX = 1"
    sql = "(AGE < 20 OR GRADE = 'A-') AND NOT SEX = 1"
    res = run_json("means", ds, "INC", "--by", "G", "--weight", "W", "--filter", flt)
    rows = con.execute(f"SELECT G, sum(W * INC) / sum(W), count(*) FROM t WHERE {sql} AND INC IS NOT NULL "
                       "GROUP BY G ORDER BY G").fetchall()
    assert [(g["by"][0]["value"], g["n"]) for g in res["groups"]] == [(r[0], r[2]) for r in rows]
    for g, r in zip(res["groups"], rows):
        assert g["mean"] == approx(r[1], rel=1e-9)


@pytest.mark.parametrize("flt,says", [
    ("(AGE > 3 or SEX = 1", "the '(' at character 1 is never closed"),
    ("AGE > 3)", "unbalanced ')' at character 8"),
    ("AGE > 3 and", "'and' at character 9 has no term after it"),
    ("AGE between 3 30", "'between' at character 5 needs 'and'"),
    ("AGE in 3", "expected '(' and a list of values after 'in'"),
])
def test_errors_name_the_mistake(data, flt, says):
    ds, _ = data
    p = run("freq", ds, "G", "--filter", flt, ok=False)
    assert says in p.stderr, p.stderr


def test_a_variable_named_as_a_keyword_gets_the_quoting_hint(tmp_path):
    csv = tmp_path / "k.csv"
    csv.write_text("in,or,W\n1,2,1\n2,1,1\n2,2,1\n")
    ds = tmp_path / "k.mtab"
    run("import", csv, ds)
    for flt, w in [("or(1)", "or"), ("in >= 2", "in"), ("IN(2) and W(1)", "IN")]:
        p = run("freq", ds, "W", "--filter", flt, ok=False)
        assert f"a variable named {w} is quoted: `{w}`" in p.stderr, p.stderr
    # Quoted as the hint says: the records by hand (or=1: one; in=2 and or=2: one).
    assert run_json("freq", ds, "W", "--filter", "`or`(1)")["total"]["count"] == 1
    assert run_json("freq", ds, "W", "--filter", "`in` >= 2 and `or`(2)")["total"]["count"] == 1


def test_ranges_on_text_still_refused(data):
    ds, _ = data
    p = run("freq", ds, "G", "--filter", "REGION > Nord", ok=False)
    assert "REGION is a text variable" in p.stderr
    # A dashed value no record has names the close spelling.
    p = run("freq", ds, "G", "--filter", "REGION(Nord-Norg)", ok=False)
    assert "'Nord-Norge'" in p.stderr


def test_several_datasets_a_value_one_of_them_lacks(tmp_path):
    """Over several datasets (a pattern, a `split` catalog) a text value one
    of them has is known, the others count none — also in a filter joining
    several variables (evaluated record by record per dataset). DuckDB on
    the whole CSV is the oracle; a value none has is still an error."""
    rows = [("Øst", 1, 1), ("Øst", 40, 2), ("Vest", 2, 1), ("Vest", 50, 2), ("Nord-Norge", 70, 1)] * 50
    src = tmp_path / "r.csv"
    src.write_text("REGION,AGE,SEX\n" + "".join(f"{r},{a},{s}\n" for r, a, s in rows))
    whole = tmp_path / "r.mtab"
    run("import", src, whole)
    yrs = tmp_path / "yrs"
    yrs.mkdir()
    run("subset", whole, yrs / "a.mtab", "--filter", "REGION(Øst)")
    run("subset", whole, yrs / "b.mtab", "--filter", "not REGION(Øst)")
    con = duckdb.connect()
    for f, where in [("REGION(Øst) or AGE < 3", "REGION = 'Øst' OR AGE < 3"),
                     ("not (REGION = Øst and SEX = 1)", "NOT (REGION = 'Øst' AND SEX = 1)"),
                     ("REGION in (Øst, Nord-Norge) or SEX = 2", "REGION IN ('Øst', 'Nord-Norge') OR SEX = 2")]:
        want = con.execute(f"SELECT count(*) FROM read_csv('{src}') WHERE {where}").fetchone()[0]
        got = run_json("freq", str(yrs / "*.mtab"), "SEX", "--filter", f)["total"]["count"]
        assert got == want, (f, got, want)
        assert run_json("freq", whole, "SEX", "--filter", f)["total"]["count"] == want
    p = run("freq", str(yrs / "*.mtab"), "SEX", "--filter", "REGION(Ost) or AGE < 3", ok=False)
    assert "REGION has no value 'Ost' (did you mean 'Øst'?)" in p.stderr, p.stderr
