"""`microtab ratio` and `microtab corr` against R survey on R's own api
data: `svyratio` (alone and by group with `svyby`, in a domain, with a
missing code), `svyvar`, and the correlation's SE — R's delta method
(`svycontrast` of `svymean`s of the products) under linearization, R's
`withReplicates` of `cov.wt(cor = TRUE)` under replicate weights — for a
stratified design with FPC, a cluster design with FPC and JK1 replicates;
without a design against `svydesign(ids = ~1)` and scipy's Pearson test."""

import math

import numpy as np
import pytest
from scipy import stats

from conftest import R_DESIGNS, close, close_p, r_design, rscript, run, run_json

R_RC = R_DESIGNS + r"""
if (kind == "none") d <- svydesign(ids=~1, weights=~pw, data=data)
d$variables$ell2[d$variables$ell2 == 999] <- NA
out_rows <- list()
add <- function(what, key, est, se) out_rows[[length(out_rows) + 1]] <<-
  data.frame(what=what, key=key, est=est, se=se)
r <- svyratio(~api00, ~enroll, d)
add("ratio", "all", coef(r), SE(r))
b <- svyby(~api00, ~stype_txt, denominator=~enroll, design=d, svyratio)
add("ratio_by", as.character(b$stype_txt), coef(b), SE(b))
# A domain (a filter) and a numerator with a missing code.
b <- svyby(~ell2, ~stype, denominator=~meals, design=subset(d, api00 >= 600), svyratio,
           na.rm=TRUE)
add("ratio_dom", as.character(b$stype), coef(b), SE(b))
sub <- subset(d, !is.na(ell2))
v <- svyvar(~api00+ell2+meals, sub)
vm <- as.matrix(v)
add("cov", c("api00:ell2", "api00:meals", "ell2:meals", "api00:api00"),
    c(vm[1,2], vm[1,3], vm[2,3], vm[1,1]), NA)
pairs <- list(c("api00", "ell2"), c("api00", "meals"), c("ell2", "meals"))
if (inherits(d, "svyrep.design")) {
  reps <- withReplicates(sub, function(w, data) {
    cc <- cov.wt(data[, c("api00", "ell2", "meals")], w, cor=TRUE)$cor
    c(cc[1,2], cc[1,3], cc[2,3])
  })
  add("corr", sapply(pairs, paste, collapse=":"), coef(reps), SE(reps))
} else {
  for (p in pairs) {
    x <- sub$variables[[p[1]]]; y <- sub$variables[[p[2]]]
    s2 <- update(sub, x=x, y=y, xy=x*y, xx=x^2, yy=y^2)
    m <- svymean(~x+y+xy+xx+yy, s2)
    ct <- svycontrast(m, quote((xy - x*y)/sqrt((xx - x^2)*(yy - y^2))))
    add("corr", paste(p, collapse=":"), coef(ct), SE(ct))
  }
}
write.csv(do.call(rbind, out_rows), out, row.names=FALSE)
"""


def want(api, kind):
    rows = r_design(api, kind, "rc", R_RC)
    by = {}
    for r in rows:
        by[(r["what"], r["key"])] = (float(r["est"]), None if r["se"] in ("NA", "") else float(r["se"]))
    return by


def groups(res):
    return {g["by"][0]["value"]: g for g in res["groups"]}


@pytest.mark.parametrize("kind", ["strat", "clus", "jk1", "none"])
def test_ratio_matches_r_svyratio(api, kind):
    w = want(api, kind)
    ds = api["strat" if kind == "none" else kind]
    extra = ["--no-design", "--weight", "pw"] if kind == "none" else []
    got = run_json("ratio", ds, "api00", "enroll", *extra)
    assert got["groups"] == []
    est, se = w[("ratio", "all")]
    t = got["total"]
    assert close(t["estimate"], est) and close(t["se"], se), (t, est, se)
    assert t["numerator_total"] / t["denominator_total"] == pytest.approx(est, rel=1e-12)
    # By a text variable; the total beside the groups is the one above.
    got = run_json("ratio", ds, "api00", "enroll", "--by", "stype_txt", *extra)
    g = groups(got)
    for key in ("elem", "high", "middle"):
        est, se = w[("ratio_by", key)]
        assert close(g[key]["estimate"], est) and close(g[key]["se"], se), (key, g[key], est, se)
    assert close(got["total"]["se"], w[("ratio", "all")][1])
    # A domain, and records whose numerator is a missing code left out.
    got = run_json("ratio", ds, "ell2", "meals", "--by", "stype", "--filter", "api00(600-2000)",
                   *extra)
    g = groups(got)
    for key in ("E", "H", "M"):
        est, se = w[("ratio_dom", key)]
        assert close(g[key]["estimate"], est) and close(g[key]["se"], se), (key, g[key], est, se)
    if kind != "none":
        assert got["df"] == got["design"]["df"]
    else:
        # svydesign(ids = ~1, weights = ~pw) of the 200 records: 199 df.
        assert got["df"] == 199


@pytest.mark.parametrize("kind", ["strat", "clus", "jk1", "none"])
def test_corr_matches_r(api, kind):
    w = want(api, kind)
    ds = api["strat" if kind == "none" else kind]
    extra = ["--no-design", "--weight", "pw"] if kind == "none" else []
    got = run_json("corr", ds, "api00", "ell2", "meals", *extra)
    assert got["variables"] == ["api00", "ell2", "meals"]
    pairs = {f'{p["a"]}:{p["b"]}': p for p in got["pairs"]}
    for key in ("api00:ell2", "api00:meals", "ell2:meals"):
        est, se = w[("corr", key)]
        g = pairs[key]
        assert close(g["estimate"], est) and close(g["se"], se), (key, g, est, se)
        assert g["t"] == pytest.approx(g["estimate"] / g["se"], rel=1e-12)
    c = got["covariance"]
    for (i, j), key in [((0, 1), "api00:ell2"), ((0, 2), "api00:meals"), ((1, 2), "ell2:meals"),
                        ((0, 0), "api00:api00")]:
        assert close(c[i][j], w[("cov", key)][0]) and c[i][j] == c[j][i]
    m = got["matrix"]
    assert m[0][0] == 1.0 and m[0][1] == pytest.approx(pairs["api00:ell2"]["estimate"], rel=1e-12)
    # A correlation's interval stays within [-1, 1].
    assert all(-1 <= p["lo"] <= p["hi"] <= 1 for p in got["pairs"])


def test_unweighted_corr_is_pearsons_test(api):
    """No design, no weight: r, its t test on n − 2 df and Fisher's interval
    are scipy's pearsonr; means and SDs numpy's (listwise: ell2's missing
    code drops its records)."""
    import csv
    rows = list(csv.DictReader(open(api["dir"] / "strat.csv")))
    rows = [r for r in rows if r["ell2"] != "999"]
    x = np.array([float(r["api00"]) for r in rows])
    y = np.array([float(r["ell2"]) for r in rows])
    got = run_json("corr", api["strat"], "api00", "ell2", "--no-design")
    (p,) = got["pairs"]
    want_ = stats.pearsonr(x, y)
    ci = want_.confidence_interval(0.95)
    assert got["n"] == len(x) and got["df"] == len(x) - 2
    assert p["estimate"] == pytest.approx(want_.statistic, rel=1e-12)
    assert close_p(p, want_.pvalue)
    assert p["lo"] == pytest.approx(ci.low, rel=1e-9) and p["hi"] == pytest.approx(ci.high, rel=1e-9)
    assert got["means"] == pytest.approx([x.mean(), y.mean()], rel=1e-12)
    assert got["sds"] == pytest.approx([x.std(ddof=1), y.std(ddof=1)], rel=1e-12)


def test_ratio_and_corr_refuse_what_they_cannot_answer(api):
    ds = api["strat"]
    for args, needle in [
        (["ratio", ds, "stype_txt", "enroll"], "stype_txt is a text variable"),
        (["ratio", ds, "api00", "enroll", "--filter", "api00(2000-3000)"], "no record"),
        (["corr", ds, "api00", "api00"], "two or more different variables"),
        (["corr", ds, "api00", "nosuch"], "nosuch"),
        (["corr", ds, "api00", "stype_txt"], "text variable"),
    ]:
        p = run(*args, ok=False)
        assert p.returncode == 1 and needle in p.stderr, (args, p.stderr)
    # A constant variable has no correlation: no number, not a NaN.
    got = run_json("corr", ds, "api00", "meals", "--filter", "meals(0-0)", "--no-design")
    assert got["pairs"][0].get("estimate") is None


def test_ratio_text_and_csv(api):
    ds = api["jk1"]
    text = run("ratio", ds, "api00", "enroll", "--by", "stype_txt").stdout
    assert "Ratio of the totals of api00 to enroll" in text and "Total" in text
    assert "replicate weights (jk1)" in text
    j = run_json("ratio", ds, "api00", "enroll", "--by", "stype_txt")
    lines = run("ratio", ds, "api00", "enroll", "--by", "stype_txt", "--format", "csv").stdout.splitlines()
    assert lines[0] == ("stype_txt,n,numerator_total,denominator_total,ratio,se,lo,hi,cv,unreliable,"
                        "replicates_dropped")
    elem = lines[1].split(",")
    g = groups(j)["elem"]
    assert elem[0] == "elem" and float(elem[4]) == g["estimate"] and float(elem[5]) == g["se"]
    assert lines[-1].startswith("Total,")
    text = run("corr", ds, "api00", "ell", "meals").stdout
    assert "api00 × ell" in text and "records: " in text
    assert not math.isnan(run_json("corr", ds, "api00", "ell")["pairs"][0]["se"])


R_TTEST = R_DESIGNS + r"""
if (kind == "none") d <- svydesign(ids=~1, weights=~pw, data=data)
d$variables$ell2[d$variables$ell2 == 999] <- NA
rows <- NULL
one <- function(key, des) {
  t <- svyttest(I(ell2 - 25) ~ 0, des, na.rm=TRUE)
  rows <<- rbind(rows, data.frame(key=key, est=unname(t$estimate),
                                  se=unname(t$estimate / t$statistic),
                                  df=unname(t$parameter), p=t$p.value))
}
# In the domain of schools with api00 of at least 600 (a filter), by stype.
dom <- subset(d, api00 >= 600)
for (s in c("E", "H", "M")) one(s, subset(dom, stype == s))
one("Total", dom)
write.csv(rows, out, row.names=FALSE)
"""


@pytest.mark.parametrize("kind", ["strat", "clus", "jk1", "none"])
def test_test_mean_matches_r_svyttest(api, kind):
    """`means --test-mean`: per group and in total, R's one-sample
    `svyttest` of a domain (its df: the domain's degf − 1), with a
    missing code in the analysis variable."""
    want_ = r_design(api, kind, "tt", R_TTEST)
    ds = api["strat" if kind == "none" else kind]
    extra = ["--no-design", "--weight", "pw"] if kind == "none" else []
    got = run_json("means", ds, "ell2", "--by", "stype", "--test-mean", "25",
                   "--filter", "api00(600-2000)", *extra)["test"]
    assert got["value"] == 25
    by = {g["by"][0]["value"]: g for g in got["groups"]} | {"Total": got["total"]}
    for w in want_:
        g = by[w["key"]]
        assert close(g["estimate"], float(w["est"])) and close(g["se"], float(w["se"])), (w, g)
        assert g["df"] == float(w["df"]), (w, g)
        assert close_p(g, float(w["p"]))
        assert g["mean"] == pytest.approx(float(w["est"]) + 25, rel=1e-12)


def test_unweighted_test_mean_is_scipys(api):
    import csv
    rows = [r for r in csv.DictReader(open(api["dir"] / "strat.csv")) if r["ell2"] != "999"]
    got = run_json("means", api["strat"], "ell2", "--by", "stype", "--test-mean", "25",
                   "--no-design")["test"]
    for g in got["groups"]:
        x = np.array([float(r["ell2"]) for r in rows if r["stype"] == g["by"][0]["value"]])
        t = stats.ttest_1samp(x, 25)
        ci = t.confidence_interval(0.95)
        assert g["t"] == pytest.approx(t.statistic, rel=1e-9) and g["df"] == len(x) - 1
        assert close_p(g, t.pvalue)
        assert g["lo"] + 25 == pytest.approx(ci.low, rel=1e-9)
    csv_out = run("means", api["strat"], "ell2", "--by", "stype", "--test-mean", "25",
                  "--no-design", "--format", "csv").stdout.splitlines()
    assert csv_out[0].endswith("test_diff,test_se,test_t,test_df,test_p,test_lo,test_hi")
    assert csv_out[-1].startswith("Total,") and csv_out[-1].split(",")[-5] == str(got["total"]["t"])
    text = run("means", api["strat"], "ell2", "--by", "stype", "--test-mean", "-3", "--no-design").stdout
    assert "Test of mean = -3" in text and "mean − -3" in text


def test_edges_perfect_constant_missing_weight_and_flags(tmp_path):
    """A perfect correlation is 1 with p = 0 (scipy), a constant variable
    has none; records with a missing weight are left out with a note (R
    refuses them); small groups are flagged; p-values in CSV stay short."""
    rng = np.random.default_rng(5)
    a = rng.normal(50, 10, 60).round(2)
    rows = ["a,b,c,d,w,g"]
    for i, x in enumerate(a):
        w = "" if i == 7 else f"{1 + i % 4}"
        rows.append(f"{x},{2 * x + 1:.2f},3,{rng.normal():.4f},{w},{1 + (i % 10 == 0)}")
    (tmp_path / "e.csv").write_text("\n".join(rows) + "\n")
    ds = tmp_path / "e.mtab"
    run("import", tmp_path / "e.csv", ds)
    got = run_json("corr", ds, "a", "b", "c", "d", "--no-design")
    pairs = {f'{p["a"]}:{p["b"]}': p for p in got["pairs"]}
    assert pairs["a:b"]["estimate"] == 1.0 and pairs["a:b"]["p"] == 0.0 and pairs["a:b"]["t"] is None
    assert stats.pearsonr(a, 2 * a + 1).pvalue == 0.0
    assert pairs["a:c"].get("estimate") is None and got["matrix"][2][2] is None
    text = run("corr", ds, "a", "b", "c", "d", "--no-design").stdout
    assert "∞" in text and "NaN" not in text
    # The missing weight: left out, said so; R on the other 59 records.
    r = run_json("ratio", ds, "a", "d", "--weight", "w", "--no-design")
    assert r["notes"] and "1 records with a missing weight w" in r["notes"][0]
    assert r["df"] == 58
    keep = [i for i in range(60) if i != 7]
    w = np.array([1 + i % 4 for i in keep], float)
    y = a[keep]
    assert r["total"]["numerator_total"] == pytest.approx((w * y).sum(), rel=1e-12)
    # Groups under --min-n are flagged (the table marks them).
    r = run_json("ratio", ds, "a", "b", "--by", "g", "--no-design", "--min-n", "10")
    flags = {g["by"][0]["value"]: g["unreliable"] for g in r["groups"]}
    assert flags == {1: False, 2: True}
    assert "* unreliable" in run("ratio", ds, "a", "b", "--by", "g", "--no-design", "--min-n", "10").stdout
    p = run("means", ds, "a", "--by", "g", "--test-mean", "nan", ok=False)
    assert "--test-mean: expected a finite number" in p.stderr
    out = run("corr", ds, "a", "b", "d", "--no-design", "--format", "csv").stdout
    assert max(len(f) for line in out.splitlines() for f in line.split(",")) < 40


def test_a_ratio_over_a_catalog_of_parts_equals_the_whole(api, tmp_path):
    """`ratio` over a catalog of parts: each part's group totals and
    replicate totals (or, without a design, its records' sums of squares),
    merged — the whole dataset's ratio, which matches R above."""
    cat = tmp_path / "jk1.parts"
    run("split", api["jk1"], cat, "--parts", "3")
    for extra in ([], ["--no-design", "--weight", "pw"], ["--no-design"]):
        for by in ([], ["--by", "stype"]):
            args = ["api00", "api99", *by, *extra, "--filter", "ell(0-40)"]
            whole = run_json("ratio", api["jk1"], *args)
            parts = run_json("ratio", cat, *args)
            assert parts["method"] == whole["method"] and parts["df"] == whole["df"]
            for a, b in zip(parts["groups"] + [parts["total"]], whole["groups"] + [whole["total"]]):
                assert a["by"] == b["by"] and a["n"] == b["n"]
                assert close(a["estimate"], b["estimate"], 1e-12) and close(a["se"], b["se"], 1e-9)


def test_correlations_over_a_catalog_of_parts_equal_the_whole(api, tmp_path):
    """`corr` over a catalog of parts: a round of partial sums per scan (the
    means, the centred cross products with the replicates', under
    linearization the influences), each merged — the whole dataset's
    correlations, which match R above."""
    cat = tmp_path / "jk1c.parts"
    run("split", api["jk1"], cat, "--parts", "3")
    for extra in ([], ["--no-design", "--weight", "pw"], ["--no-design"]):
        args = ["api00", "api99", "ell", "meals", *extra, "--filter", "ell(0-60)"]
        whole = run_json("corr", api["jk1"], *args)
        parts = run_json("corr", cat, *args)
        assert (parts["method"], parts["df"], parts["n"]) == (whole["method"], whole["df"], whole["n"])
        for a, b in zip(parts["pairs"], whole["pairs"]):
            assert (a["a"], a["b"]) == (b["a"], b["b"])
            assert close(a["estimate"], b["estimate"], 1e-12) and close(a["se"], b["se"], 1e-9)
        for x, y in zip(parts["means"] + parts["sds"], whole["means"] + whole["sds"]):
            assert close(x, y, 1e-12)


def test_a_constant_variable_has_no_correlation_weighted_or_not(api):
    """A variable constant in the domain (`yes` among the schools with
    yes = 1) correlates with nothing, weighted too: its weighted mean is
    not exactly the constant in doubles, so its variance, left as
    rounding, is taken as 0 (no estimate, none on the diagonal, SD 0)."""
    for extra in ([], ["--no-design", "--weight", "pw"], ["--no-design"]):
        for ds in (api["jk1"], api["strat"]):
            got = run_json("corr", ds, "api00", "yes", "meals", "--filter", "yes(1)", *extra)
            by = {(p["a"], p["b"]): p for p in got["pairs"]}
            assert by[("api00", "yes")].get("estimate") is None
            assert by[("yes", "meals")].get("estimate") is None
            assert by[("api00", "meals")]["estimate"] is not None
            assert got["matrix"][1][1] is None and got["sds"][1] == 0.0
            assert got["covariance"][1] == [0.0, 0.0, 0.0]


R_PSU_MISSING = r"""
suppressMessages(library(survey))
a <- commandArgs(trailingOnly=TRUE)
data <- read.csv(a[1]); out <- a[2]
data$ell2[data$ell2 == 999] <- NA
rows <- NULL
add <- function(what, key, est, se, df) rows <<- rbind(rows,
  data.frame(what=what, key=key, est=unname(est), se=unname(se), df=df))
for (kind in c("clus", "strat", "jk1")) {
  d <- switch(kind,
    clus=svydesign(ids=~dnum, weights=~pw, data=data),
    strat=svydesign(ids=~dnum, strata=~half, weights=~pw, data=data),
    jk1=svrepdesign(data=data, repweights="R[0-9]+", weights=~pw, type="JK1", scale=14/15,
                    combined.weights=TRUE, mse=FALSE))
  for (s in c("E", "H", "M")) {
    t <- svyttest(I(ell2 - 25) ~ 0, subset(d, stype == s), na.rm=TRUE)
    add(paste0("test_", kind), s, t$estimate, t$estimate / t$statistic, t$parameter)
  }
  t <- svyttest(I(ell2 - 25) ~ 0, d, na.rm=TRUE)
  add(paste0("test_", kind), "Total", t$estimate, t$estimate / t$statistic, t$parameter)
  # A filter on the variable itself takes its missing records out of the
  # domains.
  f <- subset(d, ell2 < 999)
  for (s in c("E", "H", "M")) {
    t <- svyttest(I(ell2 - 25) ~ 0, subset(f, stype == s), na.rm=TRUE)
    add(paste0("testf_", kind), s, t$estimate, t$estimate / t$statistic, t$parameter)
  }
  b <- svyby(~ell2, ~stype, denominator=~meals, design=d, svyratio, na.rm=TRUE)
  add(paste0("ratio_", kind), as.character(b$stype), coef(b), SE(b), NA)
  r <- svyratio(~ell2, ~meals, d, na.rm=TRUE)
  add(paste0("ratio_", kind), "Total", coef(r), SE(r), NA)
}
write.csv(rows, out, row.names=FALSE)
"""


def test_test_mean_and_ratio_when_whole_psus_lack_the_value(api, tmp_path):
    """Under a cluster design (and a stratified one), districts whose
    records in a group all lack the analysis value still count in the
    group's domain df (R's `degf` of the subset, as `svyttest` with
    `na.rm = TRUE` uses it), though they add nothing to its mean; the
    ratio's SE (the Taylor sums of `w·x` beside `w·y`) is R's
    `svyratio`. Both from one scan of the means kernel. Under JK1
    replicate weights the df is the rank of the group's records'
    replicate weights (those lacking the value too), from one pass that
    stops once each group's rank is full."""
    import csv
    rows = list(csv.DictReader(open(api["dir"] / "clus.csv")))
    dnums = sorted({int(r["dnum"]) for r in rows})
    gone, high_gone = set(dnums[:3]), set(dnums[3:8])
    for r in rows:
        d = int(r["dnum"])
        if d in gone or (d in high_gone and r["stype"] == "H"):
            r["ell2"] = "999"
        r["half"] = "1" if d < dnums[len(dnums) // 2] else "2"
    src = tmp_path / "psu.csv"
    with open(src, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    want_ = {(r["what"], r["key"]): r for r in rscript(tmp_path / "psu.R", R_PSU_MISSING, src,
                                                        tmp_path / "psu_out.csv")}
    for kind, design in [("clus", ["--cluster", "dnum"]),
                         ("strat", ["--cluster", "dnum", "--strata", "half"]),
                         ("jk1", ["--repweights", "R1-R15", "--type", "jk1", "--no-mse"])]:
        ds = tmp_path / f"psu_{kind}.mtab"
        run("import", src, ds, "--missing", "ell2=999")
        run("design", ds, "--weight", "pw", *design)
        got = run_json("means", ds, "ell2", "--by", "stype", "--test-mean", "25")["test"]
        by = {g["by"][0]["value"]: g for g in got["groups"]} | {"Total": got["total"]}
        for key in ("E", "H", "M", "Total"):
            w, g = want_[(f"test_{kind}", key)], by[key]
            assert g["df"] == float(w["df"]), (kind, key, g, w)
            assert close(g["estimate"], float(w["est"])) and close(g["se"], float(w["se"])), (g, w)
        got = run_json("means", ds, "ell2", "--by", "stype", "--test-mean", "25",
                       "--filter", "ell2<999")["test"]
        for g in got["groups"]:
            w = want_[(f"testf_{kind}", g["by"][0]["value"])]
            assert g["df"] == float(w["df"]) and close(g["se"], float(w["se"])), (kind, g, w)
        got = run_json("ratio", ds, "ell2", "meals", "--by", "stype")
        by = {g["by"][0]["value"]: g for g in got["groups"]} | {"Total": got["total"]}
        for key in ("E", "H", "M", "Total"):
            w, g = want_[(f"ratio_{kind}", key)], by[key]
            assert close(g["estimate"], float(w["est"])) and close(g["se"], float(w["se"])), (g, w)


R_CORR_FAR = r"""
suppressMessages(library(survey))
a <- commandArgs(trailingOnly=TRUE)
data <- read.csv(a[1]); out <- a[2]
d <- svydesign(ids=~psu, strata=~h, weights=~w, data=data, nest=TRUE)
rows <- NULL
one <- function(key, des) {
  for (p in list(c("x", "y"), c("x", "z"), c("y", "z"))) {
    s2 <- update(des, a=des$variables[[p[1]]], b=des$variables[[p[2]]])
    s2 <- update(s2, ab=a*b, aa=a^2, bb=b^2)
    m <- svymean(~a+b+ab+aa+bb, s2)
    ct <- svycontrast(m, quote((ab - a*b)/sqrt((aa - a^2)*(bb - b^2))))
    rows <<- rbind(rows, data.frame(key=key, pair=paste(p, collapse=":"),
                                    est=unname(coef(ct)), se=unname(SE(ct))))
  }
}
sub <- subset(d, !is.na(z))
one("all", sub)
one("late", subset(sub, late == 1))
write.csv(rows, out, row.names=FALSE)
"""


def test_corr_about_a_centre_far_from_the_means_matches_r(tmp_path):
    """Over one dataset the cross products are taken about the means of the
    first 65,536 records, not the means' own scan: with the records sorted
    by `x` (large values near 10^6) that centre is far from the means, and
    the linearized SEs must still be R's. A filter leaving none of those
    first records takes the means' scan first; the same answers."""
    rng = np.random.default_rng(29)
    n = 80_000
    x = np.round(np.sort(1e6 + 5000 * rng.standard_normal(n)), 3)
    y = np.round(0.4 * x + 3000 * rng.standard_normal(n), 3)
    z = np.round(np.exp(rng.normal(10, 1, n)), 2)
    z[rng.random(n) < 0.05] = np.nan
    h = 1 + (np.arange(n) * 7 // n)
    psu = np.arange(n) // 25
    w = np.round(rng.uniform(50, 150, n), 2)
    late = (np.arange(n) >= 70_000).astype(int)
    src = tmp_path / "far.csv"
    with open(src, "w") as f:
        f.write("x,y,z,h,psu,w,late\n")
        for i in range(n):
            zi = "" if np.isnan(z[i]) else f"{z[i]:.2f}"
            f.write(f"{x[i]:.3f},{y[i]:.3f},{zi},{h[i]},{psu[i]},{w[i]:.2f},{late[i]}\n")
    ds = tmp_path / "far.mtab"
    run("import", src, ds)
    run("design", ds, "--weight", "w", "--strata", "h", "--cluster", "psu")
    want_ = rscript(tmp_path / "far.R", R_CORR_FAR, src, tmp_path / "far_out.csv")
    for key, extra in [("all", []), ("late", ["--filter", "late(1)"])]:
        got = run_json("corr", ds, "x", "y", "z", *extra)
        pairs = {f'{p["a"]}:{p["b"]}': p for p in got["pairs"]}
        for r in (r for r in want_ if r["key"] == key):
            g = pairs[r["pair"]]
            assert close(g["estimate"], float(r["est"]), rel=1e-9), (key, g, r)
            assert close(g["se"], float(r["se"])), (key, g, r)
        # Unweighted, without the design: scipy's Pearson r.
        plain = run_json("corr", ds, "x", "y", "z", "--no-design", *extra)
        keep = ~np.isnan(z) & ((late == 1) if key == "late" else True)
        r = stats.pearsonr(x[keep], z[keep])
        p = next(p for p in plain["pairs"] if p["a"] == "x" and p["b"] == "z")
        assert p["estimate"] == pytest.approx(r.statistic, rel=1e-9), (key, p)
        assert plain["means"][0] == pytest.approx(x[keep].mean(), rel=1e-12)
