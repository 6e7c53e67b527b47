"""`microtab weight` on a Taylor design (strata, clusters, FPC), a
cluster-only and a weight-only one: the design kept with the adjustment,
whose residuals the linearized variance subtracts, as R's calibrated
`survey.design2` (`svyrecvar` with `postStrata`).  Every estimate of
test_taylor.py's check (weighted counts, percentages of three bases and
their logit and Korn–Graubard intervals, design effects, the Rao–Scott
test, means by group over all records and in a filtered domain with a
missing code) against R `postStratify`, `rake` and `calibrate` (linear and
raking distances) on the same design, to 1e-6."""

import csv
import io
import random

import pytest

from conftest import r_estimates, rscript, run, run_json
from test_survey import DEFF_R, KG_R, TABLES_R, check_estimates  # noqa: F401
import test_taylor
from test_taylor import R_HEAD, rows_of, write_csv

SEXES = [1, 2]
STRATA = [1, 2, 3, 4, 5, 6, 7]


def population(rows):
    """Population totals near the sample's weighted counts: per SEX × S
    cell (S, the strata, is an adjustment variable too; EDUC, whose
    estimates are checked, is not: its counts would be fixed), and AGE's
    total."""
    rng = random.Random(3)
    cells = {}
    age = 0.0
    for r in rows:
        sex, edu, a, w = r[4], r[0], r[6], float(r[8])
        cells[(sex, edu)] = cells.get((sex, edu), 0.0) + w
        age += w * a
    cells = {k: round(v * rng.uniform(0.8, 1.25)) for k, v in cells.items()}
    return cells, round(age * 1.07)


def totals_files(d, rows):
    cells, age = population(rows)
    n = sum(cells.values())
    wtot = 1.1 * sum(float(r[8]) ** 2 for r in rows)
    sex = {s: sum(v for (a, _), v in cells.items() if a == s) for s in SEXES}
    edu = {e: sum(v for (_, b), v in cells.items() if b == e) for e in STRATA}
    files = {
        "ps": "variable,value,total\n" + "".join(f"SEX*S,{s}*{e},{v}\n" for (s, e), v in cells.items()),
        "rake": "variable,value,total\n" + "".join(f"SEX,{s},{v}\n" for s, v in sex.items())
        + "".join(f"S,{e},{v}\n" for e, v in edu.items()),
        "linear": f"variable,value,total\n(Intercept),,{n}\nAGE,,{age}\n"
        + "".join(f"SEX,{s},{v}\n" for s, v in sex.items()),
        "raking": f"variable,value,total\n(Intercept),,{n}\nAGE,,{age}\n"
        + "".join(f"S,{e},{v}\n" for e, v in edu.items()),
        # W has two implied decimals: a numeric variable all the same.
        "decimal": f"variable,value,total\n(Intercept),,{n}\nW,,{wtot:.2f}\n"
        + "".join(f"SEX,{s},{v}\n" for s, v in sex.items()),
    }
    for name, text in files.items():
        (d / f"{name}.csv").write_text(text)
    ps = ", ".join(f"c('{s}', '{e}', {v})" for (s, e), v in cells.items())
    r = {
        "ps": "pop <- as.data.frame(do.call(rbind, list(%s)), stringsAsFactors=FALSE)\n"
        "names(pop) <- c('SEX', 'S', 'Freq'); pop$Freq <- as.numeric(pop$Freq)\n"
        "des <- postStratify(des, ~SEX+S, pop)\n" % ps,
        "rake": "des <- rake(des, list(~SEX, ~S), list(data.frame(SEX=c('1','2'), Freq=c(%s)), "
        "data.frame(S=c(%s), Freq=c(%s))), control=list(maxit=1000, epsilon=1e-13))\n"
        % (", ".join(str(sex[s]) for s in SEXES), ", ".join(f"'{e}'" for e in STRATA),
           ", ".join(str(edu[e]) for e in STRATA)),
        "linear": "des <- calibrate(des, ~AGE+SEX, c(%d, %d, %d), epsilon=1e-13)\n" % (n, age, sex[2]),
        "raking": "des <- calibrate(des, ~AGE+S, c(%d, %d, %s), calfun='raking', epsilon=1e-13, maxit=200)\n"
        % (n, age, ", ".join(str(edu[e]) for e in STRATA[1:])),
        "decimal": "des <- calibrate(des, ~W+SEX, c(%d, %.2f, %d), epsilon=1e-13)\n" % (n, wtot, sex[2]),
    }
    return r


METHODS = {
    "ps": ["--poststrata", "SEX*S"],
    "rake": ["--rake", "SEX; S"],
    "linear": ["--calibrate", "AGE + factor(SEX)"],
    "raking": ["--calibrate", "AGE + factor(S)", "--distance", "raking"],
    "decimal": ["--calibrate", "W + factor(SEX)"],
}

# The R scripts' design (test_taylor.py's), its adjustment's variables as
# factors, and the adjustment (%s).
DESIGN_R = r"""
d$SEX <- factor(d$SEX); d$S <- factor(d$S)
f <- function(v) if (v == "") NULL else as.formula(paste0("~", v))
des <- svydesign(ids=if (cluster == "") ~1 else f(cluster), strata=f(strata), fpc=f(fpc),
                 weights=~W, data=d, nest=TRUE)
%s
"""


def adjusted_r(extra, body):
    """R_HEAD, `extra` lines on the data, the adjusted design, `body`."""
    return R_HEAD + extra + DESIGN_R + body


R_SCRIPT = adjusted_r("d$EDUC <- factor(d$EDUC)\n", r"""df <- degf(des)
rows <- list()
add <- function(what, key, est, se, lo=NA, hi=NA) {
  rows[[length(rows) + 1]] <<- data.frame(what=what, key=key, est=est, se=se, lo=lo, hi=hi)
}
add("df", "df", df, 0)
w <- weights(des)
for (i in seq_along(w)) add("w", as.character(i), w[[i]], 0)
""" + TABLES_R + DEFF_R + KG_R + r"""
write.csv(do.call(rbind, rows), out, row.names=FALSE)
""")


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("wtaylor")
    rows = rows_of(5, lonely=False)
    path = write_csv(d / "t.csv", rows)
    return d, path, rows, totals_files(d, rows)


DESIGNS = [
    ("strata-cluster-fpc", ["--strata", "S", "--cluster", "C", "--fpc", "F"], ("S", "C", "F")),
    ("cluster-only", ["--cluster", "C"], ("", "C", "")),
    ("weight-only", None, ("", "", "")),
]


def near(a, b, rel=1e-6):
    """R's rounding for an SE the adjustment makes 0 (a post-stratified
    margin's count): within 1e-8 absolutely, else 1e-6 relatively."""
    if a is None and b is None:
        # Neither gives it (a Korn–Graubard interval of an SE of 0).
        return True
    assert a is not None and b is not None, (a, b)
    if a > 1e12 and b > 1e12:
        # An F statistic over a variance of 0: infinite to both.
        return True
    return abs(a - b) <= rel * max(abs(b), 1e-12) or abs(a - b) < 1e-8


@pytest.mark.parametrize("method", list(METHODS))
@pytest.mark.parametrize("name,flags,r_args", DESIGNS, ids=[d[0] for d in DESIGNS])
def test_adjusted_taylor_designs_match_r(data, tmp_path, monkeypatch, method, name, flags, r_args):
    import test_survey

    monkeypatch.setattr(test_survey, "close", near)
    d, path, rows, r_code = data
    ds = tmp_path / "t.mtab"
    run("import", path, ds, "--missing", "INC=99999")
    if flags is not None:
        run("design", ds, "--weight", "W", *flags)
    run("weight", ds, "W2", "--from", "W", *METHODS[method], "--totals", d / f"{method}.csv")
    info = run_json("info", ds)["design"]
    assert info["weight"] == "W2"
    assert info["taylor"]["calibration"]["source"] == "W"
    out = tmp_path / "r.csv"
    want = r_estimates(rscript(tmp_path / "r.R", R_SCRIPT % r_code[method], path, out, *r_args, "fail"))
    # The weights first (R's, record by record).
    out = run("list", ds, "W2", "--all", "--format", "csv").stdout
    got = [float(r["W2"]) for r in csv.DictReader(io.StringIO(out))]
    assert len(got) == len(rows)
    for i, g in enumerate(got):
        r = want[("w", str(i + 1))][0]
        assert abs(g - r) <= 1e-9 * r, (i, g, r)
    f = run_json("freq", ds, "EDUC")
    assert f["design"]["method"] == "taylor" and f["weight"] == "W2"
    assert "subtract the adjustment's residuals" in f["design"]["calibration"]
    assert f["design"]["df"] == want[("df", "df")][0]
    check_estimates(ds, want, len(rows), kg_bases=("total",))


def test_adjusted_design_is_refused_where_it_cannot_be_kept(data, tmp_path):
    """A second adjustment of an adjusted weight, replacing the weight
    adjusted, and dropping a variable the adjustment uses are refused;
    re-setting the design on the adjusted weight keeps the adjustment."""
    d, path, rows, _ = data
    ds = tmp_path / "t.mtab"
    run("import", path, ds, "--missing", "INC=99999")
    run("design", ds, "--weight", "W", "--strata", "S", "--cluster", "C")
    p = run("weight", ds, "W", "--from", "W", "--rake", "SEX; S", "--totals", d / "rake.csv", "--replace", ok=False)
    assert "part of the survey design" in p.stderr or "cannot replace" in p.stderr, p.stderr
    run("weight", ds, "W2", "--from", "W", "--rake", "SEX; S", "--totals", d / "rake.csv")
    p = run("weight", ds, "W3", "--rake", "SEX; S", "--totals", d / "rake.csv", ok=False)
    assert "was itself adjusted" in p.stderr, p.stderr
    p = run("drop", ds, "SEX", ok=False)
    assert "design" in p.stderr, p.stderr
    # What the adjustment read cannot change under it.
    for args in (["rename", ds, "SEX", "GENDER"], ["rename", ds, "W", "W0"],
                 ["missing", ds, "SEX", "2"], ["label", ds, "SEX", "1=Male"]):
        p = run(*args, ok=False)
        assert "used by the adjustment" in p.stderr, (args, p.stderr)
    # Parts cannot carry it; re-setting the design on W2 keeps it.
    p = run("split", ds, tmp_path / "t.parts", "--parts", "2", ok=False)
    assert "adjusted to population totals" in p.stderr, p.stderr
    run("design", ds, "--weight", "W2", "--strata", "S", "--cluster", "C", "--lonely-psu", "remove")
    assert run_json("info", ds)["design"]["taylor"]["calibration"]["source"] == "W"
    r = run_json("corr", ds, "INC", "AGE")
    assert "subtract the adjustment's residuals" in r["design"]["calibration"]
    # Replicate weights of W2 say that they leave the adjustment out.
    p = run("replicate", ds, "--type", "jkn")
    assert "not the adjustment" in p.stdout + p.stderr, p.stdout + p.stderr


# test_taylor.py's differences script, on the adjusted design.
R_DIFF = test_taylor.R_DIFF.replace(
    "f <- function", 'd$SEX <- factor(d$SEX); d$S <- factor(d$S)\nf <- function'
).replace("rows <- NULL", "%s\nrows <- NULL")


@pytest.mark.parametrize("method", ["rake", "linear"])
def test_differences_under_an_adjusted_design_match_r(data, tmp_path, method):
    """`means --diff` and `tab --diff` (every pair of cells' totals, the
    adjustment's residuals subtracted) against R's `svyglm` of the
    saturated model on the adjusted design."""
    d, path, rows, r_code = data
    ds = tmp_path / "d.mtab"
    run("import", path, ds, "--missing", "INC=99999")
    run("design", ds, "--weight", "W", "--strata", "S", "--cluster", "C", "--fpc", "F")
    run("weight", ds, "W2", "--from", "W", *METHODS[method], "--totals", d / f"{method}.csv")
    want = rscript(tmp_path / "diff.R", R_DIFF % r_code[method], path, tmp_path / "out.csv", "S", "C", "F", "fail")
    got = {"mean": run_json("means", ds, "INC", "--by", "EDUC", "--diff", "2")["comparison"]}
    (got["share"],) = [c for c in run_json("tab", ds, "SEX", "EDUC", "--diff", "2")["comparisons"]
                       if c["row"] == "1"]
    for what, c in got.items():
        rs = {r["key"]: r for r in want if r["what"] == what}
        assert {x["group"] for x in c["differences"]} == set(rs), (what, c, rs)
        for x in c["differences"]:
            r = rs[x["group"]]
            assert near(x["estimate"], float(r["est"]), 1e-9), (what, x, r)
            assert near(x["se"], float(r["se"]), 1e-6), (what, x, r)
        assert near(c["wald"]["f"], float(r["f"]), 1e-6), (what, c["wald"], r)


R_REG = adjusted_r("d$EDUC <- factor(d$EDUC); d$z <- as.numeric(d$AGE >= 50)\n", r"""rows <- NULL
add <- function(what, m) {
  s <- summary(m)$coefficients
  rows <<- rbind(rows, data.frame(what=what, key=rownames(s), est=s[, 1], se=s[, 2]))
}
add("lm", svyglm(INC ~ EDUC + SEX, design=subset(des, !is.na(INC))))
add("logit", svyglm(z ~ EDUC + SEX, design=des, family=quasibinomial))
write.csv(rows, out, row.names=FALSE)
""")


@pytest.mark.parametrize("method", ["ps", "rake", "linear"])
def test_regressions_under_an_adjusted_design_match_r(data, tmp_path, method):
    """A linear and a logistic regression on categorical predictors (fitted
    on the cube of the model's variables, the scores' totals per PSU)
    against R's `svyglm` on the adjusted design: coefficients and SEs."""
    d, path, rows, r_code = data
    ds = tmp_path / "d.mtab"
    run("import", path, ds, "--missing", "INC=99999")
    run("compute", ds, "Z = AGE >= 50")
    run("design", ds, "--weight", "W", "--strata", "S", "--cluster", "C", "--fpc", "F")
    run("weight", ds, "W2", "--from", "W", *METHODS[method], "--totals", d / f"{method}.csv")
    want = rscript(tmp_path / "reg.R", R_REG % r_code[method], path, tmp_path / "out.csv", "S", "C", "F", "fail")
    for what, formula, fam in (("lm", "INC ~ factor(EDUC) + factor(SEX)", "gaussian"),
                               ("logit", "Z ~ factor(EDUC) + factor(SEX)", "logit")):
        coefficients_match(run_json("regress", ds, formula, "--family", fam), want, what)


def coefficients_match(got, want, what):
    """A regression's coefficients and SEs against R's rows `what` of
    `want` (in order), and its note on the adjustment."""
    assert "subtract the adjustment's residuals" in got["design"]["calibration"], got["design"]
    rs = [r for r in want if r["what"] == what]
    assert len(got["coefficients"]) == len(rs)
    for g, r in zip(got["coefficients"], rs):
        assert near(g["estimate"], float(r["est"]), 1e-8), (what, g, r)
        assert near(g["se"], float(r["se"]), 1e-6), (what, g, r)


def test_lonely_psus_averaged_under_an_adjusted_design_match_r(tmp_path, monkeypatch):
    """`--lonely-psu average`: every record carries a residual, so each
    domain's variance has every stratum's terms and the lonely stratum's
    are made up over the whole design, as R does."""
    import test_survey

    monkeypatch.setattr(test_survey, "close", near)
    rows = rows_of(5, lonely=True)
    path = write_csv(tmp_path / "l.csv", rows)
    r_code = totals_files(tmp_path, rows)
    ds = tmp_path / "l.mtab"
    run("import", path, ds, "--missing", "INC=99999")
    run("design", ds, "--weight", "W", "--strata", "S", "--cluster", "C", "--lonely-psu", "average")
    run("weight", ds, "W2", "--from", "W", *METHODS["linear"], "--totals", tmp_path / "linear.csv")
    want = r_estimates(rscript(tmp_path / "r.R", R_SCRIPT % r_code["linear"], path, tmp_path / "r.csv",
                               "S", "C", "", "average"))
    check_estimates(ds, want, len(rows), kg_bases=("total",))
    # A domain of the lonely stratum alone has an SE (from the others).
    m = run_json("means", ds, "INC", "--filter", "S(8)")
    assert m["total_se"]["se"] > 0
    # Regressions record by record and correlations too.
    run("compute", ds, "Z = EDUC >= 3")
    records_match_r(ds, rscript(tmp_path / "rec.R", R_RECORDS % r_code["linear"], path, tmp_path / "rec.csv",
                                "S", "C", "", "average"))


@pytest.mark.parametrize("method", ["rake", "linear"])
def test_quantiles_under_an_adjusted_design_match_r(data, tmp_path, method):
    """Medians and 10th/90th percentiles by SEX (all records and a filtered
    domain): their Woodruff SEs and intervals (the shares below each
    quantile, the adjustment's residuals subtracted) against R's
    `svyquantile` on the adjusted design."""
    from test_taylor import QUANTILE_R, quantiles_match_r

    d, path, rows, r_code = data
    ds = tmp_path / "q.mtab"
    run("import", path, ds, "--missing", "INC=99999")
    run("design", ds, "--weight", "W", "--strata", "S", "--cluster", "C")
    run("weight", ds, "W2", "--from", "W", *METHODS[method], "--totals", d / f"{method}.csv")
    m = run_json("means", ds, "INC", "--median")
    assert "subtract the adjustment's residuals" in m["design"]["calibration"]
    # The adjustment's variables as factors before the design takes them.
    script = QUANTILE_R.replace(
        'des <- if (kind == "taylor") {', 'd$SEX <- factor(d$SEX); d$S <- factor(d$S)\ndes <- if (kind == "taylor") {'
    ).replace("df <- degf(des)", r_code[method] + "df <- degf(des)")
    import test_taylor

    orig = test_taylor.QUANTILE_R
    test_taylor.QUANTILE_R = script
    try:
        quantiles_match_r(tmp_path, path, ds, "taylor")
    finally:
        test_taylor.QUANTILE_R = orig


R_RATIO = adjusted_r("d$EDUC <- factor(d$EDUC)\n", r"""# A calibrated design's subset keeps every record (weight 0 outside),
# whose missing values R's svyratio cannot take: 0 there, out of the domain.
des <- update(des, INC0=ifelse(is.na(INC), 0, INC), HAS=!is.na(INC))
sub <- subset(des, HAS)
r <- svyratio(~INC0, ~AGE, sub)
b <- svyby(~INC0, ~EDUC, denominator=~AGE, sub, svyratio)
dom <- svyby(~INC0, ~SEX, denominator=~AGE, subset(sub, AGE >= 30), svyratio)
rows <- rbind(data.frame(what="all", key="all", est=coef(r)[[1]], se=SE(r)[[1]]),
              data.frame(what="by", key=as.character(b$EDUC), est=coef(b), se=SE(b)),
              data.frame(what="dom", key=as.character(dom$SEX), est=coef(dom), se=SE(dom)))
write.csv(rows, out, row.names=FALSE)
""")


@pytest.mark.parametrize("method", ["ps", "rake", "linear"])
def test_ratios_under_an_adjusted_design_match_r(data, tmp_path, method):
    """Ratios of two totals (over all, by group, in a filtered domain) under
    the adjusted design against R's `svyratio`: the residuals of both
    totals' influence values."""
    d, path, rows, r_code = data
    ds = tmp_path / "r.mtab"
    run("import", path, ds, "--missing", "INC=99999")
    run("design", ds, "--weight", "W", "--strata", "S", "--cluster", "C", "--fpc", "F")
    run("weight", ds, "W2", "--from", "W", *METHODS[method], "--totals", d / f"{method}.csv")
    want = {(r["what"], r["key"]): (float(r["est"]), float(r["se"]))
            for r in rscript(tmp_path / "ratio.R", R_RATIO % r_code[method], path, tmp_path / "out.csv",
                             "S", "C", "F", "fail")}
    got = run_json("ratio", ds, "INC", "AGE")
    assert "subtract the adjustment's residuals" in got["design"]["calibration"]
    t = got["total"]
    assert near(t["estimate"], want[("all", "all")][0], 1e-9) and near(t["se"], want[("all", "all")][1])
    for what, args in (("by", ["--by", "EDUC"]), ("dom", ["--by", "SEX", "--filter", "AGE(30-*)"])):
        got = run_json("ratio", ds, "INC", "AGE", *args)
        for g in got["groups"]:
            est, se = want[(what, str(g["by"][0]["value"]))]
            assert near(g["estimate"], est, 1e-9) and near(g["se"], se), (what, g, est, se)


R_RECORDS = adjusted_r("d$z <- as.numeric(d$EDUC >= 3)\n", r"""rows <- NULL
add <- function(what, key, est, se) rows <<- rbind(rows, data.frame(what=what, key=key, est=est, se=se))
reg <- function(what, m) {
  s <- summary(m)$coefficients
  add(what, rownames(s), s[, 1], s[, 2])
}
reg("lm", svyglm(INC ~ AGE + SEX, design=subset(des, !is.na(INC))))
reg("logit", svyglm(z ~ AGE + SEX, design=des, family=quasibinomial))
reg("dom", svyglm(INC ~ AGE, design=subset(des, !is.na(INC) & EDUC >= 2)))
# A calibrated design's subset keeps every record (weight 0 outside), whose
# missing values svymean cannot take: 0 there, out of the domain.
des <- update(des, INC0=ifelse(is.na(INC), 0, INC))
corr <- function(what, sub, vars) {
  for (i in 1:(length(vars) - 1)) for (j in (i + 1):length(vars)) {
    x <- sub$variables[[vars[i]]]; y <- sub$variables[[vars[j]]]
    s2 <- update(sub, x=x, y=y, xy=x*y, xx=x^2, yy=y^2)
    m <- svymean(~x+y+xy+xx+yy, s2)
    ct <- svycontrast(m, quote((xy - x*y)/sqrt((xx - x^2)*(yy - y^2))))
    add(what, paste(vars[i], vars[j], sep=":"), coef(ct), SE(ct))
  }
}
corr("corr", subset(des, !is.na(INC)), c("INC0", "AGE", "EDUC"))
corr("corr_dom", subset(des, !is.na(INC) & SEX == "2"), c("INC0", "AGE"))
write.csv(rows, out, row.names=FALSE)
""")


@pytest.mark.parametrize("method", ["ps", "rake", "linear", "raking"])
@pytest.mark.parametrize("name,flags,r_args", DESIGNS[:2], ids=[d[0] for d in DESIGNS[:2]])
def test_records_estimates_under_an_adjusted_design_match_r(data, tmp_path, method, name, flags, r_args):
    """Regressions fitted record by record (a numeric predictor: linear,
    logistic, in a filtered domain) and correlations (three variables over
    all, two in a domain) under the adjusted design against R's `svyglm`
    and the delta method of `svymean`s (`svycontrast`): each record's
    influence, its residual from the adjustment subtracted."""
    d, path, rows, r_code = data
    ds = tmp_path / "c.mtab"
    run("import", path, ds, "--missing", "INC=99999")
    run("compute", ds, "Z = EDUC >= 3")
    run("design", ds, "--weight", "W", *flags)
    run("weight", ds, "W2", "--from", "W", *METHODS[method], "--totals", d / f"{method}.csv")
    records_match_r(ds, rscript(tmp_path / "rec.R", R_RECORDS % r_code[method], path, tmp_path / "out.csv",
                                *r_args, "fail"))


def records_match_r(ds, want):
    """R_RECORDS' estimates (`want`) against microtab's on `ds`."""
    # Few cells allowed: every model is fitted record by record.
    for what, args in (("lm", ["INC ~ AGE + factor(SEX)"]),
                       ("logit", ["Z ~ AGE + factor(SEX)", "--family", "logit"]),
                       ("dom", ["INC ~ AGE", "--filter", "EDUC(2-4)"])):
        got = run_json("regress", ds, *args, "--max-cells", "20")
        assert got["fitted_on"] == "records", got
        coefficients_match(got, want, what)
    for what, args in (("corr", ["INC", "AGE", "EDUC"]), ("corr_dom", ["INC", "AGE", "--filter", "SEX(2)"])):
        got = run_json("corr", ds, *args)
        assert "subtract the adjustment's residuals" in got["design"]["calibration"], got["design"]
        rs = {r["key"].replace("INC0", "INC"): r for r in want if r["what"] == what}
        assert len(got["pairs"]) == len(rs)
        for pr in got["pairs"]:
            r = rs[f"{pr['a']}:{pr['b']}"]
            assert near(pr["estimate"], float(r["est"]), 1e-9), (what, pr, r)
            assert near(pr["se"], float(r["se"]), 1e-6), (what, pr, r)


# Records outside the totals' categories (`--allow-missing-cells`) keep
# their weight and have no residual: R's `calibrate` on the listed cells'
# indicators, the others' rows all 0.
R_OUTSIDE = adjusted_r(r"""tot <- read.csv(args[7], colClasses="character")
ind <- c()
for (i in seq_len(nrow(tot))) {
  ab <- strsplit(tot$value[i], "\\*")[[1]]; nm <- paste0("I", ab[1], "_", ab[2])
  d[[nm]] <- as.numeric(d$SEX == as.numeric(ab[1]) & d$S == as.numeric(ab[2]))
  ind <- c(ind, nm)
}
""", r"""des <- calibrate(des, as.formula(paste("~0+", paste(ind, collapse="+"))), as.numeric(tot$total), epsilon=1e-13)
rows <- NULL
add <- function(what, key, est, se) rows <<- rbind(rows, data.frame(what=what, key=key, est=est, se=se))
m <- svymean(~S, des)
add("pct", sub("^S", "", names(coef(m))), 100 * coef(m), 100 * SE(m))
t <- svytotal(~S, des)
add("tot", sub("^S", "", names(coef(t))), coef(t), SE(t))
s <- summary(svyglm(INC ~ S, design=subset(des, !is.na(INC))))$coefficients
add("diff", rownames(s), s[, 1], s[, 2])
s <- summary(svyglm(INC ~ AGE + S, design=subset(des, !is.na(INC))))$coefficients
add("rec", rownames(s), s[, 1], s[, 2])
write.csv(rows, out, row.names=FALSE)
""")


@pytest.mark.parametrize("name,flags,r_args", DESIGNS, ids=[d[0] for d in DESIGNS])
def test_records_outside_the_totals_match_r(data, tmp_path, name, flags, r_args):
    """Post-stratified by SEX*S with stratum 7's cells left out of the
    totals (`--allow-missing-cells`): the shares of S (whose base holds the
    records outside, their weight random), its totals, `means --diff` of
    every stratum against the first and a regression record by record
    against R's `calibrate` on the listed cells' indicators."""
    d, path, rows, _ = data
    cells, _ = population(rows)
    tot = tmp_path / "out.csv"
    tot.write_text("variable,value,total\n" + "".join(
        f"SEX*S,{s}*{e},{v}\n" for (s, e), v in cells.items() if e != 7))
    ds = tmp_path / "o.mtab"
    run("import", path, ds, "--missing", "INC=99999")
    if flags is not None:
        run("design", ds, "--weight", "W", *flags)
    run("weight", ds, "W2", "--from", "W", "--poststrata", "SEX*S", "--totals", tot, "--allow-missing-cells")
    want = rscript(tmp_path / "o.R", R_OUTSIDE % "", path, tmp_path / "o_r.csv", *r_args, "fail", tot)
    by = {(r["what"], r["key"]): (float(r["est"]), float(r["se"])) for r in want}
    f = run_json("freq", ds, "S")
    for r in f["rows"]:
        k = str(r["value"])
        assert near(r["percent"], by[("pct", k)][0], 1e-9) and near(r["percent_se"]["se"], by[("pct", k)][1]), (k, r)
        assert near(r["weighted_se"]["se"], by[("tot", k)][1]), (k, r)
    # Stratum 7's share is not fixed, and neither are the others'.
    assert all(r["percent_se"]["se"] > 1e-3 for r in f["rows"])
    c = run_json("means", ds, "INC", "--by", "S", "--diff", "1")["comparison"]
    for x in c["differences"]:
        est, se = by[("diff", f"S{x['group']}")]
        assert near(x["estimate"], est, 1e-9) and near(x["se"], se), x
    got = run_json("regress", ds, "INC ~ AGE + factor(S)", "--max-cells", "20")
    assert got["fitted_on"] == "records"
    coefficients_match(got, want, "rec")
