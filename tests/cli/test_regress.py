"""`microtab regress` against R survey's `svyglm` and `regTermTest` on R's
own api data (apistrat: strata + FPC; apiclus1: clusters + FPC; JK1 and
bootstrap replicates of apiclus1), every family, with factors, text
factors, interactions, conditions as outcomes, filters (domains) and
missing values. R fits with glm.control(epsilon = 1e-12): R's default
(1e-8) stops while its working weights are one step old, which moves its
GLM standard errors by up to ~1e-5 relative (docs/SURVEY.md); the
converged answers agree to 1e-8."""

import csv
import math
import shutil

import pytest

from conftest import R_DESIGNS, close, close_p, r_design, rscript, run, run_json
from answers import same_answer  # tests/ is on sys.path (conftest)

R_FIT = r"""
suppressMessages(library(survey))
a <- commandArgs(trailingOnly=TRUE)
data <- read.csv(a[1]); out <- a[2]; kind <- a[3]; formula <- as.formula(a[4])
fam <- switch(a[5], gaussian=gaussian(), logit=quasibinomial(),
              probit=quasibinomial(link="probit"), poisson=quasipoisson())
sub <- a[6]
data$ell2[data$ell2 == 999] <- NA
d <- switch(kind,
  strat=svydesign(ids=~1, strata=~stype, fpc=~fpc, weights=~pw, data=data),
  clus=svydesign(ids=~dnum, fpc=~fpc, weights=~pw, data=data),
  jk1=svrepdesign(data=data, repweights="R[0-9]+", weights=~pw, type="JK1", scale=14/15,
                  combined.weights=TRUE, mse=FALSE))
if (sub != "") d <- subset(d, eval(parse(text=sub)))
# R's refits of replicates stop at its epsilon: at 1e-12 a probit's Wald F
# was 1.4e-6 from its limit (1e-15 takes it there).
m <- svyglm(formula, design=d, family=fam, control=glm.control(epsilon=1e-15, maxit=200))
s <- summary(m)$coefficients
ci <- confint(m)
rows <- data.frame(what="coef", key=rownames(s), est=s[,1], se=s[,2], t=s[,3], p=s[,4],
                   lo=ci[,1], hi=ci[,2])
terms <- attr(terms(formula), "term.labels")
w <- regTermTest(m, as.formula(paste("~", paste(terms, collapse="+"))))
rows <- rbind(rows, data.frame(what="wald", key="F", est=w$Ftest, se=w$df, t=w$ddf, p=w$p,
                               lo=NA, hi=NA))
rows <- rbind(rows, data.frame(what="df", key="df", est=m$df.residual, se=NA, t=NA, p=NA,
                               lo=NA, hi=NA))
write.csv(rows, out, row.names=FALSE)
"""


def r_fit(api, kind, formula, family, sub=""):
    return r_design(api, kind, "fit", R_FIT, formula, family, sub)


CASES = [
    # (design, microtab formula, R formula, family, microtab filter, R subset)
    ("strat", "api00 ~ ell + meals + factor(stype)", "api00 ~ ell + meals + factor(stype)",
     "gaussian", None, ""),
    ("clus", "api00 ~ ell + meals + factor(stype)", "api00 ~ ell + meals + factor(stype)",
     "gaussian", None, ""),
    ("jk1", "api00 ~ ell + meals + factor(stype)", "api00 ~ ell + meals + factor(stype)",
     "gaussian", None, ""),
    ("clus", "yes ~ ell + meals + factor(stype)", "yes ~ ell + meals + factor(stype)",
     "logit", None, ""),
    ("jk1", "yes ~ ell + meals + factor(stype)", "yes ~ ell + meals + factor(stype)",
     "logit", None, ""),
    ("strat", "yes ~ meals + factor(stype)", "yes ~ meals + factor(stype)", "probit", None, ""),
    ("jk1", "yes ~ meals + factor(stype)", "yes ~ meals + factor(stype)", "probit", None, ""),
    ("clus", "enroll ~ ell + meals + factor(stype)", "enroll ~ ell + meals + factor(stype)",
     "poisson", None, ""),
    ("jk1", "enroll ~ meals + stype_txt", "enroll ~ meals + stype_txt", "poisson", None, ""),
    # A condition as the outcome; an interaction; a domain; a missing code.
    ("clus", "api00(700-1000) ~ ell*meals", "I(api00 >= 700) ~ ell*meals", "logit", None, ""),
    ("strat", "api00 ~ ell2 + factor(stype, base = M):meals", "api00 ~ ell2 + relevel(factor(stype), 'M'):meals",
     "gaussian", "meals(10-100)", "meals >= 10"),
    ("jk1", "api00 ~ meals + factor(stype) - 1", "api00 ~ meals + factor(stype) - 1",
     "gaussian", "enroll(200-5000)", "enroll >= 200 & enroll <= 5000"),
    # Without an intercept R codes the first factor by indicators, the
    # others by contrasts.
    ("clus", "api00 ~ factor(stype) + factor(yes) - 1", "api00 ~ factor(stype) + factor(yes) - 1",
     "gaussian", None, ""),
    ("strat", "api00 ~ meals + stype_txt + factor(yes, base = 1) - 1",
     "api00 ~ meals + stype_txt + relevel(factor(yes), '1') - 1", "gaussian", None, ""),
    # A domain in 8 of the 15 clusters: R's degf is the rank of its
    # records' replicate weights less one (7, not the design's 14).
    ("jk1", "api00 ~ meals + factor(yes)", "api00 ~ meals + factor(yes)", "gaussian",
     "stype(H)", "stype == 'H'"),
]

# Continuous predictors with too many combinations for a cube: fitted
# record by record (`fitted_on` says so), every design and family.
ROWS = "api00 ~ ell + meals + mobility + api99"
RECORD_CASES = [
    ("strat", ROWS, ROWS, "gaussian", None, ""),
    ("clus", ROWS + " + factor(stype)", ROWS + " + factor(stype)", "gaussian", None, ""),
    ("jk1", ROWS, ROWS, "gaussian", None, ""),
    ("jk1", "yes ~ ell + meals + mobility + enroll + factor(stype)",
     "yes ~ ell + meals + mobility + enroll + factor(stype)", "logit", None, ""),
    ("clus", "yes ~ ell + meals + mobility + enroll", "yes ~ ell + meals + mobility + enroll",
     "logit", None, ""),
    ("strat", "yes ~ ell + meals + mobility + enroll", "yes ~ ell + meals + mobility + enroll",
     "probit", None, ""),
    ("jk1", "yes ~ ell + meals + mobility + enroll", "yes ~ ell + meals + mobility + enroll",
     "probit", None, ""),
    ("clus", "enroll ~ ell + meals + mobility + api99", "enroll ~ ell + meals + mobility + api99",
     "poisson", None, ""),
    ("jk1", "enroll ~ ell + meals + mobility + api99 + stype_txt",
     "enroll ~ ell + meals + mobility + api99 + stype_txt", "poisson", None, ""),
    # A condition; interactions of a factor and of two numbers; a domain;
    # a missing code (ell2's 999).
    ("strat", "api00(700-1000) ~ ell*meals + mobility + enroll", "I(api00 >= 700) ~ ell*meals + mobility + enroll",
     "logit", "meals(10-100)", "meals >= 10"),
    ("clus", "api00 ~ ell2 + factor(stype, base = M):meals + mobility + api99",
     "api00 ~ ell2 + relevel(factor(stype), 'M'):meals + mobility + api99", "gaussian", None, ""),
    ("jk1", "api00 ~ meals + mobility + api99 + ell + factor(stype) - 1",
     "api00 ~ meals + mobility + api99 + ell + factor(stype) - 1",
     "gaussian", "enroll(200-5000)", "enroll >= 200 & enroll <= 5000"),
    ("jk1", ROWS, ROWS, "gaussian", "stype(H)", "stype == 'H'"),
]


@pytest.mark.parametrize("case", [(c, "cells") for c in CASES] + [(c, "records") for c in RECORD_CASES],
                         ids=[f"{c[0]}-{c[3]}-{i}" for i, c in enumerate(CASES)]
                         + [f"records-{c[0]}-{c[3]}-{i}" for i, c in enumerate(RECORD_CASES)])
def test_models_match_r_svyglm(api, case):
    (kind, formula, rformula, family, filt, sub), fitted_on = case
    args = ["regress", api[kind], formula, "--family", family]
    if filt:
        args += ["--filter", filt]
    got = run_json(*args)
    assert got["fitted_on"] == fitted_on
    want = r_fit(api, kind, rformula, family, sub)
    coefs = [r for r in want if r["what"] == "coef"]
    assert len(got["coefficients"]) == len(coefs)
    for g, w in zip(got["coefficients"], coefs):
        # R names a relevel()ed factor differently; the order is the same.
        if "relevel" not in w["key"]:
            assert g["term"] == w["key"]
        for k, rk in [("estimate", "est"), ("se", "se"), ("t", "t"), ("p", "p"), ("lo", "lo"),
                      ("hi", "hi")]:
            # An interval's end near 0: compared to 1e-6 of its SE.
            tol = 1e-6 * g["se"] if k in ("lo", "hi") else 0
            ok = close_p(g, float(w[rk])) if k == "p" else close(g[k], float(w[rk]))
            assert ok or abs(g[k] - float(w[rk])) <= tol, (g["term"], k, g[k], w[rk])
    df = float(next(r for r in want if r["what"] == "df")["est"])
    assert got["df"] == pytest.approx(df)
    wald = next(r for r in want if r["what"] == "wald")
    assert close(got["wald"]["f"], float(wald["est"]))
    assert got["wald"]["ndf"] == float(wald["se"]) and got["wald"]["ddf"] == float(wald["t"])
    # The tail's relative error is F's times about ndf·F/2.
    f_rel = 1e-6 * max(1.0, got["wald"]["ndf"] * got["wald"]["f"])
    assert close(got["wald"]["p"], float(wald["p"]), rel=f_rel), (got["wald"], wald)


R_PLAIN = r"""
a <- commandArgs(trailingOnly=TRUE)
data <- read.csv(a[1]); out <- a[2]
g <- lm(api00 ~ ell + meals + factor(stype), data=data)
s <- summary(g)$coefficients
lg <- glm(yes ~ meals + factor(stype), data=data, family=binomial(),
          control=glm.control(epsilon=1e-12, maxit=100))
l <- summary(lg)$coefficients
# HC0 by hand: X' diag(u²) X sandwiched by the weighted information
# (weights scaled to mean 1, as svyglm does: R's glm diverges from its
# start with weights near 44; the sandwich does not depend on the scale).
w <- data$pw / mean(data$pw)
gw <- glm(yes ~ meals + factor(stype), data=data, family=quasibinomial(), weights=w,
          control=glm.control(epsilon=1e-12, maxit=100))
X <- model.matrix(gw); u <- X * (data$yes - fitted(gw)) * w
A <- solve(t(X) %*% (X * (fitted(gw) * (1 - fitted(gw)) * w)))
hc0 <- sqrt(diag(A %*% crossprod(u) %*% A))
rows <- rbind(
  data.frame(what="lm", key=rownames(s), est=s[,1], se=s[,2], p=s[,4]),
  data.frame(what="glm", key=rownames(l), est=l[,1], se=l[,2], p=l[,4]),
  data.frame(what="hc0", key=names(coef(gw)), est=coef(gw), se=hc0, p=NA),
  data.frame(what="r2", key="r2", est=summary(g)$r.squared, se=NA, p=NA))
write.csv(rows, out, row.names=FALSE)
"""


def test_without_a_design_match_r(api):
    want = rscript(api["dir"] / "plain.R", R_PLAIN, api["dir"] / "strat.csv", api["dir"] / "plain.csv")
    by = {}
    for r in want:
        by.setdefault(r["what"], []).append(r)
    ds = api["strat"]
    lm = run_json("regress", ds, "api00 ~ ell + meals + factor(stype)", "--no-design")
    assert lm["method"] == "model-based"
    for g, w in zip(lm["coefficients"], by["lm"]):
        assert close(g["estimate"], float(w["est"])) and close(g["se"], float(w["se"]))
        assert close_p(g, float(w["p"]))
    assert close(lm["r_squared"], float(by["r2"][0]["est"]))
    lg = run_json("regress", ds, "yes ~ meals + factor(stype)", "--family", "logit", "--no-design")
    for g, w in zip(lg["coefficients"], by["glm"]):
        assert close(g["estimate"], float(w["est"])) and close(g["se"], float(w["se"]))
        assert close_p(g, float(w["p"]))
    hc = run_json("regress", ds, "yes ~ meals + factor(stype)", "--family", "logit", "--no-design",
                  "--weight", "pw")
    assert hc["method"] == "sandwich (HC0)" and hc["notes"]
    for g, w in zip(hc["coefficients"], by["hc0"]):
        assert close(g["estimate"], float(w["est"])) and close(g["se"], float(w["se"]))


R_PLAIN_RECORDS = R_PLAIN.replace("api00 ~ ell + meals + factor(stype)", "api00 ~ ell + meals + mobility + api99").replace(
    "yes ~ meals + factor(stype)", "yes ~ ell + meals + mobility + enroll")


def test_records_without_a_design_match_r(api):
    """The same three fits record by record: lm, glm and the HC0 sandwich."""
    want = rscript(api["dir"] / "plain_rec.R", R_PLAIN_RECORDS, api["dir"] / "strat.csv",
                   api["dir"] / "plain_rec.csv")
    by = {}
    for r in want:
        by.setdefault(r["what"], []).append(r)
    ds = api["strat"]
    lm = run_json("regress", ds, "api00 ~ ell + meals + mobility + api99", "--no-design")
    assert lm["method"] == "model-based" and lm["fitted_on"] == "records"
    for g, w in zip(lm["coefficients"], by["lm"], strict=True):
        assert close(g["estimate"], float(w["est"])) and close(g["se"], float(w["se"]))
        assert close_p(g, float(w["p"]))
    assert close(lm["r_squared"], float(by["r2"][0]["est"]))
    logit = "yes ~ ell + meals + mobility + enroll"
    lg = run_json("regress", ds, logit, "--family", "logit", "--no-design")
    assert lg["fitted_on"] == "records"
    for g, w in zip(lg["coefficients"], by["glm"], strict=True):
        assert close(g["estimate"], float(w["est"])) and close(g["se"], float(w["se"]))
        assert close_p(g, float(w["p"]))
    hc = run_json("regress", ds, logit, "--family", "logit", "--no-design", "--weight", "pw")
    assert hc["method"] == "sandwich (HC0)" and hc["notes"] and hc["fitted_on"] == "records"
    for g, w in zip(hc["coefficients"], by["hc0"], strict=True):
        assert close(g["estimate"], float(w["est"])) and close(g["se"], float(w["se"]))


def test_bad_models_record_by_record_are_errors_that_say_why(api):
    ds = api["strat"]
    wide = "ell + meals + mobility + api99"
    for args, needle in [
        ([f"api00 ~ {wide}", "--family", "logit"], "must be 0 or 1"),
        ([f"api00 ~ {wide} + factor(stype) + stype_txt"], "collinear"),
        ([f"api00 ~ {wide} + factor(stype, base = Q)"], "base Q"),
        ([f"api00 ~ {wide}", "--filter", "api00(2000-3000)"], "no record"),
    ]:
        p = run("regress", ds, *args, ok=False)
        assert needle in p.stderr, (args, p.stderr)


def test_bad_models_are_errors_that_say_why(api):
    ds = api["strat"]
    cases = [
        (["api00 ~ meals", "--family", "logit"], "must be 0 or 1"),
        (["api00 ~ meals + factor(stype) + stype_txt"], "collinear"),
        (["api00 ~ factor(stype) + stype_txt"], "only 3 distinct combinations"),
        (["api00 ~ factor(stype, base = Q)"], "base Q"),
        (["api00 ~ stype"], None),  # a text variable is a factor: fine
        (["api00 meals"], "formula"),
        (["yes ~ factor(stype)", "--family", "logit", "--filter", "api00(700-1000)"], None),
    ]
    for args, needle in cases:
        p = run("regress", ds, *args, ok=needle is None)
        if needle:
            assert p.returncode == 1 and needle in p.stderr, p.stderr



R_DIFF = R_DESIGNS + r"""
# The domain of schools with ell under 50 (a filter), by a text variable.
sub <- subset(d, ell < 50)
b <- svyby(~api00, ~stype_txt, sub, svymean, covmat=TRUE)
ct <- svycontrast(b, list(high=c(-1, 1, 0), middle=c(-1, 0, 1)))
t2 <- svyttest(api00 ~ yes, d)
rows <- rbind(
  data.frame(what="contrast", key=names(coef(ct)), est=coef(ct), se=SE(ct), df=NA, p=NA),
  data.frame(what="ttest", key="1", est=t2$estimate, se=t2$estimate / t2$statistic,
             df=t2$parameter, p=t2$p.value))
write.csv(rows, out, row.names=FALSE)
"""


@pytest.mark.parametrize("kind", ["strat", "clus", "jk1"])
def test_differences_match_r_svycontrast_and_svyttest(api, kind):
    want = r_design(api, kind, "diff", R_DIFF)
    ds = api[kind]
    got = run_json("means", ds, "api00", "--by", "stype_txt", "--diff", "elem",
                   "--filter", "ell(0-49)")["comparison"]
    assert got["base"] == "elem"
    by = {d["group"]: d for d in got["differences"]}
    for w in (r for r in want if r["what"] == "contrast"):
        g = by[w["key"]]
        assert close(g["estimate"], float(w["est"])) and close(g["se"], float(w["se"]))
    t = next(r for r in want if r["what"] == "ttest")
    got = run_json("means", ds, "api00", "--by", "yes", "--diff", "0")["comparison"]
    (g,) = got["differences"]
    assert close(g["estimate"], float(t["est"])) and close(g["se"], float(t["se"]))
    assert got["df"] == float(t["df"])
    assert close_p(g, float(t["p"]))
    # The CSV carries the same difference beside the means; the table says it.
    csv_out = run("means", ds, "api00", "--by", "yes", "--diff", "0", "--format", "csv").stdout
    head, base, other, total = csv_out.strip().splitlines()
    assert head.split(",")[-6:] == ["diff", "diff_se", "diff_t", "diff_p", "diff_lo", "diff_hi"]
    assert base.endswith(",,,,,,") and total.endswith(",,,,,,")
    assert float(other.split(",")[-6]) == pytest.approx(float(t["est"]), rel=1e-9)
    text = run("means", ds, "api00", "--by", "yes", "--diff", "0").stdout
    assert "Difference from yes = 0" in text


R_SHARES = R_DESIGNS + r"""
# Each row category's share by column, compared with the column elem, in
# the domain of schools with meals of at least 10 (a filter).
d <- subset(d, meals >= 10)
rows <- NULL
for (r in c(0, 1)) {
  d2 <- update(d, z=as.numeric(yes == r))
  b <- svyby(~z, ~stype_txt, d2, svymean, covmat=TRUE)
  ct <- svycontrast(b, list(high=c(-1, 1, 0), middle=c(-1, 0, 1)))
  rows <- rbind(rows, data.frame(row=r, key=names(coef(ct)), base=coef(b)[1], est=coef(ct),
                                 se=SE(ct)))
}
write.csv(rows, out, row.names=FALSE)
"""


@pytest.mark.parametrize("kind", ["strat", "clus", "jk1"])
def test_share_differences_match_r_svyby_svycontrast(api, kind):
    want = r_design(api, kind, "shares", R_SHARES)
    ds = api[kind]
    args = ["tab", ds, "yes", "stype_txt", "--diff", "elem", "--filter", "meals(10-*)"]
    got = run_json(*args)["comparisons"]
    assert [c["row"] for c in got] == ["0", "1"]
    for c in got:
        assert c["base"] == "elem"
        by = {d["group"]: d for d in c["differences"]}
        assert set(by) == {"high", "middle"}
        for w in (r for r in want if r["row"] == c["row"]):
            assert close(c["base_estimate"], float(w["base"]))
            g = by[w["key"]]
            assert close(g["estimate"], float(w["est"])) and close(g["se"], float(w["se"]))
    # CSV: each cell's difference from the base column; the text: a table per row.
    lines = run(*args, "--format", "csv").stdout.strip().splitlines()
    head = lines[0].split(",")
    assert head[-6:] == ["diff", "diff_se", "diff_t", "diff_p", "diff_lo", "diff_hi"]
    cells = [dict(zip(head, line.split(","))) for line in lines[1:]]
    for c in got:
        for d in c["differences"]:
            (cell,) = [x for x in cells if x["row"] == c["row"] and x["col"] == d["group"]]
            assert float(cell["diff"]) == pytest.approx(d["estimate"], rel=1e-12)
        (base,) = [x for x in cells if x["row"] == c["row"] and x["col"] == "elem"]
        assert base["diff"] == ""
    text = run(*args).stdout
    assert "Share of yes = 1: difference from stype_txt = elem" in text
    for bad, why in [(["--diff", "elem", "--control", "stype"], "one grouping variable"),
                     (["--diff", "nope"], "nope")]:
        p = run("tab", ds, "yes", "stype_txt", *bad, ok=False)
        assert why in p.stderr, p.stderr
    p = run("tab", ds, "api00(r: 0-699; 700-*)", "stype_txt", "--diff", "elem", ok=False)
    assert "recode" in p.stderr


def test_differences_refuse_what_they_cannot_answer(api):
    p = run("means", api["clus"], "api00", "--by", "stype,yes", "--diff", "E", ok=False)
    assert p.returncode == 1 and "one grouping variable, not 2" in p.stderr
    p = run("means", api["clus"], "api00", "--by", "stype", "--diff", "Q", ok=False)
    assert p.returncode == 1 and "base Q is not one of its categories" in p.stderr


def test_a_model_over_a_catalog_of_parts_equals_the_whole(api, tmp_path):
    """`regress` over a catalog of parts (the pattern and catalog forms the
    tables take): fitted on the merged cube, the replicates refitted on the
    merged replicate sums — the whole dataset's model, which matches R
    above. Weighted without a design (HC0) a second round sums the scores.
    A model on too many combinations for a cube is fitted record by record
    over the parts, a round per pass."""
    cat = tmp_path / "jk1.parts"
    run("split", api["jk1"], cat, "--parts", "3")
    for extra in ([], ["--no-design", "--weight", "pw"], ["--no-design"]):
        for formula, family in [("api00 ~ ell + factor(stype)", "gaussian"),
                                ("yes ~ ell + factor(stype)", "logit"),
                                # Too many combinations: record by record.
                                ("api00 ~ ell + meals + mobility + api99 + factor(stype)",
                                 "gaussian"),
                                ("yes ~ ell + meals + mobility + api99", "logit")]:
            args = [formula, "--family", family, *extra]
            whole = run_json("regress", api["jk1"], *args)
            parts = run_json("regress", cat, *args)
            assert parts["method"] == whole["method"]
            assert parts["fitted_on"] == whole["fitted_on"]
            assert close(parts["wald"]["f"], whole["wald"]["f"], 1e-9)
            assert parts["df"] == whole["df"]
            for a, b in zip(parts["coefficients"], whole["coefficients"]):
                assert a["term"] == b["term"]
                assert close(a["estimate"], b["estimate"], 1e-12) and close(a["se"], b["se"], 1e-9)


def test_means_compared_over_a_catalog_of_parts_equal_the_whole(api, tmp_path):
    """`means --diff` over a catalog of parts: the means from the merged
    cube, the differences from the comparison's model over the parts (a
    second round of partial results for its scores when weighted without a
    design) — the whole dataset's, which match R above."""
    cat = tmp_path / "jk1d.parts"
    run("split", api["jk1"], cat, "--parts", "3")
    for extra in ([], ["--no-design", "--weight", "pw"], ["--no-design"]):
        args = ["api00", "--by", "stype", "--diff", "E", *extra, "--filter", "ell(0-60)"]
        whole = run_json("means", api["jk1"], *args)
        parts = run_json("means", cat, *args)
        w, p = whole["comparison"], parts["comparison"]
        assert (p["base"], p["df"], p["method"]) == (w["base"], w["df"], w["method"])
        for a, b in zip(p["differences"], w["differences"]):
            assert a["group"] == b["group"]
            assert close(a["estimate"], b["estimate"], 1e-9) and close(a["se"], b["se"], 1e-9)
        assert close(p["wald"]["f"], w["wald"]["f"], 1e-9)


R_CONSTANT_SHARES = R_DESIGNS + r"""
# Each district's share by school type (a district's schools are often of
# one or two types only): where both columns' shares are 0, R's difference
# and its SE are exactly 0.
d <- subset(d, ell <= 30)
rows <- NULL
for (r in sort(unique(d$variables$dnum))) {
  d2 <- update(d, z=as.numeric(dnum == r))
  b <- svyby(~z, ~stype_txt, d2, svymean, covmat=TRUE)
  lv <- names(coef(b)); k <- length(lv)
  cs <- lapply(2:k, function(i) { v <- rep(0, k); v[1] <- -1; v[i] <- 1; v })
  names(cs) <- lv[2:k]
  ct <- svycontrast(b, cs)
  rows <- rbind(rows, data.frame(row=r, key=names(coef(ct)), est=coef(ct), se=SE(ct)))
}
write.csv(rows, out, row.names=FALSE)
"""


@pytest.mark.parametrize("kind", ["strat", "clus", "jk1"])
def test_share_differences_of_constant_shares_are_zero_as_in_r(api, kind):
    """A row category with a share of 0 in the base column and in another
    differs from it by exactly 0, with an SE of 0 (R's svycontrast): given
    as 0 and 0 with no t, p or test (not the fit's rounding noise, whose t
    would be anything), and left out of the Wald test."""
    want = r_design(api, kind, "constshares", R_CONSTANT_SHARES)
    got = run_json("tab", api[kind], "dnum", "stype_txt", "--diff", "elem", "--filter", "ell(0-30)")
    by = {(c["row"], d["group"]): d for c in got["comparisons"] for d in c["differences"]}
    zeros = 0
    for w in want:
        g = by[(w["row"], w["key"])]
        assert g["estimate"] == pytest.approx(float(w["est"]), rel=1e-6, abs=1e-12)
        assert g["se"] == pytest.approx(float(w["se"]), rel=1e-6, abs=1e-12)
        if float(w["se"]) == 0.0 and float(w["est"]) == 0.0:
            zeros += 1
            assert (g["estimate"], g["se"], g["t"], g["p"]) == (0.0, 0.0, None, None)
        else:
            assert g["t"] is not None
    assert zeros > 0
    for c in got["comparisons"]:
        # The test of the others (none when their covariance is singular:
        # a share of 0 in both other columns makes their differences equal).
        tested = [d for d in c["differences"] if d["t"] is not None]
        assert c["wald"] is None or c["wald"]["ndf"] == len(tested)
        if not tested:
            assert c["wald"] is None


R_ZERO_PSU = r"""
suppressMessages(library(survey))
a <- commandArgs(trailingOnly=TRUE)
d <- read.csv(a[1])
des <- svydesign(ids=~dnum, fpc=~fpc, weights=~zw, data=d)
m <- svyglm(api00 ~ meals + enroll, des)
s <- summary(m)$coefficients
t <- svyttest(api00 ~ yes, des)
write.csv(data.frame(term=c(rownames(s), "ttest"), df=c(rep(m$df.residual, nrow(s)), t$parameter),
                     p=c(s[, 4], t$p.value)), a[2], row.names=FALSE)
"""


def test_zero_weight_psus_are_out_of_the_domain_df_as_in_r(api, tmp_path):
    """A PSU whose records all have weight 0 is not a PSU of R's degf():
    the df (so the t tests, p-values and intervals) of a model and of a
    comparison under a Taylor design leave it out, as the design's df
    does."""
    rows = list(csv.DictReader(open(api["dir"] / "clus.csv")))
    first = rows[0]["dnum"]
    for r in rows:
        r["zw"] = "0" if r["dnum"] == first else r["pw"]
    path = tmp_path / "zw.csv"
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    ds = tmp_path / "zw.mtab"
    run("import", path, ds, "--missing", "ell2=999")
    run("design", ds, "--weight", "zw", "--cluster", "dnum", "--fpc", "fpc")
    want = {r["term"]: r for r in rscript(tmp_path / "zw.R", R_ZERO_PSU, path, tmp_path / "zw_r.csv")}
    got = run_json("regress", ds, "api00 ~ meals + enroll")
    for c in got["coefficients"]:
        w_ = want[c["term"]]
        assert got["df"] == float(w_["df"])
        assert close(c["p"], float(w_["p"]))
    comp = run_json("means", ds, "api00", "--by", "yes", "--diff", "0")["comparison"]
    assert comp["df"] == float(want["ttest"]["df"])
    assert close(comp["differences"][0]["p"], float(want["ttest"]["p"]))


def test_shares_compared_and_tests_over_a_catalog_of_parts_equal_the_whole(api, tmp_path):
    """`tab --diff` over a catalog of parts (a round for the table's row
    categories, then each row's model in its rounds) and `means
    --test-mean` (the tests' sums merged; under replicate weights each
    group's basis of its replicate weights, united for R's domain df): the
    whole dataset's answers, which match R in test_ratio_corr.py and above.
    The domain `dnum(0-300)` lies in a few clusters (R's domain df 3, not
    the design's 14), some parts have none of its records."""
    cat = tmp_path / "jk1t.parts"
    run("split", api["jk1"], cat, "--parts", "3")
    for extra in ([], ["--no-design", "--weight", "pw"], ["--no-design"]):
        for args in (["tab", "{}", "yes", "stype", "--diff", "E", "--filter", "ell(0-60)"],
                     ["tab", "{}", "stype_txt", "yes", "--diff", "0", "--filter", "dnum(0-300)"],
                     ["means", "{}", "api00", "--by", "stype", "--test-mean", "650",
                      "--filter", "ell(0-60)"],
                     ["means", "{}", "api00", "--by", "stype", "--test-mean", "650",
                      "--filter", "dnum(0-300)"],
                     ["means", "{}", "api00", "--by", "stype", "--diff", "E",
                      "--test-mean", "650"]):
            at = args.index("{}")
            whole = run_json(*args[:at], api["jk1"], *args[at + 1:], *extra)
            parts = run_json(*args[:at], cat, *args[at + 1:], *extra)
            got = parts.get("comparisons") or parts.get("test")
            assert got, (args, extra)
            same_answer(parts, whole)
    # The recoded row variable and a control variable are refused over parts
    # as over one dataset.
    p = run("tab", cat, "ell(r: 0-30; 31-*)", "stype", "--diff", "E", ok=False)
    assert "recode" in p.stderr, p.stderr


R_DEVIANCE = R_DESIGNS + r"""
# R's deviance of a binary model is the records' (-2 log-likelihood), on
# weights rescaled to mean 1; saturated models included.
rows <- NULL
for (f in c("yes ~ factor(stype)", "yes ~ ell + factor(stype)", "yes ~ 1")) {
  m <- svyglm(as.formula(f), d, family=quasibinomial(), control=glm.control(epsilon=1e-12))
  w <- weights(d, "sampling")
  rows <- rbind(rows, data.frame(f=f, dev=deviance(m) * sum(w) / length(w),
                                 null=m$null.deviance * sum(w) / length(w),
                                 b=coef(m)[1]))
}
write.csv(rows, out, row.names=FALSE)
"""


@pytest.mark.parametrize("kind", ["strat", "clus", "jk1"])
def test_binary_deviance_is_the_records_as_in_r(api, kind):
    """A logit's deviance and null deviance are the records' (-2 × the
    log-likelihood, R's), on the cube and record by record alike; a
    saturated model (one coefficient per cell) converges and has a
    deviance, not 0 and a pseudo-R² of 1."""
    want = r_design(api, kind, "dev", R_DEVIANCE)
    for w in want:
        formula = w["f"]
        got = run_json("regress", api[kind], formula, "--family", "logit")
        assert close(got["deviance"], float(w["dev"]), 1e-8), formula
        assert close(got["null_deviance"], float(w["null"]), 1e-8), formula
        assert close(got["coefficients"][0]["estimate"], float(w["b"]), 1e-7), formula
        assert 0 <= got["pseudo_r_squared"] < 1


def write_rows(path, rows):
    """`rows` (dicts of one set of keys) as a CSV file at `path`."""
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return path


R_DIFF_MISSING = r"""
suppressMessages(library(survey))
a <- commandArgs(trailingOnly=TRUE)
data <- read.csv(a[1], na.strings=""); out <- a[2]; kind <- a[3]
d <- switch(kind,
  strat=svydesign(ids=~1, strata=~stype, fpc=~fpc, weights=~pw, data=data),
  clus=svydesign(ids=~dnum, fpc=~fpc, weights=~pw, data=data),
  jk1=svrepdesign(data=data, repweights="R[0-9]+", weights=~pw, type="JK1", scale=14/15,
                  combined.weights=TRUE, mse=FALSE),
  hc0=svydesign(ids=~1, weights=~pw, data=data))
rows <- NULL
add <- function(what, m, n) {
  s <- summary(m)$coefficients
  w <- regTermTest(m, ~grpf)
  rows <<- rbind(rows,
    data.frame(what=what, key=rownames(s)[-1], est=s[-1, 1], se=s[-1, 2], p=s[-1, 4],
               df=m$df.residual, f=w$Ftest[1], fp=w$p[1], n=n))
}
data$grpf <- relevel(factor(data$grp), "elem")
if (kind == "none") {
  m <- lm(y ~ grpf, data=data)
  s <- summary(m)$coefficients
  f <- anova(m)
  rows <- data.frame(what="mean", key=rownames(s)[-1], est=s[-1, 1], se=s[-1, 2], p=s[-1, 4],
                     df=m$df.residual, f=f$`F value`[1], fp=f$`Pr(>F)`[1], n=nobs(m))
} else {
  # The complete cases' subset (the same domain; its degf is the
  # subset's). The factor is not named g: svyglm on replicate designs
  # evaluates its call, g, within the data.
  d <- update(d, grpf=relevel(factor(grp), "elem"), z=as.numeric(yes == 1))
  m <- svyglm(y ~ grpf, design=subset(d, !is.na(y) & !is.na(grp)))
  add("mean", m, nrow(data))
  m <- svyglm(z ~ grpf, design=subset(d, !is.na(grp)))
  add("share", m, nrow(data))
}
write.csv(rows, out, row.names=FALSE)
"""


@pytest.mark.parametrize("kind", ["strat", "clus", "jk1", "hc0", "none"])
def test_differences_with_missing_values_match_r(api, kind, tmp_path):
    """Differences answered from the means and table queries' own scans
    (no model fitted) where the outcome lacks values — in single records
    and in whole PSUs — and the grouping variable lacks values too, with
    `--test-mean` in the same scan: estimates, SEs, p, the df (the
    domain's PSUs − strata, or the rank of its replicate weights, + 1 −
    groups) and the Wald test equal R's `svyglm` + `regTermTest` (`lm`
    without a design; HC0 is R's `ids = ~1` SE without its n/(n − 1))."""
    src = api["dir"] / ("strat.csv" if kind in ("strat", "none", "hc0") else "clus.csv")
    rows = list(csv.DictReader(src.open()))
    for i, r in enumerate(rows):
        lost = i % 7 == 3 or (kind in ("clus", "jk1") and r["dnum"] == rows[0]["dnum"])
        r["y"] = "" if lost else r["api00"]
        r["grp"] = "" if i % 11 == 5 else r["stype_txt"]
        if kind == "hc0" and i % 13 == 2:
            # Records of weight 0: out of R's degf and of the df.
            r["pw"] = "0"
    data = write_rows(tmp_path / "data.csv", rows)
    ds = tmp_path / "d.mtab"
    run("import", data, ds)
    design = {
        "strat": ["--weight", "pw", "--strata", "stype", "--fpc", "fpc"],
        "clus": ["--weight", "pw", "--cluster", "dnum", "--fpc", "fpc"],
        "jk1": ["--weight", "pw", "--repweights", "R1-R15", "--type", "jk1", "--no-mse"],
    }
    if kind in design:
        run("design", ds, *design[kind])
    extra = {"hc0": ["--weight", "pw"], "none": []}.get(kind, [])
    want = rscript(tmp_path / "diff.R", R_DIFF_MISSING, data, tmp_path / "out.csv", kind)
    got = {
        "mean": run_json("means", ds, "y", "--by", "grp", "--diff", "elem", "--test-mean", "650",
                         *extra)["comparison"],
    }
    if kind != "none":
        (got["share"],) = [c for c in
                           run_json("tab", ds, "yes", "grp", "--diff", "elem", *extra)["comparisons"]
                           if c["row"] == "1"]
    for what, c in got.items():
        rs = {r["key"].removeprefix("grpf"): r for r in want if r["what"] == what}
        assert {d["group"] for d in c["differences"]} == set(rs) == {"high", "middle"}
        for d in c["differences"]:
            r = rs[d["group"]]
            n = float(r["n"])
            # R's ids = ~1 design scales the HC0 variance by n/(n − 1),
            # n its PSUs: every record, in the domain or not.
            f = math.sqrt(n / (n - 1)) if kind == "hc0" else 1.0
            assert close(d["estimate"], float(r["est"]), rel=1e-9), (what, d, r)
            assert close(d["se"] * f, float(r["se"])), (what, d, r)
            if kind != "hc0":
                assert close_p(d, float(r["p"])), (what, d, r)
        r = next(iter(rs.values()))
        assert c["df"] == float(r["df"]), (what, c["df"], r)
        if kind != "hc0":
            assert close(c["wald"]["f"], float(r["f"])) and close(c["wald"]["p"], float(r["fp"]))
    if kind == "hc0":
        # The same model as a regression (its records of weight 0 out of
        # its n and df, as `lm` and `svyglm` leave them), whole and in
        # parts (the model path of a comparison).
        r = next(r for r in want if r["what"] == "mean")
        parts = tmp_path / "d.parts"
        run("split", ds, parts, "--parts", "3")
        for d in (ds, parts):
            reg = run_json("regress", d, "y ~ factor(grp, base=elem)", *extra)
            assert reg["df"] == float(r["df"]), (d, reg["df"], r)
            c = run_json("means", d, "y", "--by", "grp", "--diff", "elem", *extra)["comparison"]
            assert c["df"] == float(r["df"]), (d, c["df"], r)


def test_differences_with_missing_categories_and_repeated_labels(api, tmp_path):
    """Under JK1 replicate weights, `tab --diff --include-missing` compares
    the rows and columns that are not missing, on the df of their records
    (the rank of those records' replicate weights): the same comparisons
    as without `--include-missing`. Groups shown as the same value (a
    recode giving two ranges one label) cannot be named apart: a
    comparison or a test of them is an error saying so."""
    rows = list(csv.DictReader((api["dir"] / "clus.csv").open()))
    dnums = sorted({r["dnum"] for r in rows})
    for r in rows:
        # The row variable known only in three districts (9: missing).
        r["A"] = r["yes"] if r["dnum"] in dnums[:3] else "9"
    data = write_rows(tmp_path / "m.csv", rows)
    ds = tmp_path / "m.mtab"
    run("import", data, ds, "--missing", "A=9")
    run("design", ds, "--weight", "pw", "--repweights", "R1-R15", "--type", "jk1", "--no-mse")
    plain = run_json("tab", ds, "A", "stype_txt", "--diff", "elem")["comparisons"]
    wide = run_json("tab", ds, "A", "stype_txt", "--diff", "elem", "--include-missing")["comparisons"]
    assert [c["row"] for c in wide] == [c["row"] for c in plain] and plain
    for a, b in zip(wide, plain):
        assert a["df"] == b["df"] < 14, (a, b)
        for x, y in zip(a["differences"], b["differences"]):
            assert close(x["estimate"], y["estimate"], rel=1e-9) and close(x["se"], y["se"], rel=1e-9)
    twice = 'stype(r: E "X"; H "Y"; M "X")'
    # Over parts too (whose tests once merged the two into one group).
    parts = tmp_path / "m.parts"
    run("split", api["jk1"], parts, "--parts", "3")
    for ds_ in (api["jk1"], parts):
        for args in (["--diff", "Y"], ["--test-mean", "600"], ["--no-design", "--test-mean", "600"]):
            p = run("means", ds_, "api00", "--by", twice, *args, ok=False)
            assert p.returncode == 1 and 'both shown as "X"' in p.stderr, (ds_, args, p.stderr)
        p = run("tab", ds_, "yes", twice, "--diff", "Y", ok=False)
        assert p.returncode == 1 and 'both shown as "X"' in p.stderr, (ds_, p.stderr)


def test_outcomes_a_family_refuses_are_named(api, tmp_path):
    """A Poisson outcome below 0 and a logit outcome of many values are
    refused for what they are, whether the model is fitted on cells or
    record by record (not as a failure to converge, or a table too large);
    an empty domain with a factor is the empty-domain error."""
    ds = tmp_path / "g.mtab"
    shutil.copytree(api["strat"], ds)
    run("compute", ds, "G = api00 - api99")
    with open(api["dir"] / "strat.csv") as f:
        growth = {int(r["api00"]) - int(r["api99"]) for r in csv.DictReader(f)}
    negative = {str(g) for g in growth if g < 0}
    assert negative
    for args in (["G ~ meals"], ["G ~ meals", "--max-cells", "20"], ["G ~ factor(stype)"]):
        p = run("regress", ds, *args, "--family", "poisson", ok=False)
        msg = "the outcome G of a poisson model must not be negative (it takes "
        assert msg in p.stderr and p.stderr.split(msg)[1].split(")")[0] in negative, p.stderr
    # Poisson on G where it is not negative is fitted.
    run("regress", ds, "G ~ meals", "--family", "poisson", "--filter", "G(0-*)")
    for args in (["api00 ~ meals + factor(stype)"], ["api00 ~ meals + factor(stype)", "--max-cells", "20"]):
        p = run("regress", ds, *args, "--family", "logit", ok=False)
        assert "the outcome api00 of a logit model must be 0 or 1" in p.stderr, p.stderr
    p = run("regress", ds, "api00 ~ meals + factor(stype)", "--filter", "api00(2000-3000)", "--max-cells", "20",
            ok=False)
    assert "no record has a value of every model variable" in p.stderr, p.stderr


def test_a_negative_outcome_outside_the_models_records_is_no_refusal(tmp_path):
    """A record whose outcome is negative but whose predictor is missing is
    not in the model: the Poisson fit goes on, on cells and record by
    record, and equals R's `glm(Y ~ X, family = poisson)` (its values
    below, from R 4's glm on these six records; its SEs to 1e-6, R's
    default convergence)."""
    (tmp_path / "p.csv").write_text("Y,X\n1,1\n2,2\n3,\n-1,\n0,3\n4,4\n")
    ds = tmp_path / "p.mtab"
    run("import", tmp_path / "p.csv", ds)
    want = [(-0.5968495403, 1.1537414627), (0.4196176250, 0.3633581426)]
    for extra in ([], ["--max-cells", "2"]):
        got = run_json("regress", ds, "Y ~ X", "--family", "poisson", *extra)
        for g, (est, se) in zip(got["coefficients"], want, strict=True):
            assert abs(g["estimate"] - est) < 1e-8 and abs(g["se"] - se) < 1e-6 * se, (extra, g)
