"""Random query shapes against DuckDB: freq, tab and means over 1–3
grouping variables (u8 and u16 codes, a wide one), weighted or not, with
0–3 filters of every kind (ranges, comparisons, lists, on u8/u16/u32/i32
and the analysis variable itself), on the 200k-row census — every planner
path (fused byte and u16 kernels, gathered rows, selection column,
dropped filters, rank dictionary) against an oracle that shares no code.
The same queries over a pattern of two copies of the dataset must give
twice the counts and sums (exact partial results)."""

import json
import random

import pytest

from conftest import INCTOT_NA, answer_cells as answer, approx, between, run, run_json

DIMS = ["SEX", "EDUC", "RACE", "OCC", "IND", "STATEFIP", "MARST", "EMPSTAT", "AGE"]


def random_filter(rng):
    k = rng.randrange(7)
    if k == 0:
        a = rng.randint(0, 90)
        b = rng.randint(a, 95)
        return between("AGE", a, b)
    if k == 1:
        a = rng.randint(0, 900)
        b = a + rng.randint(0, 300)
        return between("OCC", a, b)
    if k == 2:
        v = rng.randint(0, 200000)
        return f"INCWAGE>{v}", f"INCWAGE > {v}"
    if k == 3:
        v = rng.randint(-5000, 300000)
        return f"INCTOT<{v}", f"INCTOT < {v} AND INCTOT <> {INCTOT_NA}"
    if k == 4:
        v = rng.randint(1, 60)
        return f"UHRSWORK({v}-*)", f"UHRSWORK >= {v}"
    if k == 5:
        return f"INCTOT<{INCTOT_NA}", f"INCTOT <> {INCTOT_NA}"
    vals = sorted(rng.sample(range(1, 10), 3))
    return f"RACE({','.join(map(str, vals))})", f"RACE IN ({','.join(map(str, vals))})"


def shapes(n, seed):
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        kind = rng.choice(["tab", "means", "freq"])
        k = 1 if kind == "freq" else (rng.randint(1, 2) if kind == "means" else 2)
        dims = rng.sample(DIMS, k)
        fs = [random_filter(rng) for _ in range(rng.randint(0, 3))]
        out.append((kind, dims, fs, rng.random() < 0.6))
    return out


def args_of(ds, kind, dims, fs, weighted):
    a = [kind, ds]
    a += ["INCTOT", "--by", ",".join(dims)] if kind == "means" else dims
    if weighted:
        a += ["--weight", "PERWT"]
    if fs:
        a += ["--filter", " ".join(f[0] for f in fs)]
    return a


def close(a, b):
    return a is None and b is None or a is not None and b is not None and a == approx(b)


@pytest.mark.parametrize("seed", [1, 2])
def test_random_shapes_match_duckdb(census, seed):
    for kind, dims, fs, weighted in shapes(30, seed):
        args = args_of(census.ds, kind, dims, fs, weighted)
        got = answer(run_json(*args), kind)
        conds = [f[1] for f in fs] + [f"{d} IS NOT NULL" for d in dims]
        cols = ", ".join(dims)
        if kind == "means":
            conds.append(f"INCTOT <> {INCTOT_NA}")
            w = "PERWT::DOUBLE" if weighted else "1.0"
            sql = f"SELECT {cols}, count(*), sum({w} * INCTOT) / sum({w}) FROM census"
        else:
            w = "sum(PERWT)::DOUBLE" if weighted else "NULL"
            sql = f"SELECT {cols}, count(*), {w} FROM census"
        rows = census.q(f"{sql} WHERE {' AND '.join(conds)} GROUP BY ALL")
        exp = {tuple(r[: len(dims)]): (r[len(dims)], r[len(dims) + 1]) for r in rows}
        assert set(got) == set(exp), args
        for key, (n, v) in exp.items():
            assert got[key][0] == n, (args, key)
            assert close(got[key][1], v), (args, key, got[key][1], v)


def test_random_shapes_over_two_parts(census, tmp_path):
    parts = tmp_path / "parts"
    parts.mkdir()
    # Whole-dataset subsets (a copied directory is one dataset, refused).
    for name in ("a", "b"):
        run("subset", census.ds, parts / f"{name}.mtab")
    for kind, dims, fs, weighted in shapes(20, 3):
        one = answer(run_json(*args_of(census.ds, kind, dims, fs, weighted)), kind)
        two = answer(run_json(*args_of(f"{parts}/*.mtab", kind, dims, fs, weighted)), kind)
        assert set(one) == set(two)
        for key, (n, v) in one.items():
            assert two[key][0] == 2 * n
            if kind == "means":
                assert two[key][1] == approx(v)
            elif v is not None:
                # Integer (implied-decimal) sums: exactly twice.
                assert two[key][1] == 2 * v
