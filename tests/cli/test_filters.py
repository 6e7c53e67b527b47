"""--filter: SDA-style syntax vs equivalent SQL in DuckDB."""

import pytest

from conftest import INCTOT_NA, approx, check_freq, disp, module_dataset, run, run_json

# (filter, SQL condition). User-missing INCTOT fails every INCTOT term.
INC_OK = f"INCTOT IS NOT NULL AND INCTOT <> {INCTOT_NA}"
CASES = [
    ("AGE(25-64)", "AGE BETWEEN 25 AND 64"),
    ("SEX(2)", "SEX = 2"),
    ("RACE(1,3-5)", "(RACE = 1 OR RACE BETWEEN 3 AND 5)"),
    ("AGE(25-64) SEX(2) RACE(1,3-5)",
     "AGE BETWEEN 25 AND 64 AND SEX = 2 AND (RACE = 1 OR RACE BETWEEN 3 AND 5)"),
    ("AGE(65-*)", "AGE >= 65"),
    ("AGE(*-17)", "AGE <= 17"),
    ("MARST(1,2,6)", "MARST IN (1, 2, 6)"),
    ("age(25-64) sex(2)", "AGE BETWEEN 25 AND 64 AND SEX = 2"),
    ("AGE<18", "AGE < 18"),
    ("AGE<=18", "AGE <= 18"),
    ("AGE>90", "AGE > 90"),
    ("AGE>=90", "AGE >= 90"),
    ("AGE=30", "AGE = 30"),
    ("AGE!=30", "AGE <> 30"),
    (f"INCTOT<{INCTOT_NA}", f"{INC_OK} AND INCTOT < {INCTOT_NA}"),
    ("INCTOT>=50000", f"{INC_OK} AND INCTOT >= 50000"),
    ("INCTOT(100000-*)", f"{INC_OK} AND INCTOT >= 100000"),
    ("INCTOT!=0", f"{INC_OK} AND INCTOT <> 0"),
    # {p1}: the median PERWT with one decimal (PERWT has two), {q1}/{q3}: the
    # quartiles with two decimals -- taken from the data at run time
    ("PERWT>{p1}", "PERWT > {p1}"),
    ("PERWT<={p1}", "PERWT <= {p1}"),
    ("PERWT({q1}-{q3})", "PERWT BETWEEN {q1} AND {q3}"),
    ("EMPSTAT(1) AGE(30-39) PERWT<{p1}", "EMPSTAT = 1 AND AGE BETWEEN 30 AND 39 AND PERWT < {p1}"),
]


@pytest.fixture(scope="module")
def perwt_points(census):
    med, q1, q3 = census.one("SELECT quantile_cont(PERWT::DOUBLE, 0.5), "
                             "quantile_cont(PERWT::DOUBLE, 0.25), quantile_cont(PERWT::DOUBLE, 0.75) "
                             "FROM census")
    return {"p1": f"{med:.1f}", "q1": f"{q1:.2f}", "q3": f"{q3:.2f}"}


@pytest.mark.parametrize("flt,sql", CASES, ids=[c[0] for c in CASES])
def test_filter_freq_weighted(census, perwt_points, flt, sql):
    flt, sql = flt.format(**perwt_points), sql.format(**perwt_points)
    res = run_json("freq", census.ds, "EDUC", "--weight", "PERWT", "--filter", flt)
    assert res["filter"] == flt
    exp = census.freq("EDUC", weight="PERWT", extra=sql)
    assert exp, f"filter {flt} should match something in the census data"
    check_freq(res, exp, weighted=True)


def test_filter_user_missing_fails_every_term(census):
    """9999999 ≥ 50000 numerically, but user-missing fails the term."""
    n_code = census.one(f"SELECT count(*) FROM census WHERE INCTOT = {INCTOT_NA}")[0]
    assert n_code > 0
    res = run_json("freq", census.ds, "SEX", "--filter", "INCTOT>=50000")
    n_raw = census.one("SELECT count(*) FROM census WHERE INCTOT >= 50000 AND SEX IS NOT NULL")[0]
    assert res["total"]["count"] == n_raw - n_code


def test_filter_exact_decimal_equality(census):
    """PERWT=<value> with a 2-decimal value picks exactly those rows."""
    v, n = census.one("SELECT PERWT, count(*) FROM census WHERE PERWT IS NOT NULL "
                      "GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT 1")
    s = f"{v:.2f}"
    res = run_json("freq", census.ds, "SEX", "--filter", f"PERWT={s}")
    assert res["total"]["count"] == n
    res = run_json("freq", census.ds, "SEX", "--filter", f"PERWT!={s}")
    assert res["total"]["count"] == census.one(
        f"SELECT count(*) FROM census WHERE PERWT <> {s} AND SEX IS NOT NULL")[0]
    res = run_json("freq", census.ds, "SEX", "--filter", f"PERWT({s})")
    assert res["total"]["count"] == n


def test_filter_tab(census):
    flt = "AGE(25-64) RACE(1,3-5)"
    res = run_json("tab", census.ds, "SEX", "EMPSTAT", "--weight", "PERWT", "--filter", flt)
    cells = census.cells("SEX", "EMPSTAT", weight="PERWT",
                         extra="AGE BETWEEN 25 AND 64 AND (RACE = 1 OR RACE BETWEEN 3 AND 5)")
    t = res["tables"][0]
    got = {}
    for i, r in enumerate(t["rows"]):
        for j, c in enumerate(t["cols"]):
            if t["counts"][i][j]:
                got[(None, disp(r), disp(c))] = (t["counts"][i][j], t["weighted"][i][j])
    assert {k: v[0] for k, v in got.items()} == {k: v[0] for k, v in cells.items()}
    for k, v in cells.items():
        assert got[k][1] == approx(v[1])


def test_filter_means(census):
    res = run_json("means", census.ds, "INCTOT", "--by", "SEX", "--filter", "AGE(65-*) EDUC(*-6)")
    rows = census.q(
        f"SELECT SEX, avg(INCTOT), count(*) FROM census WHERE {INC_OK} AND SEX IS NOT NULL "
        "AND AGE >= 65 AND EDUC <= 6 GROUP BY 1 ORDER BY 1")
    assert [(disp(g["by"][0]), g["n"]) for g in res["groups"]] == [(r[0], r[2]) for r in rows]
    for g, r in zip(res["groups"], rows):
        assert g["mean"] == approx(r[1])


@pytest.mark.parametrize("flt", ["AGE(200-*)", "AGE>95 AGE<0", "SEX(1) SEX(2)"])
def test_filter_matching_nothing(census, flt):
    assert census.one("SELECT count(*) FROM census WHERE AGE > 200")[0] == 0
    res = run_json("freq", census.ds, "EDUC", "--weight", "PERWT", "--filter", flt)
    assert res["rows"] == []
    assert res["total"]["count"] == 0
    assert res["total"]["weighted"] in (0, 0.0, None)

    res = run_json("tab", census.ds, "SEX", "EDUC", "--filter", flt)
    for t in res["tables"]:
        assert t["rows"] == [] and t["cols"] == []
        assert t["total"]["count"] == 0

    res = run_json("means", census.ds, "AGE", "--by", "SEX", "--filter", flt)
    assert res["groups"] == []
    assert res["total"]["n"] == 0
    assert res["total"]["mean"] is None


STATES_CSV = ("STATE,N,V\n"
              "CA,1,1.5\nNY,2,2.25\nNew York,3,0.5\nTX,4,\nCA,5,-1.75\n,6,3.0\n"
              "\"New York\",7,1.0\nNY,8,2.0\n")

strds = module_dataset(STATES_CSV)


@pytest.mark.parametrize("flt,exp_n", [
    ("STATE(CA,NY)", [1, 2, 5, 8]),
    ('STATE="New York"', [3, 7]),
    ("STATE!=CA", [2, 3, 4, 7, 8]),      # the missing STATE row fails the term
    ("state(TX)", [4]),
    ("V>1.5", [2, 6, 8]),
    ("V>=1.5", [1, 2, 6, 8]),
    ("V<0", [5]),
    ("V(*-0.5)", [3, 5]),
    ("N(2-7) V(0.5-2.25)", [2, 3, 7]),
    ("V(-2-0)", [5]),                     # negative bounds
    ("V(*--1)", [5]),
    ("V(-1.8--1.7)", [5]),
    ("V=-1.75", [5]),
    ("N(2.5-4)", [3, 4]),                 # decimal bounds on an integer variable
    ("V(1.5,3)", [1, 6]),
])
def test_filter_string_and_decimal_hand(strds, flt, exp_n):
    res = run_json("freq", strds, "N", "--filter", flt)
    assert [r["value"] for r in res["rows"]] == exp_n
    assert res["total"]["count"] == len(exp_n)


def test_reversed_range_is_an_error(strds):
    # A range that holds no value is a typo, not an empty answer.
    p = run("freq", strds, "N", "--filter", "N(3-1)", ok=False)
    assert "reversed" in p.stderr and "write 1-3" in p.stderr


def test_a_label_for_a_numeric_value_names_the_value(tmp_path):
    """Issue 27, item 5: `SEX(male)` for a numeric SEX labeled 1=Male is an
    error naming the value (never an empty result); a numeric value the
    data does not reach is an empty answer, not an error (counted by hand:
    no record has AGE 150)."""
    src = tmp_path / "l.csv"
    src.write_text("SEX,AGE\n1,20\n2,30\n1,40\n")
    ds = tmp_path / "l.mtab"
    run("import", src, ds)
    run("label", ds, "SEX", "1=Male", "2=Female")
    p = run("freq", ds, "AGE", "--filter", "SEX(male)", ok=False)
    assert "expected a finite number for SEX, found 'male' ('male' is the label of 1: write 1)" in p.stderr
    p = run("freq", ds, "SEX(r: Female; *)", ok=False)
    assert "'Female' is the label of 2: write 2" in p.stderr
    assert run_json("freq", ds, "SEX", "--filter", "AGE(150-200)")["total"]["count"] == 0
    got = {r["label"]: r["count"] for r in run_json("freq", ds, "SEX(r: 2 \"f\"; *)")["rows"] if not r["missing"]}
    assert got == {"f": 1, "*": 2}
