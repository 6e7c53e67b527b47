"""Quantiles where the cumulative weight lands exactly on p: every record
of a stratum has the same weight in R's apistrat (pw = 15.1000003814697 for
the 50 high schools) and apiclus1, so half the weight is reached exactly
at a record, which float rounding put one ulp short (the median was the
next value: 641 where the rule gives 635). The oracle is R's rule
(qrule "math": the smallest value whose cumulative weight reaches p of
the total) in exact arithmetic, and by hand: a constant weight of any
scale gives the unweighted quantiles."""

import csv as csvmod
import math
from fractions import Fraction

import pytest

from conftest import run, run_json, write

def exact_rule(pairs, p):
    """The smallest value whose cumulative weight reaches p of the total,
    in exact arithmetic (weights as the CSV writes them)."""
    pairs = sorted((y, w) for y, w in pairs if w != 0)
    total = sum(w for _, w in pairs)
    cum = Fraction(0)
    for y, w in pairs:
        cum += w
        if cum >= Fraction(str(p)) * total:
            return y
    return pairs[-1][0]


@pytest.mark.parametrize("kind", ["strat", "clus"])
def test_quantiles_at_exact_ties_follow_the_rule_exactly(api, kind):
    # R's own answer at such ties is decided by its float sums (and the
    # data's row order: apistrat's elementary schools' 90th percentile is
    # 845 in R's order, 847 in the CSV's), so the oracle is the rule in
    # exact arithmetic; away from ties the medians and their Woodruff
    # intervals are checked against R in test_taylor.py.
    csv = api["dir"] / ("strat.csv" if kind == "strat" else "clus.csv")
    with open(csv) as f:
        rows = list(csvmod.DictReader(f))
    got = run_json("means", api[kind], "api00", "--by", "stype", "--median", "--percentile", "10,90")
    seen = 0
    for g in got["groups"]:
        k = str(g["by"][0]["value"])
        pairs = [(float(r["api00"]), Fraction(r["pw"])) for r in rows if r["stype"] == k]
        for q in g["quantiles"]:
            assert q["value"] == exact_rule(pairs, q["p"]), (kind, k, q)
            seen += 1
    assert seen == 9


@pytest.mark.parametrize("w", ["0.1", "0.3", "1.1", "15.1000003814697", "33.847"])
def test_a_constant_weight_gives_the_unweighted_quantiles(tmp_path, w):
    # 610 records of values 1..610 (one group; the second has its first
    # 50); by hand the p-quantile of n equal weights is the ceil(p*n)-th
    # smallest value.
    lines = ["G,Y,W"] + [f"1,{i + 1},{w}" for i in range(610)] + [f"2,{i + 1},{w}" for i in range(50)]
    ds = tmp_path / "c.mtab"
    run("import", write(tmp_path / "c.csv", "\n".join(lines) + "\n"), ds)
    plain = run_json("means", ds, "Y", "--by", "G", "--median", "--percentile", "10,25,75,90")
    weighted = run_json("means", ds, "Y", "--by", "G", "--median", "--percentile", "10,25,75,90",
                        "--weight", "W")
    for a, b in zip(plain["groups"], weighted["groups"]):
        g = a["by"][0]["value"]
        ys = list(range(1, 611 if g == 1 else 51))
        for qa, qb in zip(a["quantiles"], b["quantiles"]):
            by_hand = ys[max(1, math.ceil(round(qa["p"] * len(ys), 9))) - 1]
            assert qa["value"] == by_hand and qb["value"] == by_hand, (w, g, qa, qb, by_hand)
