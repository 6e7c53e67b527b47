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
worker against two (both clusters up, runs alternated between them), Q3
and a mean of INCTOT by EDUC cold (page cache dropped before each run)
and warm, the bytes the workers read from disk
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
    ap.add_argument("--read-path", help="MICROTAB_READ_PATH in the workers (auto|mmap|pread|inline)")
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


def disk_floor(ds, names, runs):
    """What this machine's disk gives for Q3's column files, cold: read
    whole in 1 MiB preads by 1, 2 and 4 threads (each its share of every
    file): the floor under any cold Q3, however many workers."""
    import os
    import threading
    import time
    from run import drop_caches

    files = [os.path.join(ds, "vars", f) for f in os.listdir(os.path.join(ds, "vars"))
             if f.split(".")[0] in names and f.endswith(".col")]
    total = sum(os.path.getsize(f) for f in files)

    def read(k):
        drop_caches()

        def share(i):
            for f in files:
                size = os.path.getsize(f)
                fd = os.open(f, os.O_RDONLY)
                o, end = size * i // k, size * (i + 1) // k
                while o < end:
                    n = len(os.pread(fd, min(1 << 20, end - o), o))
                    if not n:
                        break
                    o += n
                os.close(fd)
        t = time.perf_counter()
        th = [threading.Thread(target=share, args=(i,)) for i in range(k)]
        [x.start() for x in th]
        [x.join() for x in th]
        return time.perf_counter() - t

    out = []
    for k in (1, 2, 4):
        xs = [read(k) for _ in range(max(3, runs // 2))]
        out.append(f"{k} reader{'s' if k > 1 else ''} {med(xs)} ({total / statistics.median(xs) / 1e9:.2f} GB/s)")
    print(f"the disk, cold, Q3's {len(files)} column files ({total / 1e6:.0f} MB): " + ", ".join(out), flush=True)


def scale(a):
    """1 worker against 2, both clusters up at once and the runs
    alternated between them (this machine is shared: pairs of runs see
    the same conditions), cold and warm."""
    import json
    import os
    import time
    import microtab as mt
    import microtab.dask as mtd
    from distributed import Client, LocalCluster
    from run import drop_caches

    ds = os.path.abspath(a.scale)
    rows = mt.open(ds).rows
    queries = {
        "Q3 tab RACE × EMPSTAT, AGE 25–64": ("tab", ("RACE", "EMPSTAT"), dict(weight="PERWT", filter="AGE(25-64)")),
        "Q4 means INCTOT by EDUC": ("means", ("INCTOT",), dict(by=["EDUC"], weight="PERWT")),
    }
    print(f"{rows:,} records, {a.parts} parts, {a.runs} alternated runs each; each worker scans with one thread")
    disk_floor(ds, ["RACE", "EMPSTAT", "PERWT", "AGE"], a.runs)
    env = {"RAYON_NUM_THREADS": "1"}
    if a.read_path:
        env["MICROTAB_READ_PATH"] = a.read_path
        print(f"read path in the workers: {a.read_path}")
    clients = {}
    clusters = []
    try:
        for workers in (1, 2):
            cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                                   dashboard_address=None, silence_logs=40, env=env)
            clusters.append(cluster)
            clients[workers] = Client(cluster)
            assert set(clients[workers].run(lambda: os.environ.get("RAYON_NUM_THREADS")).values()) == {"1"}

        def read_bytes(c):
            def io():
                with open(f"/proc/{os.getpid()}/io") as f:
                    return int(next(ln for ln in f if ln.startswith("read_bytes")).split()[1])
            return sum(c.run(io).values())

        want = None
        for name, (kind, args, kw) in queries.items():
            res = {(w, t): [] for w in (1, 2) for t in ("cold", "warm")}
            reads = {1: [], 2: []}
            for w, c in clients.items():
                got = getattr(mtd.on(c, mtd.split(ds, a.parts)), kind)(*args, **kw).to_dict()
                got.pop("dataset")
                if want is None or want[0] != name:
                    want = (name, got)
                assert got == want[1], "1 and 2 workers differ"
            for _ in range(a.runs):
                for w, c in clients.items():
                    on = mtd.on(c, mtd.split(ds, a.parts))
                    drop_caches()
                    before = read_bytes(c)
                    t0 = time.perf_counter()
                    getattr(on, kind)(*args, **kw)
                    res[(w, "cold")].append(time.perf_counter() - t0)
                    reads[w].append(read_bytes(c) - before)
                    t0 = time.perf_counter()
                    getattr(on, kind)(*args, **kw)
                    res[(w, "warm")].append(time.perf_counter() - t0)
            for t in ("cold", "warm"):
                one, two = res[(1, t)], res[(2, t)]
                ratios = sorted(x / y for x, y in zip(one, two))
                print(f"{name}, {t}: 1 worker {med(one)}, 2 workers {med(two)}: "
                      f"{statistics.median(one) / statistics.median(two):.2f}× "
                      f"(ratio of paired runs: median {statistics.median(ratios):.2f}×, "
                      f"{ratios[0]:.2f}–{ratios[-1]:.2f})", flush=True)
            print(f"{name}: read from disk per cold run: 1 worker {statistics.median(reads[1]) / 1e6:.0f} MB, "
                  f"2 workers {statistics.median(reads[2]) / 1e6:.0f} MB", flush=True)
        # Per-part costs: one part's partial in a worker (with the round
        # trip), and the merge + finish of all parts here.
        spec = json.dumps({"analysis": "tab", "row": "RACE", "col": "EMPSTAT",
                           "weight": "PERWT", "filter": "AGE(25-64)"})
        part = mtd.split(ds, a.parts)[0]
        t_part = timed(lambda: clients[1].submit(mtd.partial, part, spec, pure=False).result(), a.runs)
        parts = [mtd.partial(p, spec) for p in mtd.split(ds, a.parts)]
        t_merge = timed(lambda: mtd.finish(mtd.merge(*parts), spec), a.runs)
        print(f"per part ({rows // a.parts:,} records, warm): Q3's partial in a worker with the round trip "
              f"{med(t_part)}, {len(parts[0]):,} bytes of JSON; merge of {a.parts} parts + finish here "
              f"{statistics.median(t_merge) * 1e3:.2f} ms")
    finally:
        for c in clients.values():
            c.close()
        for cl in clusters:
            cl.close()


if __name__ == "__main__":
    main()
