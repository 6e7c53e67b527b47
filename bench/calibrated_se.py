#!/usr/bin/env python3
"""Standard errors under a raked Taylor design (issue 32, item 3): the
census's records in strata STATEFIP and household PSUs SERIAL, PERWT raked
to STATEFIP, SEX and AGE (149 categories); `means INCTOT --by EDUC`,
`freq EDUC`, `corr INCTOT AGE` and `regress INCTOT ~ AGE + factor(SEX)`
(fitted on the cells of its variables, and record by record) with the
adjustment's residuals (the calibrated
design), the
same weight as a plain design (its residuals left out), and R `survey`
(`rake()` on the `svydesign`, then `svyby(svymean)`, `svytotal`, the
correlation's `svycontrast` of `svymean`s and `svyglm`) on the
first records, side by side in one run.

    python3 bench/calibrated_se.py [--runs 5] [--r-rows 100000]

Uses bench/data/wt/c1m.csv (made by bench/weighting.py's generator on
first use). Every microtab timing is the wall time of a fresh process;
R's is `system.time()` of the estimate alone (the design and the raking
made before the clock starts). The SEs of both at the R sample's size are
compared (max relative difference). Results: docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import csv
import json
import shutil
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from survey import log, sh  # noqa: E402
from weighting import DATA, REPO, dataset  # noqa: E402

COLS = ["SERIAL", "STATEFIP", "SEX", "AGE", "EDUC", "INCTOT", "PERWT"]
QUERIES = {
    "means": ["means", "INCTOT", "--by", "EDUC"],
    "freq": ["freq", "EDUC"],
    # Record by record: a correlation, and a regression on a numeric
    # predictor with too many distinct values for the cube.
    "corr": ["corr", "INCTOT", "AGE"],
    "regress": ["regress", "INCTOT ~ AGE + factor(SEX)"],
    # The same model fitted record by record (a table of at most 100 cells).
    "regress_records": ["regress", "INCTOT ~ AGE + factor(SEX)", "--max-cells", "100"],
}


def cut(src, out, rows):
    """The first `rows` records of `src` (all with None), COLS only."""
    with open(src, newline="") as f, open(out, "w", newline="") as g:
        r = csv.DictReader(f)
        w = csv.writer(g)
        w.writerow(COLS)
        for i, row in enumerate(r):
            if rows is not None and i >= rows:
                break
            w.writerow([row[c] for c in COLS])


def datasets(binary, csv_path, name, tot):
    """NAME_cal.mtab (raked, the adjustment kept) and NAME_plain.mtab (the
    same weight, a design without it)."""
    cal, plain = DATA / f"{name}_cal.mtab", DATA / f"{name}_plain.mtab"
    sh([binary, "import", csv_path, cal, "--force", "--missing", "INCTOT=9999999"])
    sh([binary, "design", cal, "--weight", "PERWT", "--strata", "STATEFIP", "--cluster", "SERIAL"])
    sh([binary, "weight", cal, "W2", "--from", "PERWT", "--rake", "STATEFIP; SEX; AGE", "--totals", tot])
    shutil.rmtree(plain, ignore_errors=True)
    shutil.copytree(cal, plain)
    sh([binary, "design", plain, "--clear"])
    sh([binary, "design", plain, "--weight", "W2", "--strata", "STATEFIP", "--cluster", "SERIAL"])
    return cal, plain


def timed(binary, ds, q, runs):
    ts, out = [], None
    for _ in range(runs):
        t = time.perf_counter()
        out = sh([binary, q[0], ds, *q[1:], "--format", "json"]).stdout
        ts.append(time.perf_counter() - t)
    return ts, json.loads(out)


def ses(kind, res):
    if kind == "corr":
        return {f"{p['a']}:{p['b']}": p["se"] for p in res["pairs"]}
    if kind.startswith("regress"):
        return {str(i): c["se"] for i, c in enumerate(res["coefficients"])}
    if kind == "means":
        return {str(g["by"][0]["value"]): g["mean_se"]["se"] for g in res["groups"] if g.get("mean_se")}
    return {str(r["value"]): r["weighted_se"]["se"] for r in res["rows"]}


R_SCRIPT = r"""
suppressMessages(library(survey))
a <- commandArgs(trailingOnly=TRUE)
d <- read.csv(a[1]); tot <- read.csv(a[2]); out <- a[3]
d$INCTOT[d$INCTOT == 9999999] <- NA
for (v in c("STATEFIP", "SEX", "AGE", "EDUC")) d[[v]] <- factor(d[[v]])
des <- svydesign(ids=~SERIAL, strata=~STATEFIP, weights=~PERWT, data=d, nest=TRUE)
pop <- function(v) { t <- tot[tot$variable == v, ]; x <- data.frame(factor(t$value), t$total); names(x) <- c(v, "Freq"); x }
des <- rake(des, list(~STATEFIP, ~SEX, ~AGE), list(pop("STATEFIP"), pop("SEX"), pop("AGE")),
            control=list(maxit=1000, epsilon=1e-13))
tm <- system.time(m <- svyby(~INCTOT, ~EDUC, des, svymean, na.rm=TRUE))[["elapsed"]]
tf <- system.time(f <- svytotal(~EDUC, des))[["elapsed"]]
des <- update(des, X=as.numeric(as.character(AGE)), Y=ifelse(is.na(INCTOT), 0, INCTOT))
sub <- subset(des, !is.na(INCTOT))
tc <- system.time({
  s2 <- update(sub, xy=Y*X, xx=Y^2, yy=X^2)
  cm <- svymean(~Y+X+xy+xx+yy, s2)
  ct <- svycontrast(cm, quote((xy - Y*X)/sqrt((xx - Y^2)*(yy - X^2))))
})[["elapsed"]]
tg <- system.time(g <- svyglm(INCTOT ~ X + SEX, design=sub))[["elapsed"]]
res <- rbind(data.frame(what="means", key=as.character(m$EDUC), se=SE(m), t=tm),
             data.frame(what="freq", key=sub("^EDUC", "", names(coef(f))), se=unname(SE(f)), t=tf),
             data.frame(what="corr", key="INCTOT:AGE", se=SE(ct)[[1]], t=tc),
             data.frame(what="regress", key=as.character(0:2), se=unname(SE(g)), t=tg))
write.csv(res, out, row.names=FALSE)
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--r-rows", type=int, default=100_000)
    ap.add_argument("--binary", default=str(REPO / "target" / "release" / "microtab"))
    a = ap.parse_args()
    src, _ = dataset(a.binary, 1_000_000, "c1m")
    tot = DATA / "totals3.csv"
    if not tot.exists():
        sys.exit(f"{tot} is missing: run bench/weighting.py once first")
    small_csv, full_csv = DATA / "cal_small.csv", DATA / "cal_full.csv"
    cut(src, small_csv, a.r_rows)
    cut(src, full_csv, None)
    rows = {"small": a.r_rows, "full": 1_000_000}
    sets = {n: datasets(a.binary, p, f"cal_{n}", tot) for n, p in (("small", small_csv), ("full", full_csv))}
    log("R: rake and the estimates on", a.r_rows, "records")
    script = DATA / "cal_se.R"
    script.write_text(R_SCRIPT)
    r_out = DATA / "cal_se_r.csv"
    sh(["Rscript", script, small_csv, tot, r_out])
    with open(r_out) as f:
        r_rows = list(csv.DictReader(f))
    print("| query | records | calibrated design | plain design (same weight) | ratio | R survey | R ÷ calibrated | max rel. SE diff vs R |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for kind, q in QUERIES.items():
        for n, (cal, plain) in sets.items():
            tc, rc = timed(a.binary, cal, q, a.runs)
            tp, _ = timed(a.binary, plain, q, a.runs)
            mc, mp = statistics.median(tc), statistics.median(tp)
            r_t, diff = "", ""
            if n == "small":
                # R fits the model one way.
                rk = kind.split("_")[0]
                want = {r["key"]: float(r["se"]) for r in r_rows
                        if r["what"] == rk and r["se"] not in ("NA", "")}
                got = ses(kind, rc)
                diff = max(abs(got[k] - w) / max(abs(w), 1e-300) for k, w in want.items() if w > 1e-6 * max(want.values()))
                rt = float(next(r["t"] for r in r_rows if r["what"] == rk))
                r_t = f"{rt:.2f} s | {rt / mc:.0f}×"
                diff = f"{diff:.1e}"
            else:
                r_t = "- | -"
            print(f"| {kind} | {rows[n]:,} | {1000 * mc:.0f} ms ({1000 * min(tc):.0f}–{1000 * max(tc):.0f}) "
                  f"| {1000 * mp:.0f} ms ({1000 * min(tp):.0f}–{1000 * max(tp):.0f}) | {mc / mp:.1f} | {r_t} | {diff} |")


if __name__ == "__main__":
    main()
