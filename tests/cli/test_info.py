"""gen, info and codebook vs DuckDB on the generated CSV."""

import hashlib

import pytest

from conftest import CENSUS_ROWS, run, run_json, same_dataset

CENSUS_VARS = ["YEAR", "SERIAL", "PERNUM", "PERWT", "STATEFIP", "PUMA", "GQ", "SEX", "AGE",
               "MARST", "RACE", "HISPAN", "BPL", "CITIZEN", "EDUC", "EMPSTAT", "OCC", "IND",
               "UHRSWORK", "INCTOT", "INCWAGE", "POVERTY"]


def test_gen_rows_and_columns(census):
    assert census.one("SELECT count(*) FROM census")[0] == CENSUS_ROWS
    cols = [d[0] for d in census.con.execute("SELECT * FROM census LIMIT 0").description]
    assert set(CENSUS_VARS) <= set(cols)
    # PERWT written with exactly 2 decimals
    bad = census.con.execute(
        "SELECT count(*) FROM read_csv(?, header=true, all_varchar=true) "
        "WHERE NOT regexp_full_match(PERWT, '[0-9]+\\.[0-9]{2}')", [str(census.csv)]).fetchone()[0]
    assert bad == 0
    assert census.one("SELECT min(SEX), max(SEX) FROM census") == (1, 2)
    lo, hi = census.one("SELECT min(AGE), max(AGE) FROM census")
    assert 0 <= lo and hi <= 95
    assert census.one("SELECT count(*) FROM census WHERE INCTOT = 9999999")[0] > 0


def test_gen_deterministic(tmp_path, census):
    a, b, c = tmp_path / "a.csv", tmp_path / "b.csv", tmp_path / "c.csv"
    run("gen", "census", "--rows", 3000, "--seed", 7, "--out", a)
    run("gen", "census", "--rows", 3000, "--seed", 7, "--out", b)
    run("gen", "census", "--rows", 3000, "--seed", 8, "--out", c)
    h = [hashlib.sha256(p.read_bytes()).hexdigest() for p in (a, b, c)]
    assert h[0] == h[1] != h[2]
    assert len(a.read_text().splitlines()) == 3001


def test_info_json(census):
    info = run_json("info", census.ds)
    assert same_dataset(info["dataset"], census.ds)
    assert info["rows"] == CENSUS_ROWS
    assert info["generation"] >= 1
    assert info["bytes"] >= sum(v["bytes"] for v in info["variables"]) > 0
    for v in info["variables"]:
        width = {"8": 1, "16": 2, "32": 4, "64": 8}.get(v["type"][1:])
        if v.get("packing"):
            # bit-packed: 128 bytes per bit of width per 1024-row block
            assert v["bytes"] == -(-CENSUS_ROWS // 1024) * 128 * v["packing"]["bits"]
        elif width:
            assert v["bytes"] == CENSUS_ROWS * width
        assert "top" not in v


def test_info_csv_and_table(census):
    out = run("info", census.ds, "--format", "csv").stdout
    lines = out.splitlines()
    assert any("EDUC" in line for line in lines)
    out = run("info", census.ds).stdout
    for name in CENSUS_VARS:
        assert name in out
    assert f"{CENSUS_ROWS}" in out.replace(",", "").replace("_", "")


@pytest.mark.parametrize("top", [3, 10])
def test_codebook_top(census, top):
    cb = run_json("codebook", census.ds, "EDUC", "AGE", "--top", top)
    assert [v["name"] for v in cb["variables"]] == ["EDUC", "AGE"]
    for v in cb["variables"]:
        name = v["name"]
        counts = dict(census.q(f"SELECT {name}, count(*) FROM census WHERE {name} IS NOT NULL GROUP BY 1"))
        exp = sorted(counts.values(), reverse=True)[:top]
        assert [t["count"] for t in v["top"]] == exp
        for t in v["top"]:
            assert counts[t["value"]] == t["count"]
        mn, mx = census.one(f"SELECT min({name}), max({name}) FROM census")
        assert v["min"] == mn and v["max"] == mx


def test_codebook_all_variables(census):
    cb = run_json("codebook", census.ds)
    info = run_json("info", census.ds)
    assert [v["name"] for v in cb["variables"]] == [v["name"] for v in info["variables"]]
    v = {x["name"]: x for x in cb["variables"]}
    counts = census.q("SELECT SEX, count(*) FROM census GROUP BY 1 ORDER BY 2 DESC")
    assert [(t["value"], t["count"]) for t in v["SEX"]["top"]] == counts


def test_codebook_top_of_wide_variables(census):
    """Wide domains (ids, incomes) take the hash-count path: top values, ties
    in value order, missing codes flagged, distinct count without them."""
    cb = run_json("codebook", census.ds, "SERIAL", "INCTOT", "--top", "5")
    v = {x["name"]: x for x in cb["variables"]}
    for name in ("SERIAL", "INCTOT"):
        rows = census.q(
            f'SELECT "{name}", count(*) FROM census GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT 5')
        assert [(t["value"], t["count"]) for t in v[name]["top"]] == rows
        missing = [9999999] if name == "INCTOT" else []
        assert [t["missing"] for t in v[name]["top"]] == [r[0] in missing for r in rows]
        (distinct,) = census.one(
            f'SELECT count(DISTINCT "{name}") FROM census WHERE {census.valid(name)}')
        assert v[name]["distinct"] == distinct
