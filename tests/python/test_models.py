"""Models and comparisons from Python and over HTTP (issue 29): the same
answers as the CLI's (one analysis layer), and R survey's `svyglm`,
`svyby` + `svycontrast` on the same records as the oracle."""

import csv as csvmod
import json
import os
import subprocess
import sys
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

import microtab as mt

REPO = Path(__file__).resolve().parents[2]
sys.path.append(str(REPO / "tests"))
from census_data import census_dataset, microtab, replicate_design, serve  # noqa: E402

BIN = Path(os.environ.get("MICROTAB_BIN", REPO / "target" / "release" / "microtab"))

R = r"""
suppressMessages(library(survey))
a <- commandArgs(trailingOnly=TRUE)
d <- read.csv(a[1]); out <- a[2]
d$INCTOT[d$INCTOT == 9999999] <- NA
des <- svrepdesign(data=d, weights=~PERWT, repweights="REPWTP[0-9]+",
                   type="successive-difference", mse=TRUE)
# (svyglm on a replicate design evaluates its family where it is called:
# no function around it.)
rows <- function(m) {
  s <- summary(m)$coefficients
  data.frame(term=rownames(s), est=s[, 1], se=s[, 2], p=NA)
}
ctl <- glm.control(epsilon=1e-12, maxit=100)
g <- rows(svyglm(INCTOT ~ AGE + factor(SEX) + factor(EDUC), design=des, control=ctl))
g$model <- "g"
l <- rows(svyglm(I(EMPSTAT == 1) ~ AGE + factor(SEX), design=des, family=quasibinomial(),
                 control=ctl))
l$model <- "l"
w <- rows(svyglm(INCTOT ~ AGE + INCWAGE + factor(SEX), design=des, control=ctl))
w$model <- "w"
b <- svyby(~INCTOT, ~RACE, subset(des, AGE >= 18), svymean, covmat=TRUE, na.rm=TRUE)
k <- length(coef(b))
ct <- svycontrast(b, lapply(2:k, function(i) { v <- rep(0, k); v[1] <- -1; v[i] <- 1; v }))
c <- data.frame(term=as.character(b$RACE[-1]), est=coef(ct), se=SE(ct), p=NA, model="c")
rr <- svyby(~INCWAGE, ~SEX, denominator=~INCTOT, design=des, svyratio, na.rm=TRUE)
r <- data.frame(term=as.character(rr$SEX), est=coef(rr), se=SE(rr), p=NA, model="r")
cc <- withReplicates(subset(des, !is.na(INCTOT)), function(w, data) {
  m <- cov.wt(data[, c("AGE", "INCTOT", "INCWAGE")], w, cor=TRUE)$cor
  c(m[1, 2], m[1, 3], m[2, 3])
})
k <- data.frame(term=c("AGE:INCTOT", "AGE:INCWAGE", "INCTOT:INCWAGE"), est=coef(cc), se=SE(cc),
                p=NA, model="k")
tt <- svyttest(I(INCTOT - 30000) ~ 0, subset(des, SEX == 2), na.rm=TRUE)
t <- data.frame(term="2", est=unname(tt$estimate), se=unname(tt$estimate / tt$statistic),
                p=unname(tt$parameter), model="t")
write.csv(rbind(g, l, w, c, r, k, t), out, row.names=FALSE)
"""


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("regress")
    csv, ds = census_dataset(d, 20000, 3, reps=24)
    replicate_design(ds, 24)
    (d / "r.R").write_text(R)
    p = subprocess.run(["Rscript", str(d / "r.R"), str(csv), str(d / "r.csv")],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    rows = list(csvmod.DictReader(open(d / "r.csv")))
    return ds, rows


def rel(a, b):
    return abs(a - b) <= 1e-6 * max(abs(b), 1e-300)


def same(a, b):
    """Equal JSON, numbers to 1e-12 relative: the package and the binary are
    built apart, and a p-value's incomplete beta function can differ in
    its last bit between the two builds."""
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, float):
        return a == b or abs(a - b) <= 1e-12 * max(abs(a), abs(b))
    return a == b


def cli_json(*args):
    return json.loads(microtab(*args, "--format", "json").stdout)


def test_regress_from_python_matches_r_and_the_cli(data):
    ds, want = data
    d = mt.open(ds)
    for key, formula, family, on in [
            ("g", "INCTOT ~ AGE + factor(SEX) + factor(EDUC)", "gaussian", "cells"),
            ("l", "EMPSTAT(1) ~ AGE + factor(SEX)", "logit", "cells"),
            # A wage has too many values for a cube: fitted record by record.
            ("w", "INCTOT ~ AGE + INCWAGE + factor(SEX)", "gaussian", "records")]:
        r = d.regress(formula, family=family)
        assert r.fitted_on == on
        w = [x for x in want if x["model"] == key]
        co = r.coefficients
        assert len(co) == len(w)
        for x in w:
            # R names the condition's model I(EMPSTAT == 1); the terms are the same.
            got = co.loc[x["term"]]
            assert rel(got["estimate"], float(x["est"])) and rel(got["se"], float(x["se"]))
        assert same(r.to_dict(), cli_json("regress", ds, formula, "--family", family))
        assert r.method == "replicate weights (sdr)"
        assert r.df == r.design_df + 1 - len(w)
        text = r.summary()
        assert formula in text and "Wald test of all terms" in text
        for t in co.index:
            assert t in text
        cov = r.covariance
        assert rel(cov.loc["AGE", "AGE"] ** 0.5, co.loc["AGE", "se"])


def test_differences_from_python_match_r(data):
    ds, want = data
    d = mt.open(ds)
    m = d.means("INCTOT", by="RACE", filter="AGE(18-*)", diff=1)
    diffs = m.differences().set_index("group")
    w = [x for x in want if x["model"] == "c"]
    assert len(diffs) == len(w)
    for x in w:
        got = diffs.loc[x["term"]]
        assert rel(got["estimate"], float(x["est"])) and rel(got["se"], float(x["se"]))
    assert m.comparison["base"] == "1"
    cli = cli_json("means", ds, "INCTOT", "--by", "RACE", "--filter", "AGE(18-*)", "--diff", "1")
    assert same(m.to_dict(), cli)
    with pytest.raises(mt.QueryError, match="no comparison"):
        d.means("INCTOT", by="RACE").differences()


def test_ratio_corr_and_test_mean_from_python_match_r_and_the_cli(data):
    ds, want = data
    d = mt.open(ds)
    w = {(x["model"], x["term"]): x for x in want}
    r = d.ratio("INCWAGE", "INCTOT", by="SEX")
    assert same(r.to_dict(), cli_json("ratio", ds, "INCWAGE", "INCTOT", "--by", "SEX"))
    df = r.to_pandas()
    assert list(df.columns) == ["SEX", "n", "numerator_total", "denominator_total", "ratio", "se", "t", "p",
                                "lo", "hi", "cv", "unreliable", "replicates_dropped"]
    # Every field of to_dict() is in the frame.
    groups = r.to_dict()["groups"]
    assert list(df["t"].iloc[:2]) == [g["t"] for g in groups] and list(df["p"].iloc[:2]) == [g["p"] for g in groups]
    assert not df["unreliable"].any() and (df["cv"] > 0).all()
    assert list(df["SEX"]) == [1, 2, "Total"]
    for _, row in df.iloc[:2].iterrows():
        x = w[("r", str(row["SEX"]))]
        assert rel(row["ratio"], float(x["est"])) and rel(row["se"], float(x["se"]))
    assert r.method == "replicate weights (sdr)"
    c = d.corr("AGE", "INCTOT", "INCWAGE")
    assert same(c.to_dict(), cli_json("corr", ds, "AGE", "INCTOT", "INCWAGE"))
    assert c.to_dict() == d.corr(["AGE", "INCTOT", "INCWAGE"]).to_dict()
    for _, p in c.to_pandas().iterrows():
        x = w[("k", f"{p['a']}:{p['b']}")]
        assert rel(p["r"], float(x["est"])) and rel(p["se"], float(x["se"]))
    assert c.matrix.loc["AGE", "INCTOT"] == c.matrix.loc["INCTOT", "AGE"]
    assert c.matrix.loc["AGE", "AGE"] == 1.0 and c.covariance.shape == (3, 3)
    m = d.means("INCTOT", by="SEX", test_mean=30000)
    assert same(m.to_dict(), cli_json("means", ds, "INCTOT", "--by", "SEX", "--test-mean", "30000"))
    t = m.tests()
    assert list(t["SEX"]) == [1, 2, "Total"]
    row, x = t.iloc[1], w[("t", "2")]
    assert rel(row["estimate"], float(x["est"])) and rel(row["se"], float(x["se"]))
    assert row["df"] == float(x["p"])
    assert row["mean"] == pytest.approx(row["estimate"] + 30000, rel=1e-12)
    with pytest.raises(mt.QueryError, match="no test"):
        d.means("INCTOT", by="SEX").tests()
    with pytest.raises(ValueError, match="test_mean"):
        d.means("INCTOT", by="SEX", test_mean=float("nan"))
    with pytest.raises(mt.ArgumentError, match="two or more"):
        d.corr("AGE")


def test_share_differences_from_python_equal_the_cli(data):
    ds, _ = data
    d = mt.open(ds)
    t = d.tab("EMPSTAT", "SEX", diff=1, filter="AGE(18-*)")
    assert same(t.to_dict(), cli_json("tab", ds, "EMPSTAT", "SEX", "--diff", "1", "--filter", "AGE(18-*)"))
    df = t.differences()
    assert list(df.columns) == ["row", "col", "estimate", "se", "t", "p", "lo", "hi"]
    assert len(df) == len(t.comparisons) and set(df["col"]) == {"2"}
    with pytest.raises(mt.QueryError, match="no comparison"):
        d.tab("EMPSTAT", "SEX").differences()


def test_regress_over_http_equals_the_cli(data, tmp_path):
    ds, _ = data
    proc, url = serve(ds.parent)
    try:
        formula = "EMPSTAT(1) ~ AGE + factor(SEX)"
        q = urllib.parse.urlencode({"formula": formula, "family": "logit"})
        with urllib.request.urlopen(f"{url}/api/v1/datasets/{ds.stem}/regress?{q}") as resp:
            got = json.loads(resp.read())
        want = cli_json("regress", ds, formula, "--family", "logit")
        # The API names the dataset as served; the CLI gives its path.
        assert got.pop("dataset") == ds.stem and want.pop("dataset") == str(ds)
        assert same(got, want)
        q = urllib.parse.urlencode({"var": "INCTOT", "by": "RACE", "diff": "1"})
        with urllib.request.urlopen(f"{url}/api/v1/datasets/{ds.stem}/means?{q}") as resp:
            got = json.loads(resp.read())
        assert same(got["comparison"],
                    cli_json("means", ds, "INCTOT", "--by", "RACE", "--diff", "1")["comparison"])
        for kind, params, args in [
                ("ratio", [("numerator", "INCWAGE"), ("denominator", "INCTOT"), ("by", "SEX")],
                 ["ratio", ds, "INCWAGE", "INCTOT", "--by", "SEX"]),
                ("corr", [("vars", "AGE"), ("vars", "INCTOT")], ["corr", ds, "AGE", "INCTOT"]),
                ("corr", [("vars", "AGE,INCTOT")], ["corr", ds, "AGE", "INCTOT"]),
                ("means", [("var", "INCTOT"), ("by", "SEX"), ("test_mean", "30000")],
                 ["means", ds, "INCTOT", "--by", "SEX", "--test-mean", "30000"])]:
            q = urllib.parse.urlencode(params)
            with urllib.request.urlopen(f"{url}/api/v1/datasets/{ds.stem}/{kind}?{q}") as resp:
                got = json.loads(resp.read())
            want = cli_json(*args)
            assert got.pop("dataset") == ds.stem and want.pop("dataset") == str(ds)
            assert same(got, want), kind
        q = urllib.parse.urlencode({"formula": "INCTOT ~ AGE", "family": "nope"})
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(f"{url}/api/v1/datasets/{ds.stem}/regress?{q}")
        assert e.value.code == 400 and "gaussian, logit, probit or poisson" in e.value.read().decode()
    finally:
        proc.terminate()
        proc.wait()


def test_bad_models_raise_with_the_reason(data):
    ds, _ = data
    d = mt.open(ds)
    with pytest.raises(mt.ArgumentError, match="family='nope'"):
        d.regress("INCTOT ~ AGE", family="nope")
    with pytest.raises(mt.QueryError, match="must be 0 or 1"):
        d.regress("EDUC ~ AGE", family="logit")
    with pytest.raises(mt.QueryError, match="formula"):
        d.regress("INCTOT AGE")
    with pytest.raises(mt.QueryError, match="one grouping variable, not 2"):
        d.means("INCTOT", by=["RACE", "SEX"], diff=1)
