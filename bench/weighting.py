#!/usr/bin/env python3
"""Making weights at census scale (issue 32): `microtab weight` raking the
14.1 M-record census with 80 SDR replicate weights to three margins
(STATEFIP, AGE, SEX: 149 categories), and `microtab replicate` building 80
bootstrap replicates from strata and household PSUs, against R `survey`'s
`rake` on the same 1 M-record census (its replicates adjusted the same
way), side by side in one run.

    python3 bench/weighting.py [--runs 5] [--r-rows 1000000] [--no-r]

Makes bench/data/wt/c14m.mtab and c1m.mtab (and their CSVs) with
`microtab gen census --repweights 80` on first use. Every timing is the
wall time of a fresh process (GNU time: peak RSS); microtab's runs are
"again" runs (`--replace`, which first removes the previous run's 81
columns, as a producer re-running a weighting would) and one first run
on a dataset without them. R reads the CSV before the clock starts; its
time is `system.time(rake(...))`. The weights of both at 1 M records are
compared (max relative difference). Results: docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "bench" / "data" / "wt"
MARGINS = ["STATEFIP", "AGE", "SEX"]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from survey import log, sh  # noqa: E402


def timed(args):
    """Wall seconds and peak RSS (MB) of one fresh process."""
    t = time.perf_counter()
    p = sh(["/usr/bin/time", "-f", "%M", *args])
    wall = time.perf_counter() - t
    rss = int(p.stderr.strip().splitlines()[-1]) / 1024
    return wall, rss, p.stdout


def dataset(binary, rows, name):
    csv, ds = DATA / f"{name}.csv", DATA / f"{name}.mtab"
    stamp = DATA / f"{name}.stamp.json"
    want = {"rows": rows, "reps": 80, "seed": 1}
    if not (stamp.exists() and json.loads(stamp.read_text()) == want and ds.exists()):
        DATA.mkdir(parents=True, exist_ok=True)
        log(f"generating {rows} records with 80 replicate weights")
        sh([binary, "gen", "census", "--rows", rows, "--seed", 1, "--repweights", 80, "--out", csv])
        sh([binary, "import", csv, ds, "--force", "--missing", "INCTOT=9999999"])
        stamp.write_text(json.dumps(want))
    return csv, ds


def sdr_design(binary, ds):
    sh([binary, "design", ds, "--weight", "PERWT", "--repweights", "REPWTP1-REPWTP80", "--type", "sdr"])


def totals(binary, ds, out):
    """The sample's weighted margins, each category moved by up to 5%,
    every margin scaled to the same population."""
    rows, n = [], None
    for v in MARGINS:
        f = json.loads(sh([binary, "freq", ds, v, "--format", "json"]).stdout)
        vals = [(r["value"], r["weighted"] * (1 + 0.05 * math.sin(k + 1)))
                for k, r in enumerate(f["rows"]) if not r["missing"]]
        s = sum(x for _, x in vals)
        n = n or round(s)
        rows += [(v, val, x * n / s) for val, x in vals]
    out.write_text("variable,value,total\n" + "".join(f"{v},{val},{t:.6f}\n" for v, val, t in rows))
    return rows


def stats(xs):
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "runs": len(xs)}


def microtab_weight(binary, ds, tot, runs):
    sdr_design(binary, ds)
    # A first run: no earlier weighting's columns on disk.
    names = ["RAKED"] + [f"RAKED_{k}" for k in range(1, 81)]
    if _has(binary, ds, "RAKED"):
        sh([binary, "drop", ds, *names])
    first = timed([binary, "weight", ds, "RAKED", "--rake", "; ".join(MARGINS), "--totals", tot, "--json"])
    rep = json.loads(first[2])
    again = []
    for _ in range(runs):
        sdr_design(binary, ds)
        w, rss, _ = timed([binary, "weight", ds, "RAKED", "--rake", "; ".join(MARGINS), "--totals", tot,
                           "--replace", "--json"])
        again.append((w, rss))
    return {"first": {"wall": first[0], "rss_mb": first[1]},
            "again": stats([w for w, _ in again]), "again_rss_mb": max(r for _, r in again),
            "iterations": rep["iterations"], "replicate_iterations": rep["replicate_iterations"],
            "groups": rep["groups"], "worst_misfit": rep["worst_misfit"]}


def _has(binary, ds, name):
    p = subprocess.run([str(binary), "list", str(ds), name, "--limit", "1"], capture_output=True)
    return p.returncode == 0


def microtab_replicate(binary, ds, runs):
    out = []
    for _ in range(runs):
        sh([binary, "design", ds, "--weight", "PERWT", "--strata", "STATEFIP", "--cluster", "SERIAL"])
        w, rss, _ = timed([binary, "replicate", ds, "--type", "bootstrap", "--replicates", 80, "--replace"])
        out.append((w, rss))
    return {"wall": stats([w for w, _ in out]), "rss_mb": max(r for _, r in out)}


R_RAKE = r"""
suppressMessages(library(survey))
a <- commandArgs(trailingOnly=TRUE)
d <- read.csv(a[1], colClasses=NA)[, c("STATEFIP","AGE","SEX","PERWT", paste0("REPWTP", 1:80))]
tot <- read.csv(a[2], colClasses=c("character","character","numeric"))
pm <- lapply(c("STATEFIP","AGE","SEX"), function(v) {
  x <- tot[tot$variable == v, ]; df <- data.frame(as.integer(x$value), x$total); names(df) <- c(v, "Freq"); df })
des <- svrepdesign(data=d, weights=~PERWT, repweights="REPWTP[0-9]+", type="successive-difference",
                   combined.weights=TRUE, mse=TRUE)
gc()
t <- system.time(r <- rake(des, list(~STATEFIP, ~AGE, ~SEX), pm, control=list(maxit=100, epsilon=1e-9)))
w <- weights(r, "sampling")
write.csv(data.frame(w=sprintf("%.17g", w)), a[3], row.names=FALSE, quote=FALSE)
cat(sprintf("%.3f %.3f\n", t[["elapsed"]], max(gc()[, 6])))
"""


def r_rake(csv, tot, out):
    script = DATA / "rake.R"
    script.write_text(R_RAKE)
    t = time.perf_counter()
    p = sh(["/usr/bin/time", "-f", "%M", "Rscript", script, csv, tot, out])
    total = time.perf_counter() - t
    lines = [l for l in p.stdout.strip().splitlines() if l.strip()]
    elapsed, _ = (float(x) for x in lines[-1].split())
    rss = int(p.stderr.strip().splitlines()[-1]) / 1024
    return {"rake_seconds": elapsed, "process_seconds": total, "rss_mb": rss}


def compare(binary, ds, r_out):
    out = sh([binary, "list", ds, "RAKED", "--all", "--format", "csv"]).stdout.split()[1:]
    got = [float(x.split(",")[-1]) for x in out]
    want = [float(x) for x in r_out.read_text().split()[1:]]
    assert len(got) == len(want)
    return max(abs(a - b) / abs(b) for a, b in zip(got, want))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.environ.get("MICROTAB_BIN", REPO / "target/release/microtab"))
    ap.add_argument("--rows", type=int, default=14081466)
    ap.add_argument("--r-rows", type=int, default=1000000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--no-r", action="store_true")
    a = ap.parse_args()
    b = a.bin
    _, big = dataset(b, a.rows, "c14m")
    small_csv, small = dataset(b, a.r_rows, "c1m")
    res = {"rows": a.rows, "r_rows": a.r_rows}
    for name, ds in (("big", big), ("small", small)):
        sdr_design(b, ds)
        tot = DATA / f"totals_{name}.csv"
        totals(b, ds, tot)
        log(f"microtab weight on {name}")
        res[f"weight_{name}"] = microtab_weight(b, ds, tot, a.runs)
        log(json.dumps(res[f"weight_{name}"]))
    if not a.no_r:
        log("R rake on the small census")
        out = DATA / "r_raked.csv"
        res["r_small"] = r_rake(small_csv, DATA / "totals_small.csv", out)
        log(json.dumps(res["r_small"]))
        sdr_design(b, small)
        sh([b, "weight", small, "RAKED", "--rake", "; ".join(MARGINS), "--totals", DATA / "totals_small.csv",
            "--replace"])
        res["max_rel_diff_vs_r"] = compare(b, small, out)
        scaled = res["r_small"]["rake_seconds"] * a.rows / a.r_rows
        res["r_scaled_to_big"] = scaled
        res["ratio_vs_r_scaled"] = scaled / res["weight_big"]["again"]["median"]
        res["ratio_vs_r_same_rows"] = res["r_small"]["rake_seconds"] / res["weight_small"]["again"]["median"]
    log("microtab replicate (bootstrap, 80) on the big census")
    res["replicate_big"] = microtab_replicate(b, big, a.runs)
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
