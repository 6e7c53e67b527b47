"""A design held by the object (``ds.with_design``), as R's
``svydesign``/``svrepdesign`` set one for the analysis at hand: its
standard errors are R survey's (Rscript as the oracle), and nothing is
written — a fresh ``mt.open`` and the CLI see the file's design unchanged,
also while another handle reopens the dataset concurrently."""

import json
import os
import subprocess
import threading

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
des <- if (a[3] == "taylor") {
  svydesign(ids = ~PSU, strata = ~ST, weights = ~W, data = d, nest = TRUE)
} else {
  svrepdesign(data = d, weights = ~W, repweights = "^RW[0-9]+$", type = "JK1", mse = TRUE)
}
df <- degf(des)
sub <- subset(des, KEEP == 1)
m <- svyby(~Y, ~G, sub, svymean, na.rm = TRUE)
p <- svymean(~factor(G), sub)
rows <- data.frame(what = c(rep("mean", 3), rep("pct", 3)), g = rep(1:3, 2),
                   est = c(coef(m), 100 * coef(p)), se = c(SE(m), 100 * SE(p)), lo = NA, hi = NA)
for (g in 1:3) {
  q <- svyquantile(~Y, subset(sub, G == g), 0.5, na.rm = TRUE, ci = TRUE, df = df)[[1]]
  rows <- rbind(rows, data.frame(what = "median", g = g, est = q[1, 1], se = q[1, 4],
                                 lo = q[1, 2], hi = q[1, 3]))
}
write.csv(rows, a[2], row.names = FALSE)
"""


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("with_design")
    rng = np.random.default_rng(11)
    n = 2000
    st = rng.integers(1, 5, n)
    psu = st * 100 + rng.integers(1, 6, n)
    df = pd.DataFrame({"ST": st, "PSU": psu, "W": rng.integers(50, 300, n),
                       "G": rng.integers(1, 4, n), "Y": rng.integers(0, 90000, n).astype(float),
                       "AGE": rng.integers(0, 90, n)})
    df.loc[rng.random(n) < 0.04, "Y"] = np.nan
    for r in range(1, 9):
        df[f"RW{r}"] = (df["W"] * rng.choice([0.6, 1.4], n)).round(2)
    df = df.sort_values(["ST", "PSU"], kind="stable").reset_index(drop=True)
    # The domain: a mask computed in pandas (passed as filter=), and the
    # same records flagged for R.
    keep = (df["AGE"] >= 20) & (df["Y"].fillna(0) < 80000)
    csv = d / "d.csv"
    df.to_csv(csv, index=False)
    rcsv = d / "r.csv"
    df.assign(KEEP=keep.astype(int)).to_csv(rcsv, index=False)
    ds = mt.import_csv(csv, d / "d.mtab")
    return d, df, keep, rcsv, ds


def r_answers(d, rcsv, kind):
    script = d / "r.R"
    script.write_text(R_SCRIPT)
    out = d / f"r_{kind}.csv"
    subprocess.run(["Rscript", str(script), str(rcsv), str(out), kind], check=True, capture_output=True)
    return pd.read_csv(out).set_index(["what", "g"])


@pytest.mark.parametrize("kind", ["taylor", "jk1"])
def test_held_design_matches_r_survey(data, kind):
    d, df, keep, rcsv, ds = data
    want = r_answers(d, rcsv, kind)
    if kind == "taylor":
        v = ds.with_design("W", strata="ST", cluster="PSU")
        assert v.design()["taylor"]["strata"] == "ST"
    else:
        v = ds.with_design("W", repweights=[f"RW{r}" for r in range(1, 9)], type="jk1")
        assert v.design()["replicates"]["weights"][0] == "RW1"
    m = v.means("Y", by="G", median=True, filter=keep).to_pandas().set_index("G")
    f = v.freq("G", filter=keep.to_numpy()).to_pandas().set_index("value")
    for g in (1, 2, 3):
        assert m.loc[g, "mean"] == pytest.approx(want.loc[("mean", g), "est"], rel=1e-9)
        assert m.loc[g, "mean_se"] == pytest.approx(want.loc[("mean", g), "se"], rel=1e-6)
        assert f.loc[g, "percent"] == pytest.approx(want.loc[("pct", g), "est"], rel=1e-9)
        assert f.loc[g, "percent_se"] == pytest.approx(want.loc[("pct", g), "se"], rel=1e-6)
        med = want.loc[("median", g)]
        assert m.loc[g, "p50"] == pytest.approx(med["est"], rel=1e-9)
        assert m.loc[g, "p50_lo"] == pytest.approx(med["lo"], rel=1e-9)
        assert m.loc[g, "p50_hi"] == pytest.approx(med["hi"], rel=1e-9)
        assert m.loc[g, "p50_se"] == pytest.approx(med["se"], rel=1e-6)
    # design=False ignores the held design as it ignores a stored one.
    plain = v.freq("G", design=False).to_pandas()
    assert "weighted_se" not in plain.columns


def test_held_design_writes_nothing(data):
    d, df, keep, rcsv, ds = data
    manifest = (d / "d.mtab" / "manifest.json").read_bytes()
    assert ds.design() is None
    stop = threading.Event()
    seen = []

    def reopen():
        # Another handle opening the dataset all along sees no design.
        while not stop.is_set():
            seen.append(mt.open(ds.path).design())

    th = threading.Thread(target=reopen)
    th.start()
    try:
        v = ds.with_design("W", strata="ST", cluster="PSU")
        for _ in range(3):
            v.tab("G", "ST", pct="row")
    finally:
        stop.set()
        th.join()
    assert seen and all(s is None for s in seen)
    assert (d / "d.mtab" / "manifest.json").read_bytes() == manifest
    assert mt.open(ds.path).design() is None and ds.design() is None
    if os.path.exists(CLI):
        info = subprocess.run([CLI, "info", ds.path, "--format", "json"], capture_output=True, text=True,
                              check=True)
        assert json.loads(info.stdout)["design"] is None
    # The object's own queries use it; the original's do not.
    assert "weighted_se" in v.freq("G").to_pandas().columns
    assert "weighted_se" not in ds.freq("G").to_pandas().columns
    # Setting a stored design through the view is refused; a bad design is
    # refused when held, as when stored.
    with pytest.raises(mt.QueryError, match="with_design"):
        v.design("W")
    with pytest.raises(mt.QueryError, match="with_design"):
        v.design(clear=True)
    with pytest.raises(mt.QueryError):
        ds.with_design("NOPE")
    with pytest.raises(mt.QueryError, match="weight"):
        ds.with_design(strata="ST")


def test_held_design_replaces_a_stored_one(data, tmp_path):
    d, df, keep, rcsv, _ = data
    ds = mt.import_csv(d / "d.csv", tmp_path / "s.mtab")
    stored = ds.design("W", repweights="RW1-RW8", type="jk1")
    v = ds.with_design("W", strata="ST", cluster="PSU")
    assert v.freq("G").to_dict()["design"]["method"] == "taylor"
    assert ds.freq("G").to_dict()["design"]["method"] != "taylor"
    assert mt.open(ds.path).design() == stored
