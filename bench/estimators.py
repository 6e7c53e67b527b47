#!/usr/bin/env python3
"""Ratios, correlations, one-sample tests and differences between groups at
census scale beside the `means` (or `tab`) queries over the same variables, side by side in one run (issue
29's target: no more than the means query over the same variables).

    python3 bench/estimators.py [--rows N] [--runs 5] [--cold] [--only TEXT]

Designs: the 14.1 M-record census with 80 SDR replicate weights
(bench/data/census_rep, made by bench/survey.py) and the one with strata
and household PSUs (bench/data/census_tay, made by bench/taylor.py).
Warm: the median of `--repeat 3` in-process medians over `runs` rounds;
cold: a fresh process after dropping the page cache (`--cold`, root).
Results: docs/BENCHMARKS.md."""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
from run import drop_caches  # noqa: E402
from survey import log, parse_ms, prepare as prepare_rep, sh  # noqa: E402
from taylor import prepare as prepare_tay  # noqa: E402

# (name, estimator's arguments, the means queries over the same variables)
CASES = [
    ("ratio INCWAGE/INCTOT by SEX", ["ratio", "{ds}", "INCWAGE", "INCTOT", "--by", "SEX"],
     [["means", "{ds}", "INCWAGE", "--by", "SEX"], ["means", "{ds}", "INCTOT", "--by", "SEX"]]),
    ("ratio INCTOT/AGE by EDUC", ["ratio", "{ds}", "INCTOT", "AGE", "--by", "EDUC"],
     [["means", "{ds}", "INCTOT", "--by", "EDUC"], ["means", "{ds}", "AGE", "--by", "EDUC"]]),
    ("test mean INCTOT = 30000 by SEX",
     ["means", "{ds}", "INCTOT", "--by", "SEX", "--test-mean", "30000"],
     [["means", "{ds}", "INCTOT", "--by", "SEX"]]),
    ("corr AGE INCTOT INCWAGE", ["corr", "{ds}", "AGE", "INCTOT", "INCWAGE"],
     [["means", "{ds}", v, "--by", "SEX"] for v in ("AGE", "INCTOT", "INCWAGE")]),
    ("differences of mean INCTOT by EDUC from EDUC 6",
     ["means", "{ds}", "INCTOT", "--by", "EDUC", "--diff", "6"],
     [["means", "{ds}", "INCTOT", "--by", "EDUC"]]),
    ("differences of mean INCTOT by SEX + test mean = 30000",
     ["means", "{ds}", "INCTOT", "--by", "SEX", "--diff", "1", "--test-mean", "30000"],
     [["means", "{ds}", "INCTOT", "--by", "SEX"]]),
    # A table's shares compared across its columns, beside the table.
    ("differences of EMPSTAT shares by SEX", ["tab", "{ds}", "EMPSTAT", "SEX", "--diff", "1"],
     [["tab", "{ds}", "EMPSTAT", "SEX"]]),
    ("differences of EDUC shares by RACE", ["tab", "{ds}", "EDUC", "RACE", "--diff", "1"],
     [["tab", "{ds}", "EDUC", "RACE"]]),
]


def warm(binary, args, runs):
    ts = [parse_ms(sh([binary, *args, "--format", "csv", "--repeat", 3]).stderr) for _ in range(runs)]
    return statistics.median(ts), [min(ts), max(ts)]


def cold(binary, args, runs):
    ts = []
    for _ in range(runs):
        drop_caches()
        t0 = time.perf_counter()
        sh([binary, *args, "--format", "csv"])
        ts.append((time.perf_counter() - t0) * 1000)
    return statistics.median(ts), [min(ts), max(ts)]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=14_081_466)
    ap.add_argument("--reps", type=int, default=80)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--cold", action="store_true")
    ap.add_argument("--only", default="", help="the cases whose name holds this text")
    ap.add_argument("--bin", default=str(REPO / "target" / "release" / "microtab"))
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "estimators.json"))
    a = ap.parse_args()
    rep, _, _ = prepare_rep(a.bin, a.rows, a.reps)
    _, tay, _, _ = prepare_tay(a.bin, a.rows)
    out = {}
    for kind, ds in [("replicate (80 SDR)", rep), ("Taylor (household PSUs)", tay)]:
        for name, args, means in (c for c in CASES if a.only in c[0]):
            fill = lambda xs: [str(ds) if x == "{ds}" else x for x in xs]  # noqa: E731
            est, est_range = warm(a.bin, fill(args), a.runs)
            base = [warm(a.bin, fill(m), a.runs)[0] for m in means]
            q = {"estimator_ms": est, "estimator_range": est_range, "means_ms": base,
                 "means_sum_ms": sum(base), "ratio_to_means_sum": est / sum(base)}
            if a.cold:
                q["cold_estimator_ms"] = cold(a.bin, fill(args), 3)[0]
                q["cold_means_sum_ms"] = sum(cold(a.bin, fill(m), 3)[0] for m in means)
            out[f"{kind}: {name}"] = q
            log(f"{kind}: {name}: {est:.0f} ms [{est_range[0]:.0f}–{est_range[1]:.0f}], "
                f"means over the same variables {sum(base):.0f} ms ({q['ratio_to_means_sum']:.2f}x)"
                + (f"; cold {q['cold_estimator_ms']:.0f} vs {q['cold_means_sum_ms']:.0f} ms" if a.cold else ""))
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
