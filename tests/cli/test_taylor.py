"""Taylor linearization standard errors against R's survey package
(Debian r-cran-survey, installed by the test command): weighted counts,
percentages (total, row, column; logit intervals), means by group (a
missing code, empty values and a filter as domains) and the Rao–Scott
test, for stratified cluster designs, with a finite population correction
(population sizes and fractions), each lonely-PSU option, cluster-only,
strata-only and weight-only designs, and PSUs stored apart — to 1e-6
relative. R's numbers come from an R script run here on the same CSV."""

import json
import random

import pytest

from conftest import r_estimates, rscript, run, run_json, write
from test_survey import DEFF_R, KG_R, TABLES_R, R, check_estimates, close, rep_data  # noqa: F401

ROWS = 3000
STRATA = 7


def rows_of(seed, lonely):
    """Records in PSU order: strata 1..7 of 3–9 clusters of 1–6 records
    (and, with `lonely`, a stratum 8 of one cluster)."""
    rng = random.Random(seed)
    out = []
    cluster = 0
    strata = STRATA + (1 if lonely else 0)
    per = ROWS // STRATA
    for s in range(1, strata + 1):
        ncl = 1 if s > STRATA else rng.randint(3, 9)
        pop = ncl * rng.randint(2, 5)
        left = 5 if s > STRATA else per
        for c in range(ncl):
            cluster += 1
            size = left if c == ncl - 1 else max(1, min(left - (ncl - c - 1), rng.randint(1, 2 * per // ncl)))
            left -= size
            ceff = rng.gauss(0, 1)  # a cluster effect: correlated records
            for _ in range(size):
                w = rng.randint(1000, 30000)
                inc = "" if rng.random() < 0.04 else (
                    "99999" if rng.random() < 0.03 else str(max(0, int(30000 + 9000 * ceff + rng.gauss(0, 15000)))))
                edu = min(4, max(0, int(2 + ceff + rng.gauss(0, 1))))
                sex = 1 if rng.random() < 0.5 + 0.1 * ceff / 3 else 2
                out.append([s, 1000 + cluster, pop, f"{pop and 1 / (pop / ncl):.6f}", sex, edu,
                            rng.randint(16, 90), inc, f"{w / 100:.2f}"])
    return out


def write_csv(path, rows):
    head = "S,C,F,FR,SEX,EDUC,AGE,INC,W"
    return write(path, head + "\n" + "\n".join(",".join(map(str, r)) for r in rows) + "\n")


@pytest.fixture(scope="module")
def taylor_data(tmp_path_factory):
    d = tmp_path_factory.mktemp("taylor")
    rows = rows_of(5, lonely=False)
    path = write_csv(d / "t.csv", rows)
    ds = d / "t.mtab"
    run("import", path, ds, "--missing", "INC=99999")
    return d, path, ds


# The R scripts' start: the CSV, the design's arguments, INC's missing code.
R_HEAD = r"""
suppressMessages(library(survey))
args <- commandArgs(trailingOnly=TRUE)
d <- read.csv(args[1]); out <- args[2]
strata <- args[3]; cluster <- args[4]; fpc <- args[5]; lonely <- args[6]
options(survey.lonely.psu=lonely)
d$INC[!is.na(d$INC) & d$INC == 99999] <- NA
"""

R_SCRIPT = R_HEAD + r"""
d$EDUC <- factor(d$EDUC); d$SEX <- factor(d$SEX)
f <- function(v) if (v == "") NULL else as.formula(paste0("~", v))
des <- svydesign(ids=if (cluster == "") ~1 else f(cluster), strata=f(strata), fpc=f(fpc),
                 weights=~W, data=d, nest=TRUE)
df <- degf(des)
rows <- list()
add <- function(what, key, est, se, lo=NA, hi=NA) {
  rows[[length(rows) + 1]] <<- data.frame(what=what, key=key, est=est, se=se, lo=lo, hi=hi)
}
add("df", "df", df, 0)
""" + TABLES_R + DEFF_R + KG_R + r"""
write.csv(do.call(rbind, rows), out, row.names=FALSE)
"""


def r_answers(d, csv_path, strata, cluster, fpc, lonely):
    out = d / f"r_{strata}_{cluster}_{fpc}_{lonely}.csv"
    return r_estimates(rscript(d / "taylor.R", R_SCRIPT, csv_path, out, strata, cluster, fpc, lonely))


def compare_with_r(d, csv_path, ds, strata="", cluster="", fpc="", lonely="fail"):
    rows = sum(1 for _ in open(csv_path)) - 1
    want = r_answers(d, csv_path, strata, cluster, fpc, lonely)
    f = run_json("freq", ds, "EDUC")
    assert f["design"]["method"] == "taylor" and f["weight"] == "W"
    assert f["design"]["df"] == want[("df", "df")][0]
    # Korn–Graubard: the whole sample's percentages (R takes a domain's
    # own degrees of freedom for row and column percentages, we the
    # design's: docs/SURVEY.md).
    check_estimates(ds, want, rows, kg_bases=("total",))


DESIGNS = [
    ("strata-cluster", ["--strata", "S", "--cluster", "C"], ("S", "C", "")),
    ("fpc-sizes", ["--strata", "S", "--cluster", "C", "--fpc", "F"], ("S", "C", "F")),
    ("fpc-fractions", ["--strata", "S", "--cluster", "C", "--fpc", "FR"], ("S", "C", "FR")),
    ("cluster-only", ["--cluster", "C"], ("", "C", "")),
    ("strata-only", ["--strata", "S"], ("S", "", "")),
    ("weight-only", [], ("", "", "")),
]


@pytest.mark.parametrize("name,flags,r_args", DESIGNS, ids=[d[0] for d in DESIGNS])
def test_taylor_designs_match_r(taylor_data, name, flags, r_args):
    d, csv_path, ds = taylor_data
    run("design", ds, "--weight", "W", *flags)
    compare_with_r(d, csv_path, ds, *r_args)


@pytest.mark.parametrize("lonely", ["remove", "certainty", "adjust", "average"])
def test_lonely_psu_options_match_r(tmp_path, lonely):
    """A stratum with one PSU: refused by default (naming it), and each
    option as R's `survey.lonely.psu`."""
    path = write_csv(tmp_path / "l.csv", rows_of(6, lonely=True))
    ds = tmp_path / "l.mtab"
    run("import", path, ds, "--missing", "INC=99999")
    p = run("design", ds, "--weight", "W", "--strata", "S", "--cluster", "C", ok=False)
    assert "stratum 8 of S has a single PSU" in p.stderr and "--lonely-psu" in p.stderr, p.stderr
    run("design", ds, "--weight", "W", "--strata", "S", "--cluster", "C", "--lonely-psu", lonely)
    compare_with_r(tmp_path, path, ds, "S", "C", "", lonely)


def test_psus_stored_apart_match_r(tmp_path):
    """Records shuffled: no PSU is one run of rows (each is kept by key
    until the scan ends); the answers are R's on the same records."""
    rows = rows_of(7, lonely=False)
    random.Random(3).shuffle(rows)
    path = write_csv(tmp_path / "s.csv", rows)
    ds = tmp_path / "s.mtab"
    run("import", path, ds, "--missing", "INC=99999")
    p = run("design", ds, "--weight", "W", "--strata", "S", "--cluster", "C")
    assert "not stored together" in p.stderr
    assert run_json("info", ds)["design"]["taylor"]["contiguous"] is False
    compare_with_r(tmp_path, path, ds, "S", "C", "")


def test_taylor_design_is_shown_and_checked(taylor_data, tmp_path):
    d, csv_path, ds = taylor_data
    run("design", ds, "--weight", "W", "--strata", "S", "--cluster", "C")
    info = run_json("info", ds)["design"]
    t = info["taylor"]
    assert t["strata"] == "S" and t["cluster"] == "C" and t["lonely_psu"] == "fail"
    assert len(t["psus"]) == STRATA and t["rows"] == len(rows_of(5, False)) and t["contiguous"] is True
    text = run("info", ds).stdout
    assert "Taylor linearization" in text and "strata S (7)" in text
    out = run("tab", ds, "EDUC", "SEX", "--stats").stdout
    assert "Rao–Scott" in out and "Taylor linearization" in out
    # A bad design: strata of one PSU each (W's values, decimals are codes
    # too); a fpc not constant in a stratum; an FPC smaller than the
    # sample.
    p = run("design", ds, "--weight", "W", "--strata", "W", ok=False)
    assert "of W have a single PSU" in p.stderr and "and 2" in p.stderr, p.stderr
    p = run("design", ds, "--weight", "W", "--strata", "S", "--cluster", "C", "--fpc", "AGE", ok=False)
    assert "not constant within stratum" in p.stderr
    rows = rows_of(5, lonely=False)
    for r in rows:
        r[2] = 2  # two PSUs in the population of every stratum
    bad = tmp_path / "bad.mtab"
    run("import", write_csv(tmp_path / "bad.csv", rows), bad)
    p = run("design", bad, "--weight", "W", "--strata", "S", "--cluster", "C", "--fpc", "F", ok=False)
    assert "fewer than the" in p.stderr
    # Several datasets whose strata overlap (the same records twice):
    # each stratum's PSU count is its own dataset's, so refused, not
    # answered with standard errors that ignore it (datasets with strata
    # of their own merge: tests/python/test_dask.py).
    (tmp_path / "many").mkdir()
    for name in ("a", "b"):
        run("import", csv_path, tmp_path / "many" / f"{name}.mtab", "--missing", "INC=99999")
        run("design", tmp_path / "many" / f"{name}.mtab", "--weight", "W", "--strata", "S", "--cluster", "C")
    p = run("freq", f"{tmp_path}/many/*.mtab", "EDUC", ok=False)
    assert "Taylor design's stratum 1 is in two datasets" in p.stderr, p.stderr
    run("design", ds, "--clear")
    assert "design" not in run_json("freq", ds, "EDUC")


QUANTILE_R = r"""
suppressMessages(library(survey))
args <- commandArgs(trailingOnly=TRUE)
d <- read.csv(args[1]); out <- args[2]; kind <- args[3]
d$INC[!is.na(d$INC) & d$INC == 99999] <- NA
des <- if (kind == "taylor") {
  svydesign(ids=~C, strata=~S, weights=~W, data=d, nest=TRUE)
} else {
  svrepdesign(data=d, weights=~W, repweights=d[, paste0("RW", 1:as.integer(args[4]))],
              type="successive-difference", mse=TRUE)
}
df <- degf(des)
rows <- list()
add <- function(key, p, x) {
  rows[[length(rows) + 1]] <<- data.frame(key=key, p=p, est=x[1], lo=x[2], hi=x[3], se=x[4])
}
ps <- c(0.5, 0.1, 0.9)
for (dom in c("all", "age30")) {
  sub <- if (dom == "all") des else subset(des, AGE >= 30)
  for (s in c("1", "2", "Total")) {
    g <- if (s == "Total") sub else subset(sub, SEX == as.integer(s))
    q <- svyquantile(~INC, g, quantiles=ps, na.rm=TRUE, ci=TRUE, df=df)[[1]]
    for (i in seq_along(ps)) add(paste0(dom, "_", s), ps[i], q[i, ])
  }
}
write.csv(do.call(rbind, rows), out, row.names=FALSE)
"""


def quantiles_match_r(d, csv_path, ds, kind, reps=0):
    """microtab's medians and 10th/90th percentiles by SEX (all records,
    then a filter as a domain) and over all, with their SEs and Woodruff
    intervals, against R's svyquantile (qrule "math", interval "mean")."""
    want = {}
    for r in rscript(d / "quantile.R", QUANTILE_R, csv_path, d / f"q_{kind}.csv", kind, reps):
        num = lambda k: None if r[k] in ("NA", "NaN", "") else float(r[k])  # noqa: E731
        want[(r["key"], float(r["p"]))] = (num("est"), num("lo"), num("hi"), num("se"))
    checked = 0
    for dom, filt in (("all", None), ("age30", "AGE(30-*)")):
        args = ["means", ds, "INC", "--by", "SEX", "--median", "--percentile", "10,90"]
        m = run_json(*(args + (["--filter", filt] if filt else [])))
        groups = [(str(g["by"][0]["value"]), g["quantiles"]) for g in m["groups"]]
        groups.append(("Total", m["total_quantiles"]))
        for key, qs in groups:
            assert [q["p"] for q in qs] == [0.5, 0.1, 0.9]
            for q in qs:
                est, lo, hi, se = want[(f"{dom}_{key}", q["p"])]
                assert close(q["value"], est), (dom, key, q, est)
                if lo is None or hi is None:
                    assert q["se"] is None, (dom, key, q)
                    continue
                u = q["se"]
                assert close(u["lo"], lo) and close(u["hi"], hi), (dom, key, q, lo, hi)
                assert abs(u["se"] - se) <= 1e-6 * max(se, 1.0), (dom, key, u["se"], se)
                checked += 1
    assert checked >= 12


def test_quantiles_match_r(taylor_data):
    d, csv_path, ds = taylor_data
    run("design", ds, "--weight", "W", "--strata", "S", "--cluster", "C")
    quantiles_match_r(d, csv_path, ds, "taylor")
    # Without a design: the same weighted quantiles, no intervals.
    plain = run_json("means", ds, "INC", "--by", "SEX", "--median", "--no-design", "--weight", "W")
    with_design = run_json("means", ds, "INC", "--by", "SEX", "--median")
    assert [g["quantiles"][0]["value"] for g in plain["groups"]] == \
        [g["quantiles"][0]["value"] for g in with_design["groups"]]
    assert all(g["quantiles"][0]["se"] is None for g in plain["groups"])


def test_replicate_quantiles_match_r(rep_data):
    """Under an SDR replicate design: the share below each quantile gets
    its replicate SE (R's default interval for replicate designs too)."""
    d, csv_path, ds = rep_data
    run("design", ds, "--weight", "W", "--repweights", f"RW1-RW{R}", "--type", "sdr")
    quantiles_match_r(d, csv_path, ds, "sdr", R)


def test_strata_sums_in_a_hash_map_match_r(taylor_data, monkeypatch):
    """The strata's totals kept in a hash map (the path of designs with
    more strata × cells than a dense array holds), forced on small data."""
    d, csv_path, ds = taylor_data
    monkeypatch.setenv("MICROTAB_TAYLOR_SPARSE", "1")
    run("design", ds, "--weight", "W", "--strata", "S", "--cluster", "C")
    compare_with_r(d, csv_path, ds, "S", "C", "")


EDGE_R = r"""
suppressMessages(library(survey))
args <- commandArgs(trailingOnly=TRUE)
d <- read.csv(args[1]); out <- args[2]
des <- svydesign(ids=~C, strata=~S, weights=~W, data=d, nest=TRUE)
df <- degf(des)
rows <- list()
add <- function(what, key, est, se, lo=NA, hi=NA) {
  rows[[length(rows) + 1]] <<- data.frame(what=what, key=key, est=est, se=se, lo=lo, hi=hi)
}
m <- svyby(~BIG, ~G, des, svymean)
for (i in seq_len(nrow(m))) add("big", as.character(m$G[i]), m$BIG[i], m$se[i])
a <- svymean(~BIG, des); add("big", "Total", coef(a)[[1]], SE(a)[[1]])
# The overall median of Y among the records whose G is not 3 (G = 3 is a
# missing code in microtab's import).
sub <- subset(des, G != 3)
q <- svyquantile(~Y, sub, c(0.5, 0.9), ci=TRUE, df=df)[[1]]
for (i in 1:2) add("q", c("0.5", "0.9")[i], q[i, 1], q[i, 4], q[i, 2], q[i, 3])
write.csv(do.call(rbind, rows), out, row.names=FALSE)
"""


def test_edges_of_taylor_designs_match_r(tmp_path):
    """Found by a hostile review: a mean of values far from 0 for their
    spread (1e7 + noise: no digits lost to cancellation), an empty cell's
    0% with SE 0, the overall quantile without the records whose grouping
    value is missing, the overall mean's SE in JSON, and a filter that
    selects nothing (an empty answer, not a crash)."""
    rng = random.Random(9)
    lines = ["S,C,W,G,H,Y,BIG"]
    c = 0
    for s in range(1, 6):
        for _ in range(rng.randint(3, 7)):
            c += 1
            e = rng.gauss(0, 5)
            for _ in range(rng.randint(1, 5)):
                g = rng.randint(1, 3)
                h = 1 if g == 3 else rng.randint(1, 2)
                lines.append(f"{s},{c},{rng.randint(100, 900) / 10},{g},{h},{rng.randint(0, 60) + int(e)},"
                             f"{10_000_000 + round(20 * rng.gauss(0, 1) + e, 3)}")
    path = write(tmp_path / "e.csv", "\n".join(lines) + "\n")
    ds = tmp_path / "e.mtab"
    run("import", path, ds)
    run("design", ds, "--weight", "W", "--strata", "S", "--cluster", "C")
    want = r_estimates(rscript(tmp_path / "edge.R", EDGE_R, path, tmp_path / "r.csv"))
    m = run_json("means", ds, "BIG", "--by", "G")
    for g in m["groups"]:
        est, se, _, _ = want[("big", str(g["by"][0]["value"]))]
        assert close(g["mean"], est) and close(g["mean_se"]["se"], se), (g, est, se)
    est, se, _, _ = want[("big", "Total")]
    assert close(m["total"]["mean"], est) and close(m["total_se"]["se"], se), (m["total_se"], se)
    t = run_json("tab", ds, "G", "H", "--pct", "row")["tables"][0]
    empty = [(i, j) for i in range(len(t["rows"])) for j in range(len(t["cols"])) if t["counts"][i][j] == 0]
    assert empty and all(t["pct"][i][j] == 0 and t["pct_se"][i][j]["se"] == 0 for i, j in empty), t["pct_se"]
    # G = 3 missing: the overall quantiles leave those records out.
    gm = tmp_path / "gm.mtab"
    run("import", path, gm, "--missing", "G=3")
    run("design", gm, "--weight", "W", "--strata", "S", "--cluster", "C")
    q = run_json("means", gm, "Y", "--by", "G", "--median", "--percentile", "90")["total_quantiles"]
    for x in q:
        est, se, lo, hi = want[("q", str(x["p"]))]
        assert close(x["value"], est), (x, est)
        if lo is None or hi is None:
            # An end of the share's interval beyond [0, 1]: R gives the
            # other end and no SE, microtab neither (docs/SURVEY.md).
            assert x["se"] is None, x
            continue
        assert close(x["se"]["lo"], lo) and close(x["se"]["hi"], hi), (x, lo, hi)
        assert abs(x["se"]["se"] - se) <= 1e-6 * max(se, 1.0), (x, se)
    # Nothing selected: empty answers, no crash.
    assert run_json("freq", ds, "G", "--filter", "S(99)")["rows"] == []
    assert run_json("means", ds, "Y", "--by", "G", "--filter", "S(99)", "--median")["groups"] == []
    run("tab", ds, "G", "H", "--filter", "S(99)", "--stats")


R_DIFF = R_HEAD + r"""
d$E <- relevel(factor(d$EDUC), "2"); d$z <- as.numeric(d$SEX == 1)
f <- function(v) if (v == "") NULL else as.formula(paste0("~", v))
des <- svydesign(ids=if (cluster == "") ~1 else f(cluster), strata=f(strata), fpc=f(fpc),
                 weights=~W, data=d, nest=TRUE)
rows <- NULL
add <- function(what, m) {
  s <- summary(m)$coefficients
  w <- regTermTest(m, ~E)
  rows <<- rbind(rows, data.frame(what=what, key=sub("^E", "", rownames(s)[-1]), est=s[-1, 1],
                                  se=s[-1, 2], p=s[-1, 4], df=m$df.residual, f=w$Ftest[1],
                                  fp=w$p[1]))
}
add("mean", svyglm(INC ~ E, design=subset(des, !is.na(INC))))
add("share", svyglm(z ~ E, design=des))
write.csv(rows, out, row.names=FALSE)
"""

DIFF_CASES = [(name, flags, r_args, "fail") for name, flags, r_args in DESIGNS] + [
    (f"lonely-{o}", ["--strata", "S", "--cluster", "C", "--lonely-psu", o], ("S", "C", ""), o)
    for o in ["remove", "certainty", "adjust", "average"]]


@pytest.mark.parametrize("name,flags,r_args,lonely", DIFF_CASES, ids=[c[0] for c in DIFF_CASES])
def test_differences_match_r_under_each_design(tmp_path, name, flags, r_args, lonely):
    """`means --diff` and `tab --diff`, answered from the query's own
    Taylor sums (every pair of cells' totals), against R's `svyglm` of
    the saturated model and `regTermTest`, under each design form (FPC
    as sizes and fractions) and each lonely-PSU option: estimates, SEs,
    p, the df and the Wald test."""
    path = write_csv(tmp_path / "d.csv", rows_of(8, lonely=name.startswith("lonely")))
    ds = tmp_path / "d.mtab"
    run("import", path, ds, "--missing", "INC=99999")
    run("design", ds, "--weight", "W", *flags)
    want = rscript(tmp_path / "diff.R", R_DIFF, path, tmp_path / "out.csv", *r_args, lonely)
    got = {"mean": run_json("means", ds, "INC", "--by", "EDUC", "--diff", "2")["comparison"]}
    (got["share"],) = [c for c in run_json("tab", ds, "SEX", "EDUC", "--diff", "2")["comparisons"]
                       if c["row"] == "1"]
    for what, c in got.items():
        rs = {r["key"]: r for r in want if r["what"] == what}
        assert {d["group"] for d in c["differences"]} == set(rs), (what, c, rs)
        for d in c["differences"]:
            r = rs[d["group"]]
            assert close(d["estimate"], float(r["est"]), 1e-9), (what, d, r)
            assert close(d["se"], float(r["se"]), 1e-6), (what, d, r)
            assert close(d["p"], float(r["p"]), 1e-6 * max(1.0, d["t"] ** 2)), (what, d, r)
        r = next(iter(rs.values()))
        assert c["df"] == float(r["df"]), (what, c["df"], r["df"])
        assert close(c["wald"]["f"], float(r["f"]), 1e-6), (what, c["wald"], r)
