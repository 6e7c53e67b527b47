"""Results in pandas' idiom (issue 31): a crosstab as rows × columns
(``to_pandas(wide=True)``, pandas' own ``crosstab`` of the source CSV as
the oracle), printed as ``microtab tab`` prints it (the CLI's output as
the oracle of the layout), and every field of ``to_dict()`` in the
frames (medians' and percentiles' SEs and intervals, a ratio's t and p)."""

import os
import subprocess

import numpy as np
import pandas as pd
import pytest

import microtab as mt

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
CLI = os.environ.get("MICROTAB_BIN", os.path.join(ROOT, "target", "release", "microtab"))


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("frames")
    rng = np.random.default_rng(7)
    n = 2400
    st = rng.integers(1, 5, n)
    df = pd.DataFrame({"SEX": rng.integers(1, 3, n), "RACE": rng.integers(1, 4, n),
                       "REGION": rng.integers(1, 3, n), "AGE": rng.integers(0, 90, n),
                       "INC": rng.gamma(2.0, 15000.0, n).round(0),
                       "W": rng.uniform(20, 200, n).round(2), "ST": st,
                       "PSU": st * 10 + rng.integers(1, 4, n)})
    df.loc[rng.random(n) < 0.05, "INC"] = np.nan
    df = df.sort_values(["ST", "PSU"], kind="stable").reset_index(drop=True)
    csv = d / "d.csv"
    df.to_csv(csv, index=False)
    ds = mt.import_csv(csv, d / "d.mtab")
    ds.label("SEX", {1: "Male", 2: "Female"})
    ds.label("RACE", {1: "White", 2: "Black", 3: "Other"})
    return df, ds


def test_wide_crosstab_is_pandas_crosstab(data):
    df, ds = data
    t = ds.tab("SEX", "RACE", weight="W", pct="row")
    w = t.to_pandas(wide=True)
    assert list(w.index) == ["Male", "Female"] and w.index.name == "SEX"
    assert w.columns.names == [None, "RACE"]
    assert list(w["count"].columns) == ["White", "Black", "Other"]
    labels = {"SEX": {1: "Male", 2: "Female"}, "RACE": {1: "White", 2: "Black", 3: "Other"}}
    shown = df.assign(SEX=df.SEX.map(labels["SEX"]), RACE=df.RACE.map(labels["RACE"]))
    counts = pd.crosstab(shown.SEX, shown.RACE).loc[["Male", "Female"], ["White", "Black", "Other"]]
    assert (w["count"].to_numpy() == counts.to_numpy()).all()
    weighted = pd.crosstab(shown.SEX, shown.RACE, values=shown.W, aggfunc="sum").loc[
        ["Male", "Female"], ["White", "Black", "Other"]]
    np.testing.assert_allclose(w["weighted"].to_numpy(), weighted.to_numpy(), rtol=1e-12)
    pct = 100 * weighted.div(weighted.sum(axis=1), axis=0)
    np.testing.assert_allclose(w["pct"].to_numpy(), pct.to_numpy(), rtol=1e-12)
    assert w["count"].dtypes.eq(np.int64).all()
    # By values instead of labels; the long frame is unchanged.
    v = t.to_pandas(wide=True, labels=False)
    assert list(v.index) == [1, 2] and list(v["count"].columns) == [1, 2, 3]
    long = t.to_pandas()
    assert len(long) == 6 and {"row", "row_label", "col", "col_label", "count", "pct"} <= set(long.columns)


def test_wide_crosstab_with_control_and_design(data):
    df, ds = data
    d = ds.with_design("W", strata="ST", cluster="PSU")
    t = d.tab("SEX", "RACE", control="REGION", pct="col", z=True)
    w = t.to_pandas(wide=True)
    assert w.index.names == ["REGION", "SEX"]
    assert list(w.index) == [(1, "Male"), (1, "Female"), (2, "Male"), (2, "Female")]
    for stat in ("count", "weighted", "pct", "weighted_se", "weighted_lo", "weighted_hi",
                 "pct_se", "pct_lo", "pct_hi", "pct_cv", "pct_deff", "pct_unreliable", "z"):
        assert stat in w.columns.get_level_values(0), stat
    counts = pd.crosstab([df.REGION, df.SEX], df.RACE)
    assert (w["count"].to_numpy() == counts.to_numpy()).all()
    # Each wide cell is the long frame's.
    long = t.to_pandas()
    for _, r in long.iterrows():
        assert w.loc[(r["control"], r["row_label"]), ("pct_se", r["col_label"])] == r["pct_se"]
        assert w.loc[(r["control"], r["row_label"]), ("z", r["col_label"])] == r["z"]
    tot = t.totals()
    assert set(tot["margin"]) == {"row", "col", "total"}
    all_w = tot[tot["margin"] == "total"].set_index("control")["weighted"]
    np.testing.assert_allclose(all_w.to_numpy(), df.groupby("REGION").W.sum().to_numpy(), rtol=1e-12)


def cli(*args):
    return subprocess.run([CLI, *map(str, args)], check=True, capture_output=True, text=True).stdout


@pytest.mark.skipif(not os.path.exists(CLI), reason="the CLI binary is not built")
@pytest.mark.parametrize("args,kw", [
    (["--pct", "row"], {"pct": "row"}),
    (["--weight", "W", "--pct", "col"], {"weight": "W", "pct": "col"}),
    (["--control", "REGION"], {"control": "REGION"}),
    (["--weight", "W", "--filter", "AGE >= 30"], {"weight": "W", "filter": "AGE >= 30"}),
    (["--stats", "--pct", "row"], {"stats": True, "pct": "row"}),
    (["--stats", "--control", "REGION", "--weight", "W"], {"stats": True, "control": "REGION", "weight": "W"}),
])
def test_printed_crosstab_is_the_cli_table(data, args, kw):
    _, ds = data
    t = ds.tab("SEX", "RACE", **kw)
    want = cli("tab", ds.path, "SEX", "RACE", *args).rstrip("\n")
    got = repr(t)
    assert str(t) == got
    # The tables as the CLI prints them (its notes on weights follow).
    assert want.startswith(got.rstrip("\n")), (got, want)
    html = t._repr_html_()
    assert html.count("<table>") == len(t.tables) and "Male" in html


@pytest.mark.skipif(not os.path.exists(CLI), reason="the CLI binary is not built")
def test_printed_crosstab_with_standard_errors(data, tmp_path):
    df, ds = data
    copy = mt.import_csv(ds.path + "/../d.csv", tmp_path / "c.mtab")
    copy.design("W", strata="ST", cluster="PSU")
    t = copy.tab("SEX", "RACE", pct="row")
    want = cli("tab", copy.path, "SEX", "RACE", "--pct", "row")
    assert want.startswith(repr(t).rstrip("\n")), (repr(t), want)
    s = copy.tab("SEX", "RACE", stats=True)
    want = cli("tab", copy.path, "SEX", "RACE", "--stats")
    assert "Rao–Scott F = " in repr(s) and want.startswith(repr(s).rstrip("\n")), (repr(s), want)
    assert repr(t).splitlines()[4].strip().startswith("(")     # SEs under the estimates
    html = t._repr_html_()
    u = t.tables[0]["pct_se"][0][0]["se"]
    assert f"{t.tables[0]['pct'][0][0]:.1f}% ({u:.2f})" in html


def test_means_frame_has_every_field(data):
    _, ds = data
    d = ds.with_design("W", strata="ST", cluster="PSU")
    m = d.means("INC", by="SEX", median=True, percentiles=[10, 90])
    f = m.to_pandas()
    dd = m.to_dict()
    for g, (_, row) in zip(dd["groups"], f.iterrows()):
        assert row["mean_se"] == g["mean_se"]["se"]
        for q in g["quantiles"]:
            name = f"p{q['p'] * 100:g}"
            assert row[name] == q["value"]
            for k in ("se", "lo", "hi", "cv", "unreliable"):
                assert row[f"{name}_{k}"] == q["se"][k], (name, k)
    t = m.to_pandas(total=True)
    assert len(t) == len(f) + 1 and t.iloc[-1]["SEX"] == "Total"
    last = t.iloc[-1]
    assert last["mean"] == dd["total"]["mean"] and last["mean_se"] == dd["total_se"]["se"]
    assert last["p50_se"] == next(q for q in dd["total_quantiles"] if q["p"] == 0.5)["se"]["se"]
    r = d.ratio("INC", "AGE", by="SEX").to_pandas()
    assert {"t", "p", "replicates_dropped"} <= set(r.columns)
    c = d.corr("AGE", "INC")
    assert list(c.moments.columns) == ["mean", "sd"] and list(c.moments.index) == ["AGE", "INC"]


def test_means_frame_without_design_keeps_its_columns(data):
    df, ds = data
    m = ds.means("INC", by="SEX", median=True)
    f = m.to_pandas()
    assert "p50" in f.columns and "p50_se" not in f.columns
    want = df.dropna(subset=["INC"]).groupby("SEX").INC.mean()
    np.testing.assert_allclose(f["mean"].to_numpy(), want.to_numpy(), rtol=1e-12)


def test_wide_crosstab_with_codes_sharing_a_label(data, tmp_path):
    # Several codes labelled alike ("Other" for 2 and 3) keep their own
    # columns, named with their code as the printed table names them;
    # a label that is another code's number does not merge them either.
    df, _ = data
    csv = tmp_path / "s.csv"
    df.to_csv(csv, index=False)
    ds = mt.import_csv(csv, tmp_path / "s.mtab")
    ds.label("RACE", {1: "White", 2: "Other", 3: "Other"})
    ds.label("SEX", {1: "2"})
    w = ds.tab("SEX", "RACE").to_pandas(wide=True)["count"]
    assert list(w.columns) == ["White", "2 Other", "3 Other"]
    assert list(w.index.astype(str)) == ["1 2", "2 2"]
    oracle = pd.crosstab(df.SEX, df.RACE)
    assert (w.to_numpy() == oracle.to_numpy()).all()
