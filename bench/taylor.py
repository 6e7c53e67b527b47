#!/usr/bin/env python3
"""Taylor linearization standard errors at census scale: microtab against
DuckDB computing the same sums (per-PSU totals of every cell, then per
stratum Σz², (Σz)² and the PSU counts), side by side in one run, warm
(both in-process medians) and cold; R `survey` on the first --r-rows
records beside them (one run each; R cannot hold the whole file).

    python3 bench/taylor.py [--rows N] [--runs 7] [--cold] [--r-rows 1000000]

The design: strata STRATA (the state × a band of PUMAs, ~2,350 strata),
PSUs the households (SERIAL, ~5.9 M), weight PERWT. Generates
bench/data/census_tay.csv (`microtab gen census --strata`) and imports it
into bench/data/census_tay.mtab and .duckdb on first use. Every microtab
SE is recomputed here from DuckDB's sums and must agree to 1e-9.
Results: docs/BENCHMARKS.md."""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "bench" / "data"
NA = 9999999
sys.path.insert(0, str(Path(__file__).resolve().parent))
from survey import generated, log, reported, sh, time_query  # noqa: E402


def prepare(binary, rows):
    want = {"rows": rows, "seed": 1, "strata": True}
    csv, ds, db, _ = generated(binary, "census_tay", want, f"generating {rows} rows with STRATA", ["--strata"])
    t = time.monotonic()
    sh([binary, "design", ds, "--weight", "PERWT", "--strata", "STRATA", "--cluster", "SERIAL"])
    return csv, ds, db, time.monotonic() - t


QUERIES = {
    "L1": ("SEX × EDUC, Taylor SEs", ["tab", "{ds}", "SEX", "EDUC"], ["SEX", "EDUC"], None),
    "L2": ("SEX × EDUC, Taylor SEs + Rao–Scott", ["tab", "{ds}", "SEX", "EDUC", "--stats"], ["SEX", "EDUC"], None),
    "L3": ("mean INCTOT by EDUC, Taylor SEs", ["means", "{ds}", "INCTOT", "--by", "EDUC"], ["EDUC"], "INCTOT"),
}


def duck_sql(keys, x):
    """Per cell: Σ_h c_h Σ_j z_hj z'_hj − d_h S_h S'_h for the products of
    the PSU totals of w (and w·x), with n_h the stratum's PSUs (whole
    sample), c_h = n_h/(n_h − 1), d_h = c_h/n_h."""
    k = ", ".join(keys)
    y = f"PERWT * {x}" if x else "0"
    where = f"WHERE {x} <> {NA}" if x else ""
    return f"""
WITH n AS (SELECT STRATA, count(DISTINCT SERIAL)::DOUBLE nh FROM census GROUP BY 1),
z AS (SELECT STRATA, SERIAL, {k}, sum(PERWT)::DOUBLE w, sum({y})::DOUBLE y, count(*) c
      FROM census {where} GROUP BY ALL),
h AS (SELECT STRATA, {k}, sum(w*w) ww, sum(w*y) wy, sum(y*y) yy, sum(w) sw, sum(y) sy, sum(c) c
      FROM z GROUP BY ALL)
SELECT {k}, sum(c), sum(sw), sum(sy),
       sum(nh/(nh-1) * (ww - sw*sw/nh)), sum(nh/(nh-1) * (wy - sw*sy/nh)), sum(nh/(nh-1) * (yy - sy*sy/nh))
FROM h JOIN n USING (STRATA) GROUP BY ALL"""


R_SCRIPT = r"""
suppressMessages(library(survey))
args <- commandArgs(trailingOnly=TRUE)
d <- read.csv(args[1], nrows=as.integer(args[2]))
d$INCTOT[d$INCTOT == 9999999] <- NA
d$SEX <- factor(d$SEX); d$EDUC <- factor(d$EDUC)
t0 <- proc.time()[[3]]
des <- svydesign(ids=~SERIAL, strata=~STRATA, weights=~PERWT, data=d, nest=TRUE)
t1 <- proc.time()[[3]]
message(sprintf("design %.1f s", t1 - t0))
x <- svytotal(~interaction(SEX, EDUC), des)
t2 <- proc.time()[[3]]
message(sprintf("table %.1f s", t2 - t1))
x <- svychisq(~SEX + EDUC, des)
t3 <- proc.time()[[3]]
message(sprintf("Rao-Scott %.1f s", t3 - t2))
# Means by group on fewer records (23 minutes on 1 M in our first try);
# strata of the first records may hold one PSU there.
m <- as.integer(args[3])
options(survey.lonely.psu="remove")
dm <- svydesign(ids=~SERIAL, strata=~STRATA, weights=~PERWT, data=d[seq_len(m), ], nest=TRUE)
t4 <- proc.time()[[3]]
x <- svyby(~INCTOT, ~EDUC, dm, svymean, na.rm=TRUE)
t5 <- proc.time()[[3]]
cat(sprintf('{"design_s": %f, "table_s": %f, "rao_scott_s": %f, "means_rows": %d, "means_s": %f}\n', t1-t0, t2-t1, t3-t2, m, t5-t4))
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=14_100_000)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--cold", action="store_true")
    ap.add_argument("--r-rows", type=int, default=0, help="also time R survey on this many records")
    ap.add_argument("--r-means-rows", type=int, default=100_000, help="R's means by group on this many")
    ap.add_argument("--bin", default=str(REPO / "target" / "release" / "microtab"))
    a = ap.parse_args()
    import duckdb
    csv, ds, db, design_s = prepare(a.bin, a.rows)
    con = duckdb.connect(str(db), read_only=True)
    out = {"design_s": design_s, "queries": {}}
    for name, (what, args, keys, x) in QUERIES.items():
        margs = [s.replace("{ds}", str(ds)) for s in args]
        res = json.loads(sh([a.bin, *margs, "--format", "json"]).stdout)
        warm, cold, rows = time_query(a, margs, con, db, duck_sql(keys, x))
        ok = check(res, rows, keys, x, name)
        p = subprocess.run(["/usr/bin/time", "-f", "%M", a.bin, *margs, "--format", "csv"],
                           capture_output=True, text=True)
        out["queries"][name] = q = {"what": what, "args": " ".join(args), **warm, "same_se": ok,
                                    "microtab_peak_mb": int(p.stderr.strip().splitlines()[-1]) / 1024, **cold}
        log(f"{name} {what}: microtab {q['microtab_ms']:.1f} ms, DuckDB {q['duckdb_ms']:.1f} ms "
            f"({q['duckdb_ms'] / q['microtab_ms']:.1f}x), peak {q['microtab_peak_mb']:.0f} MB, same SEs: {ok}"
            + (f"; cold {q['cold_microtab_ms']:.0f} vs {q['cold_duckdb_ms']:.0f} ms" if a.cold else ""))
    if a.r_rows:
        script = DATA / "taylor_bench.R"
        script.write_text(R_SCRIPT)
        log(f"R survey on the first {a.r_rows} records …")
        r = json.loads(sh(["Rscript", script, csv, a.r_rows, min(a.r_rows, a.r_means_rows)]).stdout)
        out["r"] = {"rows": a.r_rows, **r}
        log(f"R on {a.r_rows}: design {r['design_s']:.1f} s, table {r['table_s']:.1f} s, "
            f"Rao–Scott {r['rao_scott_s']:.1f} s, means by EDUC {r['means_s']:.1f} s on {r['means_rows']}")
    print(json.dumps(out, indent=1))
    if not all(q["same_se"] for q in out["queries"].values()):
        sys.exit(1)


def check(res, rows, keys, x, name):
    by = {tuple(r[:len(keys)]): r[len(keys):] for r in rows}
    ok = True
    if x is None:
        t = res["tables"][0]
        for i, rv in enumerate(t["rows"]):
            for j, cv in enumerate(t["cols"]):
                _, sw, _, vw, _, _ = by[(rv["value"], cv["value"])]
                want = math.sqrt(vw)
                got = t["weighted_se"][i][j]["se"]
                ok &= abs(t["weighted"][i][j] - sw) <= 1e-9 * sw and abs(got - want) <= 1e-9 * want
    else:
        for g in res["groups"]:
            _, sw, sy, vw, cwy, vy = by[(g["by"][0]["value"],)]
            m = sy / sw
            want = math.sqrt((vy - 2 * m * cwy + m * m * vw) / (sw * sw))
            ok &= abs(g["mean"] - m) <= 1e-9 * abs(m) and abs(g["mean_se"]["se"] - want) <= 1e-9 * want
    return reported(ok, name)


if __name__ == "__main__":
    main()
