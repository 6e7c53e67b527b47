"""A boolean mask as ``filter=`` (numpy or pandas, passed to the native
side as a selection: nothing is written to the dataset), ``ds.head(n)``
and ``ds["AGE"]`` — against pandas computing the same from the CSV."""

import os

import numpy as np
import pandas as pd
import pytest

import microtab as mt


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("masks")
    rng = np.random.default_rng(3)
    n = 5000
    df = pd.DataFrame({"AGE": rng.integers(0, 90, n), "SEX": rng.integers(1, 3, n),
                       "INC": rng.integers(0, 100000, n).astype(float),
                       "W": rng.uniform(1, 5, n).round(3), "CITY": rng.choice(["Oslo", "Bergen", "Tromsø"], n)})
    df.loc[rng.random(n) < 0.1, "INC"] = np.nan
    csv = d / "d.csv"
    df.to_csv(csv, index=False)
    ds = mt.import_csv(csv, d / "d.mtab")
    return csv, ds


def listing(path):
    return sorted((f, os.stat(os.path.join(path, f)).st_mtime_ns) for f in os.listdir(path))


def test_mask_as_filter_matches_pandas(data):
    csv, ds = data
    df = pd.read_csv(csv)
    before = listing(ds.path)
    mask = (df["AGE"] >= 25) & (df["CITY"] != "Oslo")
    f = ds.freq("SEX", weight="W", filter=mask).to_pandas().set_index("value")
    want = df[mask].groupby("SEX")
    assert f["count"].tolist() == want.size().tolist()
    np.testing.assert_allclose(f["weighted"].to_numpy(), want.W.sum().to_numpy(), rtol=1e-12)
    m = ds.means("INC", by="SEX", filter=mask.to_numpy()).to_pandas().set_index("SEX")
    np.testing.assert_allclose(m["mean"].to_numpy(), want.INC.mean().to_numpy(), rtol=1e-12)
    t = ds.tab("SEX", "CITY", filter=mask).to_pandas(wide=True)["count"]
    oracle = pd.crosstab(df[mask].SEX, df[mask].CITY)
    assert (t[oracle.columns].to_numpy() == oracle.to_numpy()).all()
    # Masks combine as numpy's do (a filter text's mask and one of pandas).
    both = ds.freq("SEX", filter=ds.select("SEX = 2") & mask.to_numpy()).to_dict()["total"]["count"]
    assert both == int((mask & (df["SEX"] == 2)).sum())
    # ds.select's mask round-trips; to_pandas takes it too.
    sel = ds.select("AGE >= 25 and CITY != Oslo")
    assert (sel == mask.to_numpy()).all()
    got = ds.to_pandas(["AGE", "INC", "CITY"], filter=sel)
    want_df = df.loc[mask, ["AGE", "INC", "CITY"]].reset_index(drop=True)
    assert (got["AGE"].to_numpy() == want_df["AGE"].to_numpy()).all()
    assert got["INC"].isna().sum() == want_df["INC"].isna().sum()
    np.testing.assert_allclose(got["INC"].dropna().to_numpy(float), want_df["INC"].dropna().to_numpy())
    assert (got["CITY"].astype(str).to_numpy() == want_df["CITY"].to_numpy()).all()
    # Correlations and models take it too (numpy's on the same records).
    sub = df[mask].dropna(subset=["INC"])
    r = ds.corr("AGE", "INC", filter=mask).matrix.loc["AGE", "INC"]
    assert r == pytest.approx(np.corrcoef(sub.AGE, sub.INC)[0, 1], rel=1e-9)
    b = ds.regress("INC ~ AGE", filter=mask).coefficients["estimate"]
    slope, icpt = np.polyfit(sub.AGE.to_numpy(float), sub.INC.to_numpy(), 1)
    assert b["AGE"] == pytest.approx(slope, rel=1e-8) and b["(Intercept)"] == pytest.approx(icpt, rel=1e-8)
    q = ds.ratio("INC", "AGE", filter=mask).to_pandas().iloc[-1]
    both = df[mask].dropna(subset=["INC"])
    assert q["ratio"] == pytest.approx(both.INC.sum() / both.AGE.sum(), rel=1e-12)
    # Nothing was written to the dataset for the selection.
    assert listing(ds.path) == before


def test_mask_edges(data):
    csv, ds = data
    df = pd.read_csv(csv)
    none = np.zeros(len(df), dtype=bool)
    assert ds.freq("SEX", filter=none).to_pandas().empty
    assert len(ds.to_pandas(["AGE"], filter=none)) == 0
    assert ds.means("INC", by="SEX", filter=none).groups == []
    with pytest.raises(ValueError, match="4,999 values; the dataset has 5,000 records"):
        ds.freq("SEX", filter=none[:-1])
    with pytest.raises(ValueError, match="5,001 values"):
        ds.to_pandas(["AGE"], filter=np.ones(len(df) + 1, dtype=bool))
    na = pd.Series(df["INC"] > 50000, dtype="boolean")
    na[df["INC"].isna()] = pd.NA
    with pytest.raises(ValueError, match=r"missing value\(s\) \(NA\).*fillna\(False\)"):
        ds.freq("SEX", filter=na)
    # The advice works as typed.
    ok = ds.freq("SEX", filter=na.fillna(False)).to_dict()["total"]["count"]
    assert ok == int((df["INC"] > 50000).sum())
    with pytest.raises(ValueError, match="expected booleans"):
        ds.freq("SEX", filter=df["AGE"])
    with pytest.raises(ValueError, match="boolean mask"):
        ds.freq("SEX", filter=np.ones(len(df), dtype=np.int64))
    # Exports take masks too (tests/python/test_export_masks_py.py): one
    # selecting nothing writes no records.
    here = os.path.dirname(ds.path)
    assert ds.arrow(["AGE"], filter=none).to_arrow().num_rows == 0
    assert ds.to_parquet(os.path.join(here, "x.parquet"), filter=none)["rows"] == 0
    ds.to_stata(os.path.join(here, "x.dta"), filter=none)
    import pyreadstat
    assert len(pyreadstat.read_dta(os.path.join(here, "x.dta"))[0]) == 0
    # A subset of a mask's records.
    keep = (df["SEX"] == 2).to_numpy()
    sub = ds.subset(os.path.join(os.path.dirname(ds.path), "women.mtab"), ["AGE", "SEX"], filter=keep)
    assert sub.shape == (int(keep.sum()), 2)
    assert (sub["AGE"].to_numpy() == df.loc[keep, "AGE"].to_numpy()).all()


def test_head_and_getitem_are_read_csv(data):
    csv, ds = data
    df = pd.read_csv(csv)
    full = ds.to_pandas()
    for n in (0, 1, 5, 64, 4999, 5000, 10**6):
        h = ds.head(n)
        k = min(n, len(df))
        assert h.shape == (k, df.shape[1])
        assert list(h.columns) == list(df.columns)
        assert (h["AGE"].to_numpy() == df["AGE"].head(k).to_numpy()).all()
        assert (h["CITY"].astype(object).to_numpy() == df["CITY"].head(k).to_numpy()).all()
        assert h["INC"].isna().sum() == df["INC"].head(k).isna().sum()
        pd.testing.assert_frame_equal(h.reset_index(drop=True),
                                      ds.to_pandas(filter=np.arange(len(df)) < k).reset_index(drop=True))
    assert ds.head()["AGE"].dtype == np.int64 and len(ds.head()) == 5
    with pytest.raises(ValueError):
        ds.head("5")
    age = ds["age"]
    assert isinstance(age, pd.Series) and age.name == "AGE" and age.dtype == np.int64
    assert (age.to_numpy() == df["AGE"].to_numpy()).all()
    inc = ds["INC"]
    assert str(inc.dtype) == "Float64" and inc.isna().sum() == df["INC"].isna().sum()
    two = ds[["AGE", "SEX"]]
    assert list(two.columns) == ["AGE", "SEX"] and two.shape == (len(df), 2)
    pd.testing.assert_frame_equal(two, full[["AGE", "SEX"]])
    with pytest.raises(mt.QueryError, match="unknown variable"):
        ds["NOPE"]
    with pytest.raises(TypeError):
        ds[0]
    # As a pandas frame: iterating gives the variables, `in` asks for one.
    assert list(ds) == list(df.columns) and "age" in ds and "NOPE" not in ds


def test_series_mask_is_aligned_on_its_index(data):
    """A mask built on a sorted or shuffled frame selects the records its
    index names, as pandas' df[mask] does (it used to be read by position)."""
    csv, ds = data
    df = ds.to_pandas(["AGE", "INC", "SEX"])
    sub = df.sort_values("AGE")
    mk = (sub.AGE >= 25) & (sub.INC > 50000).fillna(False)
    want = df[mk].SEX.value_counts().sort_index()
    got = ds.freq("SEX", filter=mk).to_pandas().set_index("value")["count"]
    assert got.tolist() == want.tolist()
    shuffled = mk.sample(frac=1, random_state=5)
    got = ds.freq("SEX", filter=shuffled).to_pandas().set_index("value")["count"]
    assert got.tolist() == want.tolist()
    # An index that names no records is refused, saying how to pass values in record order.
    moved = pd.Series(mk.sort_index().to_numpy(), index=np.arange(len(mk)) + 10)
    with pytest.raises(ValueError, match="does not name the records 0"):
        ds.freq("SEX", filter=moved)
    by_order = ds.freq("SEX", filter=moved.to_numpy()).to_pandas().set_index("value")["count"]
    assert by_order.tolist() == want.tolist()
    text = pd.Series(mk.to_numpy(), index=mk.index.astype(str))
    with pytest.raises(ValueError, match="does not name the records"):
        ds.freq("SEX", filter=text)


def test_a_select_mask_is_refused_after_a_new_import(tmp_path):
    # The same number of records imported anew in another order: a mask
    # computed before would select other records, so it is refused; a
    # label or computed variable keeps the records and the mask.
    rng = np.random.default_rng(11)
    df = pd.DataFrame({"AGE": rng.integers(0, 90, 3000), "SEX": rng.integers(1, 3, 3000)})
    df.to_csv(tmp_path / "a.csv", index=False)
    ds = mt.import_csv(tmp_path / "a.csv", tmp_path / "a.mtab")
    m = ds.select("AGE >= 65")
    assert isinstance(m, np.ndarray) and m.dtype == bool and int(m.sum()) == int((df.AGE >= 65).sum())
    assert isinstance(m & np.ones(len(df), dtype=bool), mt.Mask)
    ds.label("SEX", {1: "Male", 2: "Female"})
    ds.compute("OLD = AGE >= 65")
    want = df[df.AGE >= 65].SEX.value_counts().sort_index().tolist()
    assert ds.freq("SEX", filter=m).to_pandas()["count"].tolist() == want
    assert ds.freq("SEX", filter=m & ~ds.select("SEX = 1")).to_pandas()["count"].tolist() == want[1:]
    df.sort_values("AGE").to_csv(tmp_path / "a.csv", index=False)
    mt.import_csv(tmp_path / "a.csv", tmp_path / "a.mtab", force=True)
    for call in (lambda: ds.freq("SEX", filter=m), lambda: ds.to_pandas(["AGE"], filter=m),
                 lambda: ds.subset(tmp_path / "s.mtab", ["AGE"], filter=m)):
        with pytest.raises(ValueError, match="another import of this dataset"):
            call()
    # As the error says: the mask computed again selects the right records.
    assert ds.freq("SEX", filter=ds.select("AGE >= 65")).to_pandas()["count"].tolist() == want
    # A plain numpy copy is taken as it is (its values are in record order by the user's word).
    assert len(ds.to_pandas(["AGE"], filter=np.asarray(m))) == int(m.sum())
