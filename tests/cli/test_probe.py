"""The inline scan probes a morsel's filters before it reads the morsel's
other columns (issue 33): filter columns are read one at a time, the
filter that passed fewest rows first; a morsel no row of which passes is
dropped; once few rows pass, the other filters are evaluated at those
rows only and the kernel counts values unpacked one by one. Every answer
against DuckDB over the same CSV, on 1 and 2 threads, for the kernels a
table or a mean can take."""

import os
import random

import duckdb
import pytest

from conftest import answer_cells as answer, approx, run, run_json

# Thirteen morsels of 32 Ki rows, the last one short.
ROWS = 400_000
X_MISSING = 9999999


@pytest.fixture(scope="module")
def probed(tmp_path_factory):
    """P: 3,000 codes (u16, packed); G: 1–9; H: 500 codes of 1–900; A:
    0–95; X: an income with the missing code 9999999 (2%); W: a weight with
    two decimals; F: a float in [0, 1); Z: 1 in the rows of morsels 3 to
    5 only (1%), else 0, so that most morsels pass none of Z=1 while the
    zone maps settle none of them."""
    d = tmp_path_factory.mktemp("probe")
    rng = random.Random(3301)
    h_codes = rng.sample(range(1, 901), 500)
    csv = d / "p.csv"
    with open(csv, "w") as f:
        f.write("P,G,H,A,X,W,F,Z\n")
        for i in range(ROWS):
            x = X_MISSING if rng.random() < 0.02 else rng.randint(-5000, 250000)
            z = int(3 * 32768 <= i < 6 * 32768 and rng.random() < 0.01)
            f.write(
                f"{rng.randint(1, 3000)},{rng.randint(1, 9)},{rng.choice(h_codes)},"
                f"{rng.randint(0, 95)},{x},{rng.randint(100, 9999) / 100:.2f},"
                f"{rng.random()!r},{z}\n"
            )
    ds = d / "p.mtab"
    run("import", csv, ds, "--missing", f"X={X_MISSING}")
    con = duckdb.connect()
    con.execute(
        "CREATE TABLE p AS SELECT * FROM read_csv(?, header=true, "
        "types={'W': 'DECIMAL(18,2)', 'F': 'DOUBLE'})",
        [str(csv)],
    )
    return ds, con


# (microtab filter, SQL): a first filter that leaves few rows and others
# evaluated at those rows; filters no record passes; dense filters; one
# selective filter; a column whose rows pass in three morsels only;
# missing codes; a float filter; a filter on a grouping variable.
FILTERS = [
    ("P(17,2001,2999) A(20-40)", "P IN (17, 2001, 2999) AND A BETWEEN 20 AND 40"),
    (
        "P(17,2001,2999) A(1-8) X(100000-101000)",
        "P IN (17, 2001, 2999) AND A BETWEEN 1 AND 8 AND X BETWEEN 100000 AND 101000",
    ),
    ("A(20-40) X(10000-50000)", "A BETWEEN 20 AND 40 AND X BETWEEN 10000 AND 50000"),
    ("X(100000-100300)", "X BETWEEN 100000 AND 100300"),
    ("P(1-1500) Z=1", "P BETWEEN 1 AND 1500 AND Z = 1"),
    ("Z=1 X(0-200000)", "Z = 1 AND X BETWEEN 0 AND 200000"),
    ("P(5-60) F<0.3", "P BETWEEN 5 AND 60 AND F < 0.3"),
    ("G(2,3) P(17-80,2001,2999)", "G IN (2, 3) AND (P BETWEEN 17 AND 80 OR P IN (2001, 2999))"),
    ("H(5-40) A(0-200)", "H BETWEEN 5 AND 40"),
]

# (arguments, dims, measure, weight): the fused counts kernel (byte
# codes), a u16 dimension, weighted means (exact and float weights), and
# a two-way table of a u16 code.
KERNELS = [
    (["tab", "G", "Z"], ["G", "Z"], None, None),
    (["freq", "H", "--weight", "W"], ["H"], None, "W"),
    (["means", "X", "--by", "G", "--weight", "W"], ["G"], "X", "W"),
    (["means", "X", "--by", "H,G", "--weight", "F"], ["H", "G"], "X", "F"),
    (["tab", "H", "G", "--weight", "W"], ["H", "G"], None, "W"),
]


def oracle(con, dims, measure, weight, where):
    conds = [where] + [f"{d} IS NOT NULL" for d in dims]
    if measure:
        conds.append(f"{measure} <> {X_MISSING}")
        if weight:
            v = f"sum({weight}::DOUBLE * {measure}) / sum({weight}::DOUBLE)"
        else:
            v = f"avg({measure}::DOUBLE)"
    else:
        v = f"sum({weight})::DOUBLE" if weight else "NULL"
    cols = ", ".join(dims)
    sql = f"SELECT {cols}, count(*), {v} FROM p WHERE {' AND '.join(conds)} GROUP BY ALL"
    return {tuple(r[: len(dims)]): (r[len(dims)], r[len(dims) + 1]) for r in con.execute(sql).fetchall()}


@pytest.mark.parametrize("threads", ["1", "2"])
@pytest.mark.parametrize("flt", FILTERS, ids=[f[0] for f in FILTERS])
@pytest.mark.parametrize("kernel", range(len(KERNELS)))
def test_probed_filters_match_duckdb(probed, threads, flt, kernel):
    ds, con = probed
    args, dims, measure, weight = KERNELS[kernel]
    cmd = [args[0], ds, *args[1:], "--filter", flt[0]]
    res = run_json(*cmd, env={**os.environ, "RAYON_NUM_THREADS": threads})
    kind = args[0]
    exp = oracle(con, dims, measure, weight, flt[1])
    got = answer(res, kind)
    if kind == "means":
        # Groups with no record are listed with N 0 or left out.
        got = {k: v for k, v in got.items() if v[0]}
    assert set(got) == set(exp), cmd
    for k, (n, v) in exp.items():
        assert got[k][0] == n, (cmd, k)
        if v is None:
            assert got[k][1] is None, (cmd, k)
        else:
            assert got[k][1] == approx(v), (cmd, k, got[k][1], v)
