"""A notebook's worth of microtab, as a new user runs it in a fresh
virtual environment after `pip install microtab[pandas,arrow,polars]`:
import data, set a design, tables with standard errors, pandas / Polars /
DuckDB interop, Parquet out and back. Numbers are checked against DuckDB
(sums and counts) and against the replicate-variance formula computed
here with numpy. Run by scripts/test.sh in a new venv:

    python tests/smoke/notebook.py WORKDIR
"""

import sys
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import polars as pl
import pyarrow as pa

import microtab as mt

work = Path(sys.argv[1])
work.mkdir(parents=True, exist_ok=True)

# Cell 1: some microdata, as a CSV a user would have.
rng = np.random.default_rng(1)
n = 20000
df = pd.DataFrame({
    "SEX": rng.integers(1, 3, n), "AGE": rng.integers(0, 96, n),
    "EDUC": rng.integers(0, 12, n), "PERWT": rng.integers(20, 300, n) / 4,
    "INCTOT": np.where(rng.random(n) < 0.1, 9999999, rng.integers(-5000, 200000, n)),
})
for r in range(1, 9):
    df[f"REPWTP{r}"] = (df["PERWT"] * rng.choice([0.5, 1.5], n)).round(2)
df.to_csv(work / "people.csv", index=False)

# Cell 2: import, label, design.
ds = mt.import_csv(work / "people.csv", work / "people.mtab", missing={"INCTOT": 9999999}, force=True)
assert ds.rows == n and ds.variable("PERWT").decimals == 2
d = ds.design("PERWT", repweights="REPWTP1-REPWTP8", type="sdr")
assert d["replicates"]["scale"] == 4 / 8
print(repr(ds))

# Cell 3: a weighted crosstab with SEs; check against DuckDB and numpy.
t = ds.tab("SEX", "EDUC", filter="AGE(25-64)", pct="row", stats=True)
frame = t.to_pandas()
con = duckdb.connect()
con.register("people", df)
want = con.execute("SELECT SEX, EDUC, count(*), sum(PERWT) FROM people WHERE AGE BETWEEN 25 AND 64 "
                   "GROUP BY ALL ORDER BY ALL").fetchall()
got = [(int(r.row), int(r.col), int(r["count"]), float(r.weighted)) for _, r in frame.iterrows() if r["count"]]
assert [(a, b, c) for a, b, c, _ in got] == [(a, b, c) for a, b, c, _ in want]
assert np.allclose([x[3] for x in got], [x[3] for x in want], rtol=1e-12)
sub = df[(df.AGE >= 25) & (df.AGE <= 64) & (df.SEX == 1) & (df.EDUC == 3)]
full = sub["PERWT"].sum()
reps = np.array([sub[f"REPWTP{r}"].sum() for r in range(1, 9)])
se = np.sqrt(4 / 8 * ((reps - full) ** 2).sum())
cell = frame[(frame.row == 1) & (frame.col == 3)].iloc[0]
assert abs(cell.weighted_se - se) <= 1e-9 * se, (cell.weighted_se, se)
assert list(t.tests()["test"]) == ["rao-scott"] and t.tests()["p"].between(0, 1).all()
html = t._repr_html_()
assert "<table" in html

# Cell 4: means with a missing code left out.
m = ds.means("INCTOT", by="SEX").to_pandas()
ok = df[df.INCTOT != 9999999]
w = ok.groupby("SEX").apply(lambda g: np.average(g.INCTOT, weights=g.PERWT), include_groups=False)
assert np.allclose(m.sort_values("SEX")["mean"], w.sort_index(), rtol=1e-12)

# Cell 5: data frames and Arrow.
f = ds.to_pandas(["SEX", "AGE", "INCTOT"], filter="AGE(18-*)")
assert len(f) == int((df.AGE >= 18).sum()) and f["INCTOT"].isna().sum() == int(
    ((df.AGE >= 18) & (df.INCTOT == 9999999)).sum())
v = ds.arrow(["SEX", "INCTOT", "PERWT"])
got = duckdb.sql("SELECT SEX, sum(INCTOT * PERWT) FROM v GROUP BY SEX ORDER BY SEX").fetchall()
want = con.execute("SELECT SEX, sum(INCTOT * PERWT) FROM people WHERE INCTOT <> 9999999 "
                   "GROUP BY SEX ORDER BY SEX").fetchall()
assert all(a[0] == b[0] and abs(a[1] - b[1]) <= 1e-9 * abs(b[1]) for a, b in zip(got, want))
p = ds.to_polars(["SEX", "AGE"])
assert isinstance(p, pl.DataFrame) and p.height == n
assert isinstance(ds.to_arrow(["AGE"]), pa.Table)
assert t.to_polars().height == len(frame) and pa.table(t).num_rows == len(frame)

# Cell 6: Parquet out and back, design and labels kept.
ds.to_parquet(work / "people.parquet", force=True)
back = mt.import_parquet(work / "people.parquet", work / "back.mtab", force=True)
assert back.design() == ds.design()
assert back.tab("SEX", "EDUC", filter="AGE(25-64)").to_dict()["tables"] == \
    ds.tab("SEX", "EDUC", filter="AGE(25-64)").to_dict()["tables"]

# Cell 7: errors a user meets.
try:
    ds.tab("SEX", "NOPE")
except mt.QueryError as e:
    assert "NOPE" in str(e)
else:
    raise AssertionError("no QueryError")
print("notebook smoke test: all cells ran, numbers match DuckDB and the replicate formula")
