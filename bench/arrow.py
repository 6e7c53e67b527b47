#!/usr/bin/env python3
"""Arrow and Parquet, side by side in one run (medians with min–max):

* export: `microtab export census.mtab x.parquet` (every variable,
  snappy) against DuckDB's `COPY census TO 'x.parquet' (FORMAT parquet)`
  from its own table (bench/data/census.duckdb), cold (page cache dropped)
  and warm; target: microtab at least as fast;
* import: `microtab import x.parquet` against DuckDB's
  `CREATE TABLE … AS SELECT * FROM read_parquet(…)`;
* Python: `ds.to_arrow(5 columns)` against `pyarrow.parquet.read_table`
  of the same columns, and DuckDB/Polars reading the dataset's Arrow
  stream;
* an IPUMS extract into pandas: ipumspy's `read_microdata` against
  microtab (`import_fixed` then `to_pandas`, and `to_pandas` of the
  imported dataset), on the CPS extract in ../shared/data tiled to
  --ipums-rows records (target ≥ 20×).

    python3 bench/arrow.py [--runs 5] [--ipums-rows 1000000]

Needs `pip install ./crates/python` and bench/data/census.{mtab,duckdb,
parquet} (`python3 bench/run.py`). Results: docs/BENCHMARKS.md."""

import argparse
import gzip
import shutil
import statistics
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

import duckdb
import pyarrow.parquet as pq

import microtab as mt

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))
from run import drop_caches, timed  # noqa: E402

DATA = REPO / "bench" / "data"
BIN = REPO / "target" / "release" / "microtab"
IPUMS = REPO.parent / "shared" / "data" / "ipums"
COLS = ["AGE", "SEX", "EDUC", "PERWT", "INCTOT"]


def fmt(xs):
    return f"{statistics.median(xs):.3f} s ({min(xs):.3f}–{max(xs):.3f})"


def ratio(theirs, ours):
    return f"{statistics.median(theirs) / statistics.median(ours):.2f}×"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--ipums-rows", type=int, default=1_000_000)
    a = ap.parse_args()
    ok, how = drop_caches()
    print(f"page cache: {how}")
    tmp = Path(tempfile.mkdtemp(dir=DATA))
    try:
        ours_pq, duck_pq = tmp / "m.parquet", tmp / "d.parquet"
        con = duckdb.connect(str(DATA / "census.duckdb"), read_only=True)
        con.execute("SET preserve_insertion_order = true")

        def export_ours():
            subprocess.run([str(BIN), "export", str(DATA / "census.mtab"), str(ours_pq), "--force"],
                           check=True, capture_output=True)

        def export_duck():
            con.execute(f"COPY census TO '{duck_pq}' (FORMAT parquet, COMPRESSION snappy)")

        for label, cold in (("warm", False), ("cold", True)):
            if not cold:
                export_ours()
                export_duck()
            o, d = [], []
            for _ in range(a.runs):  # alternate, so drift hits both
                o += timed(export_ours, 1, cold)
                d += timed(export_duck, 1, cold)
            print(f"export 22 variables × 14.1 M ({label}): microtab {fmt(o)}, DuckDB COPY {fmt(d)}; "
                  f"DuckDB/microtab {ratio(d, o)}; files {ours_pq.stat().st_size / 1e6:.0f} MB / "
                  f"{duck_pq.stat().st_size / 1e6:.0f} MB")

        out = tmp / "i.mtab"
        mem = duckdb.connect()

        def import_ours():
            subprocess.run([str(BIN), "import", str(ours_pq), str(out), "--force"], check=True,
                           capture_output=True)

        def import_duck():
            mem.execute(f"CREATE OR REPLACE TABLE t AS SELECT * FROM read_parquet('{ours_pq}')")

        o, d = [], []
        for _ in range(a.runs):
            o += timed(import_ours, 1)
            d += timed(import_duck, 1)
        print(f"import that Parquet file (warm): microtab {fmt(o)} (into a dataset on disk), "
              f"DuckDB CREATE TABLE AS {fmt(d)} (in memory); DuckDB/microtab {ratio(d, o)}")

        ds = mt.open(DATA / "census.mtab")
        ta = timed(lambda: ds.to_arrow(COLS), a.runs)
        tp = timed(lambda: pq.read_table(DATA / "census.parquet", columns=COLS), a.runs)
        print(f"5 columns into a pyarrow Table: microtab {fmt(ta)}, pyarrow.parquet.read_table "
              f"{fmt(tp)}; {ratio(tp, ta)}")
        v = ds.arrow(["SEX", "INCTOT"])
        def over_stream(v=v):  # DuckDB finds `v` among the caller's locals
            return duckdb.sql("SELECT SEX, avg(INCTOT) FROM v GROUP BY SEX").fetchall()
        td = timed(over_stream, a.runs)
        tq = timed(lambda: duckdb.sql(f"SELECT SEX, avg(INCTOT) FROM read_parquet('{DATA / 'census.parquet'}') "
                                      "GROUP BY SEX").fetchall(), a.runs)
        print(f"DuckDB over the dataset's Arrow stream (2 columns) {fmt(td)}, over census.parquet {fmt(tq)}")

        # An IPUMS extract into pandas.
        import ipumspy.readers as readers
        name = "cps_00006"
        lines = gzip.open(IPUMS / f"{name}.dat.gz", "rb").read().splitlines(keepends=True)
        reps = max(1, a.ipums_rows // len(lines))
        dat = tmp / f"{name}.dat.gz"
        with gzip.open(dat, "wb", compresslevel=6) as f:
            for _ in range(reps):
                f.writelines(lines)
        ddi_path = tmp / f"{name}.xml"
        shutil.copy(IPUMS / f"{name}.xml", ddi_path)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ddi = readers.read_ipums_ddi(ddi_path)
            ti = timed(lambda: readers.read_microdata(ddi, dat), max(1, a.runs // 2))
        imp = tmp / "cps.mtab"
        tm = timed(lambda: mt.import_fixed(dat, ddi_path, imp, force=True).to_pandas(), a.runs)
        cps = mt.open(imp)
        tr = timed(lambda: cps.to_pandas(), a.runs)
        print(f"IPUMS {name} × {reps} = {reps * len(lines):,} records, {len(cps.variables)} variables, "
              f"into pandas: ipumspy {fmt(ti)}; microtab import + to_pandas {fmt(tm)} ({ratio(ti, tm)}); "
              f"to_pandas of the imported dataset {fmt(tr)} ({ratio(ti, tr)})")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
