"""freq: counts, weighted sums and percentages vs DuckDB on the same CSV."""

import pytest

from conftest import INCTOT_NA, approx, check_freq, run, run_json, same_dataset

CATEGORICAL = ["SEX", "AGE", "MARST", "RACE", "HISPAN", "EDUC", "EMPSTAT",
               "STATEFIP", "GQ", "CITIZEN", "YEAR"]


@pytest.mark.parametrize("var", CATEGORICAL)
def test_freq_unweighted(census, var):
    res = run_json("freq", census.ds, var)
    check_freq(res, census.freq(var), weighted=False)


@pytest.mark.parametrize("var", ["EDUC", "SEX", "AGE", "STATEFIP", "EMPSTAT"])
def test_freq_weighted(census, var):
    res = run_json("freq", census.ds, var, "--weight", "PERWT")
    check_freq(res, census.freq(var, weight="PERWT"), weighted=True)


def test_freq_header_fields(census):
    res = run_json("freq", census.ds, "EDUC", "--weight", "PERWT", "--filter", "AGE(25-64)")
    assert same_dataset(res["dataset"], census.ds)
    assert res["variable"] == "EDUC"
    assert res["weight"] == "PERWT"
    assert res["filter"] == "AGE(25-64)"
    res = run_json("freq", census.ds, "EDUC")
    assert res["weight"] is None
    assert res["filter"] is None
    for r in res["rows"]:
        assert r["label"] is None  # numeric variable, no value labels
        assert r["missing"] is False


def test_freq_weighted_total_is_sum_of_weights(census):
    res = run_json("freq", census.ds, "SEX", "--weight", "PERWT")
    (tot_w, n) = census.one(
        "SELECT sum(PERWT)::DOUBLE, count(*) FROM census WHERE SEX IS NOT NULL AND PERWT IS NOT NULL")
    assert res["total"]["weighted"] == approx(tot_w)
    assert res["total"]["count"] == n
    assert sum(r["percent"] for r in res["rows"]) == approx(100.0)


def test_freq_excludes_user_missing_code(census):
    """INCTOT=9999999 was declared missing: it is not a category and not in
    the totals; the weighted total equals DuckDB's over valid INCTOT."""
    n_na = census.one(f"SELECT count(*) FROM census WHERE INCTOT = {INCTOT_NA}")[0]
    assert n_na > 0, "generator should produce INCTOT N/A codes"
    res = run_json("freq", census.ds, "INCTOT", "--weight", "PERWT")
    assert INCTOT_NA not in [r["value"] for r in res["rows"]]
    check_freq(res, census.freq("INCTOT", weight="PERWT"), weighted=True)


def test_freq_include_missing_flags_code(census):
    res = run_json("freq", census.ds, "INCTOT", "--include-missing")
    miss = [r for r in res["rows"] if r["missing"]]
    n_na = census.one(f"SELECT count(*) FROM census WHERE INCTOT = {INCTOT_NA}")[0]
    assert [(r["value"], r["count"], r["percent"]) for r in miss
            if r["value"] is not None] == [(INCTOT_NA, n_na, None)]
    # non-missing rows and their percentages are those of the plain run
    check_freq(res, census.freq("INCTOT"), weighted=False, missing_rows=True)


def test_freq_decimal_values(census):
    """PERWT has 2 decimals: values are shown in decimal form."""
    res = run_json("freq", census.ds, "PERWT")
    check_freq(res, census.freq("PERWT"), weighted=False)
    assert any(isinstance(r["value"], float) and r["value"] != int(r["value"])
               for r in res["rows"])


def test_freq_lists_only_values_that_occur(census):
    res = run_json("freq", census.ds, "EDUC", "--filter", "AGE(*-5)")
    exp = census.freq("EDUC", extra="AGE <= 5")
    check_freq(res, exp, weighted=False)
    assert all(r["count"] > 0 for r in res["rows"])


def test_freq_weight_missing_excludes_rows_from_count(census):
    """With --weight, count describes exactly the rows that were weighted:
    here a filter on PERWT is combined with weight on a variable with
    user-missing codes (INCTOT used as a weight). INCTOT has negative
    values, which a weight may only have when asked (issue 10); the rows
    left out for a missing weight and those with a zero or negative one
    are counted in ``weight_cases`` (DuckDB)."""
    run("freq", census.ds, "SEX", "--weight", "INCTOT", ok=False)
    res = run_json("freq", census.ds, "SEX", "--weight", "INCTOT", "--allow-negative-weights")
    exp = census.freq("SEX", weight="INCTOT")
    check_freq(res, exp, weighted=True)
    neg, zero, miss = census.one(
        "SELECT count(*) FILTER (INCTOT < 0), count(*) FILTER (INCTOT = 0), "
        f"count(*) FILTER (INCTOT IS NULL OR INCTOT = {INCTOT_NA}) FROM census WHERE SEX IS NOT NULL")
    assert res["weight_cases"] == {"negative": neg, "zero": zero, "missing": miss}


def test_variable_names_case_insensitive(census):
    exp = census.freq("EDUC", weight="PERWT", extra="AGE BETWEEN 25 AND 64")
    res = run_json("freq", census.ds, "educ", "--weight", "perwt", "--filter", "age(25-64)")
    check_freq(res, exp, weighted=True)
    t = run_json("tab", census.ds, "sex", "Educ", "--control", "marst")
    assert sum(tt["total"]["count"] for tt in t["tables"]) == census.one(
        "SELECT count(*) FROM census WHERE SEX IS NOT NULL AND EDUC IS NOT NULL AND MARST IS NOT NULL")[0]
    m = run_json("means", census.ds, "age", "--by", "sex")
    assert m["total"]["mean"] == approx(census.one(
        "SELECT avg(AGE) FROM census WHERE AGE IS NOT NULL AND SEX IS NOT NULL")[0])
