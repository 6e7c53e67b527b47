#!/usr/bin/env python3
"""Regression models at census scale: `microtab regress` beside the cube
query over the same cells (`means` with the same grouping, same design),
and beside R `survey::svyglm` on the first --r-rows records (scaled to the
whole file), side by side in one run.

    python3 bench/regress.py [--rows N] [--runs 5] [--r-rows 1000000] [--skip-r]

Designs: the 14.1 M-record census with 80 SDR replicate weights
(bench/data/census_rep, as bench/survey.py makes it) and the one with
strata and household PSUs (bench/data/census_tay, as bench/taylor.py
makes it). Each model's coefficients are checked against R's on the R
subset (microtab fits the same subset, written as its own dataset).
Peak memory is read from /usr/bin/time. Results: docs/BENCHMARKS.md."""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "bench" / "data"
sys.path.insert(0, str(Path(__file__).resolve().parent))
from survey import log, parse_ms, prepare as prepare_rep, sh  # noqa: E402
from taylor import prepare as prepare_tay  # noqa: E402

MODELS = {
    "G": ("INCTOT ~ AGE + factor(SEX) + factor(EDUC)", "gaussian", "INCTOT", "AGE,SEX,EDUC",
          "INCTOT ~ AGE + factor(SEX) + factor(EDUC)", "gaussian()"),
    "L": ("EMPSTAT(1) ~ AGE + factor(SEX) + factor(RACE)", "logit", "INCTOT", "AGE,SEX,RACE,EMPSTAT",
          "I(EMPSTAT == 1) ~ AGE + factor(SEX) + factor(RACE)", "quasibinomial()"),
}
# A continuous wide predictor (a wage: too many values for a cube): fitted
# record by record. (formula, family, rounds)
WIDE = [("INCTOT ~ AGE + INCWAGE + factor(SEX)", "gaussian", None),
        ("EMPSTAT(1) ~ AGE + INCWAGE + factor(SEX)", "logit", 1)]

R_SCRIPT = r"""
suppressMessages(library(survey))
a <- commandArgs(trailingOnly=TRUE)
d <- read.csv(a[1], nrows=as.integer(a[2])); kind <- a[3]; out <- a[4]
d$INCTOT[d$INCTOT == 9999999] <- NA
des <- if (kind == "rep") {
  svrepdesign(data=d, weights=~PERWT, repweights="REPWTP[0-9]+", type="successive-difference", mse=TRUE)
} else {
  svydesign(ids=~SERIAL, strata=~STRATA, weights=~PERWT, data=d, nest=TRUE)
}
rows <- list()
for (i in seq(5, length(a), by=3)) {
  f <- as.formula(a[i]); fam <- eval(parse(text=a[i + 1])); name <- a[i + 2]
  t0 <- proc.time()[[3]]
  m <- svyglm(f, design=des, family=fam, control=glm.control(epsilon=1e-12, maxit=100))
  t <- proc.time()[[3]] - t0
  s <- summary(m)$coefficients
  rows[[length(rows) + 1]] <- data.frame(model=name, term=rownames(s), est=s[, 1], se=s[, 2], seconds=t)
}
write.csv(do.call(rbind, rows), out, row.names=FALSE)
"""


def timed(binary, args, runs):
    """Median, min and max of `--repeat 3` medians over `runs` rounds (ms)."""
    ts = [parse_ms(sh([binary, *args, "--format", "csv", "--repeat", 3]).stderr) for _ in range(runs)]
    return {"ms": statistics.median(ts), "range": [min(ts), max(ts)]}


def peak_mb(binary, args):
    p = subprocess.run(["/usr/bin/time", "-v", binary, *map(str, args), "--format", "csv"],
                       capture_output=True, text=True)
    if p.returncode != 0:
        return None, p.stderr.strip().splitlines()[0]
    m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", p.stderr)
    return int(m.group(1)) / 1024, None


def wall(binary, args, runs):
    """Median, min and max wall time of `runs` fresh processes (ms)."""
    ts = []
    for _ in range(runs):
        t0 = time.perf_counter()
        sh([binary, *args, "--format", "csv"])
        ts.append((time.perf_counter() - t0) * 1000)
    return {"ms": statistics.median(ts), "range": [min(ts), max(ts)]}


def bench_wide(a, ds, kind, out):
    scan = wall(a.bin, ["means", ds, "INCTOT", "--by", "SEX"], a.runs)
    for formula, family, rounds in WIDE:
        reg = ["regress", ds, formula, "--family", family]
        r = wall(a.bin, reg, rounds or a.runs)
        mem, _ = peak_mb(a.bin, reg)
        out[f"{kind}-wide-{family}"] = {"formula": formula, "regress": r, "means_scan": scan,
                                        "ratio": r["ms"] / scan["ms"], "peak_mb": mem}
        log(f"{kind} wide {formula} ({family}): {r['ms'] / 1000:.1f} s, a means scan "
            f"{scan['ms']:.0f} ms, peak {mem:.0f} MB")


def bench_design(a, ds, kind, out):
    if a.wide_only:
        return bench_wide(a, ds, kind, out)
    for key, (formula, family, measure, by, _, _) in MODELS.items():
        reg = ["regress", ds, formula, "--family", family]
        cube = ["means", ds, measure, "--by", by]
        r, c = timed(a.bin, reg, a.runs), timed(a.bin, cube, a.runs)
        mem, _ = peak_mb(a.bin, reg)
        out[f"{kind}-{key}"] = q = {"formula": formula, "family": family, "regress": r, "cube": c,
                                     "ratio": r["ms"] / c["ms"], "peak_mb": mem}
        log(f"{kind} {key} {formula}: regress {r['ms']:.0f} ms, cube {c['ms']:.0f} ms "
            f"({q['ratio']:.2f}x), peak {mem:.0f} MB")
    bench_wide(a, ds, kind, out)


def r_side(a, csv, kind, out, sub_ds):
    """R svyglm on the first r_rows records, and microtab on the same
    records (a dataset of them), for each model: seconds and the largest
    relative difference of estimates and SEs."""
    script = DATA / "regress_r.R"
    script.write_text(R_SCRIPT)
    res = DATA / f"regress_r_{kind}.csv"
    args = []
    for key, (_, _, _, _, rformula, rfam) in MODELS.items():
        args += [rformula, rfam, key]
    t = time.monotonic()
    sh(["Rscript", script, csv, a.r_rows, kind, res, *args])
    log(f"R {kind} on {a.r_rows} records: {time.monotonic() - t:.0f} s in all")
    import csv as csvmod
    rows = list(csvmod.DictReader(open(res)))
    for key, (formula, family, *_rest) in MODELS.items():
        got = json.loads(sh([a.bin, "regress", sub_ds, formula, "--family", family, "--format", "json"]).stdout)
        mine = timed(a.bin, ["regress", sub_ds, formula, "--family", family], 3)
        theirs = [r for r in rows if r["model"] == key]
        diff = max(max(abs(g["estimate"] - float(w["est"])) / abs(float(w["est"])),
                       abs(g["se"] - float(w["se"])) / float(w["se"]))
                   for g, w in zip(got["coefficients"], theirs))
        secs = float(theirs[0]["seconds"])
        scale = a.rows / a.r_rows
        q = out[f"{kind}-{key}"]
        q["r"] = {"records": a.r_rows, "seconds": secs, "scaled_seconds": secs * scale,
                  "microtab_same_records_ms": mine["ms"], "max_rel_diff": diff,
                  "speedup_scaled": secs * scale * 1000 / q["regress"]["ms"]}
        log(f"R {kind} {key}: {secs:.1f} s on {a.r_rows} records (scaled {secs * scale:.0f} s); "
            f"microtab on them {mine['ms']:.0f} ms; whole file {q['regress']['ms']:.0f} ms: "
            f"{q['r']['speedup_scaled']:.0f}x; largest difference {diff:.1e}")


def subset_dataset(a, csv, name, design_args):
    """The first r_rows records as a dataset of their own, with the design."""
    ds = DATA / f"{name}_r{a.r_rows}.mtab"
    if not ds.exists():
        head = DATA / f"{name}_r{a.r_rows}.csv"
        with open(csv) as f, open(head, "w") as g:
            for i, line in enumerate(f):
                if i > a.r_rows:
                    break
                g.write(line)
        sh([a.bin, "import", head, ds, "--missing", "INCTOT=9999999"])
        head.unlink()
    sh([a.bin, "design", ds, *design_args])
    return ds


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=14_081_466)
    ap.add_argument("--reps", type=int, default=80)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--r-rows", type=int, default=1_000_000)
    ap.add_argument("--skip-r", action="store_true")
    ap.add_argument("--wide-only", action="store_true",
                    help="only the models with a wide predictor (no R)")
    ap.add_argument("--only", choices=["rep", "taylor"], help="one design only")
    ap.add_argument("--bin", default=str(REPO / "target" / "release" / "microtab"))
    a = ap.parse_args()
    out = {}
    if a.only != "taylor":
        rep_ds, _, _ = prepare_rep(a.bin, a.rows, a.reps)
        bench_design(a, rep_ds, "rep", out)
        if not (a.skip_r or a.wide_only):
            rep_csv = DATA / "census_rep.csv"
            sub = subset_dataset(a, rep_csv, "census_rep", ["--weight", "PERWT", "--repweights",
                                                             f"REPWTP1-REPWTP{a.reps}", "--type", "sdr"])
            r_side(a, rep_csv, "rep", out, sub)
    if a.only != "rep":
        tay_csv, tay_ds, _, _ = prepare_tay(a.bin, a.rows)
        bench_design(a, tay_ds, "taylor", out)
        if not (a.skip_r or a.wide_only):
            sub = subset_dataset(a, tay_csv, "census_tay", ["--weight", "PERWT", "--strata", "STRATA",
                                                             "--cluster", "SERIAL"])
            r_side(a, tay_csv, "taylor", out, sub)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
