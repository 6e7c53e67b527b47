"""Issue 31: a boolean mask as ``filter=`` of the exports
(``to_parquet``, ``to_stata``, ``to_spss``, ``arrow``, ``to_arrow``,
``to_polars``): the records written are pandas' ``df[mask]`` of the
source CSV, read back by pyarrow and pyreadstat (the oracles)."""

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pyreadstat
import pytest

import microtab as mt


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("export_masks")
    rng = np.random.default_rng(66)
    n = 3000
    df = pd.DataFrame({"AGE": rng.integers(0, 90, n), "SEX": rng.integers(1, 3, n),
                       "INC": rng.gamma(2.0, 15000.0, n).round(2),
                       "TOWN": rng.choice(["Ames", "Boise", "Cary", "Dover"], n)})
    df.loc[rng.random(n) < 0.07, "INC"] = np.nan
    csv = d / "d.csv"
    df.to_csv(csv, index=False)
    ds = mt.import_csv(csv, d / "d.mtab")
    ds.label("SEX", {1: "Male", 2: "Female"})
    return d, df, ds


def masks(df, ds):
    m = (df.AGE >= 30) & (df.INC > 20000).fillna(False)
    return {"series": m, "numpy": m.to_numpy(), "select": ds.select("SEX = 2") & m.to_numpy(),
            "none": np.zeros(len(df), dtype=bool)}


def want_of(df, mask):
    return df[np.asarray(mask)].reset_index(drop=True)


def same(got, want):
    assert len(got) == len(want)
    assert got["AGE"].astype("int64").tolist() == want["AGE"].tolist()
    assert got["SEX"].astype("int64").tolist() == want["SEX"].tolist()
    np.testing.assert_allclose(got["INC"].astype("float64").to_numpy(), want["INC"].to_numpy(),
                               rtol=1e-12, equal_nan=True)
    assert [str(x) for x in got["TOWN"]] == want["TOWN"].tolist()


@pytest.mark.parametrize("kind", ["series", "numpy", "select", "none"])
def test_parquet_with_a_mask_is_pandas_selection(data, tmp_path, kind):
    _, df, ds = data
    mask = masks(df, ds)[kind]
    s = ds.to_parquet(tmp_path / "m.parquet", filter=mask)
    want = want_of(df, mask)
    assert s["rows"] == len(want)
    same(pq.read_table(tmp_path / "m.parquet").to_pandas(), want)


@pytest.mark.parametrize("kind", ["series", "select"])
def test_stata_and_spss_with_a_mask(data, tmp_path, kind):
    _, df, ds = data
    mask = masks(df, ds)[kind]
    want = want_of(df, mask)
    ds.to_stata(tmp_path / "m.dta", filter=mask)
    got, meta = pyreadstat.read_dta(str(tmp_path / "m.dta"))
    same(got, want)
    assert meta.variable_value_labels["SEX"] == {1: "Male", 2: "Female"}
    ds.to_spss(tmp_path / "m.sav", filter=mask)
    got, _ = pyreadstat.read_sav(str(tmp_path / "m.sav"))
    same(got, want)


def test_arrow_polars_with_a_mask(data):
    _, df, ds = data
    mask = masks(df, ds)["series"]
    want = want_of(df, mask)
    same(ds.to_arrow(filter=mask).to_pandas(), want)
    same(ds.to_polars(filter=mask).to_pandas(), want)
    v = ds.arrow(["AGE", "SEX", "INC", "TOWN"], filter=mask.to_numpy())
    import pyarrow as pa
    same(pa.table(v).to_pandas(), want)
    same(pa.table(v).to_pandas(), want)      # every pass reads the same records
    # The mask is the records', as to_pandas takes it.
    same(ds.to_pandas(filter=mask), want)


def test_bad_masks_are_refused_by_exports(data, tmp_path):
    _, df, ds = data
    with pytest.raises(ValueError, match="3,000 records"):
        ds.to_parquet(tmp_path / "x.parquet", filter=np.ones(10, dtype=bool))
    with pytest.raises(ValueError, match="missing value"):
        ds.to_stata(tmp_path / "x.dta", filter=pd.Series([True, None] * 1500, dtype="boolean"))
    with pytest.raises(ValueError, match="booleans"):
        ds.arrow(filter=pd.Series(np.ones(len(df), dtype=int)))
    assert not (tmp_path / "x.parquet").exists() and not (tmp_path / "x.dta").exists()


def test_a_mask_of_another_import_is_refused(data, tmp_path):
    d, df, _ = data
    ds = mt.import_csv(d / "d.csv", tmp_path / "r.mtab")
    mask = ds.select("AGE >= 30")
    v = ds.arrow(["AGE"], filter=mask)
    assert v.to_arrow().num_rows == int((df.AGE >= 30).sum())
    mt.import_csv(d / "d.csv", tmp_path / "r.mtab", force=True)
    for write in (lambda: ds.to_parquet(tmp_path / "y.parquet", filter=mask),
                  lambda: ds.to_spss(tmp_path / "y.sav", filter=mask),
                  lambda: v.to_arrow()):
        with pytest.raises(ValueError, match="compute the mask again"):
            write()
