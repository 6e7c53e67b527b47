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

    python3 bench/on_dask.py --scale bench/data/scale/census_150000000.mtab [--parts 32] [--runs 5]

is the scaling run (issue 16's target): each worker scans with one thread
(RAYON_NUM_THREADS=1 in the workers: a worker stands for a node), one
worker against two, Q3 and a mean of INCTOT by EDUC cold (page cache
dropped before each run) and warm, the bytes the workers read from disk
per cold run (/proc/PID/io), and the per-part costs the projection in
docs/DISTRIBUTED.md rests on (a part's scan in a worker; the merge and
finish). The dataset comes from `python3 bench/scale.py --sizes 150000000`.
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
    ap.add_argument("--scale", help="a large census dataset: the 1-vs-2-worker scaling run only")
    a = ap.parse_args()
    if a.scale:
        return scale(a)
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


def scale(a):
    import json
    import os
    import time
    import microtab as mt
    import microtab.dask as mtd
    from distributed import Client, LocalCluster

    ds = os.path.abspath(a.scale)
    rows = mt.open(ds).rows
    queries = {
        "Q3 tab RACE × EMPSTAT, AGE 25–64": ("tab", ("RACE", "EMPSTAT"), dict(weight="PERWT", filter="AGE(25-64)")),
        "Q4 means INCTOT by EDUC": ("means", ("INCTOT",), dict(by=["EDUC"], weight="PERWT")),
    }
    print(f"{rows:,} records, {a.parts} parts, {a.runs} runs each; each worker scans with one thread")
    res = {}
    for workers in (1, 2):
        cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                               dashboard_address=None, silence_logs=40, env={"RAYON_NUM_THREADS": "1"})
        client = Client(cluster)
        try:
            assert set(client.run(lambda: os.environ.get("RAYON_NUM_THREADS")).values()) == {"1"}

            def read_bytes():
                def io():
                    with open(f"/proc/{os.getpid()}/io") as f:
                        return int(next(ln for ln in f if ln.startswith("read_bytes")).split()[1])
                return sum(client.run(io).values())

            on = mtd.on(client, mtd.split(ds, a.parts))
            for name, (kind, args, kw) in queries.items():
                q = lambda: getattr(on, kind)(*args, **kw)  # noqa: E731
                q()
                warm = timed(q, a.runs)
                reads = []

                def before():
                    reads.append(read_bytes())
                cold = timed(q, a.runs, cold=True, before=before)
                reads.append(read_bytes())
                per_run = [b - a_ for a_, b in zip(reads, reads[1:])][: a.runs]
                res[(workers, name)] = (cold, warm)
                print(f"{workers} worker(s), {name}: cold {med(cold)}, read {statistics.median(per_run) / 1e6:.0f} MB "
                      f"from disk per run; warm {med(warm)}", flush=True)
            if workers == 1:
                # Per-part costs: one part's partial in a worker, and the
                # merge + finish of all parts here.
                kind, args, kw = queries["Q3 tab RACE × EMPSTAT, AGE 25–64"]
                spec = json.dumps({"analysis": "tab", "row": "RACE", "col": "EMPSTAT",
                                   "weight": "PERWT", "filter": "AGE(25-64)"})
                part = mtd.split(ds, a.parts)[0]
                t_part = []
                for _ in range(a.runs):
                    t0 = time.perf_counter()
                    b = client.submit(mtd.partial, part, spec, pure=False).result()
                    t_part.append(time.perf_counter() - t0)
                parts = [mtd.partial(p, spec) for p in mtd.split(ds, a.parts)]
                t_merge = timed(lambda: mtd.finish(mtd.merge(*parts), spec), a.runs)
                print(f"per part ({rows // a.parts:,} records, warm): partial in a worker incl. the round trip "
                      f"{med(t_part)}, {len(b):,} bytes of JSON; merge of {a.parts} parts + finish here {med(t_merge)}")
        finally:
            client.close()
            cluster.close()
    for name in queries:
        for i, kind in enumerate(("cold", "warm")):
            one, two = statistics.median(res[(1, name)][i]), statistics.median(res[(2, name)][i])
            print(f"{name}, {kind}: 1 worker {one * 1e3:.0f} ms, 2 workers {two * 1e3:.0f} ms: {one / two:.2f}×")


if __name__ == "__main__":
    main()
