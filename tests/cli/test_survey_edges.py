"""Survey inference at its edges, every number against R's survey package
(Debian r-cran-survey) run here on the same CSV:

* replicate designs in which a domain has no weight in some replicates
  (BRR half-samples without the domain's PSUs, bootstrap replicates that
  missed them, a jackknife replicate that drops its only PSU): the
  estimate is 0/0 there, and R leaves those replicates out of the variance
  (`svrVar`, with a warning). microtab does the same, counts them
  (`replicates_dropped` in JSON and CSV, `†` in text) and never prints an
  SE of 0 for an undefined variance — means, weighted counts,
  percentages (freq, tab), medians, the Rao–Scott test;
* the design's degrees of freedom: the rank of the replicate weights − 1
  (R's `degf()`), not the number of replicates − 1, for BRR with a
  duplicated replicate and a bootstrap with few PSUs, and the t intervals
  and Rao–Scott denominator df that use it;
* `tab --stats --format csv` carries the Rao–Scott test (and, without a
  design, Pearson's chi-square and the association measures) with the
  design's method, df and centring;
* design effects under a Taylor design with records of weight 0 (R leaves
  them out of the SRS size of each domain)."""

import csv
import io
import random
import subprocess

import pytest

from conftest import r_estimates, rscript, run, run_json, write


def close(a, b, rel=1e-6):
    assert a is not None and b is not None, (a, b)
    return abs(a - b) <= rel * max(abs(b), 1e-12)


# ---------------------------------------------------------------- data

def brr6():
    """The six-record BRR case: strata S, PSUs P, D = 1 in PSU 1 of each
    stratum; replicate R4 keeps PSU 2 of both strata (D = 1 has no weight
    in it), R1 PSU 1 of both (D = 0 none)."""
    rows = [  # S, P, W, D, G, Y
        (1, 1, 1.0, 1, 1, 5), (1, 1, 2.0, 1, 2, 7), (1, 2, 1.5, 0, 1, 4),
        (2, 1, 1.0, 1, 1, 6), (2, 2, 2.0, 0, 2, 8), (2, 2, 1.0, 0, 1, 3),
    ]
    halves = [(1, 1), (2, 1), (1, 2), (2, 2)]  # the PSU each replicate keeps in S1, S2
    head = "S,P,W,D,G,Y," + ",".join(f"R{k}" for k in range(1, 5))
    lines = [head]
    for s, p, w, d, g, y in rows:
        reps = [2 * w if p == h[s - 1] else 0 for h in halves]
        lines.append(",".join(str(x) for x in (s, p, w, d, g, y, *reps)))
    return lines, 4


def bootstrap_data(reps=50, seed=3):
    """Three strata of four PSUs of five records; D = 1 only in two PSUs;
    Rao–Wu bootstrap replicates (3 of 4 PSUs drawn per stratum, factor
    4/3 per draw): some replicates miss both, and the replicate weights
    have rank at most 12 (the PSUs)."""
    rng = random.Random(seed)
    recs = []
    for s in range(1, 4):
        for p in range(1, 5):
            for _ in range(5):
                d = 1 if (s, p) in ((1, 1), (2, 2)) else 0
                recs.append((s, p, rng.randint(10, 50) / 10, d, rng.randint(1, 2), rng.randint(0, 40)))
    draws = []
    for _ in range(reps):
        m = {}
        for s in range(1, 4):
            for _ in range(3):
                k = (s, rng.randint(1, 4))
                m[k] = m.get(k, 0) + 1
        draws.append(m)
    lines = ["S,P,W,D,G,Y," + ",".join(f"R{k}" for k in range(1, reps + 1))]
    for s, p, w, d, g, y in recs:
        rw = [round(w * m.get((s, p), 0) * 4 / 3, 10) for m in draws]
        lines.append(",".join(str(x) for x in (s, p, w, d, g, y, *rw)))
    return lines, reps


def jk1_data(seed=5):
    """Eight PSUs of four records, no strata; D = 1 only in PSU 3, so the
    delete-one jackknife replicate that drops PSU 3 has no weight in it."""
    rng = random.Random(seed)
    lines = ["S,P,W,D,G,Y," + ",".join(f"R{k}" for k in range(1, 9))]
    for p in range(1, 9):
        for _ in range(4):
            w = rng.randint(10, 50) / 10
            d = 1 if p == 3 else 0
            rw = [0 if k == p else round(w * 8 / 7, 10) for k in range(1, 9)]
            lines.append(",".join(str(x) for x in (1, p, w, d, rng.randint(1, 2), rng.randint(0, 40), *rw)))
    return lines, 8


def brr_duplicate_data(seed=7):
    """Four strata of two PSUs, eight BRR half-samples (a Hadamard matrix)
    and a ninth replicate that repeats the first: rank 8 of 9."""
    rng = random.Random(seed)
    h8 = [[1]]
    while len(h8) < 8:
        h8 = [r + r for r in h8] + [r + [-x for x in r] for r in h8]
    lines = ["S,P,W,D,G,Y," + ",".join(f"R{k}" for k in range(1, 10))]
    for s in range(1, 5):
        for p in (1, 2):
            for _ in range(3):
                w = rng.randint(10, 50) / 10
                rw = [2 * w if (h8[k][s - 1] == 1) == (p == 1) else 0 for k in range(8)]
                rw.append(rw[0])
                lines.append(",".join(str(x) for x in (s, p, w, rng.randint(0, 1), rng.randint(1, 2),
                                                         rng.randint(0, 40), *rw)))
    return lines, 9


# A replicate design from the CSV, its degf(), and add() collecting rows.
R_PREAMBLE = r"""
suppressMessages(library(survey))
args <- commandArgs(trailingOnly=TRUE)
d <- read.csv(args[1]); out <- args[2]; type <- args[3]; R <- as.integer(args[4])
des <- svrepdesign(data=d, weights=~W, repweights=d[, paste0("R", 1:R)], type=type,
                   combined.weights=TRUE, mse=TRUE)
df <- degf(des)
rows <- list()
add <- function(what, key, est, se=NA, lo=NA, hi=NA, extra=NA)
  rows[[length(rows) + 1]] <<- data.frame(what=what, key=key, est=est, se=se, lo=lo, hi=hi, extra=extra)
"""


R_REP = R_PREAMBLE + r"""
q <- qr(as.matrix(d[, paste0("R", 1:R)]), tol=1e-5)$rank
add("degf", "all", df, q)
nadrop <- function(x) { a <- attr(attr(x, "var"), "na.replicates"); if (is.null(a)) 0 else length(a) }
m <- function(x, key, what) {
  ci <- confint(x, df=df)
  add(what, key, coef(x)[[1]], SE(x)[[1]], ci[1], ci[2], nadrop(x))
}
suppressWarnings({
  for (k in sort(unique(d$D))) m(svymean(~Y, subset(des, D == k)), k, "mean")
  m(svymean(~Y, des), "Total", "mean")
  dom <- subset(des, D == 1)
  for (g in sort(unique(d$G))) {
    m(svytotal(as.formula(paste0("~as.numeric(G == ", g, ")")), dom), g, "freq_w")
    p <- svyciprop(as.formula(paste0("~as.numeric(G == ", g, ")")), dom, method="xlogit", df=df)
    x <- svymean(as.formula(paste0("~as.numeric(G == ", g, ")")), dom)
    add("freq_pct", g, 100 * coef(p)[[1]], 100 * SE(x)[[1]], 100 * confint(p)[1], 100 * confint(p)[2], nadrop(x))
  }
  for (k in sort(unique(d$D))) for (g in sort(unique(d$G))) {
    sub <- subset(des, D == k)
    f <- as.formula(paste0("~as.numeric(G == ", g, ")"))
    x <- svymean(f, sub)
    if (coef(x)[[1]] > 0 && coef(x)[[1]] < 1) {
      p <- svyciprop(f, sub, method="xlogit", df=df)
      add("row_pct", paste0(k, "_", g), 100 * coef(p)[[1]], 100 * SE(x)[[1]], 100 * confint(p)[1],
          100 * confint(p)[2], nadrop(x))
    }
  }
  for (k in sort(unique(d$D))) {
    x <- svyquantile(~Y, subset(des, D == k), 0.5, ci=TRUE, df=df)[[1]]
    # extra: the SE of the share below the median, from which Woodruff's
    # interval is read (rounding noise where every replicate agrees).
    sm <- SE(svymean(as.formula(paste0("~as.numeric(Y <= ", x[1], ")")), subset(des, D == k)))[[1]]
    add("median", k, x[1], x[4], x[2], x[3], sm)
  }
  t <- svychisq(~D + G, des)
  add("chisq", "F", t$statistic[[1]], NA, t$parameter[[1]], t$parameter[[2]], t$p.value[[1]])
})
write.csv(do.call(rbind, rows), out, row.names=FALSE)
"""


def r_rows(tmp, script_text, args):
    rows = rscript(tmp / "oracle.R", script_text, *args, out=tmp / "r_out.csv")
    return r_estimates(rows, ("est", "se", "lo", "hi", "extra"), ("NA", "NaN", ""))


def replicate_case(tmp, lines, reps, kind, rtype):
    path = write(tmp / "d.csv", "\n".join(lines) + "\n")
    ds = tmp / "d.mtab"
    run("import", path, ds)
    run("design", ds, "--weight", "W", "--repweights", f"R1-R{reps}", "--type", kind)
    want = r_rows(tmp, R_REP, [path, tmp / "r_out.csv", rtype, reps])
    return ds, want


def check_u(est, u, want, what, dropped=True):
    """An estimate and its uncertainty against R's (est, se, lo, hi,
    replicates R dropped)."""
    r_est, r_se, r_lo, r_hi, r_drop = want
    assert close(est, r_est), (what, est, r_est)
    assert u is not None, (what, "no SE where R has", r_se)
    # (an SE of 0 where R's is: a domain inside one PSU under JK1; both
    # are rounding of the replicate weights' last digits there)
    assert abs(u["se"] - r_se) <= 1e-6 * abs(r_se) + 1e-9 * abs(r_est), (what, u["se"], r_se)
    if r_lo is not None:
        assert close(u["lo"], r_lo) and close(u["hi"], r_hi), (what, u, r_lo, r_hi)
    if dropped:
        assert u.get("replicates_dropped", 0) == int(r_drop), (what, u, r_drop)


CASES = {
    "brr6": (brr6, "brr", "BRR"),
    "bootstrap": (bootstrap_data, "bootstrap", "bootstrap"),
    "jk1": (jk1_data, "jk1", "JK1"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_domains_missing_from_replicates_match_r(tmp_path, case):
    make, kind, rtype = CASES[case]
    lines, reps = make()
    ds, want = replicate_case(tmp_path, lines, reps, kind, rtype)
    dropped_any = 0

    # The design's df: R's degf (the replicate weights' rank − 1).
    m = run_json("means", ds, "Y", "--by", "D")
    r_df, r_rank = want[("degf", "all")][:2]
    assert m["design"]["df"] == r_df and m["design"]["rank"] == r_rank, (m["design"], r_df, r_rank)

    # Means by D and overall.
    for g in m["groups"]:
        k = str(g["by"][0]["value"])
        check_u(g["mean"], g["mean_se"], want[("mean", k)], ("mean", k))
        dropped_any += g["mean_se"].get("replicates_dropped", 0)
    check_u(m["total"]["mean"], m["total_se"], want[("mean", "Total")], "mean total")

    # Weighted counts and percentages of G in the domain D = 1 (a filter).
    f = run_json("freq", ds, "G", "--filter", "D(1)")
    for r in f["rows"]:
        k = str(r["value"])
        check_u(r["weighted"], r["weighted_se"], want[("freq_w", k)], ("freq weighted", k))
        r_est, r_se, r_lo, r_hi, r_drop = want[("freq_pct", k)]
        if 0 < r_est < 100:
            check_u(r["percent"], r["percent_se"], want[("freq_pct", k)], ("freq percent", k))
        dropped_any += r["percent_se"].get("replicates_dropped", 0)

    # Row percentages of D × G (each row a domain).
    t = run_json("tab", ds, "D", "G", "--pct", "row", "--stats")["tables"][0]
    checked = 0
    for i, rv in enumerate(t["rows"]):
        for j, cv in enumerate(t["cols"]):
            key = f"{rv['value']}_{cv['value']}"
            if ("row_pct", key) in want:
                check_u(t["pct"][i][j], t["pct_se"][i][j], want[("row_pct", key)], ("row pct", key))
                checked += 1
    assert checked >= 2

    # The Rao–Scott test: F, ndf, ddf (with the rank's df) and p.
    f_r, _, ndf, ddf, p = want[("chisq", "F")]
    rs = t["rao_scott"]
    assert close(rs["f"], f_r) and close(rs["ndf"], ndf) and close(rs["ddf"], ddf) and close(rs["p"], p), (rs, want[("chisq", "F")])

    # Medians by D: R's Woodruff intervals, or none where R has none (never
    # an interval of width 0 from an undefined variance).
    med = run_json("means", ds, "Y", "--by", "D", "--median")
    for g in med["groups"]:
        k = str(g["by"][0]["value"])
        q = g["quantiles"][0]
        est, se, lo, hi, share_se = want[("median", k)]
        assert close(q["value"], est), (k, q, est)
        if share_se is not None and share_se < 1e-9:
            # The share below the median has no variance but R's rounding
            # noise (every replicate keeps the same records), which moves
            # R's interval to a neighbouring value; in exact arithmetic
            # the interval is the median itself.
            assert q["se"] is not None and q["se"]["se"] == 0.0, (k, q)
            assert q["se"]["lo"] == q["se"]["hi"] == q["value"], (k, q)
        elif lo is None or hi is None or se is None:
            assert q["se"] is None, (k, q)
        else:
            assert close(q["se"]["lo"], lo) and close(q["se"]["hi"], hi), (k, q, lo, hi)
            assert abs(q["se"]["se"] - se) <= 1e-6 * max(se, 1.0), (k, q, se)

    # Every case has some estimate whose domain some replicate missed.
    assert dropped_any > 0

    # Text marks those SEs and says why; CSV carries the counts.
    text = run("means", ds, "Y", "--by", "D").stdout
    assert "†" in text and "no weight in some replicates" in text, text
    rows = list(csv.DictReader(io.StringIO(run("means", ds, "Y", "--by", "D", "--format", "csv").stdout)))
    for r, g in zip(rows, m["groups"]):
        assert int(r["mean_replicates_dropped"]) == g["mean_se"].get("replicates_dropped", 0)
        assert float(r["mean_se"]) == pytest.approx(g["mean_se"]["se"], rel=1e-12)
        assert float(r["df"]) == r_df and r["se_method"] == f"replicate:{kind}" and r["centring"] == "full-sample"


def test_six_record_brr_case_gives_rs_se_not_zero(tmp_path):
    """The reproducer: D = 1's mean 6.25 had SE 0 and [6.25, 6.25]; R
    gives SE 0.1768 with 4 replicates... of which R4 is 0/0 and dropped."""
    lines, reps = brr6()
    ds, want = replicate_case(tmp_path, lines, reps, "brr", "BRR")
    m = run_json("means", ds, "Y", "--by", "D")
    g = [g for g in m["groups"] if g["by"][0]["value"] == 1][0]
    r_est, r_se, r_lo, r_hi, r_drop = want[("mean", "1")]
    assert g["mean"] == pytest.approx(6.25) and r_est == pytest.approx(6.25)
    assert g["mean_se"]["se"] > 0 and close(g["mean_se"]["se"], r_se)
    assert g["mean_se"]["lo"] < g["mean"] < g["mean_se"]["hi"]
    assert g["mean_se"]["replicates_dropped"] == 1 == r_drop
    assert g["mean_se"]["deff"] > 0 and g["mean_se"]["cv"] > 0


R_DF = R_PREAMBLE + r"""
add("degf", "all", df, qr(as.matrix(d[, paste0("R", 1:R)]), tol=1e-5)$rank)
x <- svymean(~Y, des); ci <- confint(x, df=df)
add("mean", "Total", coef(x)[[1]], SE(x)[[1]], ci[1], ci[2], 0)
x <- svytotal(~Y, des); ci <- confint(x, df=df)
add("total", "Total", coef(x)[[1]], SE(x)[[1]], ci[1], ci[2], 0)
t <- svychisq(~D + G, des)
add("chisq", "F", t$statistic[[1]], NA, t$parameter[[1]], t$parameter[[2]], t$p.value[[1]])
write.csv(do.call(rbind, rows), out, row.names=FALSE)
"""


@pytest.mark.parametrize("case", ["brr-duplicate", "bootstrap"])
def test_replicate_df_is_rank_minus_one_as_r(tmp_path, case):
    """BRR with a replicate repeated (rank 8 of 9 replicates) and a
    bootstrap of 50 replicates over 12 PSUs (rank ≤ 12): df = rank − 1 as
    R's degf(), in the t intervals and the Rao–Scott denominator df."""
    lines, reps = brr_duplicate_data() if case == "brr-duplicate" else bootstrap_data()
    kind, rtype = ("brr", "BRR") if case == "brr-duplicate" else ("bootstrap", "bootstrap")
    path = write(tmp_path / "d.csv", "\n".join(lines) + "\n")
    ds = tmp_path / "d.mtab"
    run("import", path, ds)
    p = run("design", ds, "--weight", "W", "--repweights", f"R1-R{reps}", "--type", kind)
    msg = p.stdout + p.stderr
    want = r_rows(tmp_path, R_DF, [path, tmp_path / "r_out.csv", rtype, reps])
    r_df, r_rank = want[("degf", "all")][:2]
    assert r_df < reps - 1, (r_df, reps)  # the case is one where the rule matters
    assert f"t intervals with {int(r_df)} df" in msg, msg
    m = run_json("means", ds, "Y", "--by", "D")
    assert m["design"]["df"] == r_df and m["design"]["rank"] == r_rank and m["design"]["replicates"] == reps
    check_u(m["total"]["mean"], m["total_se"], want[("mean", "Total")], "mean")
    t = run_json("tab", ds, "D", "G", "--stats")["tables"][0]
    f_r, _, ndf, ddf, p = want[("chisq", "F")]
    rs = t["rao_scott"]
    assert close(rs["f"], f_r) and close(rs["ndf"], ndf) and close(rs["ddf"], ddf) and close(rs["p"], p), (rs, want[("chisq", "F")])
    text = run("means", ds, "Y", "--by", "D").stdout
    assert f"t with {int(r_df)} df (the replicate weights' rank {int(r_rank)} − 1" in text, text


def test_tab_csv_carries_the_tests(tmp_path):
    """`tab --stats --format csv`: the Rao–Scott test (R's svychisq) under a
    replicate and a Taylor design, with the method, df and centring; without
    a design Pearson's chi-square (scipy) and the association measures
    (those of the JSON, themselves checked in test_stats)."""
    from scipy.stats import chi2_contingency
    lines, reps = bootstrap_data()
    ds, want = replicate_case(tmp_path, lines, reps, "bootstrap", "bootstrap")
    js = run_json("tab", ds, "D", "G", "--stats", "--pct", "row")["tables"][0]
    rows = list(csv.DictReader(io.StringIO(run("tab", ds, "D", "G", "--stats", "--pct", "row",
                                               "--format", "csv").stdout)))
    assert len(rows) == 4
    f_r, _, ndf, ddf, p = want[("chisq", "F")]
    for r in rows:
        assert r["test"] == "rao-scott"
        assert close(float(r["f"]), f_r) and close(float(r["ndf"]), ndf)
        assert close(float(r["ddf"]), ddf) and close(float(r["p"]), p)
        assert float(r["chi2"]) == pytest.approx(js["rao_scott"]["chi2"], rel=1e-12)
        assert float(r["p_first_order"]) == pytest.approx(js["rao_scott"]["p_first_order"], rel=1e-12)
        assert float(r["chi2_n"]) == js["rao_scott"]["n"]
        assert r["se_method"] == "replicate:bootstrap" and float(r["df"]) == want[("degf", "all")][0]
        assert r["centring"] == "full-sample"

    # Taylor: strata S, PSUs P of the same records.
    tds = tmp_path / "t.mtab"
    run("import", tmp_path / "d.csv", tds)
    run("design", tds, "--weight", "W", "--strata", "S", "--cluster", "P")
    script = tmp_path / "t.R"
    script.write_text(r"""
suppressMessages(library(survey))
args <- commandArgs(trailingOnly=TRUE)
d <- read.csv(args[1])
des <- svydesign(ids=~P, strata=~S, weights=~W, data=d, nest=TRUE)
t <- svychisq(~D + G, des)
cat(t$statistic[[1]], t$parameter[[1]], t$parameter[[2]], t$p.value[[1]], degf(des), "\n")
""")
    p = subprocess.run(["Rscript", str(script), str(tmp_path / "d.csv")], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    f_r, ndf, ddf, pv, df = map(float, p.stdout.split())
    rows = list(csv.DictReader(io.StringIO(run("tab", tds, "D", "G", "--stats", "--format", "csv").stdout)))
    for r in rows:
        assert r["test"] == "rao-scott" and r["se_method"] == "taylor" and r["centring"] == ""
        assert float(r["df"]) == df
        assert close(float(r["f"]), f_r) and close(float(r["ndf"]), ndf)
        assert close(float(r["ddf"]), ddf) and close(float(r["p"]), pv)

    # No design: Pearson's chi-square and the association measures.
    js = run_json("tab", ds, "D", "G", "--stats", "--no-design", "--weight", "W")["tables"][0]
    rows = list(csv.DictReader(io.StringIO(run("tab", ds, "D", "G", "--stats", "--no-design", "--weight", "W",
                                               "--format", "csv").stdout)))
    chi2, pv, dof, _ = chi2_contingency(js["weighted"], correction=False)
    for r in rows:
        assert r["test"] == "pearson" and "se_method" not in r
        assert close(float(r["chi2"]), chi2) and close(float(r["p"]), pv) and int(r["df"]) == dof
        assert float(r["cramers_v"]) == pytest.approx(js["stats"]["cramers_v"], rel=1e-12)
        for k, v in js["association"].items():
            assert (r[k] == "") if v is None else float(r[k]) == pytest.approx(v, rel=1e-12), k


R_DEFF = r"""
suppressMessages(library(survey))
args <- commandArgs(trailingOnly=TRUE)
d <- read.csv(args[1]); out <- args[2]
des <- svydesign(ids=~P, strata=~S, weights=~W, data=d, nest=TRUE)
rows <- list()
add <- function(what, key, est, se=NA, lo=NA, hi=NA, extra=NA)
  rows[[length(rows) + 1]] <<- data.frame(what=what, key=key, est=est, se=se, lo=lo, hi=hi, extra=extra)
dd <- function(x, y) c(deff(x)[[1]], deff(y)[[1]])
for (g in sort(unique(d$G))) {
  sub <- subset(des, G == g)
  x <- dd(svymean(~Y, sub, deff=TRUE), svymean(~Y, sub, deff="replace"))
  add("mean", g, x[1], x[2])
  f <- as.formula(paste0("~as.numeric(G == ", g, ")"))
  x <- dd(svymean(f, des, deff=TRUE), svymean(f, des, deff="replace")); add("freq_pct", g, x[1], x[2])
  x <- dd(svytotal(f, des, deff=TRUE), svytotal(f, des, deff="replace")); add("freq_w", g, x[1], x[2])
  for (h in sort(unique(d$H))) {
    fh <- as.formula(paste0("~as.numeric(H == ", h, ")"))
    x <- dd(svymean(fh, sub, deff=TRUE), svymean(fh, sub, deff="replace")); add("row_pct", paste0(g, "_", h), x[1], x[2])
  }
}
x <- dd(svymean(~Y, des, deff=TRUE), svymean(~Y, des, deff="replace")); add("mean", "Total", x[1], x[2])
write.csv(do.call(rbind, rows), out, row.names=FALSE)
"""


def test_taylor_deff_with_zero_weights_matches_r(tmp_path):
    """Records of weight 0 under a Taylor design: R counts only records of
    non-zero weight in each domain's SRS size; microtab gave no deff at all
    for the whole table. Now every deff and deft is R's."""
    rng = random.Random(21)
    lines = ["S,P,W,G,H,Y"]
    for s in range(1, 5):
        for p in range(1, 4):
            for _ in range(rng.randint(3, 6)):
                w = 0 if rng.random() < 0.2 else rng.randint(10, 90) / 10
                lines.append(f"{s},{p},{w},{rng.randint(1, 3)},{rng.randint(1, 2)},{rng.randint(0, 50)}")
    path = write(tmp_path / "z.csv", "\n".join(lines) + "\n")
    assert sum(1 for l in lines[1:] if l.split(",")[2] == "0") >= 5
    ds = tmp_path / "z.mtab"
    run("import", path, ds)
    run("design", ds, "--weight", "W", "--strata", "S", "--cluster", "P")
    want = r_rows(tmp_path, R_DEFF, [path, tmp_path / "r_out.csv"])

    def check(u, key):
        deff, deft2 = want[key][:2]
        assert u["deff"] is not None and close(u["deff"], deff), (key, u, deff)
        assert close(u["deft"] ** 2, deft2), (key, u, deft2)

    m = run_json("means", ds, "Y", "--by", "G")
    assert m["weight_cases"]["zero"] > 0
    for g in m["groups"]:
        check(g["mean_se"], ("mean", str(g["by"][0]["value"])))
    check(m["total_se"], ("mean", "Total"))
    f = run_json("freq", ds, "G")
    for r in f["rows"]:
        check(r["percent_se"], ("freq_pct", str(r["value"])))
        check(r["weighted_se"], ("freq_w", str(r["value"])))
    t = run_json("tab", ds, "G", "H", "--pct", "row")["tables"][0]
    for i, rv in enumerate(t["rows"]):
        for j, cv in enumerate(t["cols"]):
            check(t["pct_se"][i][j], ("row_pct", f"{rv['value']}_{cv['value']}"))
