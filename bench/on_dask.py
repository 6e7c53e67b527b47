#!/usr/bin/env python3
"""microtab on Dask, measured on this machine (issue 16):

* Dask's overhead per query: Q3 (RACE × EMPSTAT weighted, AGE 25–64) over
  the 14.1 M-record dataset as one part through a LocalCluster, against
  the same query in this process (warm, medians);
* one worker against two: Q3 over --parts ranges of the dataset, warm and
  cold (page cache dropped before each cold run);
* against what a Dask user would write instead: Dask DataFrame
  `read_parquet(columns) → filter → groupby → sum` on the same data's
  Parquet file (bench/data/census.parquet), on the same cluster.

    python3 bench/on_dask.py [--runs 7] [--parts 16]

Needs bench/data/census.mtab and census.parquet (`python3 bench/run.py`).
Results: docs/BENCHMARKS.md."""

import argparse
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "bench" / "data"
sys.path.insert(0, str(Path(__file__).resolve().parent))
from run import timed  # noqa: E402


def med(xs):
    return f"{statistics.median(xs) * 1e3:.0f} ms ({min(xs) * 1e3:.0f}–{max(xs) * 1e3:.0f})"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--parts", type=int, default=16)
    a = ap.parse_args()
    import dask.dataframe as dd
    import microtab as mt
    import microtab.dask as mtd
    from distributed import Client, LocalCluster

    ds = str(DATA / "census.mtab")
    pq = str(DATA / "census.parquet")
    q3 = dict(weight="PERWT", filter="AGE(25-64)")
    local = mt.open(ds)
    want = local.tab("RACE", "EMPSTAT", **q3).to_dict()
    want.pop("dataset")

    def dask_df():
        df = dd.read_parquet(pq, columns=["RACE", "EMPSTAT", "AGE", "PERWT"])
        df = df[(df.AGE >= 25) & (df.AGE <= 64)]
        return df.groupby(["RACE", "EMPSTAT"]).PERWT.agg(["sum", "count"]).compute()

    for workers in (1, 2):
        cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                               dashboard_address=None, silence_logs=40)
        client = Client(cluster)
        try:
            one = mtd.on(client, mtd.parts([ds]))
            many = mtd.on(client, mtd.split(ds, a.parts))
            got = many.tab("RACE", "EMPSTAT", **q3).to_dict()
            got.pop("dataset")
            assert got == want, "the cluster's answer differs from one machine's"
            if workers == 1:
                one.tab("RACE", "EMPSTAT", **q3)
                inproc = timed(lambda: local.tab("RACE", "EMPSTAT", **q3), a.runs)
                through = timed(lambda: one.tab("RACE", "EMPSTAT", **q3), a.runs)
                print(f"Dask overhead: Q3 as one part through the cluster {med(through)}, in this process "
                      f"{med(inproc)}: {(statistics.median(through) - statistics.median(inproc)) * 1e3:+.1f} ms")
            warm = timed(lambda: many.tab("RACE", "EMPSTAT", **q3), a.runs)
            cold = timed(lambda: many.tab("RACE", "EMPSTAT", **q3), a.runs, cold=True)
            dask_df()
            ddw = timed(dask_df, max(3, a.runs // 2))
            ddc = timed(dask_df, max(3, a.runs // 2), cold=True)
            print(f"{workers} worker(s), Q3 over {a.parts} parts: warm {med(warm)}, cold {med(cold)}; "
                  f"Dask DataFrame groupby on Parquet: warm {med(ddw)} ({statistics.median(ddw) / statistics.median(warm):.1f}×), "
                  f"cold {med(ddc)} ({statistics.median(ddc) / statistics.median(cold):.1f}×)")
        finally:
            client.close()
            cluster.close()


if __name__ == "__main__":
    main()
