"""``Dataset.weight`` from Python: the same library call as ``microtab
weight``. The oracles are hand-computed post-stratification factors,
numpy's IPF on the cell table for raking, R `survey` (``calibrate`` with
the logit distance) for calibration, and the CLI run on a copy of the
dataset for the report. Totals given as a file, a DataFrame and rows
must give the same weights; errors carry Python's keyword names."""

import json
import os
import shutil
import subprocess

import numpy as np
import pandas as pd
import pytest

import microtab as mt

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
CLI = os.environ.get("MICROTAB_BIN", os.path.join(ROOT, "target", "release", "microtab"))


@pytest.fixture()
def data(tmp_path):
    rng = np.random.default_rng(32)
    n = 2000
    df = pd.DataFrame({"REGION": rng.choice(["North", "South", "West"], n),
                       "SEX": rng.integers(1, 3, n), "AGE": rng.integers(18, 90, n),
                       "W": rng.uniform(5, 50, n).round(3)})
    for k in range(1, 6):  # five replicate weights (a made-up bootstrap)
        df[f"R{k}"] = (df["W"] * rng.integers(0, 3, n)).round(3)
    csv = tmp_path / "d.csv"
    df.to_csv(csv, index=False)
    ds = mt.import_csv(csv, tmp_path / "d.mtab")
    ds.design("W", repweights="R1-R5", type="bootstrap")
    return df, ds, tmp_path


def values(ds, name):
    return ds.to_pandas([name])[name].to_numpy()


def test_poststratify_by_hand_and_replicates_follow(data):
    df, ds, _ = data
    tot = {"North": 30000.0, "South": 25000.0, "West": 45000.0}
    rep = ds.weight("PS", poststrata="REGION",
                    totals=[("REGION", k, v) for k, v in tot.items()])
    want = df["W"] * df["REGION"].map(tot) / df.groupby("REGION")["W"].transform("sum")
    np.testing.assert_allclose(values(ds, "PS"), want, rtol=1e-13)
    for k in range(1, 6):
        r = df[f"R{k}"]
        want_r = r * df["REGION"].map(tot) / r.groupby(df["REGION"]).transform("sum")
        np.testing.assert_allclose(values(ds, f"PS_{k}"), want_r, rtol=1e-13)
    assert rep["replicates"] == [f"PS_{k}" for k in range(1, 6)]
    d = ds.design()
    assert d["weight"] == "PS" and d["replicates"]["weights"] == rep["replicates"]
    # The means now use PS: the same number the CLI prints.
    m = ds.means("AGE")
    assert m.to_pandas()["mean"].iloc[0] == pytest.approx(np.average(df["AGE"], weights=want), rel=1e-12)


def test_rake_matches_numpy_ipf_and_totals_forms_agree(data):
    df, ds, tmp = data
    rows = [("REGION", "North", 30000.0), ("REGION", "South", 25000.0), ("REGION", "West", 45000.0),
            ("SEX", "1", 48000.0), ("SEX", "2", 52000.0)]
    # numpy: IPF on the REGION × SEX table of W, to 1e-14.
    regions = ["North", "South", "West"]
    t = np.array([[df.W[(df.REGION == r) & (df.SEX == s)].sum() for s in (1, 2)] for r in regions])
    g = np.ones_like(t)
    for _ in range(500):
        g *= (np.array([30000, 25000, 45000]) / (t * g).sum(1))[:, None]
        g *= (np.array([48000, 52000]) / (t * g).sum(0))[None, :]
    gi = g[df.REGION.map({r: i for i, r in enumerate(regions)}).to_numpy(), df.SEX.to_numpy() - 1]
    want = df.W.to_numpy() * gi
    rep = ds.weight("RK", rake=["REGION", "SEX"], totals=rows)
    np.testing.assert_allclose(values(ds, "RK"), want, rtol=1e-9)
    assert rep["worst_misfit"] < 1e-10
    # The same totals as a DataFrame and as a file give the same weights.
    ds.design("W", repweights="R1-R5", type="bootstrap")
    ds.weight("RK2", rake="REGION; SEX", totals=pd.DataFrame(rows, columns=["variable", "value", "total"]))
    f = tmp / "tot.csv"
    pd.DataFrame(rows, columns=["variable", "value", "total"]).to_csv(f, index=False)
    ds.design("W", repweights="R1-R5", type="bootstrap")
    ds.weight("RK3", rake=["REGION", "SEX"], totals=f)
    np.testing.assert_array_equal(values(ds, "RK2"), values(ds, "RK"))
    np.testing.assert_array_equal(values(ds, "RK3"), values(ds, "RK"))


def test_logit_calibration_matches_r(data):
    df, ds, tmp = data
    f = tmp / "d.csv"
    out = tmp / "r.csv"
    script = tmp / "cal.R"
    script.write_text(r"""
suppressMessages(library(survey))
a <- commandArgs(trailingOnly=TRUE)
d <- read.csv(a[1])
des <- svydesign(ids=~1, weights=~W, data=d)
tot <- as.numeric(a[3:5])
cal <- calibrate(des, ~AGE + factor(SEX), tot, calfun="logit", bounds=c(0.5, 2), epsilon=1e-12, maxit=100)
write.csv(data.frame(w=sprintf("%.17g", weights(cal))), a[2], row.names=FALSE, quote=FALSE)
""")
    n = round(df.W.sum() * 1.1)
    age = round((df.W * df.AGE).sum() * 1.12)
    p = subprocess.run(["Rscript", str(script), str(f), str(out), str(n), str(age), str(round(n * 0.52))],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    want = pd.read_csv(out)["w"].to_numpy()
    ds.design("W")
    rep = ds.weight("CAL", calibrate=["AGE", "factor(SEX)"], distance="logit", bounds=(0.5, 2),
                    totals=[("(Intercept)", "", n), ("AGE", "", age), ("SEX", 1, n - round(n * 0.52)),
                            ("SEX", 2, round(n * 0.52))])
    np.testing.assert_allclose(values(ds, "CAL"), want, rtol=1e-9)
    assert rep["after"]["min"] >= 0.5 * df.W.min() - 1e-9
    assert any("every standard error subtracts its residuals" in n for n in rep["notes"])


def test_report_is_the_clis(data):
    df, ds, tmp = data
    shutil.copytree(ds.path, tmp / "cli.mtab")
    rows = [("REGION", "North", 30000.0), ("REGION", "South", 25000.0), ("REGION", "West", 45000.0)]
    (tmp / "t.csv").write_text("variable,value,total\n" + "".join(f"{a},{b},{c}\n" for a, b, c in rows))
    rep = ds.weight("PS", poststrata="REGION", totals=rows)
    p = subprocess.run([CLI, "weight", tmp / "cli.mtab", "PS", "--poststrata", "REGION", "--totals",
                        tmp / "t.csv", "--json"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    cli = json.loads(p.stdout)
    for k in ("achieved", "before", "after", "replicates", "iterations", "groups", "outside", "method"):
        assert rep[k] == cli[k], k


def test_errors_name_python_keywords(data):
    df, ds, _ = data
    with pytest.raises(mt.QueryError, match="allow_missing_cells=True"):
        ds.weight("X", poststrata="REGION", totals=[("REGION", "North", 1.0), ("REGION", "South", 2.0)])
    with pytest.raises(FileExistsError, match="replace=True"):
        ds.weight("AGE", poststrata="REGION", totals=[("REGION", "North", 1.0), ("REGION", "South", 2.0),
                                                     ("REGION", "West", 3.0)])
    with pytest.raises(mt.InputError, match="line 3"):
        ds.weight("X", poststrata="REGION", totals=[("REGION", "North", 1.0), ("REGION", "North", 2.0)])
    with pytest.raises(mt.ArgumentError, match="one of poststrata"):
        ds.weight("X", poststrata="REGION", rake="SEX", totals=[])
    with pytest.raises(mt.ArgumentError, match="totals= is needed"):
        ds.weight("X", rake="SEX")
    with pytest.raises(mt.QueryError, match="did not converge"):
        ds.weight("X", calibrate="AGE + SEX", bounds=(0.99, 1.01), source="W",
                  totals=[("(Intercept)", "", 100000), ("AGE", "", 9000000), ("SEX", 1, 48000),
                          ("SEX", 2, 52000)])
    # Nothing was written by the refusals.
    assert "X" not in ds.variables and ds.design()["weight"] == "W"


def test_trim_alone(data):
    df, ds, _ = data
    ds.design("W")
    ds.weight("T", trim=(10, 40))
    t = values(ds, "T")
    assert t.min() >= 10 - 1e-9 and t.max() <= 40 + 1e-9
    assert t.sum() == pytest.approx(df.W.sum(), rel=1e-12)


def test_replicate_is_the_clis_and_then_weighting_follows(tmp_path):
    """``Dataset.replicate`` writes what ``microtab replicate`` writes (the
    CLI's weights are checked against R's ``as.svrepdesign`` in
    tests/cli/test_replicate.py): same names, scale and values; then
    ``weight`` adjusts every new replicate weight."""
    rng = np.random.default_rng(5)
    n = 400
    df = pd.DataFrame({"STR": rng.integers(1, 5, n), "PSU": rng.integers(1, 9, n),
                       "SEX": rng.integers(1, 3, n), "W": rng.uniform(1, 9, n).round(2)})
    df["PSU"] = df["STR"] * 100 + df["PSU"]
    df = df.sort_values(["STR", "PSU"]).reset_index(drop=True)
    csv = tmp_path / "d.csv"
    df.to_csv(csv, index=False)
    ds = mt.import_csv(csv, tmp_path / "d.mtab")
    ds.design("W", strata="STR", cluster="PSU")
    shutil.copytree(ds.path, tmp_path / "cli.mtab")
    out = ds.replicate("jkn")
    p = subprocess.run([CLI, "replicate", tmp_path / "cli.mtab", "--type", "jkn"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    cli = mt.open(tmp_path / "cli.mtab")
    assert out["replicates"] == cli.design()["replicates"]["weights"] == ds.design()["replicates"]["weights"]
    assert out["scale"] == cli.design()["replicates"]["scale"]
    names = out["replicates"]
    np.testing.assert_array_equal(ds.to_pandas(names).to_numpy(), cli.to_pandas(names).to_numpy())
    # By hand: JKn deleting PSU j of stratum h: 0 there, n_h/(n_h−1) for
    # h's other PSUs, 1 elsewhere.
    first = values(ds, names[0])
    h0 = df["STR"].iloc[0]
    psus = sorted(df.PSU[df.STR == h0].unique(), key=list(df.PSU).index)
    nh = len(psus)
    want = np.where(df.PSU == psus[0], 0.0, np.where(df.STR == h0, df.W * nh / (nh - 1), df.W))
    np.testing.assert_allclose(first, want, rtol=1e-14)
    with pytest.raises(mt.QueryError, match="set the design again"):
        ds.replicate("jkn")
    ds.design("W", strata="STR", cluster="PSU")
    with pytest.raises(FileExistsError):
        ds.replicate("jkn")
    ds.replicate("jkn", replace=True)
    # Weighting now adjusts each of them.
    rep = ds.weight("PS", poststrata="SEX", totals=[("SEX", 1, 5000.0), ("SEX", 2, 5200.0)])
    assert len(rep["replicates"]) == len(names)
    r1 = values(ds, rep["replicates"][0])
    sums = pd.Series(first).groupby(df.SEX).transform("sum").to_numpy()
    np.testing.assert_allclose(r1, first * df.SEX.map({1: 5000.0, 2: 5200.0}).to_numpy() / sums, rtol=1e-13)


@pytest.mark.parametrize("bad", [float("inf"), float("nan"), -float("inf")])
def test_non_finite_totals_are_refused(data, bad):
    df, ds, _ = data
    with pytest.raises(mt.InputError, match="line 3: the total of REGION South is not a finite number"):
        ds.weight("X", poststrata="REGION",
                  totals=[("REGION", "North", 1.0), ("REGION", "South", bad), ("REGION", "West", 3.0)])
    assert "X" not in ds.variables


def test_poststratified_weight_only_design_keeps_the_residuals(data):
    """On data with only a weight, post-stratifying sets a design with each
    record its own PSU that keeps the adjustment: the SE of a mean is that
    of the residuals w*·(u − ū_h) (ū_h the old-weight mean of the mean's
    linearized variable u in post-stratum h), computed here with numpy."""
    df, _, tmp = data
    ds = mt.import_csv(tmp / "d.csv", tmp / "plain.mtab")
    tot = {"North": 30000.0, "South": 25000.0, "West": 45000.0}
    ds.weight("PS", poststrata="REGION", source="W",
              totals=[("REGION", k, v) for k, v in tot.items()])
    d = ds.design()
    assert d["taylor"]["calibration"]["source"] == "W"
    w = df["W"].to_numpy()
    ws = (df["W"] * df["REGION"].map(tot) / df.groupby("REGION")["W"].transform("sum")).to_numpy()
    y = df["AGE"].to_numpy(dtype=float)
    mean = np.average(y, weights=ws)
    u = (y - mean) / ws.sum()
    ubar = pd.Series(w * u).groupby(df["REGION"]).transform("sum") / pd.Series(w).groupby(df["REGION"]).transform("sum")
    z = ws * (u - ubar.to_numpy())
    n = len(z)
    se = np.sqrt(n / (n - 1) * ((z - z.mean()) ** 2).sum())
    m = ds.means("AGE").to_pandas()
    assert m["mean"].iloc[0] == pytest.approx(mean, rel=1e-12)
    assert m["mean_se"].iloc[0] == pytest.approx(se, rel=1e-9)
    # The weight taken as given would give a larger SE here.
    z0 = ws * u
    assert se < np.sqrt(n / (n - 1) * ((z0 - z0.mean()) ** 2).sum())
