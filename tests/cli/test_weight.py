"""`microtab weight`: post-stratification, raking, calibration (linear,
raking, logit; bounded) and trimming, with the replicate weights adjusted
the same way, against R `survey` (postStratify, rake, calibrate) on the
api data: every new weight record by record to 1e-9, and the standard
errors of a total, a mean and a regression coefficient under the new
replicate design to 1e-6 (R with mse=TRUE, microtab's default).  Errors
(records outside the totals, empty cells, inconsistent margins,
non-convergence, bad totals files) and a killed run are checked too.
"""

from __future__ import annotations

import csv as csvmod
import io
import json
import os
import signal
import subprocess
import time

import pytest

from conftest import BIN, census_dataset, replicate_design, rscript, run

R_DATA = r"""
suppressMessages(library(survey)); data(api)
a <- commandArgs(trailingOnly=TRUE); dir <- a[1]; out <- a[2]
d <- apiclus1[, c("dnum","snum","stype","sch.wide","comp.imp","api99","api00","ell","meals","pw","fpc")]
names(d) <- c("DNUM","SNUM","STYPE","SCHWIDE","COMPIMP","API99","API00","ELL","MEALS","PW","FPC")
for (v in c("STYPE","SCHWIDE","COMPIMP")) d[[v]] <- as.character(d[[v]])
dclus1 <- svydesign(id=~dnum, weights=~pw, data=apiclus1, fpc=~fpc)
rclus1 <- as.svrepdesign(dclus1)
rw <- weights(rclus1, "analysis")
for (k in 1:ncol(rw)) d[[paste0("RW", k)]] <- rw[, k]
f17 <- function(df) { for (n in names(df)) if (is.numeric(df[[n]])) df[[n]] <- sprintf("%.17g", df[[n]]); df }
write.csv(f17(d), file.path(dir, "clus1.csv"), row.names=FALSE, quote=FALSE)
write.csv(data.frame(scale=sprintf("%.17g", rclus1$scale)), out, row.names=FALSE, quote=FALSE)
"""

# Each case: R's adjusted design from rclus1, and microtab's arguments.
CASES = {
    "ps": (
        'postStratify(rclus1, ~stype, data.frame(stype=c("E","H","M"), Freq=c(4421,755,1018)))',
        ["--poststrata", "STYPE", "--totals", "ps.csv"],
    ),
    "ps2": (
        'postStratify(rclus1, ~stype+sch.wide, data.frame(stype=rep(c("E","H","M"), 2), '
        'sch.wide=rep(c("No","Yes"), each=3), Freq=c(800,200,300,3621,555,718)))',
        ["--poststrata", "SCHWIDE*STYPE", "--totals", "ps2.csv"],
    ),
    "rake": (
        'rake(rclus1, list(~stype, ~sch.wide), list(data.frame(stype=c("E","H","M"), Freq=c(4421,755,1018)), '
        'data.frame(sch.wide=c("No","Yes"), Freq=c(1072,5122))), control=list(maxit=1000, epsilon=1e-15))',
        ["--rake", "STYPE; SCHWIDE", "--totals", "rake.csv"],
    ),
    "linear": (
        "calibrate(rclus1, ~api99+stype, c(6194, 3914069, 755, 1018), epsilon=1e-12)",
        ["--calibrate", "API99 + STYPE", "--totals", "cal.csv"],
    ),
    "raking": (
        'calibrate(rclus1, ~api99+stype, c(6194, 3914069, 755, 1018), calfun="raking", epsilon=1e-12, maxit=100)',
        ["--calibrate", "API99 + factor(STYPE)", "--distance", "raking", "--totals", "cal.csv"],
    ),
    "logit": (
        'calibrate(rclus1, ~api99+stype, c(6194, 3914069, 755, 1018), calfun="logit", bounds=c(0.4,2.2), epsilon=1e-12, maxit=100)',
        ["--calibrate", "API99 + STYPE", "--distance", "logit", "--bounds", "0.4,2.2", "--totals", "cal.csv"],
    ),
}

TOTALS = {
    "ps.csv": "variable,value,total\nSTYPE,E,4421\nSTYPE,H,755\nSTYPE,M,1018\n",
    "ps2.csv": "variable,value,total\nSTYPE*SCHWIDE,E*No,800\nSTYPE*SCHWIDE,H*No,200\nSTYPE*SCHWIDE,M*No,300\n"
    "STYPE*SCHWIDE,E*Yes,3621\nSTYPE*SCHWIDE,H*Yes,555\nSTYPE*SCHWIDE,M*Yes,718\n",
    "rake.csv": "variable,value,total\nSTYPE,E,4421\nSTYPE,H,755\nSTYPE,M,1018\nSCHWIDE,No,1072\nSCHWIDE,Yes,5122\n",
    "cal.csv": "variable,value,total\n(Intercept),,6194\nAPI99,,3914069\nSTYPE,E,4421\nSTYPE,H,755\nSTYPE,M,1018\n",
}

R_CASE = r"""
suppressMessages(library(survey)); data(api)
a <- commandArgs(trailingOnly=TRUE); out <- a[2]
dclus1 <- svydesign(id=~dnum, weights=~pw, data=apiclus1, fpc=~fpc)
rclus1 <- as.svrepdesign(dclus1)
des <- suppressWarnings(%s)
des$mse <- TRUE
w <- weights(des, "sampling"); rw <- weights(des, "analysis")
m <- svymean(~api00, des); t <- svytotal(~comp.imp, des)
g <- svyglm(api00 ~ ell + meals, design=des)
se <- c(mean=SE(m)[[1]], total_no=SE(t)[[1]], coef_ell=SE(g)[["ell"]])
est <- c(mean=coef(m)[[1]], total_no=coef(t)[[1]], coef_ell=coef(g)[["ell"]])
res <- data.frame(what=c(rep("w", length(w)), rep("r3", nrow(rw)), names(se), paste0(names(est), "_est")),
                  value=sprintf("%%.17g", c(w, rw[, 3], se, est)))
write.csv(res, out, row.names=FALSE, quote=FALSE)
"""


@pytest.fixture(scope="module")
def clus(tmp_path_factory):
    d = tmp_path_factory.mktemp("weight")
    rows = rscript(d / "data.R", R_DATA, d, d / "scale.csv")
    for name, text in TOTALS.items():
        (d / name).write_text(text)
    return {"dir": d, "csv": d / "clus1.csv", "scale": rows[0]["scale"]}


def fresh(clus, tmp_path, name="c.mtab"):
    ds = tmp_path / name
    run("import", clus["csv"], ds)
    run("design", ds, "--weight", "PW", "--repweights", "RW1-RW15", "--type", "jk1", "--scale", clus["scale"])
    return ds


def column(ds, var):
    out = run("list", ds, var, "--all", "--format", "csv").stdout
    return [float(r[var]) for r in csvmod.DictReader(io.StringIO(out))]


def rel(a, b):
    return abs(a - b) / max(abs(b), 1e-300)


@pytest.mark.parametrize("case", sorted(CASES))
def test_weights_and_standard_errors_match_r(clus, tmp_path, case):
    r_expr, args = CASES[case]
    rows = rscript(tmp_path / "case.R", R_CASE % r_expr, clus["dir"], tmp_path / "r.csv")
    want_w = [float(r["value"]) for r in rows if r["what"] == "w"]
    want_r3 = [float(r["value"]) for r in rows if r["what"] == "r3"]
    want = {r["what"]: float(r["value"]) for r in rows if r["what"] not in ("w", "r3")}
    ds = fresh(clus, tmp_path)
    args = [str(clus["dir"] / a) if a.endswith(".csv") else a for a in args]
    rep = json.loads(run("weight", ds, "NEW", *args, "--json").stdout)
    assert rep["replicates"] == [f"NEW_{k}" for k in range(1, 16)]
    assert rep["worst_misfit"] < 1e-10
    got = column(ds, "NEW")
    assert len(got) == len(want_w) == 183
    assert max(rel(a, b) for a, b in zip(got, want_w)) < 1e-9
    got3 = column(ds, "NEW_3")
    assert max(abs(a - b) / max(abs(b), 1.0) for a, b in zip(got3, want_r3)) < 1e-9
    # The achieved totals are R's weights' totals (the report's "after").
    for a in rep["achieved"]:
        assert a["achieved"] == pytest.approx(a["total"], rel=1e-9, abs=1e-6) or case == "none"
    # The design now uses NEW and NEW_1…NEW_15: SEs as R's adjusted design's.
    m = json.loads(run("means", ds, "API00", "--format", "json").stdout)
    assert m["weight"] == "NEW"
    assert m["total"]["mean"] == pytest.approx(want["mean_est"], rel=1e-9)
    assert m["total_se"]["se"] == pytest.approx(want["mean"], rel=1e-6)
    f = json.loads(run("freq", ds, "COMPIMP", "--format", "json").stdout)
    no = next(r for r in f["rows"] if r["value"] == "No")
    assert no["weighted"] == pytest.approx(want["total_no_est"], rel=1e-9)
    assert no["weighted_se"]["se"] == pytest.approx(want["total_no"], rel=1e-6)
    g = json.loads(run("regress", ds, "API00 ~ ELL + MEALS", "--format", "json").stdout)
    ell = next(c for c in g["coefficients"] if c["term"] == "ELL")
    assert ell["estimate"] == pytest.approx(want["coef_ell_est"], rel=1e-9)
    assert ell["se"] == pytest.approx(want["coef_ell"], rel=1e-6)


def test_bounded_linear_refuses_a_replicate_it_cannot_fit(clus, tmp_path):
    """Linear calibration within [0.6, 1.6]: the full sample fits and its
    weights are R's; replicate RW1 cannot (R only warns, "Failed to
    converge", and goes on), so microtab refuses and names it."""
    rows = rscript(tmp_path / "b.R", r"""
suppressMessages(library(survey)); data(api)
a <- commandArgs(trailingOnly=TRUE)
dclus1 <- svydesign(id=~dnum, weights=~pw, data=apiclus1, fpc=~fpc)
rclus1 <- as.svrepdesign(dclus1)
warn <- ""
withCallingHandlers(calibrate(rclus1, ~api99+stype, c(6194, 3914069, 755, 1018), bounds=c(0.6,1.6)),
  warning=function(w) { warn <<- paste(warn, conditionMessage(w)); invokeRestart("muffleWarning") })
cal <- calibrate(dclus1, ~api99+stype, c(6194, 3914069, 755, 1018), bounds=c(0.6,1.6), epsilon=1e-12, maxit=100)
write.csv(data.frame(w=sprintf("%.17g", weights(cal)), warn=warn), a[2], row.names=FALSE)
""", clus["dir"], tmp_path / "r.csv")
    assert "Failed to converge" in rows[0]["warn"]
    ds = fresh(clus, tmp_path)
    cal = clus["dir"] / "cal.csv"
    p = run("weight", ds, "NEW", "--calibrate", "API99 + STYPE", "--bounds", "0.6,1.6", "--totals", cal, ok=False)
    assert "calibration of RW1 did not converge" in p.stderr
    # Without the replicates (a weight-only design), the full sample's
    # weights are R's.
    run("design", ds, "--weight", "PW")
    run("weight", ds, "NEW", "--calibrate", "API99 + STYPE", "--bounds", "0.6,1.6", "--totals", cal)
    got = column(ds, "NEW")
    want = [float(r["w"]) for r in rows]
    assert max(rel(a, b) for a, b in zip(got, want)) < 1e-9
    assert 0.6 * 33.846996307373047 - 1e-9 <= min(got) and max(got) <= 1.6 * 33.846996307373047 + 1e-9


def test_report_by_hand(tmp_path):
    """Six records, post-stratified by SEX (f: 10+20, m: 30 → 60 and 90):
    factors 2 and 3; Kish deff before n·Σw²/(Σw)² = 3·1400/3600."""
    csv = tmp_path / "t.csv"
    csv.write_text("SEX,W\nf,10\nf,20\nm,30\n")
    tot = tmp_path / "tot.csv"
    tot.write_text("variable,value,total\nSEX,f,60\nSEX,m,90\n")
    ds = tmp_path / "t.mtab"
    run("import", csv, ds)
    rep = json.loads(run("weight", ds, "W2", "--from", "W", "--poststrata", "SEX", "--totals", tot, "--json").stdout)
    assert column(ds, "W2") == [20.0, 40.0, 90.0]
    assert rep["before"]["kish_deff"] == pytest.approx(3 * 1400 / 3600, rel=1e-15)
    assert rep["after"]["kish_deff"] == pytest.approx(3 * (400 + 1600 + 8100) / 150**2, rel=1e-15)
    assert [(a["value"], a["before"], a["achieved"]) for a in rep["achieved"]] == [("f", 30, 60), ("m", 30, 90)]
    assert rep["after"]["min"] == 20 and rep["after"]["max"] == 90
    # The design is set to the new weight (no replicates: a weight-only
    # design), and the text report says what it did.
    info = run("info", ds).stdout
    assert "W2" in info
    text = run("weight", ds, "W3", "--from", "W", "--poststrata", "SEX", "--totals", tot).stdout
    assert "W3 = W by post-stratification" in text
    assert "SEX = f" in text
    assert "Kish design effect 1.1667" in text and "Kish design effect 1.3467" in text


def test_trimming_by_hand(tmp_path):
    """[1, 10, 30] trimmed to [3, 20]: 1→3, 30→20 frees 8, 10 gets +8 = 18
    (R trimWeights(strict=TRUE) shares the cut equally); [1, 2, 30] cannot
    be trimmed (every weight is outside)."""
    csv = tmp_path / "t.csv"
    csv.write_text("W\n1\n10\n30\n")
    ds = tmp_path / "t.mtab"
    run("import", csv, ds)
    rep = json.loads(run("weight", ds, "T", "--from", "W", "--trim", "3,20", "--json").stdout)
    assert column(ds, "T") == [3.0, 18.0, 20.0]
    assert rep["trimmed"] == [2, 1]
    assert rep["after"]["sum"] == 41
    csv.write_text("W\n1\n2\n30\n")
    run("import", csv, ds, "--force")
    p = run("weight", ds, "T", "--from", "W", "--trim", "3,20", ok=False)
    assert "trimming W to [3, 20] is impossible" in p.stderr


def test_trimming_matches_r(clus, tmp_path):
    rows = rscript(tmp_path / "trim.R", r"""
suppressMessages(library(survey)); data(api)
a <- commandArgs(trailingOnly=TRUE)
d <- svydesign(id=~1, strata=~stype, weights=~pw, data=apistrat, fpc=~fpc)
cal <- calibrate(d, ~api99+stype, c(6194, 3914069, 755, 1018))
t <- trimWeights(cal, lower=20, upper=45, strict=TRUE)
x <- apistrat[, c("stype","api99","pw")]; names(x) <- c("STYPE","API99","PW")
x$STYPE <- as.character(x$STYPE); x$PW <- sprintf("%.17g", x$PW)
write.csv(x, file.path(a[1], "strat.csv"), row.names=FALSE, quote=FALSE)
write.csv(data.frame(w=sprintf("%.17g", weights(t))), a[2], row.names=FALSE, quote=FALSE)
""", tmp_path, tmp_path / "r.csv")
    want = [float(r["w"]) for r in rows]
    ds = tmp_path / "s.mtab"
    run("import", tmp_path / "strat.csv", ds)
    run("weight", ds, "CAL", "--from", "PW", "--calibrate", "API99 + STYPE", "--totals", clus["dir"] / "cal.csv",
        "--trim", "20,45")
    got = column(ds, "CAL")
    assert max(rel(a, b) for a, b in zip(got, want)) < 1e-9
    assert min(got) >= 20 - 1e-9 and max(got) <= 45 + 1e-9


@pytest.mark.parametrize("totals, args, needles", [
    ("variable,value,total\nSTYPE,E,4421\nSTYPE,H,755\n", ["--poststrata", "STYPE"],
     ["25 records are outside the totals' categories", "STYPE values the totals do not list: M (25)",
      "--allow-missing-cells"]),
    ("variable,value,total\nSTYPE,E,4421\nSTYPE,H,755\nSTYPE,M,1000\nSCHWIDE,No,1072\nSCHWIDE,Yes,5122\n",
     ["--rake", "STYPE; SCHWIDE"], ["the totals disagree: STYPE sums to 6176, SCHWIDE sums to 6194"]),
    ("variable,value,total\nSTYPE,E,4421\nSTYPE,H,755\nSTYPE,M,1018\nSTYPE,X,10\n", ["--poststrata", "STYPE"],
     ["has no weight in STYPE = X, whose population total is 10"]),
    ("variable,value,total\nSTYPE,E,4421\nSTYPE,H,abc\n", ["--poststrata", "STYPE"],
     ["line 3: the total 'abc' of STYPE H is not a number"]),
    ("variable,value,total\nSTYPE,E,4421\nSTYPE,E,755\n", ["--poststrata", "STYPE"],
     ["line 3: STYPE E is also given on line 2"]),
    ("variable,value,total\nSTYPE,E,4421\nSTYPE,H,755\nSTYPE,M,1018\nSEX,1,3\n", ["--poststrata", "STYPE"],
     ["line 5", "SEX"]),
    ("var,val,tot\nSTYPE,E,1\n", ["--poststrata", "STYPE"], ["expected the header variable,value,total"]),
    ("variable,value,total\n(Intercept),,6194\nAPI99,,3914069\nSTYPE,E,4421\nSTYPE,H,755\nSTYPE,M,1018\n",
     ["--calibrate", "API99 + STYPE", "--bounds", "0.99,1.01"],
     ["calibration of PW did not converge", "STYPE = ", "--max-iterations"]),
    ("variable,value,total\n(Intercept),,6194\nSTYPE,E,4421\nSTYPE,H,755\nSTYPE,M,1000\n",
     ["--calibrate", "STYPE"], ["the totals disagree: the total of STYPE = M is 1000, but the other totals make it 1018"]),
    ("variable,value,total\n(Intercept),,6194\nAPI99,,3914069\nSTYPE,E,4421\nSTYPE,H,755\nSTYPE,M,1018\n",
     ["--calibrate", "API99 + STYPE", "--distance", "logit"], ["logit calibration needs finite bounds"]),
])
def test_impossible_inputs_are_refused_and_nothing_is_written(clus, tmp_path, totals, args, needles):
    ds = fresh(clus, tmp_path)
    before = (ds / "manifest.json").read_bytes()
    tot = tmp_path / "tot.csv"
    tot.write_text(totals)
    p = run("weight", ds, "NEW", "--from", "PW", *args, "--totals", tot, ok=False)
    for n in needles:
        assert n in p.stderr, p.stderr
    assert (ds / "manifest.json").read_bytes() == before


def test_missing_cells_allowed_keep_their_weight(clus, tmp_path):
    """Records outside the totals keep their weight; the others are
    post-stratified (by hand: E and H records get N_h / Σw_h)."""
    ds = fresh(clus, tmp_path)
    tot = tmp_path / "tot.csv"
    tot.write_text("variable,value,total\nSTYPE,E,4421\nSTYPE,H,755\n")
    rep = json.loads(run("weight", ds, "NEW", "--from", "PW", "--poststrata", "STYPE", "--totals", tot,
                         "--allow-missing-cells", "--json").stdout)
    assert rep["outside"] == 25
    out = run("list", ds, "STYPE", "PW", "NEW", "--all", "--format", "csv").stdout
    recs = list(csvmod.DictReader(io.StringIO(out)))
    sums = {s: sum(float(r["PW"]) for r in recs if r["STYPE"] == s) for s in "EHM"}
    for r in recs:
        pw, new = float(r["PW"]), float(r["NEW"])
        if r["STYPE"] == "M":
            assert new == pw
        else:
            assert new == pytest.approx(pw * {"E": 4421, "H": 755}[r["STYPE"]] / sums[r["STYPE"]], rel=1e-14)


def test_existing_names_and_design_weights_are_refused(clus, tmp_path):
    ds = fresh(clus, tmp_path)
    tot = clus["dir"] / "ps.csv"
    p = run("weight", ds, "API00", "--poststrata", "STYPE", "--totals", tot, ok=False)
    assert "already has a variable API00" in p.stderr and "--replace" in p.stderr
    p = run("weight", ds, "PW", "--poststrata", "STYPE", "--totals", tot, "--replace", ok=False)
    assert "part of the survey design" in p.stderr


def test_a_killed_weight_leaves_the_dataset_as_it_was(tmp_path):
    """kill -9 in the middle of writing 41 weight columns of 1 M records:
    the dataset verifies and answers as before; a rerun succeeds."""
    _, ds = census_dataset(tmp_path, 1_000_000, 3, reps=40)
    replicate_design(ds, 40)
    before = run("freq", ds, "SEX", "--format", "json").stdout
    tot = tmp_path / "tot.csv"
    f = json.loads(before)
    tot.write_text("variable,value,total\n" + "".join(
        f"SEX,{r['value']},{round(r['weighted'] * 1.1)}\n" for r in f["rows"]))
    killed = False
    for delay in (0.15, 0.3, 0.6, 1.0):
        p = subprocess.Popen([str(BIN), "weight", ds, "NEW", "--poststrata", "SEX", "--totals", tot],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(delay)
        if p.poll() is None:
            os.kill(p.pid, signal.SIGKILL)
            p.wait()
            killed = True
            break
        run("drop", ds, *(["NEW"] + [f"NEW_{k}" for k in range(1, 41)]), ok=None)
    assert killed
    run("verify", ds)
    assert run("freq", ds, "SEX", "--format", "json").stdout == before
    run("weight", ds, "NEW", "--poststrata", "SEX", "--totals", tot)
    after = json.loads(run("freq", ds, "SEX", "--format", "json").stdout)
    assert [r["weighted"] for r in after["rows"]] == pytest.approx(
        [round(r["weighted"] * 1.1) for r in f["rows"]], rel=1e-12)


def test_rescaling_and_bounds_as_r(clus, tmp_path):
    """Weights of 1 against totals 34× larger: R's grake first multiplies
    them by the mean ratio over its treatment-contrast columns (40.93 here,
    not the mean over other columns), and the logit bounds apply after it."""
    rows = rscript(tmp_path / "r.R", r"""
suppressMessages(library(survey)); data(api)
a <- commandArgs(trailingOnly=TRUE)
d1 <- svydesign(id=~1, weights=~I(rep(1, 183)), data=apiclus1)
c <- calibrate(d1, ~api99+stype, c(6194, 3914069, 755, 1018), calfun="logit", bounds=c(0.5, 2),
               epsilon=1e-12, maxit=100)
write.csv(data.frame(w=sprintf("%.17g", weights(c))), a[2], row.names=FALSE, quote=FALSE)
""", clus["dir"], tmp_path / "r.csv")
    ds = tmp_path / "one.mtab"
    run("import", clus["csv"], ds)
    run("compute", ds, "ONE = 1 + 0 * PW")
    rep = json.loads(run("weight", ds, "LG", "--from", "ONE", "--calibrate", "API99 + STYPE", "--distance",
                         "logit", "--bounds", "0.5,2", "--totals", clus["dir"] / "cal.csv", "--json").stdout)
    assert rep["rescaled"] == pytest.approx((6194 / 183 + 3914069 / sum_api99(clus) + 755 / 14 + 1018 / 25) / 4,
                                            rel=1e-12)
    got = column(ds, "LG")
    assert max(rel(a, float(b["w"])) for a, b in zip(got, rows)) < 1e-9


def sum_api99(clus):
    with open(clus["csv"]) as f:
        return sum(float(r["API99"]) for r in csvmod.DictReader(f))


def test_records_outside_are_counted_in_the_achieved_totals(clus, tmp_path):
    """SCHWIDE blank on 19 records: with --allow-missing-cells they keep
    PW, the others are raked; the report's achieved totals are what the
    new weight gives over every record (as `freq` counts them)."""
    src = list(csvmod.DictReader(open(clus["csv"])))
    for r in src[:19]:
        r["SCHWIDE"] = ""
    csv = tmp_path / "miss.csv"
    with open(csv, "w", newline="") as f:
        w = csvmod.DictWriter(f, fieldnames=list(src[0]))
        w.writeheader()
        w.writerows(src)
    ds = tmp_path / "m.mtab"
    run("import", csv, ds)
    run("design", ds, "--weight", "PW")
    rep = json.loads(run("weight", ds, "NW", "--rake", "STYPE; SCHWIDE", "--totals", clus["dir"] / "rake.csv",
                         "--allow-missing-cells", "--json").stdout)
    assert rep["outside"] == 19
    f = json.loads(run("freq", ds, "STYPE", "--format", "json").stdout)
    by = {r["value"]: r["weighted"] for r in f["rows"]}
    for a in rep["achieved"]:
        if a["term"] == "STYPE":
            assert a["achieved"] == pytest.approx(by[a["value"]], rel=1e-12)
    assert rep["after"]["sum"] == pytest.approx(sum(by.values()), rel=1e-12)
    assert rep["after"]["sum"] > 6194 + 100
    assert any("19 records outside" in n for n in rep["notes"])
    # Records outside kept PW exactly.
    out = run("list", ds, "SCHWIDE", "PW", "NW", "--all", "--format", "csv").stdout
    kept = [r for r in csvmod.DictReader(io.StringIO(out)) if r["SCHWIDE"] == ""]
    assert len(kept) == 19 and all(float(r["PW"]) == float(r["NW"]) for r in kept)


def test_the_replicate_designs_rank_is_kept(clus, tmp_path):
    """JK1 over 15 PSUs: rank 15 (R's degf 14) before and after weighting."""
    ds = fresh(clus, tmp_path)
    before = json.loads((ds / "manifest.json").read_text())["design"]["replicates"]["rank"]
    run("weight", ds, "NEW", "--poststrata", "STYPE", "--totals", clus["dir"] / "ps.csv")
    d = json.loads((ds / "manifest.json").read_text())["design"]
    assert before == 15 and d["replicates"]["rank"] == 15
    m = json.loads(run("means", ds, "API00", "--format", "json").stdout)
    assert m["design"]["df"] == 14


def test_values_by_label_and_text_holding_a_star(tmp_path):
    """A value label that labels one code stands for it; a text value
    holding `*` is one value of its own variable (by hand: factors
    60/30 and 90/30)."""
    csv = tmp_path / "t.csv"
    csv.write_text("SEX,G,W\n1,p*q,10\n1,r,20\n2,p*q,30\n")
    ds = tmp_path / "t.mtab"
    run("import", csv, ds)
    run("label", ds, "SEX", "1=Female", "2=Male")
    tot = tmp_path / "tot.csv"
    tot.write_text("variable,value,total\nSEX,Female,60\nSEX,Male,90\n")
    run("weight", ds, "A", "--from", "W", "--poststrata", "SEX", "--totals", tot)
    assert column(ds, "A") == [20.0, 40.0, 90.0]
    tot.write_text('variable,value,total\nG,p*q,80\nG,r,40\n')
    run("weight", ds, "B", "--from", "W", "--poststrata", "G", "--totals", tot)
    assert column(ds, "B") == [20.0, 40.0, 60.0]
    tot.write_text("variable,value,total\nW*SEX,,5\n")
    p = run("weight", ds, "C", "--from", "W", "--calibrate", "W*SEX", "--totals", tot, ok=False)
    assert "a number crossed with categories is not a target" in p.stderr
