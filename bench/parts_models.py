#!/usr/bin/env python3
"""Models, ratios, correlations and compared means over parts of the data
against the same query over the whole dataset (issue 29): the cost of
answering in rounds of exact partial results (each part scanned, its
result serialized, merged, finished; a second round for Taylor scores,
a round per correlation scan, per row category of shares compared, per
pass of a model fitted record by record).

Each query runs over the whole dataset (`mt.open(ds)`) and over `--parts`
ranges of its records answered here one after another
(`microtab.dask.on(None, microtab.dask.split(ds, N))`: the work a cluster
spreads, with no cluster overhead), alternating which goes first; warm;
the median of `--runs` and the spread. The answers are compared (to
1e-9) in the same run.

    python3 bench/parts_models.py [--runs 3] [--parts 4] [--only rep|taylor]

Needs bench/data/census_rep.mtab and census_tay.mtab (`python3
bench/survey.py`, `python3 bench/taylor.py`) and the microtab package.
Results: docs/BENCHMARKS.md."""

import argparse
import math
import statistics
import time
from pathlib import Path

import microtab as mt
import microtab.dask as mtd

DATA = Path(__file__).resolve().parent / "data"

QUERIES = [
    ("regress gaussian", lambda q: q.regress("INCTOT ~ AGE + factor(SEX) + factor(EDUC)")),
    ("regress logit", lambda q: q.regress("EMPSTAT(1) ~ AGE + factor(SEX) + factor(RACE)", family="logit")),
    ("ratio by SEX", lambda q: q.ratio("INCTOT", "PERNUM", by="SEX", filter="INCTOT<9999999")),
    ("corr of 3", lambda q: q.corr("INCTOT", "AGE", "UHRSWORK", filter="INCTOT<9999999")),
    ("means diff", lambda q: q.means("INCTOT", by="SEX", diff="1", filter="INCTOT<9999999")),
    ("means test-mean", lambda q: q.means("INCTOT", by="SEX", test_mean=30000.0, filter="INCTOT<9999999")),
    ("tab diff (shares)", lambda q: q.tab("MARST", "SEX", diff="1")),
    ("regress wide (records)", lambda q: q.regress("INCTOT ~ AGE + INCWAGE + factor(SEX)",
                                                   filter="INCWAGE<999998")),
]


def close(a, b, rel=1e-9):
    """Equal to 1e-9 relative (p-values, whose relative error is the t's
    times about t², to 1e-6)."""
    if isinstance(a, dict):
        return all(close(a[k], b[k], 1e-6 if k == "p" else rel)
                   for k in a if k not in ("dataset", "covariance"))
    if isinstance(a, list):
        return len(a) == len(b) and all(close(x, y, rel) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or abs(a - b) <= rel * max(abs(a), abs(b), 1e-300)
    return a == b


def timed(f):
    t = time.perf_counter()
    out = f()
    return time.perf_counter() - t, out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--parts", type=int, default=4)
    ap.add_argument("--only", choices=["rep", "taylor"])
    a = ap.parse_args()
    sets = [("80 SDR replicates", DATA / "census_rep.mtab", "rep"),
            ("Taylor, household PSUs", DATA / "census_tay.mtab", "taylor")]
    print("| design | query | whole s (spread) | parts s (spread) | parts/whole | same answer |")
    print("| --- | --- | ---: | ---: | ---: | --- |")
    for label, ds, key in sets:
        if a.only and a.only != key:
            continue
        whole_q = mt.open(ds)
        parts_q = mtd.on(None, mtd.split(ds, a.parts))
        for name, f in QUERIES:
            tw, tp = [], []
            for k in range(a.runs):
                order = [(whole_q, tw), (parts_q, tp)]
                if k % 2:
                    order.reverse()
                outs = {}
                for q, ts in order:
                    t, out = timed(lambda: f(q).to_dict())
                    ts.append(t)
                    outs[id(ts)] = out
            same = close(outs[id(tp)], outs[id(tw)])
            mw, mp = statistics.median(tw), statistics.median(tp)
            print(f"| {label} | {name} | {mw:.2f} ({min(tw):.2f}–{max(tw):.2f}) | "
                  f"{mp:.2f} ({min(tp):.2f}–{max(tp):.2f}) | {mp / mw:.2f} | {'yes' if same else 'NO'} |",
                  flush=True)


if __name__ == "__main__":
    main()
