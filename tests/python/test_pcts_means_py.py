"""Issue 31: a crosstab with several percentages (``pct="col,row,total"``
or a list: each cell has each of them with its SE; pandas' ``crosstab``
for the percentages and R survey's ``svyby``/``svymean`` for their SEs as
oracles, the CLI's ``--pct col,row,total`` table for the printed one),
``means`` without ``by`` (numpy's weighted mean, R's ``svymean(~x, d)``)
and ``t.tests()`` as a frame (scipy's chi-square, R's ``svychisq``)."""

import json
import os
import subprocess

import numpy as np
import pandas as pd
import pytest

import microtab as mt

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
CLI = os.environ.get("MICROTAB_BIN", os.path.join(ROOT, "target", "release", "microtab"))

R_SCRIPT = r"""
suppressMessages(library(survey))
a <- commandArgs(TRUE)
d <- read.csv(a[1])
des <- svydesign(ids = ~PSU, strata = ~ST, weights = ~W, data = d, nest = TRUE)
d$SEXF <- factor(d$SEX); d$RACEF <- factor(d$RACE)
des <- update(des, SEXF = factor(SEX), RACEF = factor(RACE), CELL = factor(paste(SEX, RACE)))
out <- data.frame()
# Column percentages: SEX's shares within each RACE; row: RACE's within SEX.
col <- svyby(~SEXF, ~RACEF, des, svymean)
for (r in 1:3) for (s in 1:2) {
  out <- rbind(out, data.frame(what = "col", sex = s, race = r,
    est = 100 * coef(col)[paste0(r, ":SEXF", s)], se = 100 * SE(col)[r, s]))
}
row <- svyby(~RACEF, ~SEXF, des, svymean)
for (s in 1:2) for (r in 1:3) {
  out <- rbind(out, data.frame(what = "row", sex = s, race = r,
    est = 100 * coef(row)[paste0(s, ":RACEF", r)], se = 100 * SE(row)[s, r]))
}
tot <- svymean(~CELL, des)
for (s in 1:2) for (r in 1:3) {
  k <- paste0("CELL", s, " ", r)
  out <- rbind(out, data.frame(what = "total", sex = s, race = r,
    est = 100 * coef(tot)[k], se = 100 * SE(tot)[k]))
}
m <- svymean(~INC, des, na.rm = TRUE)
out <- rbind(out, data.frame(what = "mean", sex = 0, race = 0, est = coef(m)[1], se = SE(m)[1]))
x <- svychisq(~SEXF + RACEF, des)
out <- rbind(out, data.frame(what = "chisq", sex = 0, race = 0, est = unname(x$statistic), se = x$p.value))
out <- rbind(out, data.frame(what = "chisq_df", sex = 0, race = 0, est = unname(x$parameter[1]),
                             se = unname(x$parameter[2])))
write.csv(out, a[2], row.names = FALSE)
"""


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("pcts")
    rng = np.random.default_rng(31)
    n = 1800
    st = rng.integers(1, 5, n)
    df = pd.DataFrame({"SEX": rng.integers(1, 3, n), "RACE": rng.integers(1, 4, n),
                       "REGION": rng.integers(1, 3, n),
                       "INC": rng.gamma(2.0, 15000.0, n).round(0),
                       "W": rng.uniform(20, 200, n).round(2), "ST": st,
                       "PSU": st * 10 + rng.integers(1, 4, n)})
    df.loc[rng.random(n) < 0.06, "INC"] = np.nan
    df = df.sort_values(["ST", "PSU"], kind="stable").reset_index(drop=True)
    csv = d / "d.csv"
    df.to_csv(csv, index=False)
    ds = mt.import_csv(csv, d / "d.mtab")
    ds.label("SEX", {1: "Male", 2: "Female"})
    ds.label("RACE", {1: "White", 2: "Black", 3: "Other"})
    return d, df, csv, ds


@pytest.fixture(scope="module")
def r_want(data):
    d, _, csv, _ = data
    script = d / "r.R"
    script.write_text(R_SCRIPT)
    out = d / "r.csv"
    subprocess.run(["Rscript", str(script), str(csv), str(out)], check=True, capture_output=True)
    return pd.read_csv(out).set_index(["what", "sex", "race"])


def cli(*args):
    return subprocess.run([CLI, *map(str, args)], check=True, capture_output=True, text=True).stdout


def test_several_percentages_are_pandas_crosstabs(data):
    _, df, _, ds = data
    for pct in ("col,row,total", ["col", "row", "total"], " col , row,col,total"):
        t = ds.tab("SEX", "RACE", weight="W", pct=pct)
        assert t.to_dict()["pcts"] == ["col", "row", "total"]
        long = t.to_pandas().set_index(["row", "col"])
        assert "pct" not in long.columns
        for base, norm in (("col", "columns"), ("row", "index"), ("total", "all")):
            want = 100 * pd.crosstab(df.SEX, df.RACE, values=df.W, aggfunc="sum", normalize=norm)
            for (s, r), v in long[f"pct_{base}"].items():
                assert v == pytest.approx(want.loc[s, r], rel=1e-12), (base, s, r)
    # The order asked is kept; one base in a list is the plain `pct`.
    t = ds.tab("SEX", "RACE", pct=["total", "row"])
    assert t.to_dict()["pcts"] == ["total", "row"] and t.to_dict()["pct"] == "total"
    assert [c for c in t.to_pandas().columns if c.startswith("pct")] == ["pct_total", "pct_row"]
    one = ds.tab("SEX", "RACE", pct=["row"]).to_pandas()
    counts = pd.crosstab(df.SEX, df.RACE, normalize="index") * 100
    np.testing.assert_allclose(one["pct"].to_numpy(), counts.to_numpy().ravel(), rtol=1e-12)
    # Wide: each base is a statistic of the MultiIndex.
    w = ds.tab("SEX", "RACE", pct="col,row").to_pandas(wide=True)
    want = 100 * pd.crosstab(df.SEX, df.RACE, normalize="columns")
    np.testing.assert_allclose(w["pct_col"].to_numpy(), want.to_numpy(), rtol=1e-12)
    assert list(w["pct_row"].columns) == ["White", "Black", "Other"]


def test_several_percentages_with_control(data):
    _, df, _, ds = data
    t = ds.tab("SEX", "RACE", control="REGION", pct="row,col")
    long = t.to_pandas()
    for reg, g in df.groupby("REGION"):
        want = 100 * pd.crosstab(g.SEX, g.RACE, normalize="columns")
        got = long[long.control == reg].set_index(["row", "col"])["pct_col"]
        for (s, r), v in got.items():
            assert v == pytest.approx(want.loc[s, r], rel=1e-12)


def test_several_percentages_ses_are_r_survey(data, r_want):
    _, _, _, ds = data
    d = ds.with_design("W", strata="ST", cluster="PSU")
    t = d.tab("SEX", "RACE", pct="col,row,total", stats=True, z=True)
    long = t.to_pandas().set_index(["row", "col"])
    for base in ("col", "row", "total"):
        for s in (1, 2):
            for r in (1, 2, 3):
                want = r_want.loc[(base, s, r)]
                assert long.loc[(s, r), f"pct_{base}"] == pytest.approx(want["est"], rel=1e-9)
                assert long.loc[(s, r), f"pct_{base}_se"] == pytest.approx(want["se"], rel=1e-6)
                for k in ("lo", "hi", "cv", "deff", "unreliable"):
                    assert f"pct_{base}_{k}" in long.columns
    # The test and z are the table's, as with the first percentage alone.
    alone = d.tab("SEX", "RACE", pct="col", stats=True, z=True)
    assert t.tables[0]["rao_scott"] == alone.tables[0]["rao_scott"]
    assert t.tables[0]["z"] == alone.tables[0]["z"]


@pytest.mark.skipif(not os.path.exists(CLI), reason="the CLI binary is not built")
def test_several_percentages_print_as_the_cli(data, tmp_path):
    _, _, csv, _ = data
    copy = mt.import_csv(csv, tmp_path / "c.mtab")
    copy.label("SEX", {1: "Male", 2: "Female"})
    for args, kw in ((["--pct", "col,row,total"], {"pct": "col,row,total"}),
                     (["--pct", "row", "--pct", "col", "--weight", "W"], {"pct": ["row", "col"], "weight": "W"})):
        t = copy.tab("SEX", "RACE", **kw)
        want = cli("tab", copy.path, "SEX", "RACE", *args)
        assert want.startswith(repr(t).rstrip("\n")), (repr(t), want)
        assert "(percentages under each cell: " in repr(t)
        # The CLI's JSON is the Python answer.
        j = json.loads(cli("tab", copy.path, "SEX", "RACE", *args, "--format", "json"))
        assert j["tables"] == t.to_dict()["tables"] and j["pcts"] == t.to_dict()["pcts"]
    copy.design("W", strata="ST", cluster="PSU")
    t = copy.tab("SEX", "RACE", pct="col,total")
    want = cli("tab", copy.path, "SEX", "RACE", "--pct", "col,total")
    assert want.startswith(repr(t).rstrip("\n")), (repr(t), want)
    html = t._repr_html_()
    p = t.tables[0]["percentages"]["total"]
    assert f"{p['pct'][0][0]:.1f}% ({p['pct_se'][0][0]['se']:.2f}) total" in html
    # CSV: a column and its SE columns per base.
    head = cli("tab", copy.path, "SEX", "RACE", "--pct", "col,total", "--format", "csv").splitlines()[0]
    assert "pct_col" in head and "pct_total_se" in head and ",pct," not in head


def test_bad_percentages_are_refused(data):
    _, _, _, ds = data
    with pytest.raises(mt.QueryError, match="'rows'"):
        ds.tab("SEX", "RACE", pct="col,rows")
    with pytest.raises(ValueError, match="pct"):
        ds.tab("SEX", "RACE", pct=[1, 2])


def test_means_without_by(data, r_want):
    _, df, _, ds = data
    m = ds.means("INC")
    f = m.to_pandas()
    assert len(f) == 1
    assert f.loc[0, "mean"] == pytest.approx(df.INC.mean(), rel=1e-12)
    assert f.loc[0, "n"] == df.INC.notna().sum()
    ok = df.INC.notna()
    w = ds.means("INC", weight="W", median=True).to_pandas()
    assert w.loc[0, "mean"] == pytest.approx(np.average(df.INC[ok], weights=df.W[ok]), rel=1e-12)
    assert w.loc[0, "sum_weights"] == pytest.approx(df.W[ok].sum(), rel=1e-12)
    assert "p50" in w.columns
    d = ds.with_design("W", strata="ST", cluster="PSU")
    u = d.means("INC").to_pandas()
    assert u.loc[0, "mean"] == pytest.approx(r_want.loc[("mean", 0, 0), "est"], rel=1e-9)
    assert u.loc[0, "mean_se"] == pytest.approx(r_want.loc[("mean", 0, 0), "se"], rel=1e-6)
    # Without groups the one row is the total (not twice), and so is the
    # one test against a value (R: svyttest(I(INC - 30000) ~ 0, d)).
    assert len(d.means("INC").to_pandas(total=True)) == 1
    t = d.means("INC", test_mean=30000).tests()
    assert len(t) == 1 and t.loc[0, "estimate"] == pytest.approx(u.loc[0, "mean"] - 30000, rel=1e-12)
    assert t.loc[0, "se"] == pytest.approx(r_want.loc[("mean", 0, 0), "se"], rel=1e-6)
    # An empty selection: no group, no row.
    assert ds.means("INC", filter="INC < 0").to_pandas().empty
    with pytest.raises(mt.QueryError, match="one grouping variable, not 0"):
        ds.means("INC", diff=1)


@pytest.mark.skipif(not os.path.exists(CLI), reason="the CLI binary is not built")
def test_means_without_by_is_the_cli(data):
    _, _, _, ds = data
    j = json.loads(cli("means", ds.path, "INC", "--weight", "W", "--format", "json"))
    m = ds.means("INC", weight="W").to_dict()
    assert j["groups"] == m["groups"] and j["total"] == m["total"] and j["by"] == []
    text = cli("means", ds.path, "INC", "--weight", "W")
    assert "Total" not in text and f"{m['total']['n']:,}" in text
    csv = cli("means", ds.path, "INC", "--format", "csv").splitlines()
    assert csv[0].startswith("mean,sd,n,sum_weights") and len(csv) == 2


def test_tests_are_a_frame_per_table(data, r_want):
    from scipy.stats import chi2_contingency
    _, df, _, ds = data
    t = ds.tab("SEX", "RACE", control="REGION", stats=True)
    f = t.tests()
    assert list(f.columns[:7]) == ["control", "control_label", "test", "statistic", "df", "ddf", "p"]
    assert list(f["control"]) == [1, 2] and (f["test"] == "pearson").all()
    for _, row in f.iterrows():
        g = df[df.REGION == row["control"]]
        chi2, p, dof, _ = chi2_contingency(pd.crosstab(g.SEX, g.RACE), correction=False)
        assert row["statistic"] == pytest.approx(chi2, rel=1e-10)
        assert row["p"] == pytest.approx(p, rel=1e-8) and row["df"] == dof
        assert "cramers_v" in f.columns and "gamma" in f.columns
    # The dicts are to_dict()'s.
    assert t.to_dict()["tables"][1]["stats"]["chi2"] == f.loc[1, "statistic"]
    d = ds.with_design("W", strata="ST", cluster="PSU")
    r = d.tab("SEX", "RACE", stats=True).tests()
    assert list(r["test"]) == ["rao-scott"] and "control" not in r.columns
    assert r.loc[0, "statistic"] == pytest.approx(r_want.loc[("chisq", 0, 0), "est"], rel=1e-6)
    assert r.loc[0, "p"] == pytest.approx(r_want.loc[("chisq", 0, 0), "se"], rel=1e-5)
    assert r.loc[0, "df"] == pytest.approx(r_want.loc[("chisq_df", 0, 0), "est"], rel=1e-6)
    assert r.loc[0, "ddf"] == pytest.approx(r_want.loc[("chisq_df", 0, 0), "se"], rel=1e-6)
    # One row: no test defined.
    one = ds.tab("SEX", "RACE", stats=True, filter="SEX = 1").tests()
    assert len(one) == 1 and one.loc[0, "test"] is None
    # Not asked for: an error that says how, as Means.tests() and
    # differences() give, not a row of Nones.
    with pytest.raises(mt.QueryError, match=r"stats=True"):
        ds.tab("SEX", "RACE").tests()
