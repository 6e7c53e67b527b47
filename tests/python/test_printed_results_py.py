"""Issue 31: ``print(m)`` of means, frequencies, ratios and correlations
is the table the CLI prints for the same query (the CLI's output as the
oracle of the layout; its numbers are checked against DuckDB and R
elsewhere), and each has an HTML table for Jupyter."""

import os
import subprocess

import numpy as np
import pandas as pd
import pytest

import microtab as mt

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
CLI = os.environ.get("MICROTAB_BIN", os.path.join(ROOT, "target", "release", "microtab"))
pytestmark = pytest.mark.skipif(not os.path.exists(CLI), reason="the CLI binary is not built")


@pytest.fixture(scope="module", params=["plain", "taylor"])
def ds(request, tmp_path_factory):
    d = tmp_path_factory.mktemp("printed")
    rng = np.random.default_rng(5)
    n = 1500
    st = rng.integers(1, 4, n)
    df = pd.DataFrame({"SEX": rng.integers(1, 3, n), "EDUC": rng.integers(1, 5, n),
                       "AGE": rng.integers(18, 90, n), "INC": rng.gamma(2.0, 15000.0, n).round(0),
                       "W": rng.uniform(20, 200, n).round(2), "ST": st,
                       "PSU": st * 10 + rng.integers(1, 4, n)})
    df.loc[rng.random(n) < 0.05, "INC"] = np.nan
    df.loc[rng.random(n) < 0.03, "EDUC"] = 9
    df = df.sort_values(["ST", "PSU"], kind="stable").reset_index(drop=True)
    df.to_csv(d / "d.csv", index=False)
    ds = mt.import_csv(d / "d.csv", d / "d.mtab")
    ds.label("SEX", {1: "Male", 2: "Female"}, var_label="Sex of respondent")
    ds.label("EDUC", {1: "Primary", 4: "College"})
    ds.missing("EDUC", [9])
    if request.param == "taylor":
        ds.design("W", strata="ST", cluster="PSU")
    return ds


def cli(*args):
    return subprocess.run([CLI, *map(str, args)], check=True, capture_output=True, text=True).stdout


@pytest.mark.parametrize("args,kw", [
    ([], {}),
    (["--weight", "W"], {"weight": "W"}),
    (["--filter", "AGE >= 30", "--include-missing"], {"filter": "AGE >= 30", "include_missing": True}),
])
def test_printed_frequencies_are_the_cli_table(ds, args, kw):
    if ds.design() is not None:
        kw = {k: v for k, v in kw.items() if k != "weight"}
        args = [a for a in args if a not in ("--weight", "W")]
    for var in ("SEX", "EDUC"):
        f = ds.freq(var, **kw)
        want = cli("freq", ds.path, var, *args)
        assert str(f) == repr(f)
        assert want.startswith(str(f)), (str(f), want)
        html = f._repr_html_()
        assert "<table>" in html and "Total" in html


@pytest.mark.parametrize("args,kw", [
    (["--by", "SEX"], {"by": "SEX"}),
    # (Python asks for quantiles in order, the CLI the median first.)
    (["--by", "SEX,EDUC", "--percentile", "10,90"], {"by": ["SEX", "EDUC"], "percentiles": [10, 90]}),
    (["--by", "EDUC", "--median"], {"by": "EDUC", "median": True}),
    ([], {}),
    (["--median", "--filter", "AGE < 40"], {"median": True, "filter": "AGE < 40"}),
])
def test_printed_means_are_the_cli_table(ds, args, kw):
    m = ds.means("INC", **kw)
    want = cli("means", ds.path, "INC", *args)
    assert want.startswith(str(m)), (str(m), want)
    assert "<table>" in m._repr_html_()


@pytest.mark.parametrize("args,kw", [
    (["--by", "SEX"], {"by": "SEX"}),
    ([], {}),
    (["--by", "SEX,EDUC", "--filter", "AGE >= 60"], {"by": ["SEX", "EDUC"], "filter": "AGE >= 60"}),
])
def test_printed_ratio_is_the_cli_table(ds, args, kw):
    r = ds.ratio("INC", "AGE", **kw)
    assert str(r) == cli("ratio", ds.path, "INC", "AGE", *args)
    assert "<table>" in r._repr_html_()


@pytest.mark.parametrize("vars_,args", [(["INC", "AGE"], []), (["INC", "AGE", "W"], ["--filter", "SEX = 2"])])
def test_printed_correlations_are_the_cli_tables(ds, vars_, args):
    kw = {"filter": args[1]} if args else {}
    c = ds.corr(*vars_, **kw)
    assert str(c) == cli("corr", ds.path, *vars_, *args)
    assert c._repr_html_().count("<table>") == 3


def test_printed_regression_is_its_summary(ds):
    r = ds.regress("INC ~ AGE + factor(SEX)")
    assert str(r) == r.summary() == repr(r)
    assert r.summary().splitlines()[0] == "gaussian model: INC ~ AGE + factor(SEX)"
