"""Issue 31: several datasets (``open_many``) and Dask's parts under a
design held by the object (``with_design``: nothing written), and a
boolean mask over all the datasets' records (``dss.select``) as
``filter=``. Oracles: the same query on one dataset holding all the
records (the CSVs concatenated and imported), R survey for the held
design's SEs; Dask on a real ``distributed.LocalCluster``."""

import os
import subprocess

import numpy as np
import pandas as pd
import pytest

import microtab as mt
import microtab.dask as mtd

R_SCRIPT = r"""
suppressMessages(library(survey))
a <- commandArgs(TRUE)
d <- read.csv(a[1])
des <- svydesign(ids = ~PSU, strata = ~ST, weights = ~W, data = d, nest = TRUE)
m <- svyby(~Y, ~G, subset(des, KEEP == 1), svymean, na.rm = TRUE)
write.csv(data.frame(g = 1:3, est = coef(m), se = SE(m)), a[2], row.names = FALSE)
"""

TAYLOR = dict(weight="W", strata="ST", cluster="PSU")
JK1 = dict(weight="W", repweights=[f"RW{r}" for r in range(1, 7)], type="jk1")


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("many_held")
    rng = np.random.default_rng(55)
    n = 2400
    st = rng.integers(1, 5, n)
    df = pd.DataFrame({"ST": st, "PSU": st * 100 + rng.integers(1, 6, n),
                       "W": rng.integers(50, 300, n), "G": rng.integers(1, 4, n),
                       "Y": rng.integers(0, 90000, n).astype(float), "AGE": rng.integers(0, 90, n)})
    df.loc[rng.random(n) < 0.04, "Y"] = np.nan
    for r in range(1, 7):
        df[f"RW{r}"] = (df["W"] * rng.choice([0.6, 1.4], n)).round(2)
    df = df.sort_values(["ST", "PSU"], kind="stable").reset_index(drop=True)
    # Three datasets, each stratum within one (as Taylor designs over
    # datasets need), and one of all the records in the same order.
    cuts = [df[df.ST <= 2], df[df.ST == 3], df[df.ST == 4]]
    paths = []
    for i, part in enumerate(cuts):
        part.to_csv(d / f"p{i}.csv", index=False)
        paths.append(mt.import_csv(d / f"p{i}.csv", d / f"p{i}.mtab").path)
    whole = pd.concat(cuts, ignore_index=True)
    whole.to_csv(d / "all.csv", index=False)
    one = mt.import_csv(d / "all.csv", d / "all.mtab")
    return d, whole, paths, one


def close(a, b):
    assert a.keys() == b.keys() if isinstance(a, dict) else True
    pd.testing.assert_frame_equal(a, b, rtol=1e-9, check_dtype=False)


@pytest.mark.parametrize("design", [TAYLOR, JK1], ids=["taylor", "jk1"])
def test_held_design_over_datasets_is_one_datasets(data, design):
    _, whole, paths, one = data
    dss = mt.open_many(paths).with_design(**design)
    ref = one.with_design(**design)
    close(dss.means("Y", by="G").to_pandas(), ref.means("Y", by="G").to_pandas())
    close(dss.freq("G").to_pandas(), ref.freq("G").to_pandas())
    close(dss.tab("G", "ST", pct="col").to_pandas(), ref.tab("G", "ST", pct="col").to_pandas())
    assert "mean_se" in dss.means("Y", by="G").to_pandas().columns
    assert dss.design()["weight"] == "W"
    # design=False ignores it; nothing was written.
    assert "mean_se" not in dss.means("Y", by="G", design=False).to_pandas().columns
    assert all(mt.open(p).design() is None for p in paths)
    assert mt.open_many(paths).design() is None


def test_mask_over_datasets_is_one_datasets(data):
    d, whole, paths, one = data
    dss = mt.open_many(paths)
    keep = (whole.AGE >= 20) & (whole.Y.fillna(0) < 80000)
    for mask in (keep, keep.to_numpy(), dss.select("AGE >= 20") & (whole.Y.fillna(0) < 80000).to_numpy()):
        got = dss.means("Y", by="G", filter=mask).to_pandas()
        close(got, one.means("Y", by="G", filter=keep.to_numpy()).to_pandas())
    want = whole[keep].groupby("G").Y.mean()
    np.testing.assert_allclose(got["mean"].to_numpy(), want.to_numpy(), rtol=1e-12)
    f = dss.freq("G", filter=keep).to_dict()
    assert f["filter"] == f"a selection of {int(keep.sum())} records"
    # Held design and mask together: R survey's SEs.
    held = dss.with_design(**TAYLOR)
    m = held.means("Y", by="G", filter=keep).to_pandas().set_index("G")
    rcsv, out = d / "r.csv", d / "r_out.csv"
    whole.assign(KEEP=keep.astype(int)).to_csv(rcsv, index=False)
    (d / "r.R").write_text(R_SCRIPT)
    subprocess.run(["Rscript", str(d / "r.R"), str(rcsv), str(out)], check=True, capture_output=True)
    r = pd.read_csv(out).set_index("g")
    for g in (1, 2, 3):
        assert m.loc[g, "mean"] == pytest.approx(r.loc[g, "est"], rel=1e-9)
        assert m.loc[g, "mean_se"] == pytest.approx(r.loc[g, "se"], rel=1e-6)
    # A mask selecting nothing: no groups, no error.
    none = dss.freq("G", filter=np.zeros(len(whole), dtype=bool)).to_dict()
    assert none["total"]["count"] == 0


def test_bad_masks_over_datasets(data, tmp_path):
    d, whole, paths, _ = data
    dss = mt.open_many(paths)
    with pytest.raises(ValueError, match="the datasets have 2,400 records"):
        dss.freq("G", filter=np.ones(10, dtype=bool))
    with pytest.raises(ValueError, match="missing value"):
        dss.freq("G", filter=pd.Series([True, None] * 1200, dtype="boolean"))
    # A part imported anew: a mask select() computed before is refused.
    copies = []
    for i, p in enumerate(paths):
        copies.append(mt.import_csv(d / f"p{i}.csv", tmp_path / f"c{i}.mtab").path)
    many = mt.open_many(copies)
    mask = many.select("AGE >= 20")
    assert many.freq("G", filter=mask).to_dict()["total"]["count"] == int((whole.AGE >= 20).sum())
    mt.import_csv(d / "p1.csv", tmp_path / "c1.mtab", force=True)
    with pytest.raises(ValueError, match="compute the mask again"):
        many.freq("G", filter=mask)
    # One dataset through open_many takes masks and held designs too.
    single = mt.open_many([paths[0]])
    n0 = len(pd.read_csv(d / "p0.csv"))
    m0 = single.with_design(**TAYLOR).means("Y", filter=np.ones(n0, dtype=bool)).to_pandas()
    ref = mt.open(paths[0]).with_design(**TAYLOR).means("Y").to_pandas()
    close(m0, ref)
    # A one-dataset mask (Dataset.select) is tied to its import through
    # open_many too: after a re-import of the same size it is refused.
    one = mt.open(copies[0])
    m1 = one.select("AGE >= 20")
    alone = mt.open_many([copies[0]])
    want = int((pd.read_csv(d / "p0.csv").AGE >= 20).sum())
    assert alone.freq("G", filter=m1).to_dict()["total"]["count"] == want
    mt.import_csv(d / "p0.csv", tmp_path / "c0.mtab", force=True)
    with pytest.raises(ValueError, match="compute the mask again"):
        mt.open_many([copies[0]]).freq("G", filter=m1)


# A real two-process LocalCluster, as test_dask.py starts it.
from test_dask import client  # noqa: E402,F401  (a fixture)


@pytest.mark.parametrize("design", [TAYLOR, JK1], ids=["taylor", "jk1"])
def test_held_design_on_dask(data, client, design):
    _, whole, paths, one = data
    ref = one.with_design(**design).means("Y", by="G").to_pandas()
    over = mtd.on(client, mtd.parts(paths)).with_design(**design)
    close(over.means("Y", by="G").to_pandas(), ref)
    ranges = mtd.on(client, mtd.split(one.path, 3)).with_design(**design)
    close(ranges.means("Y", by="G").to_pandas(), ref)
    t = ranges.tab("G", "ST", pct="row").to_pandas()
    close(t, one.with_design(**design).tab("G", "ST", pct="row").to_pandas())
    assert mt.open(one.path).design() is None
    with pytest.raises(ValueError, match="ds.subset"):
        over.freq("G", filter=np.ones(len(whole), dtype=bool))
