"""filter= with the operators users type (issue 31, item 2) in Python and
over Dask parts, against pandas' nullable boolean indexing: pandas'
`Int64`/`Float64`/`string` columns compare a missing value to <NA> and
combine with Kleene's logic (`<NA> & False` is False, `~<NA>` is <NA>),
SQL's three-valued logic, and a row is kept only when the mask is True."""

import numpy as np
import pandas as pd
import pytest

import microtab as mt
import microtab.dask as mtd

N = 70_000


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("grammar_py")
    rng = np.random.default_rng(312)
    age = np.arange(N) * 90 // N
    df = pd.DataFrame({
        "G": rng.integers(1, 6, N),
        "AGE": pd.array(np.where(rng.random(N) < 0.05, None, age), dtype="Int64"),
        "SEX": pd.array(np.where(rng.random(N) < 0.03, None, rng.integers(1, 3, N)), dtype="Int64"),
        "INC": pd.array(np.where(rng.random(N) < 0.1, None, np.round(rng.uniform(-50, 5000, N), 2)),
                        dtype="Float64"),
        # Python strings: their comparisons are nullable booleans too.
        "REGION": pd.array(np.where(rng.random(N) < 0.04, None,
                                    rng.choice(["Nord-Norge", "Sør-Øst", "Vest"], N)),
                           dtype=pd.StringDtype("python")),
    })
    src = d / "g.csv"
    df.to_csv(src, index=False)
    ds = d / "g.mtab"
    mt.import_csv(src, ds)
    return ds, df


CASES = [
    ("AGE >= 25 and SEX = 2", lambda f: (f.AGE >= 25) & (f.SEX == 2)),
    ("not AGE > 25", lambda f: ~(f.AGE > 25)),
    ("AGE < 10 or SEX = 1", lambda f: (f.AGE < 10) | (f.SEX == 1)),
    ("not (AGE > 80 or INC < 100)", lambda f: ~((f.AGE > 80) | (f.INC < 100))),
    ("AGE between 20 and 30", lambda f: (f.AGE >= 20) & (f.AGE <= 30)),
    ("AGE not in (1, 5, 7) & REGION != Vest",
     lambda f: ~f.AGE.isin([1, 5, 7]).astype("boolean").mask(f.AGE.isna(), pd.NA) & (f.REGION != "Vest")),
    ("(REGION(Nord-Norge) | INC > 4900) and not SEX == 1",
     lambda f: ((f.REGION == "Nord-Norge") | (f.INC > 4900)) & ~(f.SEX == 1)),
]


@pytest.mark.parametrize("flt,mask", CASES, ids=[c[0] for c in CASES])
def test_freq_matches_pandas(data, flt, mask):
    ds, df = data
    keep = mask(df).fillna(False).astype(bool)
    want = df[keep].G.value_counts().sort_index()
    assert len(want)
    got = mt.open(ds).freq("G", filter=flt).to_dict()
    rows = {r["value"]: r["count"] for r in got["rows"] if not r.get("missing")}
    assert rows == {int(g): int(n) for g, n in want.items()}
    # Over parts (Dask's path: exact partial results merged).
    parts = mtd.on(None, mtd.split(ds, 5)).freq("G", filter=flt).to_dict()
    assert {r["value"]: r["count"] for r in parts["rows"] if not r.get("missing")} == rows
    # A frame of the records that pass.
    assert len(mt.open(ds).to_pandas(["G"], filter=flt)) == int(keep.sum())
    assert int(mt.open(ds).select(flt).sum()) == int(keep.sum())


def test_a_bad_filter_names_the_mistake(data):
    ds, _ = data
    with pytest.raises(mt.QueryError, match="never closed"):
        mt.open(ds).freq("G", filter="(AGE > 3 or SEX = 1")
