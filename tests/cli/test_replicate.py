"""`microtab replicate`: replicate weights built from a dataset's Taylor
design, checked against R `survey`'s `as.svrepdesign` (survey 4.1.1):

* jk1, jkn, brr and fay: every analysis replicate weight, record by record,
  to 1e-9 relative of R's `weights(rdes, "analysis")`; the scale, the
  rscales and the rank (R's `degf()` + 1); and the SEs of totals (weighted
  counts), a mean and a regression coefficient through `microtab freq`,
  `means` and `regress` to 1e-6 of R's with `mse = TRUE` (apiclus1,
  apistrat, a 4-strata × 2-PSU toy, R's string order of strata, strata of
  four PSUs split in pairs, the Hadamard matrices of several sizes, the
  lonely-PSU options);
* bootstrap (Rao–Wu, R's subbootstrap): the invariants (per stratum and
  replicate the counts sum to n_h − 1, factors count · n_h/(n_h − 1), same
  seed the same weights, another seed others), the SEs given R the same
  replicate weights (`svrepdesign(type = "bootstrap", scale = 1/(R − 1))`),
  and 2000 replicates against the Taylor SE;
* sdr: the identity of Fay & Train (variance of a total = ½ Σ of squared
  successive differences, circular within strata) computed with numpy, and
  R given microtab's replicate weights;
* errors, and a kill -9 during a run that leaves the dataset as it was.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from conftest import BIN, assert_one_error, read_column_file, run, run_json, write

R_HEAD = r"""
suppressMessages(library(survey))
f17 <- function(x) sprintf("%.17g", x)
"""

# Writes R's api data with 17 significant digits (R's float32-valued
# weights exactly), for microtab and the oracle alike.
R_API = R_HEAD + r"""
data(api)
a <- commandArgs(trailingOnly=TRUE)
w <- function(d, f) {
  for (n in names(d)) if (is.double(d[[n]])) d[[n]] <- f17(d[[n]])
  write.csv(d, f, row.names=FALSE, quote=FALSE)
}
k <- c("snum", "stype", "dnum", "fpc", "pw", "api00", "ell", "meals")
w(apiclus1[, k], file.path(a[1], "clus.csv"))
w(apistrat[, k], file.path(a[1], "strat.csv"))
"""

# The oracle of one case: the CSV, the design and the replicate design in
# R's words; the analysis weights (records × replicates) and the facts.
R_CASE = R_HEAD + r"""
a <- commandArgs(trailingOnly=TRUE)
d <- read.csv(a[1], stringsAsFactors=FALSE)
%(pre)s
des <- %(design)s
r <- %(rep)s
r$mse <- TRUE
A <- weights(r, "analysis")
write.csv(apply(A, 2, f17), a[2], row.names=FALSE, quote=FALSE)
t <- svytotal(~factor(%(group)s), r)
m <- svymean(~%(y)s, r)
g <- suppressWarnings(svyglm(%(y)s ~ %(x)s, design=r))
ty <- svytotal(~factor(%(group)s), des)
facts <- list(scale=f17(r$scale), rscales=f17(r$rscales), degf=f17(degf(r)),
  total_names=sub("^factor\\(.*\\)", "", names(coef(t))), total=f17(coef(t)), total_se=f17(SE(t)),
  mean=f17(coef(m)), mean_se=f17(SE(m)), coef=f17(coef(g)[["%(x)s"]]), coef_se=f17(SE(g)[["%(x)s"]]),
  taylor_total_se=f17(SE(ty)))
writeLines(jsonlite::toJSON(facts), a[3])
"""


def fill(text: str, **kw) -> str:
    """`text` with each `%(key)s` replaced by its value (R code holds `%`)."""
    for k, v in kw.items():
        text = text.replace(f"%({k})s", str(v))
    return text


def rscript(path: Path, text: str, *args):
    path.write_text(text)
    p = subprocess.run(["Rscript", str(path), *map(str, args)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return p


@pytest.fixture(scope="module")
def apidir(tmp_path_factory):
    d = tmp_path_factory.mktemp("apirep")
    rscript(d / "api.R", R_API, d)
    return d


def manifest(ds: Path) -> dict:
    return json.loads((ds / "manifest.json").read_text())


def columns(ds: Path, names) -> np.ndarray:
    """The stored values of `names` (records × names), read from the files."""
    m = manifest(ds)
    by = {v["name"]: v for v in m["variables"]}
    return np.column_stack([read_column_file(ds / by[n]["file"], by[n], m["rows"]).astype(float) for n in names])


def r_case(tmp: Path, csv: Path, design: str, rep: str, group: str, y: str, x: str, pre: str = ""):
    """R's analysis weights and facts of one case."""
    out_w, out_f = tmp / "r_weights.csv", tmp / "r_facts.json"
    rscript(tmp / "case.R", fill(R_CASE, design=design, rep=rep, group=group, y=y, x=x, pre=pre),
            csv, out_w, out_f)
    weights = np.loadtxt(out_w, delimiter=",", skiprows=1, ndmin=2, dtype=float)
    facts = json.loads(out_f.read_text())
    return weights, {k: [float(v) if k != "total_names" else v for v in vs] for k, vs in facts.items()}


def import_design(tmp: Path, csv: Path, *design_args, name="d") -> Path:
    ds = tmp / f"{name}.mtab"
    run("import", csv, ds)
    run("design", ds, *design_args)
    return ds


def rel(a, b):
    a, b = np.asarray(a, float), np.asarray(b, float)
    return np.max(np.abs(a - b) / np.maximum(np.abs(b), 1e-300)) if a.size else 0.0


def check_against_r(tmp, ds, csv, rep_args, design, rep, group, y, x, pre=""):
    """microtab's replicate weights and SEs against R's (see the module's
    doc); returns microtab's stderr report."""
    p = run("replicate", ds, *rep_args)
    want, facts = r_case(tmp, csv, design, rep, group, y, x, pre)
    d = manifest(ds)["design"]
    reps = d["replicates"]
    assert d.get("taylor") is None and reps["mse"] is True
    got = columns(ds, reps["weights"])
    assert got.shape == want.shape, (got.shape, want.shape)
    # Record by record: zeros exactly, the rest to 1e-9 relative.
    assert np.array_equal(got == 0, want == 0)
    nz = want != 0
    assert rel(got[nz], want[nz]) < 1e-9
    assert reps["scale"] == pytest.approx(facts["scale"][0], rel=1e-12)
    assert reps["rscales"] == pytest.approx(facts["rscales"], rel=1e-12)
    assert reps["rank"] == facts["degf"][0] + 1
    # SEs under the new design, as every query uses it.
    f = run_json("freq", ds, group)
    se = {str(r["value"] if r["label"] is None else r["label"]): r["weighted_se"]["se"] for r in f["rows"]}
    tot = {str(r["value"] if r["label"] is None else r["label"]): r["weighted"] for r in f["rows"]}
    for k, t, s in zip(facts["total_names"], facts["total"], facts["total_se"]):
        # (A stratum's count has no variance under JKn: its SE is rounding, ~1e-11.)
        assert tot[k] == pytest.approx(t, rel=1e-9)
        assert se[k] == pytest.approx(s, rel=1e-6, abs=1e-12 * abs(t)), (k, se[k], s)
    m = run_json("means", ds, y)
    assert m["design"]["method"] == "replicate" and m["design"]["df"] == facts["degf"][0]
    assert m["total_se"]["se"] == pytest.approx(facts["mean_se"][0], rel=1e-6)
    g = run_json("regress", ds, f"{y} ~ {x}")
    c = next(c for c in g["coefficients"] if c["term"] == x)
    assert c["estimate"] == pytest.approx(facts["coef"][0], rel=1e-9)
    assert c["se"] == pytest.approx(facts["coef_se"][0], rel=1e-6)
    return p.stderr, facts


# --------------------------------------------------------------- jk1, jkn


@pytest.mark.parametrize("fpc", [True, False])
def test_jk1_on_apiclus1_matches_r(tmp_path, apidir, fpc):
    csv = apidir / "clus.csv"
    extra = ["--fpc", "fpc"] if fpc else []
    ds = import_design(tmp_path, csv, "--weight", "pw", "--cluster", "dnum", *extra)
    err, facts = check_against_r(
        tmp_path, ds, csv, ["--type", "jk1"],
        f"svydesign(id=~dnum, weights=~pw, data=d{', fpc=~fpc' if fpc else ''})",
        'as.svrepdesign(des, type="JK1")', "stype", "api00", "ell")
    # T22 of docs/research/weighting-r-survey.md.
    assert facts["scale"][0] == pytest.approx((757 - 15) / 757 * 14 / 15 if fpc else 14 / 15, rel=1e-15)
    assert "15 jk1 replicates from 15 PSUs" in err and "pw_REP1 … pw_REP15" in err
    names = manifest(ds)["design"]["replicates"]["weights"]
    assert names == [f"pw_REP{i}" for i in range(1, 16)]
    # A public-use file: the PSU codes and FPC dropped, the same SEs.
    se = run_json("means", ds, "api00")["total_se"]["se"]
    run("drop", ds, "dnum", "fpc")
    assert run_json("means", ds, "api00")["total_se"]["se"] == pytest.approx(se, rel=1e-12)
    assert se == pytest.approx(facts["mean_se"][0], rel=1e-6)


@pytest.mark.parametrize("fpc", [True, False])
def test_jkn_on_apistrat_matches_r(tmp_path, apidir, fpc):
    csv = apidir / "strat.csv"
    extra = ["--fpc", "fpc"] if fpc else []
    ds = import_design(tmp_path, csv, "--weight", "pw", "--strata", "stype", *extra)
    _, facts = check_against_r(
        tmp_path, ds, csv, ["--type", "jkn", "--prefix", "JK"],
        f"svydesign(id=~1, strata=~stype, weights=~pw, data=d{', fpc=~fpc' if fpc else ''})",
        'as.svrepdesign(des, type="JKn")', "stype", "api00", "ell")
    if fpc:
        # T23: the rscales of stratum E.
        assert facts["rscales"][0] == pytest.approx((4421 - 100) / 4421 * 99 / 100, rel=1e-15)
    # Strata in order of first appearance (E, M, H), 200 replicates.
    assert len(manifest(ds)["design"]["replicates"]["weights"]) == 200


def test_jkn_clustered_with_text_strata_matches_r(tmp_path, apidir):
    """apiclus1 with its districts as PSUs inside school-type strata (text),
    PSUs nested in strata (a district in two strata is two PSUs)."""
    csv = apidir / "clus.csv"
    ds = import_design(tmp_path, csv, "--weight", "pw", "--strata", "stype", "--cluster", "dnum",
                       "--lonely-psu", "remove")
    check_against_r(tmp_path, ds, csv, ["--type", "jkn"],
                    "svydesign(id=~dnum, strata=~stype, weights=~pw, data=d, nest=TRUE)",
                    'as.svrepdesign(des, type="JKn")', "stype", "api00", "ell",
                    pre='options(survey.lonely.psu="remove")')


TINY = "st,psu,w,y,x,grp\n" + "\n".join(
    f"{s},{p},{w},{y},{x},{g}" for s, p, w, y, x, g in zip(
        [1, 1, 1, 2, 2, 3, 3, 3], [1, 2, 3, 4, 4, 5, 6, 7], [10, 10, 10, 20, 20, 5, 5, 5],
        range(1, 9), [3, 1, 4, 1, 5, 9, 2, 6], list("abababab"))) + "\n"


@pytest.mark.parametrize("lonely", ["certainty", "remove", "adjust", "average"])
def test_jkn_lonely_psu_options_match_r(tmp_path, lonely):
    """T23's design: stratum 2 has one PSU; each option as R's compressed
    jknweights (adjust: one replicate deleting the lonely PSU, the others
    weighted strata/(strata − 1); average: the scale PSUs/replicates)."""
    csv = write(tmp_path / "tiny.csv", TINY)
    ds = import_design(tmp_path, csv, "--weight", "w", "--strata", "st", "--cluster", "psu",
                       "--lonely-psu", lonely)
    err, facts = check_against_r(
        tmp_path, ds, csv, ["--type", "jkn"],
        "svydesign(id=~psu, strata=~st, weights=~w, data=d)", 'as.svrepdesign(des, type="JKn")',
        "grp", "y", "x", pre=f'options(survey.lonely.psu="{lonely}")')
    assert len(facts["rscales"]) == (7 if lonely == "adjust" else 6)
    if lonely == "average":
        assert facts["scale"][0] == pytest.approx(7 / 6, rel=1e-15)
    if lonely in ("certainty", "remove", "average"):
        assert "1 stratum has a single PSU" in err


# --------------------------------------------------------------- brr, fay

TOY = "st,psu,w,y,x,grp\n" + "\n".join(
    f"{s},{p},{w},{y},{x},{g}" for s, p, w, y, x, g in zip(
        np.repeat([1, 2, 3, 4], 4), np.repeat(range(1, 9), 2), np.repeat([10, 12, 8, 6], 4),
        [3, 5, 2, 8, 6, 4, 7, 1, 9, 2, 5, 3, 4, 6, 8, 2],
        [1, 4, 2, 2, 5, 3, 1, 6, 2, 7, 3, 3, 8, 1, 4, 5], list("abcabcabcabcabca"))) + "\n"


@pytest.mark.parametrize("kind,rho", [("brr", None), ("fay", 0.5), ("fay", 0.3)])
def test_brr_and_fay_on_the_toy_match_r(tmp_path, kind, rho):
    """T24: 4 strata × 2 PSUs, R's 8 × 8 Hadamard matrix; the BRR (any ρ)
    variance of a total equals the Taylor with-replacement one."""
    csv = write(tmp_path / "toy.csv", TOY)
    ds = import_design(tmp_path, csv, "--weight", "w", "--strata", "st", "--cluster", "psu")
    args = ["--type", kind] + (["--fay-rho", str(rho)] if rho is not None else [])
    rtype = 'type="BRR"' if kind == "brr" else f'type="Fay", fay.rho={rho}'
    err, facts = check_against_r(tmp_path, ds, csv, args,
                                 "svydesign(id=~psu, strata=~st, weights=~w, data=d)",
                                 f"as.svrepdesign(des, {rtype})", "grp", "y", "x")
    assert len(facts["rscales"]) == 8
    assert facts["total_se"] == pytest.approx(facts["taylor_total_se"], rel=1e-9)
    if rho:
        assert f"rho {rho}" in err


def test_brr_strata_in_string_order_and_pairs_split_match_r(tmp_path):
    """T31's order ("10" < "2" < "9"), PSUs of a stratum in order of
    appearance, and a stratum of four PSUs split into two pairs (placed
    before the strata of two, as R's brrweights does)."""
    rows = [(9, 51), (9, 50), (2, 21), (2, 20), (10, 11), (10, 10), (7, 74), (7, 71), (7, 73), (7, 72),
            (9, 51), (2, 20)]
    text = "st,psu,w,y,x,grp\n" + "\n".join(
        f"{s},{p},{1 + i % 3},{(i * 7) % 5 + 1},{i % 4},{'ab'[i % 2]}" for i, (s, p) in enumerate(rows)) + "\n"
    csv = write(tmp_path / "order.csv", text)
    ds = import_design(tmp_path, csv, "--weight", "w", "--strata", "st", "--cluster", "psu")
    check_against_r(tmp_path, ds, csv, ["--type", "brr"],
                    "svydesign(id=~psu, strata=~st, weights=~w, data=d)", 'as.svrepdesign(des, type="BRR")',
                    "grp", "y", "x")


@pytest.mark.parametrize("pairs", [3, 13, 26, 34, 49, 61])
def test_brr_hadamard_sizes_match_r(tmp_path, pairs):
    """R's Hadamard matrices of several sizes: Sylvester (4, 64), the
    precooked 16, 28 and 36, a Paley (52 → 56: R's choice, not 52) and a
    doubled Paley (62 → 64)."""
    rng = np.random.default_rng(pairs)
    lines = ["st,psu,w,y,x,grp"]
    for s in range(pairs):
        for p in range(2):
            for _ in range(2):
                lines.append(f"S{s:03d},{s * 2 + p},{rng.integers(1, 9)},{rng.integers(0, 50)},"
                             f"{rng.integers(0, 9)},{'ab'[rng.integers(0, 2)]}")
    csv = write(tmp_path / "h.csv", "\n".join(lines) + "\n")
    ds = import_design(tmp_path, csv, "--weight", "w", "--strata", "st", "--cluster", "psu")
    _, facts = check_against_r(tmp_path, ds, csv, ["--type", "brr"],
                               "svydesign(id=~psu, strata=~st, weights=~w, data=d)",
                               'as.svrepdesign(des, type="BRR")', "grp", "y", "x")
    assert facts["total_se"] == pytest.approx(facts["taylor_total_se"], rel=1e-9)


# --------------------------------------------------------------- bootstrap

R_GIVEN = R_HEAD + r"""
a <- commandArgs(trailingOnly=TRUE)
d <- read.csv(a[1], stringsAsFactors=FALSE)
rw <- d[, grep(paste0("^", a[3], "[0-9]+$"), names(d))]
rw <- rw[, order(as.integer(sub(a[3], "", names(rw))))]
R <- ncol(rw)
r <- %(rep)s
t <- svytotal(~factor(%(group)s), r); m <- svymean(~%(y)s, r)
g <- suppressWarnings(svyglm(%(y)s ~ %(x)s, design=r))
des <- %(taylor)s
tt <- svytotal(~factor(%(group)s), des); tm <- svymean(~%(y)s, des)
writeLines(jsonlite::toJSON(list(total_names=sub("^factor\\(.*\\)", "", names(coef(t))),
  total_se=f17(SE(t)), mean_se=f17(SE(m)), coef_se=f17(SE(g)[["%(x)s"]]), degf=f17(degf(r)),
  taylor_total_se=f17(SE(tt)), taylor_mean_se=f17(SE(tm)))), a[2])
"""


def with_columns(tmp: Path, csv: Path, ds: Path, names) -> Path:
    """The CSV with microtab's replicate weights appended (17 digits)."""
    lines = csv.read_text().splitlines()
    got = columns(ds, names)
    out = [lines[0] + "," + ",".join(names)]
    for line, row in zip(lines[1:], got):
        out.append(line + "," + ",".join(repr(float(v)) for v in row))
    return write(tmp / "with_reps.csv", "\n".join(out) + "\n")


def r_given(tmp, csv, prefix, rep, taylor, group, y, x):
    out = tmp / "given.json"
    rscript(tmp / "given.R", fill(R_GIVEN, rep=rep, taylor=taylor, group=group, y=y, x=x), csv, out, prefix)
    return {k: [float(v) if k != "total_names" else v for v in vs] for k, vs in json.loads(out.read_text()).items()}


def check_ses(ds, facts, group, y, x):
    f = run_json("freq", ds, group)
    se = {str(r["value"] if r["label"] is None else r["label"]): r["weighted_se"]["se"] for r in f["rows"]}
    for k, s in zip(facts["total_names"], facts["total_se"]):
        assert se[k] == pytest.approx(s, rel=1e-6), (k, se[k], s)
    m = run_json("means", ds, y)
    assert m["total_se"]["se"] == pytest.approx(facts["mean_se"][0], rel=1e-6)
    g = run_json("regress", ds, f"{y} ~ {x}")
    c = next(c for c in g["coefficients"] if c["term"] == x)
    assert c["se"] == pytest.approx(facts["coef_se"][0], rel=1e-6)
    return m


def psu_factors(ds, csv_rows, strata, psu, weight, names):
    """{(stratum, psu): factors per replicate} from the stored replicate
    weights ÷ the weight, checked the same for every record of a PSU."""
    got = columns(ds, names)
    out = {}
    for row, reps in zip(csv_rows, got):
        key = (row[strata], row[psu])
        f = reps / float(row[weight])
        if key in out:
            assert np.allclose(out[key], f, rtol=1e-12, atol=0)
        out[key] = f
    return out


def read_rows(csv: Path):
    import csv as csvmod
    with open(csv) as f:
        return list(csvmod.DictReader(f))


def test_bootstrap_invariants_and_r_given_the_weights(tmp_path, apidir):
    """Rao–Wu on apistrat-like strata with clusters (apiclus1's districts
    inside school types): counts per stratum and replicate sum to n_h − 1,
    factors are count · n_h/(n_h − 1); same seed → same weights, another
    seed → others; R given the weights agrees on the SEs."""
    csv = apidir / "clus.csv"
    ds = import_design(tmp_path, csv, "--weight", "pw", "--strata", "stype", "--cluster", "dnum",
                       "--lonely-psu", "remove")
    p = run("replicate", ds, "--type", "bootstrap", "--replicates", "40", "--seed", "7")
    assert "seed 7" in p.stderr
    d = manifest(ds)["design"]["replicates"]
    assert d["type"] == "bootstrap" and d["scale"] == pytest.approx(1 / 39, rel=1e-15)
    assert d["rscales"] == [1.0] * 40
    rows = read_rows(csv)
    fac = psu_factors(ds, rows, "stype", "dnum", "pw", d["weights"])
    by_stratum = {}
    for (s, _), f in fac.items():
        by_stratum.setdefault(s, []).append(f)
    assert len(by_stratum) == 3
    for s, fs in by_stratum.items():
        fs = np.array(fs)                       # PSUs × replicates
        n = len(fs)
        if n == 1:                              # a lonely PSU (remove): factor 1
            assert np.all(fs == 1)
            continue
        counts = fs * (n - 1) / n
        assert np.allclose(counts, np.round(counts), atol=1e-9) and counts.min() >= 0
        assert np.all(np.round(counts).sum(axis=0) == n - 1), s
    first = columns(ds, d["weights"])
    # The same seed again: the same weights; another seed: others.
    ds2 = import_design(tmp_path, csv, "--weight", "pw", "--strata", "stype", "--cluster", "dnum",
                        "--lonely-psu", "remove", name="again")
    run("replicate", ds2, "--type", "bootstrap", "--replicates", "40", "--seed", "7")
    assert np.array_equal(columns(ds2, d["weights"]), first)
    ds3 = import_design(tmp_path, csv, "--weight", "pw", "--strata", "stype", "--cluster", "dnum",
                        "--lonely-psu", "remove", name="other")
    run("replicate", ds3, "--type", "bootstrap", "--replicates", "40", "--seed", "8")
    assert not np.array_equal(columns(ds3, d["weights"]), first)
    # R given microtab's replicate weights.
    given = with_columns(tmp_path, csv, ds, d["weights"])
    facts = r_given(tmp_path, given, "pw_REP",
                    'svrepdesign(data=d, weights=~pw, repweights=rw, type="bootstrap", scale=1/(R-1), '
                    'rscales=1, combined.weights=TRUE, mse=TRUE)',
                    "svydesign(id=~dnum, strata=~stype, weights=~pw, data=d, nest=TRUE)", "stype", "api00", "ell")
    m = check_ses(ds, facts, "stype", "api00", "ell")
    assert d["rank"] == facts["degf"][0] + 1 and m["design"]["df"] == facts["degf"][0]


@pytest.mark.parametrize("strat", [False, True])
def test_bootstrap_with_many_replicates_is_near_taylor(tmp_path, apidir, strat):
    """2000 Rao–Wu replicates: the SEs of a mean and of totals within 5% of
    the Taylor (with-replacement) ones R gives (T25: 909357.8 vs 907398.7
    with R's bootstrap)."""
    csv = apidir / ("strat.csv" if strat else "clus.csv")
    args = ["--strata", "stype"] if strat else ["--cluster", "dnum"]
    ds = import_design(tmp_path, csv, "--weight", "pw", *args)
    run("replicate", ds, "--type", "bootstrap", "--replicates", "2000")
    d = manifest(ds)["design"]["replicates"]
    given = with_columns(tmp_path, csv, ds, d["weights"])
    taylor = ("svydesign(id=~1, strata=~stype, weights=~pw, data=d)" if strat
              else "svydesign(id=~dnum, weights=~pw, data=d)")
    facts = r_given(tmp_path, given, "pw_REP",
                    'svrepdesign(data=d, weights=~pw, repweights=rw, type="bootstrap", scale=1/(R-1), '
                    'rscales=1, combined.weights=TRUE, mse=TRUE)', taylor, "stype", "api00", "ell")
    m = check_ses(ds, facts, "stype", "api00", "ell")
    assert d["rank"] == facts["degf"][0] + 1
    assert m["total_se"]["se"] == pytest.approx(facts["taylor_mean_se"][0], rel=0.05)
    for a, b in zip(facts["total_se"], facts["taylor_total_se"]):
        assert a == pytest.approx(b, rel=0.05)


# --------------------------------------------------------------- sdr


def sd_variance(z_by_stratum):
    """Fay & Train's successive-difference variance of a total, circular
    within each stratum: Σ_h ½ Σ_j (z_hj − z_h,j+1)², z_h,n+1 = z_h1."""
    return sum(0.5 * np.sum((z - np.roll(z, -1)) ** 2) for z in z_by_stratum)


@pytest.mark.parametrize("strat", [False, True])
def test_sdr_variance_of_a_total_is_the_successive_difference_formula(tmp_path, strat):
    """With more replicates than PSUs every PSU has its own rows, so the
    SDR variance of a total (4/R Σ_r (t_r − t)²) is exactly the circular
    successive-difference estimator over the PSUs in order of appearance
    (T28), computed here with numpy from the data."""
    rng = np.random.default_rng(11)
    n = 30
    st = np.repeat(["B", "A", "C"], [12, 10, 8]) if strat else np.repeat(["A"], n)
    psu = np.arange(n) // 2          # pairs of records; strata change at even records
    w = rng.uniform(5, 15, n).round(3)
    y = rng.integers(0, 20, n)
    x = rng.integers(0, 9, n)
    g = rng.choice(["a", "b", "c"], n)
    text = "st,psu,w,y,x,grp\n" + "\n".join(f"{a},{b},{c},{d},{e},{f}" for a, b, c, d, e, f in zip(st, psu, w, y, x, g)) + "\n"
    csv = write(tmp_path / "sdr.csv", text)
    dargs = ["--cluster", "psu"] + (["--strata", "st"] if strat else [])
    ds = import_design(tmp_path, csv, "--weight", "w", *dargs)
    p = run("replicate", ds, "--type", "sdr")
    d = manifest(ds)["design"]["replicates"]
    units = len(set(zip(st, psu)))
    assert len(d["weights"]) - 1 >= units and "note:" not in p.stderr
    assert d["type"] == "sdr" and d["scale"] == pytest.approx(4 / len(d["weights"]), rel=1e-15)
    f = run_json("freq", ds, "grp")
    for r in f["rows"]:
        z = w * (g == r["value"])
        # PSU totals in order of first appearance, per stratum in order of first appearance.
        groups = []
        for s in dict.fromkeys(st):
            keys = list(dict.fromkeys(psu[st == s]))
            groups.append(np.array([z[(st == s) & (psu == k)].sum() for k in keys]))
        want = np.sqrt(sd_variance(groups))
        assert r["weighted_se"]["se"] == pytest.approx(want, rel=1e-9), r["value"]
    # R given the weights: the mean's and the coefficient's SEs too.
    given = with_columns(tmp_path, csv, ds, d["weights"])
    facts = r_given(tmp_path, given, "w_REP",
                    'svrepdesign(data=d, weights=~w, repweights=rw, type="successive-difference", '
                    'combined.weights=TRUE, mse=TRUE)',
                    "svydesign(id=~psu, weights=~w, data=d)", "grp", "y", "x")
    check_ses(ds, facts, "grp", "y", "x")
    assert d["rank"] == facts["degf"][0] + 1


def test_sdr_with_more_psus_than_rows_cycles_and_says_so(tmp_path, apidir):
    """200 records as PSUs and 12 replicates: rows reused in turn (the
    ACS's way), noted; R given the weights agrees on the SEs."""
    csv = apidir / "strat.csv"
    ds = import_design(tmp_path, csv, "--weight", "pw")
    p = run("replicate", ds, "--type", "sdr", "--replicates", "12")
    assert "200 PSUs share the 11 usable rows" in p.stderr
    d = manifest(ds)["design"]["replicates"]
    given = with_columns(tmp_path, csv, ds, d["weights"])
    facts = r_given(tmp_path, given, "pw_REP",
                    'svrepdesign(data=d, weights=~pw, repweights=rw, type="successive-difference", '
                    'combined.weights=TRUE, mse=TRUE)', "svydesign(id=~1, weights=~pw, data=d)",
                    "stype", "api00", "ell")
    check_ses(ds, facts, "stype", "api00", "ell")
    # The rank, as R's degf() + 1 (rows used in turn make it fewer than 12).
    assert d["rank"] == facts["degf"][0] + 1 < 12
    # Every factor is 1 or 1 ± 2^(−1/2).
    fac = columns(ds, d["weights"]) / np.array([float(r["pw"]) for r in read_rows(csv)])[:, None]
    assert np.allclose(np.min(np.abs(fac[..., None] - np.array([1 - 2 ** -0.5, 1, 1 + 2 ** -0.5])), axis=-1), 0, atol=1e-12)


# --------------------------------------------------------------- errors


def test_errors_name_the_facts(tmp_path, apidir):
    toy = write(tmp_path / "toy.csv", TOY)
    # No design at all: nothing to take the weight from.
    ds = tmp_path / "nodesign.mtab"
    run("import", toy, ds)
    assert_one_error(run("replicate", ds, "--type", "bootstrap", ok=False), "no survey design")
    # JK1 on a stratified design; JKn/BRR/Fay on an unstratified one.
    ds = import_design(tmp_path, toy, "--weight", "w", "--strata", "st", "--cluster", "psu", name="strat")
    assert_one_error(run("replicate", ds, "--type", "jk1", ok=False), "jk1 replicates are for an unstratified design",
                     "4 strata of st", "jkn")
    ds_u = import_design(tmp_path, toy, "--weight", "w", "--cluster", "psu", name="unstrat")
    for t in ("jkn", "brr", "fay"):
        assert_one_error(run("replicate", ds_u, "--type", t, ok=False), f"{t} replicates need a stratified design",
                         "jk1, bootstrap or sdr")
    # BRR with a stratum of 3 PSUs (R: "Can't split with odd numbers of PSUs").
    lines = TOY.splitlines()
    lines[4] = lines[4].replace("1,2,", "1,9,", 1)
    odd = "\n".join(lines) + "\n"
    ds_odd = import_design(tmp_path, write(tmp_path / "odd.csv", odd), "--weight", "w", "--strata", "st",
                           "--cluster", "psu", name="odd")
    assert_one_error(run("replicate", ds_odd, "--type", "brr", ok=False), "stratum 1 of st has 3 PSUs")
    # A stratum of one PSU (set with remove): BRR refuses, bootstrap gives it factor 1.
    ds_l = import_design(tmp_path, write(tmp_path / "tiny.csv", TINY), "--weight", "w", "--strata", "st",
                         "--cluster", "psu", "--lonely-psu", "remove", name="lonely")
    assert_one_error(run("replicate", ds_l, "--type", "brr", ok=False), "stratum 2 of st has fewer than 2 PSUs")
    ds_a = import_design(tmp_path, write(tmp_path / "tiny2.csv", TINY), "--weight", "w", "--strata", "st",
                         "--cluster", "psu", "--lonely-psu", "adjust", name="adjust")
    assert_one_error(run("replicate", ds_a, "--type", "bootstrap", ok=False), "lonely-PSU option is adjust")
    # The lonely-PSU option fail is refused when the design is set (R: "Stratum2has only one PSU").
    p = run("design", tmp_path / "lonely.mtab", "--weight", "w", "--strata", "st", "--cluster", "psu", ok=False)
    assert "single PSU" in p.stderr
    # Names taken; --replace (after the Taylor design is set again).
    run("replicate", ds, "--type", "jkn")
    assert_one_error(run("replicate", ds, "--type", "jkn", ok=False), "already has 8 replicate weights")
    run("design", ds, "--weight", "w", "--strata", "st", "--cluster", "psu")
    assert_one_error(run("replicate", ds, "--type", "jkn", ok=False), "w_REP1 exists in the dataset", "--replace")
    run("replicate", ds, "--type", "brr", "--replace")
    assert manifest(ds)["design"]["replicates"]["type"] == "brr"
    run("design", ds, "--weight", "w", "--strata", "st", "--cluster", "psu")
    p1 = write(tmp_path / "p1.csv", TOY.replace("st,psu,", "st,P1,", 1))
    ds_p = import_design(tmp_path, p1, "--weight", "w", "--strata", "st", "--cluster", "P1", name="p1")
    assert_one_error(run("replicate", ds_p, "--type", "jkn", "--prefix", "P", "--replace", ok=False),
                     "P1 is part of the survey design")
    # Counts: fixed by the design; too many; no Hadamard matrix of that order.
    assert_one_error(run("replicate", ds, "--type", "jkn", "--prefix", "Q", "--replicates", "5", ok=False),
                     "jkn makes 8 replicates of this design", "not 5")
    assert_one_error(run("replicate", ds, "--type", "sdr", "--prefix", "Q", "--replicates", "52", ok=False),
                     "no Hadamard matrix of order 52", "48 or 56")
    assert_one_error(run("replicate", ds, "--type", "bootstrap", "--prefix", "Q", "--replicates", "1", ok=False),
                     "1 replicates: bootstrap makes from 2 to 10000")
    big = write(tmp_path / "big.csv", "w,y\n" + "".join(f"{1 + i % 3},{i % 7}\n" for i in range(1500)))
    ds_b = import_design(tmp_path, big, "--weight", "w", name="big")
    assert_one_error(run("replicate", ds_b, "--type", "jk1", ok=False), "1500 columns, more than 1000",
                     "bootstrap or SDR")
    # Fay's coefficient.
    assert_one_error(run("replicate", ds, "--type", "fay", "--fay-rho", "1", "--prefix", "Q", ok=False),
                     "rho must be above 0 and below 1")
    assert_one_error(run("replicate", ds, "--type", "brr", "--fay-rho", "0.5", "--prefix", "Q", ok=False),
                     "rho is Fay's coefficient")
    # A name that cannot be a variable.
    assert_one_error(run("replicate", ds, "--type", "jkn", "--prefix", "1x", ok=False), "cannot be a variable name")
    # Nothing of the refused runs was written.
    assert not any(v["name"].startswith(("Q", "1x")) for v in manifest(ds)["variables"])


def test_missing_weight_is_refused_naming_the_record(tmp_path):
    csv = write(tmp_path / "m.csv", "w,y\n1,2\n2,3\n,4\n3,5\n")
    ds = tmp_path / "m.mtab"
    run("import", csv, ds)
    # A design cannot be set on a missing weight either; R refuses NA weights too.
    p = run("design", ds, "--weight", "w", ok=None)
    if p.returncode == 0:
        assert_one_error(run("replicate", ds, "--type", "bootstrap", ok=False), "w", "record 3")
    else:
        assert "record 3" in p.stderr


def test_zero_weights_stay_zero_and_each_record_is_a_psu_without_clusters(tmp_path):
    """No strata or PSUs (R's id=~1): jk1 makes one replicate per record;
    records of weight 0 have replicate weights 0."""
    csv = write(tmp_path / "z.csv", "w,y,x,grp\n" + "".join(f"{(i % 4) * 2.5},{i % 5},{i % 3},{'ab'[i % 2]}\n"
                                                         for i in range(12)))
    ds = import_design(tmp_path, csv, "--weight", "w")
    check_against_r(tmp_path, ds, csv, ["--type", "jk1"], "svydesign(id=~1, weights=~w, data=d)",
                    'as.svrepdesign(des, type="JK1")', "grp", "y", "x")
    got = columns(ds, manifest(ds)["design"]["replicates"]["weights"])
    assert got.shape == (12, 12) and np.all(got[::4] == 0)


# --------------------------------------------------------------- kill


def test_kill_during_replicate_leaves_the_dataset_as_it_was(tmp_path):
    csv = tmp_path / "c.csv"
    run("gen", "census", "--rows", "1000000", "--seed", "3", "--strata", "--out", csv)
    ds = tmp_path / "c.mtab"
    run("import", csv, ds)
    run("design", ds, "--weight", "PERWT", "--strata", "STRATA", "--cluster", "SERIAL", "--lonely-psu", "remove")
    before = (ds / "manifest.json").read_bytes()
    answer = run_json("means", ds, "INCTOT")
    proc = subprocess.Popen([str(BIN), "replicate", str(ds), "--type", "bootstrap", "--replicates", "80"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.4)
    if proc.poll() is not None:  # pragma: no cover - a machine fast enough to finish first
        pytest.skip("replicate finished before it could be killed")
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    # Columns were being written (the run was past its checks).
    assert any(f.name.startswith("PERWT_REP") for f in (ds / "vars").iterdir())
    assert (ds / "manifest.json").read_bytes() == before
    run("verify", ds)
    again = run_json("means", ds, "INCTOT")
    # (The Taylor sums' order follows the threads: the last digit may differ.)
    assert again["design"] == answer["design"] and again["total"] == answer["total"]
    assert again["total_se"]["se"] == pytest.approx(answer["total_se"]["se"], rel=1e-12)
    # And a full run afterwards works.
    p = run("replicate", ds, "--type", "bootstrap", "--replicates", "4")
    assert "4 bootstrap replicates" in p.stderr
    run("verify", ds)
