"""means: weighted means and frequency-weight SDs vs numpy; unweighted vs
DuckDB avg/stddev_samp; user-missing INCTOT excluded."""

import json
import math
import os

import duckdb
import numpy as np
import pytest

from conftest import INCTOT_NA, approx, disp, make_dataset, run, run_json, same_dataset


def wstats(x, w):
    """Frequency-weight mean and SD: sqrt(Σw(x−m)² / (Σw − 1))."""
    sw = float(w.sum())
    m = float((w * x).sum() / sw)
    sd = math.sqrt(float((w * (x - m) ** 2).sum()) / (sw - 1)) if sw > 1 else None
    return m, sd, len(x), sw


def weighted_oracle(census, var, by, weight, extra=None):
    cols = ", ".join(f'"{b}"' for b in by)
    where = census.where(var, *by, weight=weight, extra=extra)
    arr = census.con.execute(
        f'SELECT {cols}, "{var}"::DOUBLE AS x, "{weight}"::DOUBLE AS w FROM census WHERE {where}'
    ).fetchnumpy()
    keys = list(zip(*[arr[b].tolist() for b in by]))
    x, w = np.asarray(arr["x"]), np.asarray(arr["w"])
    groups = {}
    idx = {}
    for i, k in enumerate(keys):
        idx.setdefault(k, []).append(i)
    for k, ii in idx.items():
        ii = np.array(ii)
        groups[k] = wstats(x[ii], w[ii])
    return dict(sorted(groups.items())), wstats(x, w)


def unweighted_oracle(census, var, by, extra=None):
    cols = ", ".join(f'"{b}"' for b in by)
    where = census.where(var, *by, extra=extra)
    rows = census.q(
        f'SELECT {cols}, avg("{var}"::DOUBLE), stddev_samp("{var}"::DOUBLE), count(*) '
        f"FROM census WHERE {where} GROUP BY ALL ORDER BY ALL")
    k = len(by)
    groups = {tuple(r[:k]): (r[k], r[k + 1], r[k + 2], None) for r in rows}
    m, sd, n = census.one(
        f'SELECT avg("{var}"::DOUBLE), stddev_samp("{var}"::DOUBLE), count(*) FROM census WHERE {where}')
    return groups, (m, sd, n, None)


def check_stat(got, exp, weighted):
    m, sd, n, sw = exp
    assert got["n"] == n
    assert got["mean"] == approx(m)
    if sd is None:
        assert got["sd"] is None
    else:
        assert got["sd"] == approx(sd)
    if weighted:
        assert got["sum_weights"] == approx(sw)
    else:
        assert got["sum_weights"] in (None, n, approx(float(n)))


def check_means(res, groups, total, weighted):
    got_keys = [tuple(disp(b) for b in g["by"]) for g in res["groups"]]
    assert got_keys == list(groups.keys())
    for g, exp in zip(res["groups"], groups.values()):
        check_stat(g, exp, weighted)
    check_stat(res["total"], total, weighted)


def test_means_inctot_by_educ_weighted(census):
    res = run_json("means", census.ds, "INCTOT", "--by", "EDUC", "--weight", "PERWT")
    assert same_dataset(res["dataset"], census.ds)
    assert res["variable"] == "INCTOT" and res["by"] == ["EDUC"]
    assert res["weight"] == "PERWT" and res["filter"] is None
    groups, total = weighted_oracle(census, "INCTOT", ["EDUC"], "PERWT")
    check_means(res, groups, total, weighted=True)


def test_means_inctot_by_educ_unweighted(census):
    res = run_json("means", census.ds, "INCTOT", "--by", "EDUC")
    assert res["weight"] is None
    groups, total = unweighted_oracle(census, "INCTOT", ["EDUC"])
    check_means(res, groups, total, weighted=False)


def test_means_excludes_inctot_code(census):
    res = run_json("means", census.ds, "INCTOT", "--by", "SEX")
    n_valid = census.one(
        f"SELECT count(*) FROM census WHERE INCTOT IS NOT NULL AND INCTOT <> {INCTOT_NA} "
        "AND SEX IS NOT NULL")[0]
    n_all = census.one("SELECT count(*) FROM census WHERE INCTOT IS NOT NULL AND SEX IS NOT NULL")[0]
    assert n_valid < n_all
    assert res["total"]["n"] == n_valid
    assert res["total"]["mean"] < INCTOT_NA / 10


@pytest.mark.parametrize("by", [["--by", "SEX,EDUC"], ["--by", "SEX", "--by", "EDUC"],
                                ["--by", "SEX EDUC"]])
def test_means_two_by_forms(census, by):
    res = run_json("means", census.ds, "AGE", *by, "--weight", "PERWT")
    assert res["by"] == ["SEX", "EDUC"]
    groups, total = weighted_oracle(census, "AGE", ["SEX", "EDUC"], "PERWT")
    check_means(res, groups, total, weighted=True)


def test_means_two_by_unweighted(census):
    res = run_json("means", census.ds, "UHRSWORK", "--by", "EMPSTAT,SEX")
    groups, total = unweighted_oracle(census, "UHRSWORK", ["EMPSTAT", "SEX"])
    check_means(res, groups, total, weighted=False)


def test_means_decimal_variable(census):
    """Mean of a 2-decimal variable (PERWT) — values used in decimal form."""
    res = run_json("means", census.ds, "PERWT", "--by", "SEX")
    groups, total = unweighted_oracle(census, "PERWT", ["SEX"])
    check_means(res, groups, total, weighted=False)


def test_means_filtered_weighted(census):
    res = run_json("means", census.ds, "INCTOT", "--by", "RACE", "--weight", "PERWT",
                   "--filter", "AGE(25-64) SEX(2)")
    assert res["filter"] == "AGE(25-64) SEX(2)"
    groups, total = weighted_oracle(census, "INCTOT", ["RACE"], "PERWT",
                                    extra="AGE BETWEEN 25 AND 64 AND SEX = 2")
    check_means(res, groups, total, weighted=True)


def test_means_hand_computed(tmp_path):
    """Hand data: missing analysis value, missing by, missing weight and a
    user-missing code are all excluded; a one-record group has sd null."""
    text = ("G,X,W\n"
            "1,10,1.00\n"
            "1,20,3.00\n"
            "1,,2.00\n"      # X missing
            "1,99,1.00\n"    # X user-missing
            "1,30,\n"        # W missing
            ",40,1.00\n"     # G missing
            "2,5,1.00\n"     # single record, weight 1 -> sd undefined
            "3,7,2.00\n"
            "3,9,2.00\n")
    _, ds = make_dataset(tmp_path, "m", text, "--missing", "X=99")
    res = run_json("means", ds, "X", "--by", "G", "--weight", "W")
    g = {disp(x["by"][0]): x for x in res["groups"]}
    assert list(g) == [1, 2, 3]
    # group 1: x=10 (w1), 20 (w3): m = 70/4 = 17.5; Σw(x-m)² = 56.25+18.75 = 75; sd = sqrt(75/3) = 5
    assert g[1]["n"] == 2 and g[1]["sum_weights"] == approx(4.0)
    assert g[1]["mean"] == approx(17.5) and g[1]["sd"] == approx(5.0)
    assert g[2]["n"] == 1 and g[2]["mean"] == approx(5.0) and g[2]["sd"] is None
    # group 3: m = 8, Σw(x-m)² = 2+2 = 4, sd = sqrt(4/3)
    assert g[3]["mean"] == approx(8.0) and g[3]["sd"] == approx(math.sqrt(4 / 3))
    # total: x=10,20,5,7,9 w=1,3,1,2,2: Σw=9, Σwx=10+60+5+14+18=107
    t = res["total"]
    m = 107 / 9
    ss = 1 * (10 - m) ** 2 + 3 * (20 - m) ** 2 + (5 - m) ** 2 + 2 * (7 - m) ** 2 + 2 * (9 - m) ** 2
    assert t["n"] == 5 and t["sum_weights"] == approx(9.0)
    assert t["mean"] == approx(m) and t["sd"] == approx(math.sqrt(ss / 8))

    res = run_json("means", ds, "X", "--by", "G")
    g = {disp(x["by"][0]): x for x in res["groups"]}
    # unweighted: the row with W missing still counts (no weight involved)
    assert g[1]["n"] == 3 and g[1]["mean"] == approx(20.0) and g[1]["sd"] == approx(10.0)
    assert g[2]["n"] == 1 and g[2]["sd"] is None
    assert res["total"]["n"] == 6


@pytest.mark.parametrize("weight", [[], ["--weight", "PERWT"]], ids=["unweighted", "weighted"])
def test_means_output_is_deterministic(big_census, weight):
    """The same query prints the same bytes every time (no dependence on how
    the work was split between threads) -- on 2M rows, i.e. several chunks --
    and the numbers are right (DuckDB on the same CSV)."""
    args = ["means", big_census.ds, "INCTOT", "--by", "EDUC", *weight, "--format", "json"]
    outs = {run(*args).stdout for _ in range(12)}
    res = json.loads(next(iter(outs)))
    w = "PERWT" if weight else "1"
    exp_mean, exp_n = duckdb.connect().execute(
        f"SELECT sum({w} * INCTOT::DOUBLE) / sum({w}), count(*) FROM read_csv(?, header=true) "
        f"WHERE INCTOT <> {INCTOT_NA} AND INCTOT IS NOT NULL AND EDUC IS NOT NULL "
        f"AND PERWT IS NOT NULL", [str(big_census.csv)]).fetchone() if weight else \
        duckdb.connect().execute(
        f"SELECT avg(INCTOT::DOUBLE), count(*) FROM read_csv(?, header=true) "
        f"WHERE INCTOT <> {INCTOT_NA} AND INCTOT IS NOT NULL AND EDUC IS NOT NULL",
        [str(big_census.csv)]).fetchone()
    assert res["total"]["n"] == exp_n
    assert res["total"]["mean"] == approx(exp_mean)
    assert len(outs) == 1, f"{len(outs)} different outputs in 12 runs of the same query"


def test_tab_and_freq_output_is_deterministic(big_census):
    for args in (["freq", big_census.ds, "EDUC", "--weight", "PERWT"],
                 ["tab", big_census.ds, "SEX", "EDUC", "--weight", "PERWT", "--stats", "--pct", "row"]):
        outs = {run(*args, "--format", "json").stdout for _ in range(8)}
        assert len(outs) == 1, f"{len(outs)} different outputs for {args[0]}"
    n = duckdb.connect().execute("SELECT count(*) FROM read_csv(?, header=true) WHERE EDUC IS NOT NULL "
                                 "AND PERWT IS NOT NULL", [str(big_census.csv)]).fetchone()[0]
    assert json.loads(next(iter(outs)))["tables"][0]["total"]["count"] == n


@pytest.mark.parametrize("xrange,wmax", [
    ((0, 200), 50),               # u8 values, small weights (fused kernel)
    ((-3000, 3000), 9000),        # i16 values with negatives (fused)
    ((-2_000_000, 2_000_000), 6000),    # i32 values (fused)
    ((-2_000_000, 2_000_000), 40_000_000),  # weights too large for the packed cells
], ids=["u8", "i16", "i32", "big-weights"])
def test_means_kernels_vs_numpy(tmp_path, xrange, wmax):
    """Every kernel path (fused means over byte codes with a filter, and the
    general one) on random data with nulls, a user-missing code and
    negative values, against numpy."""
    rng = np.random.default_rng(7)
    n = 120_000
    g = rng.integers(1, 6, n)
    h = rng.integers(0, 3, n)
    f = rng.integers(0, 10, n)
    x = rng.integers(xrange[0], xrange[1], n)
    w = rng.integers(1, wmax, n)
    code = xrange[1] - 1
    x[rng.random(n) < 0.1] = code
    xnull = rng.random(n) < 0.05
    lines = ["G,H,F,X,W"]
    for i in range(n):
        lines.append(f"{g[i]},{h[i]},{f[i]},{'' if xnull[i] else x[i]},{w[i]}")
    _, ds = make_dataset(tmp_path, "k", "\n".join(lines) + "\n", "--missing", f"X={code}")
    res = run_json("means", ds, "X", "--by", "G,H", "--weight", "W", "--filter", "F(2-7)")
    ok = (~xnull) & (x != code) & (f >= 2) & (f <= 7)
    groups = {}
    for gv in range(1, 6):
        for hv in range(3):
            sel = ok & (g == gv) & (h == hv)
            groups[(gv, hv)] = wstats(x[sel].astype(float), w[sel].astype(float))
    check_means(res, groups, wstats(x[ok].astype(float), w[ok].astype(float)), weighted=True)


@pytest.mark.parametrize("threads", ["1", "2"])
def test_fused_means_folded_across_morsels_match_exact_sums(tmp_path, threads):
    """Weights up to 2^21 and values up to 2^20 let the fused means kernel
    add only 15 morsels' packed sums before folding them (Σw per lane
    below 2^40), so 123 morsels fold several times mid-scan and once at
    each worker's end. Means, N and Σw against DuckDB's exact HUGEINT
    sums; the SD against the same sums in Decimal."""
    from decimal import Decimal, getcontext

    getcontext().prec = 80
    rng = np.random.default_rng(7)
    n = 4_000_000
    # Most records in one group and near the largest weight: a lane of
    # group 1 would pass 2^40 if its sums were not folded in time.
    g = np.where(rng.random(n) < 0.9, 1, rng.integers(2, 4, n))
    w = rng.integers(2**21 - 2**18, 2**21, n)
    w[:5000] = 0
    x = rng.integers(-(2**20), 2**20 + 1, n)
    x[5000:9000] = 2**20
    csv_path = tmp_path / "big.csv"
    np.savetxt(csv_path, np.column_stack([g, w, x]), fmt="%d", delimiter=",", header="G,W,X", comments="")
    ds = tmp_path / "big.mtab"
    run("import", csv_path, ds)
    env = {**os.environ, "RAYON_NUM_THREADS": threads}
    got = run_json("means", ds, "X", "--by", "G", "--weight", "W", env=env)
    rows = duckdb.sql(
        f"SELECT G, count(*), sum(W::HUGEINT), sum(W::HUGEINT * X), sum(W::HUGEINT * X * X) "
        f"FROM read_csv('{csv_path}') GROUP BY G ORDER BY G"
    ).fetchall()
    by_value = {grp["by"][0]["value"]: grp for grp in got["groups"]}
    assert sorted(by_value) == [1, 2, 3]
    for key, cnt, sw, swx, swxx in rows:
        grp = by_value[key]
        sw, swx, swxx = Decimal(sw), Decimal(swx), Decimal(swxx)
        mean = swx / sw
        sd = ((swxx - swx * swx / sw) / (sw - 1)).sqrt()
        assert grp["n"] == cnt
        assert grp["sum_weights"] == float(sw)
        assert grp["mean"] == pytest.approx(float(mean), rel=1e-14)
        assert grp["sd"] == pytest.approx(float(sd), rel=1e-12)
