"""Crosses of wide code ranges most of whose values never occur (PUMA by
BPL): the planner keeps only the values that occur and counts a table of
many cells in one lane a cell (issue 33). Every answer against DuckDB over
the same CSV: counts, weight sums and means per cell, with filters, a
control, missing values as categories, and over a catalog of parts (each
part compacted to its own values)."""

import os
import random

import duckdb
import pytest

from conftest import answer_cells as answer, approx, run, run_json

ROWS = 30_000
B_MISSING = 1999


@pytest.fixture(scope="module")
def wide(tmp_path_factory):
    """A: 150 codes spread over 100–9000, 2% empty; B: 300 codes over
    1–2000 and the user-missing code 1999 (1%); C: 1–3; W: a weight with
    two decimals; X: an income-like value; F: a float weight."""
    d = tmp_path_factory.mktemp("widex")
    rng = random.Random(33)
    a_codes = rng.sample(range(100, 9001), 150)
    b_codes = rng.sample(range(1, 1999), 300)
    csv = d / "w.csv"
    with open(csv, "w") as f:
        f.write("A,B,C,W,X,F\n")
        for _ in range(ROWS):
            a = "" if rng.random() < 0.02 else rng.choice(a_codes)
            b = B_MISSING if rng.random() < 0.01 else rng.choice(b_codes)
            w = f"{rng.randint(100, 9999) / 100:.2f}"
            x, fw = rng.randint(-5000, 250000), rng.random() * 10
            f.write(f"{a},{b},{rng.randint(1, 3)},{w},{x},{fw!r}\n")
    ds = d / "w.mtab"
    run("import", csv, ds, "--missing", f"B={B_MISSING}")
    con = duckdb.connect()
    con.execute("CREATE TABLE w AS SELECT * FROM read_csv(?, header=true, "
                "types={'W': 'DECIMAL(18,2)', 'A': 'INTEGER'})", [str(csv)])
    return ds, con


def oracle(con, dims, where, weighted, include_missing=False, mean=False):
    conds = list(where)
    if not include_missing:
        conds += [f"{x} IS NOT NULL" for x in dims]
        conds += [f"B <> {B_MISSING}" for x in dims if x == "B"]
    cols = ", ".join(dims)
    if mean:
        v = "sum(W::DOUBLE * X) / sum(W::DOUBLE)" if weighted else "avg(X::DOUBLE)"
    else:
        v = "sum(W)::DOUBLE" if weighted else "NULL"
    sql = f"SELECT {cols}, count(*), {v} FROM w"
    if conds:
        sql += " WHERE " + " AND ".join(conds)
    rows = con.execute(sql + " GROUP BY ALL").fetchall()
    return {tuple(r[: len(dims)]): (r[len(dims)], r[len(dims) + 1]) for r in rows}


def same(got, exp, what):
    assert set(got) == set(exp), what
    for k, (n, v) in exp.items():
        assert got[k][0] == n, (what, k)
        if v is None:
            assert got[k][1] is None, (what, k)
        else:
            assert got[k][1] == approx(v), (what, k, got[k][1], v)


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("flt", [None, ("C=2", "C = 2"), ("X(0-100000) C!=3", "X BETWEEN 0 AND 100000 AND C <> 3")])
def test_wide_cross_matches_duckdb(wide, weighted, flt):
    ds, con = wide
    args = ["tab", ds, "A", "B"] + (["--weight", "W"] if weighted else [])
    args += ["--filter", flt[0]] if flt else []
    # 8,901 × 2,000 planned codes (17.8 M cells, over the default limit of
    # 1 M) are 150 × 300 that occur: no --max-cells needed.
    got = answer(run_json(*args), "tab")
    same(got, oracle(con, ["A", "B"], [flt[1]] if flt else [], weighted), args)


def test_wide_cross_with_a_float_weight(wide):
    ds, con = wide
    got = answer(run_json("tab", ds, "A", "B", "--weight", "F"), "tab")
    exp = con.execute("SELECT A, B, count(*), sum(F) FROM w WHERE A IS NOT NULL "
                      f"AND B <> {B_MISSING} GROUP BY ALL").fetchall()
    same(got, {(r[0], r[1]): (r[2], r[3]) for r in exp}, "float weight")


def test_wide_cross_with_missing_categories(wide):
    """Empty A and B's missing code are categories of their own."""
    ds, con = wide
    res = run_json("tab", ds, "A", "B", "--weight", "W", "--include-missing")
    got = answer(res, "tab")
    exp = oracle(con, ["A", "B"], [], True, include_missing=True)
    assert any(k[0] is None for k in exp) and any(k[1] == B_MISSING for k in exp)
    same(got, exp, "include-missing")


def test_wide_means_and_control(wide):
    ds, con = wide
    got = answer(run_json("means", ds, "X", "--by", "A,B", "--weight", "W"), "means")
    same(got, oracle(con, ["A", "B"], [], True, mean=True), "means by A,B")
    # A control over the cross: one table per C.
    res = run_json("tab", ds, "A", "B", "--control", "C")
    exp = oracle(con, ["C", "A", "B"], [], False)
    got = {}
    for t in res["tables"]:
        c = t["control"]["value"]
        for i, rv in enumerate(t["rows"]):
            for j, cv in enumerate(t["cols"]):
                if t["counts"][i][j]:
                    got[(c, rv["value"], cv["value"])] = (t["counts"][i][j], None)
    same(got, exp, "control")


def test_wide_cross_over_parts(wide, tmp_path):
    """Each part keeps its own values; the catalog's answer is the
    whole's, and DuckDB's."""
    ds, con = wide
    cat = tmp_path / "cat"
    run("split", ds, cat, "--parts", "3")
    got = answer(run_json("tab", cat, "A", "B", "--weight", "W"), "tab")
    same(got, oracle(con, ["A", "B"], [], True), "catalog")


@pytest.fixture(scope="module")
def many(tmp_path_factory):
    """400,000 records (13 morsels) over the same kind of wide cross: A 150
    codes over 100–9000, B 300 over 1–2000 (45,000 cells, one lane a
    cell), D 1–20 to filter by, W a weight with two decimals, F a float
    weight, G an integer weight with the user-missing code 9999 (3%)."""
    import numpy as np

    d = tmp_path_factory.mktemp("widemany")
    rng = np.random.default_rng(3301)
    n = 400_000
    a = rng.choice(np.array(random.Random(1).sample(range(100, 9001), 150)), n)
    b = rng.choice(np.array(random.Random(2).sample(range(1, 1999), 300)), n)
    dd = rng.integers(1, 21, n)
    w = rng.integers(100, 999_999, n)
    f = rng.random(n) * 10
    g = np.where(rng.random(n) < 0.03, 9999, rng.integers(1, 501, n))
    csv = d / "m.csv"
    with open(csv, "w") as out:
        out.write("A,B,D,W,F,G\n")
        for ai, bi, di, wi, fi, gi in zip(a.tolist(), b.tolist(), dd.tolist(), w.tolist(), f.tolist(), g.tolist()):
            out.write(f"{ai},{bi},{di},{wi // 100}.{wi % 100:02d},{fi!r},{gi}\n")
    ds = d / "m.mtab"
    run("import", csv, ds, "--missing", "G=9999")
    con = duckdb.connect()
    con.execute("CREATE TABLE m AS SELECT * FROM read_csv(?, header=true, "
                "types={'W': 'DECIMAL(18,2)', 'F': 'DOUBLE'})", [str(csv)])
    return ds, con


# Selections of the wide cross against its 45,000 cells, whose counts are
# first listed by row and added into the cells once the rows of a worker
# (or of two merged) pass half the cells (22,500): few in each worker and
# merged (D=1: ~20,000 in all), few in each but many merged (D(1-2):
# ~20,000 a worker of two), many in each (D(1-3)), and every record.
@pytest.mark.parametrize("threads", ["1", "2"])
@pytest.mark.parametrize("flt", [
    ("D=1 A<3000", "D = 1 AND A < 3000"),
    ("D=1", "D = 1"),
    ("D(1-2)", "D BETWEEN 1 AND 2"),
    ("D(1-3)", "D BETWEEN 1 AND 3"),
    None,
])
@pytest.mark.parametrize("weight", [None, "W", "F", "G"])
def test_wide_cross_few_and_many_rows_over_threads(many, threads, flt, weight):
    """Counts and weight sums per cell, and the categories kept, against
    DuckDB: the rows a worker lists and those it adds into its cells must
    give one answer, merged across workers."""
    ds, con = many
    args = ["tab", ds, "A", "B"] + (["--weight", weight] if weight else [])
    args += ["--filter", flt[0]] if flt else []
    res = run_json(*args, env={**os.environ, "RAYON_NUM_THREADS": threads})
    conds = [flt[1]] if flt else []
    if weight == "G":
        conds.append("G <> 9999")
    v = f"sum({weight})::DOUBLE" if weight else "NULL"
    sql = f"SELECT A, B, count(*), {v} FROM m"
    if conds:
        sql += " WHERE " + " AND ".join(conds)
    exp = {(r[0], r[1]): (r[2], r[3]) for r in con.execute(sql + " GROUP BY ALL").fetchall()}
    same(answer(res, "tab"), exp, args)
    # The table keeps exactly the codes some counted record has, in order.
    t = res["tables"][0]
    assert [r["value"] for r in t["rows"]] == sorted({k[0] for k in exp})
    assert [c["value"] for c in t["cols"]] == sorted({k[1] for k in exp})
    assert sum(map(sum, t["counts"])) == sum(n for n, _ in exp.values())
