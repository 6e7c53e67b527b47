"""Zone maps (per-stripe smallest and largest value) let a scan skip the
stripes no row of which passes a filter, and drop the filter where every
row passes. On sorted and clustered columns — ids, years, states, text
codes, a variable with nulls and a missing code confined to some stripes —
random filters whose bounds fall on, beside and between stripe boundaries
must give DuckDB's answer, for tab, freq and means, one filter or several,
and over a pattern of parts."""

import os
import random

import duckdb
import pytest

from conftest import answer_cells as answer, approx, between, run, run_json, write

STRIPE = 32768
ROWS = 6 * STRIPE + 4321


@pytest.fixture(scope="module")
def sorted_ds(tmp_path_factory):
    d = tmp_path_factory.mktemp("zones")
    rng = random.Random(7)
    lines = ["ID,YEAR,STATE,X,NAME,G,W"]
    names = ["Alabama", "Alaska", "Arizona", "Ohio", "Texas", "Utah"]
    for i in range(ROWS):
        stripe = i // STRIPE
        year = 2015 + stripe  # one year per stripe, the last two share 2021
        if stripe >= 6:
            year = 2020
        state = 1 + i * 50 // ROWS
        # X: plain values in stripes 0-1, nulls only in stripe 2, the
        # missing code -1 among values in stripe 3, values beside it later.
        if stripe == 2:
            x = ""
        elif stripe == 3 and i % 5 == 0:
            x = "-1"
        elif stripe == 4 and i % 9 == 0:
            x = ""
        else:
            x = str(stripe * 1000 + (i % 700))
        name = names[min(i * len(names) // ROWS, len(names) - 1)]
        g = rng.randint(1, 6)
        w = f"{rng.randint(50, 5000) / 100:.2f}"
        lines.append(f"{i + 1},{year},{state},{x},{name},{g},{w}")
    csv = write(d / "sorted.csv", "\n".join(lines) + "\n")
    ds = d / "sorted.mtab"
    run("import", csv, ds, "--missing", "X=-1")
    con = duckdb.connect()
    con.execute(
        "CREATE TABLE t AS SELECT * FROM read_csv(?, header=true, sample_size=-1, "
        "types={'W': 'DECIMAL(18,2)', 'NAME': 'VARCHAR'})",
        [str(csv)],
    )
    return ds, con


def random_filter(rng):
    k = rng.randrange(9)
    if k >= 7:
        # G is random in every stripe: no zone map settles it, so a morsel
        # whose ID or YEAR range passes whole still tests G (the plan
        # keeping only the filters its zone maps leave open).
        a = rng.randint(1, 6)
        return between("G", a, rng.randint(a, 6))
    edge = rng.choice([0, 1, -1, 17]) + STRIPE * rng.randint(0, 6)
    if k == 0:
        a = max(1, edge)
        b = a + rng.choice([0, 5, STRIPE - 1, STRIPE, 3 * STRIPE])
        return between("ID", a, b)
    if k == 1:
        return f"ID>{edge}", f"ID > {edge}"
    if k == 2:
        ys = sorted(rng.sample(range(2014, 2022), rng.randint(1, 3)))
        return f"YEAR({','.join(map(str, ys))})", f"YEAR IN ({','.join(map(str, ys))})"
    if k == 3:
        a = rng.randint(0, 5000)
        b = a + rng.randint(0, 2500)
        return between("X", a, b, " AND X <> -1")
    if k == 4:
        v = rng.randint(-2, 6000)
        return f"X<{v}", f"X < {v} AND X <> -1"
    if k == 5:
        # (A name no record has is an error, not an empty answer: test_recode.py.)
        n = rng.choice(["Alaska", "Ohio", "Utah"])
        op = rng.choice(["=", "!="])
        return f"NAME{op}{n}", f"NAME {'=' if op == '=' else '<>'} '{n}'"
    a = rng.randint(1, 50)
    return f"STATE({a}-*)", f"STATE >= {a}"


def oracle(con, kind, dims, fs, weighted):
    conds = [f[1] for f in fs] + [f"{d} IS NOT NULL" for d in dims]
    cols = ", ".join(dims)
    if kind == "means":
        conds += ["X IS NOT NULL", "X <> -1"]
        w = "W::DOUBLE" if weighted else "1.0"
        sql = f"SELECT {cols}, count(*), sum({w} * X) / sum({w}) FROM t"
    else:
        w = "sum(W)::DOUBLE" if weighted else "NULL"
        sql = f"SELECT {cols}, count(*), {w} FROM t"
    rows = con.execute(f"{sql} WHERE {' AND '.join(conds)} GROUP BY ALL").fetchall()
    return {tuple(r[: len(dims)]): (r[len(dims)], None if r[len(dims) + 1] is None else float(r[len(dims) + 1]))
            for r in rows}


def queries(n, seed):
    rng = random.Random(seed)
    for _ in range(n):
        kind = rng.choice(["tab", "freq", "means"])
        dims = {"tab": ["G", "YEAR"], "freq": [rng.choice(["G", "NAME", "STATE"])], "means": ["G"]}[kind]
        fs = [random_filter(rng) for _ in range(rng.randint(1, 3))]
        yield kind, dims, fs, rng.random() < 0.6


def args_of(ds, kind, dims, fs, weighted):
    a = [kind, str(ds)] + (["X", "--by", ",".join(dims)] if kind == "means" else dims)
    if weighted:
        a += ["--weight", "W"]
    return a + ["--filter", " ".join(f[0] for f in fs)]


def check(got, exp, args):
    assert set(got) == set(exp), args
    for key, (n, v) in exp.items():
        assert got[key][0] == n, (args, key)
        g = got[key][1]
        assert (g is None) == (v is None) and (v is None or g == approx(v)), (args, key, g, v)


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_filters_on_sorted_columns_match_duckdb(sorted_ds, seed):
    ds, con = sorted_ds
    for kind, dims, fs, weighted in queries(30, seed):
        args = args_of(ds, kind, dims, fs, weighted)
        check(answer(run_json(*args), kind), oracle(con, kind, dims, fs, weighted), args)


def test_edges_by_hand(sorted_ds):
    """Filters that skip everything, pass everything, or cut one row off
    a stripe's end; the read paths agree."""
    ds, con = sorted_ds
    cases = [
        ("ID(0-0)", "ID = 0"),  # below every zone: nothing
        (f"ID>{ROWS}", f"ID > {ROWS}"),
        (f"ID(1-{ROWS})", "TRUE"),  # every stripe passes whole
        (f"ID({STRIPE}-{STRIPE + 1})", f"ID BETWEEN {STRIPE} AND {STRIPE + 1}"),
        ("X(2000-2699)", "X BETWEEN 2000 AND 2699"),  # the stripe of nulls only
        ("X(-5-5000)", "X BETWEEN -5 AND 5000 AND X <> -1"),  # passes stripes 0-1 whole, not 3
        ("YEAR(2020) X<9999", "YEAR = 2020 AND X < 9999 AND X <> -1"),
        ("NAME=Alaska", "NAME = 'Alaska'"),
    ]
    for f, sql in cases:
        exp = oracle(con, "tab", ["G", "YEAR"], [(f, sql)], True)
        for path in ("inline", "mmap", "pread"):
            args = ["tab", str(ds), "G", "YEAR", "--weight", "W", "--filter", f]
            res = run_json(*args, env={**os.environ, "MICROTAB_READ_PATH": path})
            check(answer(res, "tab"), exp, (args, path))


def test_parts_of_sorted_dataset(sorted_ds, tmp_path):
    """Two copies as parts: counts and weighted sums exactly doubled.
    (Whole-dataset subsets: a copied directory is the same dataset, id and
    all, and is refused as counted twice.)"""
    ds, _ = sorted_ds
    for name in ("a", "b"):
        run("subset", ds, tmp_path / f"{name}.mtab")
    for kind, dims, fs, weighted in queries(10, 9):
        one = answer(run_json(*args_of(ds, kind, dims, fs, weighted)), kind)
        two = answer(run_json(*args_of(f"{tmp_path}/*.mtab", kind, dims, fs, weighted)), kind)
        assert set(one) == set(two)
        for key, (n, v) in one.items():
            assert two[key][0] == 2 * n
            if kind != "means" and v is not None:
                assert two[key][1] == 2 * v
