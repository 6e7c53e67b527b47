"""Replicate-weight standard errors against R's survey package (Debian
r-cran-survey, installed by the test command): every SE and interval
microtab prints — weighted counts, percentages (total, row, column; logit
intervals), means by group (with a missing code, empty values and a
filter as domains) — for each kind of replicate design (SDR with and
without MSE centring, BRR, Fay, JK1, JKn, bootstrap, other), to 1e-6
relative. R's numbers come from an R script run here on the same CSV."""

import csv
import json
import random

import pytest

from conftest import r_estimates, rscript, run, run_json, write

R = 12
ROWS = 3000


@pytest.fixture(scope="module")
def rep_data(tmp_path_factory):
    d = tmp_path_factory.mktemp("survey")
    rng = random.Random(11)
    head = ["SEX", "EDUC", "AGE", "INC", "W"] + [f"RW{i}" for i in range(1, R + 1)]
    lines = [",".join(head)]
    for i in range(ROWS):
        w = rng.randint(1000, 30000)  # 10.00 .. 300.00 with two decimals
        reps = [w + rng.randint(-900, 900) * rng.choice([1, 3, 7]) for _ in range(R)]
        inc = "" if i % 23 == 0 else ("99999" if i % 31 == 0 else str(rng.randint(0, 90000)))
        edu = rng.choice([0, 1, 1, 2, 2, 2, 3, 4]) if i % 400 else 5  # a small category
        lines.append(",".join([str(rng.randint(1, 2)), str(edu), str(rng.randint(16, 90)), inc,
                               f"{w / 100:.2f}"] + [f"{r / 100:.2f}" for r in reps]))
    path = write(d / "rep.csv", "\n".join(lines) + "\n")
    ds = d / "rep.mtab"
    run("import", path, ds, "--missing", "INC=99999")
    return d, path, ds


# Design effects of the same estimates (R `deff = TRUE`: against an SRS
# without replacement; `deff = "replace"`: with, deft²), appended to the R
# scripts of this file and test_taylor.py ("est": deff, "se": deft²).
DEFF_R = r"""
dw <- deff(svytotal(~EDUC, des, deff=TRUE)); dr <- deff(svytotal(~EDUC, des, deff="replace"))
for (k in levels(d$EDUC)) add("freq_w_deff", k, dw[[paste0("EDUC", k)]], dr[[paste0("EDUC", k)]])
pd <- function(f, des) c(deff(svymean(f, des, deff=TRUE))[[2]], deff(svymean(f, des, deff="replace"))[[2]])
for (k in levels(d$EDUC)) { x <- pd(as.formula(paste0("~I(EDUC=='", k, "')")), des); add("freq_pct_deff", k, x[1], x[2]) }
dw <- deff(svytotal(~CELL, des, deff=TRUE)); dr <- deff(svytotal(~CELL, des, deff="replace"))
for (k in levels(d$CELL)) add("cell_w_deff", k, dw[[paste0("CELL", k)]], dr[[paste0("CELL", k)]])
for (k in levels(d$CELL)) { x <- pd(as.formula(paste0("~I(CELL=='", k, "')")), des); add("cell_total_deff", k, x[1], x[2]) }
for (e in levels(d$EDUC)) for (s in levels(d$SEX)) {
  x <- pd(as.formula(paste0("~I(SEX=='", s, "')")), subset(des, EDUC == e)); add("cell_row_deff", paste0(e, "_", s), x[1], x[2])
  x <- pd(as.formula(paste0("~I(EDUC=='", e, "')")), subset(des, SEX == s)); add("cell_col_deff", paste0(e, "_", s), x[1], x[2])
}
for (dom in c("all", "age30")) {
  sub <- if (dom == "all") des else subset(des, AGE >= 30)
  for (s in levels(d$SEX)) {
    g <- subset(sub, SEX == s)
    add(paste0("mean_", dom, "_deff"), s, deff(svymean(~INC, g, na.rm=TRUE, deff=TRUE))[[1]],
        deff(svymean(~INC, g, na.rm=TRUE, deff="replace"))[[1]])
  }
  add(paste0("mean_", dom, "_deff"), "Total", deff(svymean(~INC, sub, na.rm=TRUE, deff=TRUE))[[1]],
      deff(svymean(~INC, sub, na.rm=TRUE, deff="replace"))[[1]])
}
"""


# Korn–Graubard intervals of the same percentages (R svyciprop "beta").
KG_R = r"""
kg <- function(f, des) 100 * as.vector(confint(svyciprop(f, des, method="beta")))
for (k in levels(d$EDUC)) { x <- kg(as.formula(paste0("~I(EDUC=='", k, "')")), des); add("freq_pct_kg", k, NA, NA, x[1], x[2]) }
for (k in levels(d$CELL)) { x <- kg(as.formula(paste0("~I(CELL=='", k, "')")), des); add("cell_total_kg", k, NA, NA, x[1], x[2]) }
for (e in levels(d$EDUC)) for (s in levels(d$SEX)) {
  x <- kg(as.formula(paste0("~I(SEX=='", s, "')")), subset(des, EDUC == e)); add("cell_row_kg", paste0(e, "_", s), NA, NA, x[1], x[2])
  x <- kg(as.formula(paste0("~I(EDUC=='", e, "')")), subset(des, SEX == s)); add("cell_col_kg", paste0(e, "_", s), NA, NA, x[1], x[2])
}
"""


def check_kg(ds, want, bases=("total", "row", "col")):
    """Korn–Graubard percentage intervals (--pct-ci korn-graubard) against
    R's svyciprop(method = "beta")."""
    f = run_json("freq", ds, "EDUC", "--pct-ci", "korn-graubard")
    for r in f["rows"]:
        _, _, lo, hi = want[("freq_pct_kg", str(r["value"]))]
        assert close(r["percent_se"]["lo"], lo) and close(r["percent_se"]["hi"], hi), (r, lo, hi)
    for pct in bases:
        t = run_json("tab", ds, "EDUC", "SEX", "--pct", pct, "--pct-ci", "korn-graubard")["tables"][0]
        for i, rv in enumerate(t["rows"]):
            for j, cv in enumerate(t["cols"]):
                key = f"{rv['value']}_{cv['value']}"
                _, _, lo, hi = want[(f"cell_{pct}_kg", key)]
                u = t["pct_se"][i][j]
                # R takes a domain's own df (the rank of its replicate
                # weights − 1): below R + 1 records it is smaller than the
                # design's, which we keep (docs/SURVEY.md).
                domain = {"row": t["row_totals"]["counts"][i], "col": t["col_totals"]["counts"][j]}.get(pct, ROWS)
                if domain <= R:
                    continue
                assert close(u["lo"], lo) and close(u["hi"], hi), (pct, key, u, lo, hi)


def check_deff(u, want, what):
    """u: microtab's uncertainty; want: R's (deff, deft², …)."""
    deff, deft2 = want[0], want[1]
    assert close(u["deff"], deff), (what, u["deff"], deff)
    assert close(u["deft"] ** 2, deft2), (what, u["deft"], deft2)


# The tables both oracles compute from a design `des` (replicate weights
# here, strata and PSUs in test_taylor) with its degrees of freedom `df`:
# EDUC's counts and percentages, EDUC x SEX cells and percentages, INC's
# means by SEX, Rao-Scott; each a row of `add()`.
TABLES_R = r"""
# weighted counts and total percentages of EDUC
t <- svytotal(~EDUC, des)
se_of <- function(t, name) unname(SE(t))[match(name, names(coef(t)))]
for (k in levels(d$EDUC)) add("freq_w", k, coef(t)[[paste0("EDUC", k)]], se_of(t, paste0("EDUC", k)))
for (k in levels(d$EDUC)) {
  p <- svyciprop(as.formula(paste0("~I(EDUC=='", k, "')")), des, method="xlogit", df=df)
  ci <- confint(p)
  add("freq_pct", k, 100 * coef(p)[[1]], 100 * SE(p)[[1]], 100 * ci[1], 100 * ci[2])
}
# EDUC x SEX cells, total, row and column percentages
d$CELL <- interaction(d$EDUC, d$SEX, sep="_")
des <- update(des, CELL=interaction(EDUC, SEX, sep="_"))
ct <- svytotal(~CELL, des)
for (k in levels(d$CELL)) add("cell_w", k, coef(ct)[[paste0("CELL", k)]], se_of(ct, paste0("CELL", k)))
for (k in levels(d$CELL)) {
  p <- svyciprop(as.formula(paste0("~I(CELL=='", k, "')")), des, method="xlogit", df=df)
  ci <- confint(p)
  add("cell_total", k, 100 * coef(p)[[1]], 100 * SE(p)[[1]], 100 * ci[1], 100 * ci[2])
}
for (e in levels(d$EDUC)) for (s in levels(d$SEX)) {
  sub <- subset(des, EDUC == e)
  p <- svyciprop(as.formula(paste0("~I(SEX=='", s, "')")), sub, method="xlogit", df=df)
  ci <- confint(p)
  add("cell_row", paste0(e, "_", s), 100 * coef(p)[[1]], 100 * SE(p)[[1]], 100 * ci[1], 100 * ci[2])
  sub <- subset(des, SEX == s)
  p <- svyciprop(as.formula(paste0("~I(EDUC=='", e, "')")), sub, method="xlogit", df=df)
  ci <- confint(p)
  add("cell_col", paste0(e, "_", s), 100 * coef(p)[[1]], 100 * SE(p)[[1]], 100 * ci[1], 100 * ci[2])
}
# means of INC by SEX (all ages, then AGE >= 30 as a domain), and overall
for (dom in c("all", "age30")) {
  sub <- if (dom == "all") des else subset(des, AGE >= 30)
  m <- svyby(~INC, ~SEX, sub, svymean, na.rm=TRUE)
  ci <- confint(m, df=df)
  for (i in seq_len(nrow(m))) add(paste0("mean_", dom), as.character(m$SEX[i]), m$INC[i], m$se[i], ci[i, 1], ci[i, 2])
  a <- svymean(~INC, sub, na.rm=TRUE)
  ci <- confint(a, df=df)
  add(paste0("mean_", dom), "Total", coef(a)[[1]], SE(a)[[1]], ci[1], ci[2])
}
# Rao-Scott: second order (F, ndf, ddf, p) and first order (X2, df, p)
x <- svychisq(~EDUC + SEX, des)
add("rao_scott", "F", x$statistic[[1]], x$parameter[[1]], x$parameter[[2]], x$p.value)
x <- svychisq(~EDUC + SEX, des, statistic="Chisq")
add("rao_scott", "Chisq", x$statistic[[1]], x$parameter[[1]], NA, x$p.value)
"""


R_SCRIPT = r"""
suppressMessages(library(survey))
args <- commandArgs(trailingOnly=TRUE)
d <- read.csv(args[1]); out <- args[2]; type <- args[3]; mse <- args[4] == "TRUE"
R <- as.integer(args[5])
extra <- if (length(args) > 5) as.numeric(args[6]) else NA
d$INC[!is.na(d$INC) & d$INC == 99999] <- NA
d$EDUC <- factor(d$EDUC); d$SEX <- factor(d$SEX)
rs <- seq(0.5, 1.6, length.out=R)
rw <- d[, paste0("RW", 1:R)]
des <- switch(type,
  sdr = svrepdesign(data=d, weights=~W, repweights=rw, type="successive-difference", mse=mse),
  brr = svrepdesign(data=d, weights=~W, repweights=rw, type="BRR", mse=mse),
  fay = svrepdesign(data=d, weights=~W, repweights=rw, type="Fay", rho=extra, mse=mse),
  jk1 = svrepdesign(data=d, weights=~W, repweights=rw, type="JK1", mse=mse),
  jkn = svrepdesign(data=d, weights=~W, repweights=rw, type="JKn", rscales=rs, mse=mse),
  bootstrap = svrepdesign(data=d, weights=~W, repweights=rw, type="bootstrap", mse=mse),
  other = svrepdesign(data=d, weights=~W, repweights=rw, type="other", scale=extra, rscales=rs, mse=mse))
df <- degf(des)
rows <- list()
add <- function(what, key, est, se, lo=NA, hi=NA) {
  rows[[length(rows) + 1]] <<- data.frame(what=what, key=key, est=est, se=se, lo=lo, hi=hi)
}
""" + TABLES_R + DEFF_R + KG_R + r"""
write.csv(do.call(rbind, rows), out, row.names=FALSE)
"""


def r_answers(d, csv_path, kind, mse, extra=None, reps=R):
    out = d / f"r_{kind}_{mse}_{reps}.csv"
    args = [csv_path, out, kind, "TRUE" if mse else "FALSE", reps]
    if extra is not None:
        args.append(extra)
    return r_estimates(rscript(d / "oracle.R", R_SCRIPT, *args))


def close(a, b, rel=1e-6):
    assert a is not None and b is not None, (a, b)
    return abs(a - b) <= rel * max(abs(b), 1e-12)


def check(got, want, what):
    """got: (est, {se, lo, hi}); want: R's (est, se, lo, hi)."""
    est, u = got
    r_est, r_se, r_lo, r_hi = want
    assert close(est, r_est), (what, est, r_est)
    assert close(u["se"], r_se), (what, u["se"], r_se)
    if r_lo is not None:
        assert close(u["lo"], r_lo) and close(u["hi"], r_hi), (what, u, r_lo, r_hi)


DESIGNS = [
    ("sdr", True, None, []),
    ("sdr", False, None, ["--no-mse"]),
    ("brr", True, None, []),
    ("fay", True, 0.3, ["--rho", "0.3"]),
    ("jk1", False, None, ["--no-mse"]),
    ("jkn", True, None, ["--rscales", ",".join(repr(0.5 + 1.1 * i / (R - 1)) for i in range(R))]),
    ("bootstrap", True, None, []),
    ("other", False, 0.37, ["--no-mse", "--scale", "0.37", "--rscales", ",".join(repr(0.5 + 1.1 * i / (R - 1)) for i in range(R))]),
]


@pytest.mark.parametrize("kind,mse,extra,flags", DESIGNS, ids=[f"{k}-{m}" for k, m, _, _ in DESIGNS])
def test_replicate_designs_match_r(rep_data, kind, mse, extra, flags):
    d, csv_path, ds = rep_data
    run("design", ds, "--weight", "W", "--repweights", f"RW1-RW{R}", "--type", kind, *flags)
    compare_with_r(d, csv_path, ds, kind, mse, extra, R)


def test_five_replicates_and_float_replicate_weights(rep_data, tmp_path):
    """Five replicate weights (four summed together, one alone), then the
    same with two of them imported as floats (every sum in f64)."""
    d, csv_path, ds = rep_data
    run("design", ds, "--weight", "W", "--repweights", "RW1-RW5", "--type", "brr")
    compare_with_r(d, csv_path, ds, "brr", True, None, 5)
    fds = tmp_path / "floats.mtab"
    run("import", csv_path, fds, "--missing", "INC=99999", "--type", "RW2=float", "--type", "RW5=float")
    assert {v["name"]: v["kind"] for v in json.loads(run("info", fds, "--format", "json").stdout)["variables"]}["RW5"] == "float"
    run("design", fds, "--weight", "W", "--repweights", "RW1-RW5", "--type", "brr")
    compare_with_r(d, csv_path, fds, "brr", True, None, 5)


def compare_with_r(d, csv_path, ds, kind, mse, extra, reps):
    want = r_answers(d, csv_path, kind, mse, extra, reps)
    f = run_json("freq", ds, "EDUC")
    assert f["design"]["replicates"] == reps and f["design"]["mse"] == mse and f["design"]["df"] == reps - 1
    assert f["weight"] == "W"
    check_estimates(ds, want, ROWS, chisq_df=5)


def check_estimates(ds, want, rows, kg_bases=("total", "row", "col"), chisq_df=None):
    """Every estimate of EDUC, EDUC × SEX and INC by SEX (all records and
    AGE ≥ 30) against R's `want` (the R scripts of this file and
    test_taylor.py): counts, percentages of three bases, means, their SEs,
    intervals and design effects, Korn–Graubard intervals on `kg_bases`,
    and the Rao–Scott test of a table of `rows` records."""
    f = run_json("freq", ds, "EDUC")
    for r in f["rows"]:
        k = str(r["value"])
        check((r["weighted"], r["weighted_se"]), want[("freq_w", k)], ("freq_w", k))
        check((r["percent"], r["percent_se"]), want[("freq_pct", k)], ("freq_pct", k))
        check_deff(r["weighted_se"], want[("freq_w_deff", k)], ("freq_w_deff", k))
        check_deff(r["percent_se"], want[("freq_pct_deff", k)], ("freq_pct_deff", k))

    for pct, what in (("total", "cell_total"), ("row", "cell_row"), ("col", "cell_col")):
        t = run_json("tab", ds, "EDUC", "SEX", "--pct", pct)["tables"][0]
        for i, rv in enumerate(t["rows"]):
            for j, cv in enumerate(t["cols"]):
                key = f"{rv['value']}_{cv['value']}"
                check((t["weighted"][i][j], t["weighted_se"][i][j]), want[("cell_w", key)], ("cell_w", key))
                check((t["pct"][i][j], t["pct_se"][i][j]), want[(what, key)], (what, key))
                check_deff(t["weighted_se"][i][j], want[("cell_w_deff", key)], ("cell_w_deff", key))
                check_deff(t["pct_se"][i][j], want[(what + "_deff", key)], (what + "_deff", key))

    check_kg(ds, want, kg_bases)
    rs = run_json("tab", ds, "EDUC", "SEX", "--stats")["tables"][0]["rao_scott"]
    f_, ndf, ddf, p_ = want[("rao_scott", "F")]
    assert close(rs["f"], f_) and close(rs["ndf"], ndf) and close(rs["ddf"], ddf) and close(rs["p"], p_), (rs, want[("rao_scott", "F")])
    x2, df1, _, p1 = want[("rao_scott", "Chisq")]
    assert close(rs["chi2"], x2) and close(rs["p_first_order"], p1), (rs, x2, p1)
    assert chisq_df is None or df1 == chisq_df, df1
    assert rs["n"] == rows

    for dom, filt in (("all", None), ("age30", "AGE(30-*)")):
        args = ["means", ds, "INC", "--by", "SEX"] + (["--filter", filt] if filt else [])
        m = run_json(*args)
        for g in m["groups"]:
            k = str(g["by"][0]["value"])
            check((g["mean"], g["mean_se"]), want[(f"mean_{dom}", k)], (dom, k))
            check_deff(g["mean_se"], want[(f"mean_{dom}_deff", k)], (dom, k, "deff"))
        p = run(*args, "--format", "csv")
        total = [r for r in csv.DictReader(p.stdout.splitlines()) if r["SEX"] == "Total"][0]
        got = (float(total["mean"]), {"se": float(total["mean_se"]), "lo": float(total["mean_lo"]),
                                      "hi": float(total["mean_hi"])})
        check(got, want[(f"mean_{dom}", "Total")], (dom, "Total"))
        assert close(float(total["mean_deff"]), want[(f"mean_{dom}_deff", "Total")][0])
        assert close(float(total["mean_deft"]) ** 2, want[(f"mean_{dom}_deff", "Total")][1])


def test_design_is_shown_used_and_refused_where_it_does_not_fit(rep_data, tmp_path):
    d, csv_path, ds = rep_data
    run("design", ds, "--weight", "W", "--repweights", f"RW1-RW{R}", "--type", "sdr")
    info = json.loads(run("info", ds, "--format", "json").stdout)
    assert info["design"]["weight"] == "W"
    assert info["design"]["replicates"]["weights"] == [f"RW{i}" for i in range(1, R + 1)]
    assert info["design"]["replicates"]["scale"] == pytest.approx(4 / R)
    assert "survey design: weight W, 12 replicate weights RW1…RW12 (sdr" in run("info", ds).stdout
    # The text table says where its standard errors come from.
    out = run("freq", ds, "EDUC").stdout
    assert "standard errors from 12 SDR replicate weights of W" in out and "95% CI" in out
    assert "90% CI" in run("freq", ds, "EDUC", "--level", "90").stdout
    # Unreliable estimates: fewer than 30 records (EDUC 5 has 8) or a CV
    # above 30%, both configurable; marked * in the text with a note.
    rows = run_json("freq", ds, "EDUC")["rows"]
    assert [r["count"] for r in rows if r["value"] == 5] == [8]
    for r in rows:
        for u in (r["weighted_se"], r["percent_se"]):
            assert u["n"] == r["count"]
            assert u["unreliable"] == (r["count"] < 30 or (u["cv"] or 0) > 0.3)
    assert any(r["weighted_se"]["unreliable"] for r in rows)
    loose = run_json("freq", ds, "EDUC", "--min-n", "5", "--max-cv", "90")["rows"]
    assert not any(r["weighted_se"]["unreliable"] for r in loose)
    out = run("freq", ds, "EDUC").stdout
    assert "* unreliable: fewer than 30 records, or a coefficient of variation above 30%" in out
    assert [l for l in out.splitlines() if l.startswith("5 ")][0].count("*") == 2
    m = run_json("means", ds, "INC", "--by", "EDUC")["groups"]
    assert all(g["mean_se"]["n"] == g["n"] and g["mean_se"]["unreliable"] == (g["n"] < 30) for g in m)
    # A damaged byte in a replicate weight is an error naming its file,
    # never a standard error (its stripe checksum; --verify checks the
    # replicate weights' whole files too before answering).
    col = ds / info_var_file(ds, "RW7")
    data = bytearray(col.read_bytes())
    data[4096 + 3] ^= 0x40
    col.write_bytes(bytes(data))
    p = run("freq", ds, "EDUC", "--verify", ok=False)
    assert "RW7" in p.stderr
    data[4096 + 3] ^= 0x40
    col.write_bytes(bytes(data))
    run("freq", ds, "EDUC", "--verify")
    # Another weight would not fit the replicate weights: an error naming both.
    p = run("freq", ds, "EDUC", "--weight", "RW1", ok=False)
    assert "weights by W" in p.stderr and "--no-design" in p.stderr
    # --no-design: the plain table (no weight unless given), no SE fields.
    plain = run_json("freq", ds, "EDUC", "--no-design")
    assert plain["weight"] is None and "design" not in plain
    assert "weighted_se" not in plain["rows"][0]
    # The design's percentages at 90%: a narrower logit interval than at 95%.
    a = run_json("freq", ds, "EDUC")["rows"][0]["percent_se"]
    b = run_json("freq", ds, "EDUC", "--level", "90")["rows"][0]["percent_se"]
    assert a["se"] == b["se"] and a["lo"] < b["lo"] < b["hi"] < a["hi"]
    # Chi-square on weighted counts is withheld under a design; the
    # Rao–Scott test takes its place.
    t = run_json("tab", ds, "EDUC", "SEX", "--stats")["tables"][0]
    assert t["stats"] is None and t["rao_scott"]["ndf"] > 0
    assert "Rao–Scott F = " in run("tab", ds, "EDUC", "SEX", "--stats").stdout
    # Several datasets as one, with their (equal) design: two imports of
    # the same records (copies of one dataset are refused as the same
    # dataset twice) double every count and its SE, and leave percentages
    # and theirs.
    for name in ("a", "b"):
        run("import", csv_path, tmp_path / f"{name}.mtab", "--missing", "INC=99999")
        run("design", tmp_path / f"{name}.mtab", "--weight", "W", "--repweights", f"RW1-RW{R}", "--type", "sdr")
    one, two = run_json("freq", ds, "EDUC"), run_json("freq", f"{tmp_path}/*.mtab", "EDUC")
    assert two["design"] == one["design"]
    for x, y in zip(one["rows"], two["rows"]):
        assert y["weighted"] == 2 * x["weighted"] and y["weighted_se"]["se"] == pytest.approx(2 * x["weighted_se"]["se"], rel=1e-12)
        assert y["percent_se"]["se"] == pytest.approx(x["percent_se"]["se"], rel=1e-12)
    # Parts whose designs differ cannot be combined.
    run("design", tmp_path / "b.mtab", "--weight", "W", "--repweights", f"RW1-RW{R}", "--type", "sdr", "--no-mse")
    p = run("freq", f"{tmp_path}/*.mtab", "EDUC", ok=False)
    assert "designs differ" in p.stderr
    # Clearing the design restores plain tabulation.
    run("design", ds, "--clear")
    assert "design" not in run_json("freq", ds, "EDUC")


@pytest.mark.parametrize("args,needle", [
    (["--repweights", "RW1-RW99"], "RW13"),
    (["--repweights", "RW3-RW1"], "range"),
    (["--repweights", "RW1"], "at least two"),
    (["--repweights", "RW1,RW1"], "twice"),
    (["--repweights", "W,RW1"], "also listed"),
    (["--repweights", "RW1-RW12", "--type", "fay"], "rho"),
    (["--repweights", "RW1-RW12", "--type", "jkn"], "rscales"),
    (["--repweights", "RW1-RW12", "--type", "other"], "needs a scale"),
    (["--repweights", "RW1-RW12", "--rscales", "1,2"], "2 coefficients for 12"),
    (["--repweights", "INC,RW1"], "missing values"),
    (["--strata", "INC"], "every record needs its strata"),
    (["--repweights", "RW1-RW12", "--strata", "SEX"], "cannot be used with"),
])
def test_bad_designs_are_refused(rep_data, args, needle):
    _, _, ds = rep_data
    p = run("design", ds, "--weight", "W", *args, ok=False)
    assert needle in p.stderr, p.stderr


def test_ipums_import_sets_the_replicate_design(tmp_path):
    """An IPUMS extract with PERWT and REPWTP1-4 (and the REPWTP flag):
    the import sets the SDR design and says so; the SEs of a weighted
    frequency equal sqrt(4/4 · Σ (N_r − N)²) computed here from the file."""
    rng = random.Random(5)
    cols = [("SEX", 1, 0), ("PERWT", 8, 2), ("REPWTP", 1, 0)] + [(f"REPWTP{i}", 8, 2) for i in range(1, 5)]
    pos, xml_vars = 1, []
    for name, width, dcml in cols:
        xml_vars.append(f'<var name="{name}" dcml="{dcml}"><location StartPos="{pos}" EndPos="{pos + width - 1}" '
                        f'width="{width}"/><labl>{name}</labl></var>')
        pos += width
    xml = write(tmp_path / "usa_00001.xml", "<codeBook><dataDscr>" + "".join(xml_vars) + "</dataDscr></codeBook>")
    rows = []
    for _ in range(400):
        w = rng.randint(1000, 90000)
        rows.append((rng.randint(1, 2), w, 1, [max(0, w + rng.randint(-5000, 5000)) for _ in range(4)]))
    dat = write(tmp_path / "usa_00001.dat",
                "".join(f"{s}{w:8d}{f}" + "".join(f"{r:8d}" for r in reps) + "\n" for s, w, f, reps in rows))
    p = run("import", dat, "--ddi", xml, tmp_path / "usa.mtab")
    assert "survey design set from the IPUMS replicate weights: weight PERWT, 4 replicate weights REPWTP1…REPWTP4 (sdr" in p.stderr
    info = json.loads(run("info", tmp_path / "usa.mtab", "--format", "json").stdout)
    assert info["design"]["replicates"]["weights"] == [f"REPWTP{i}" for i in range(1, 5)]
    assert info["design"]["replicates"]["scale"] == 1.0 and info["design"]["replicates"]["mse"] is True
    f = run_json("freq", tmp_path / "usa.mtab", "SEX")
    for r in f["rows"]:
        n = sum(w for s, w, _, _ in rows if s == r["value"]) / 100
        reps = [sum(rep[k] for s, _, _, rep in rows if s == r["value"]) / 100 for k in range(4)]
        se = (sum((x - n) ** 2 for x in reps)) ** 0.5
        assert r["weighted"] == pytest.approx(n, rel=1e-12)
        assert r["weighted_se"]["se"] == pytest.approx(se, rel=1e-9)


def test_parts_give_the_whole_datasets_standard_errors(rep_data, tmp_path):
    """The CSV cut in three parts, imported and given the design each:
    answered as one, every estimate and SE equals the whole dataset's (the
    replicate sums are integers and merge exactly), for freq, tab with
    percentages and the Rao–Scott test, and means with a filter."""
    d, csv_path, ds = rep_data
    run("design", ds, "--weight", "W", "--repweights", f"RW1-RW{R}", "--type", "jk1")
    lines = csv_path.read_text().splitlines()
    head, body = lines[0], lines[1:]
    cuts = [0, 1000, 1001, len(body)]
    parts = tmp_path / "parts"
    parts.mkdir()
    for k in range(3):
        f = write(tmp_path / f"p{k}.csv", "\n".join([head] + body[cuts[k]:cuts[k + 1]]) + "\n")
        run("import", f, parts / f"p{k}.mtab", "--missing", "INC=99999")
        run("design", parts / f"p{k}.mtab", "--weight", "W", "--repweights", f"RW1-RW{R}", "--type", "jk1")
    pattern = f"{parts}/*.mtab"
    for args in (["freq", "EDUC"], ["tab", "EDUC", "SEX", "--pct", "row", "--stats"],
                 ["means", "INC", "--by", "SEX", "--filter", "AGE(30-*)"]):
        whole = run_json(args[0], ds, *args[1:])
        merged = run_json(args[0], pattern, *args[1:])
        whole.pop("dataset"), merged.pop("dataset")
        assert json.dumps(merged, sort_keys=True) == json.dumps(whole, sort_keys=True), args


def info_var_file(ds, name):
    """The column file of variable `name`, from the manifest."""
    return [v["file"] for v in json.loads((ds / "manifest.json").read_text())["variables"] if v["name"] == name][0]
