"""Datasets written by earlier versions still open, answer and are checked.

``tests/fixtures/v2.mtab`` was written by the last format-2 build of
microtab (commit f49ebd3) from ``tests/fixtures/v2.csv`` with
``--missing INC=9999999`` and SEX labelled. Format 2 had one checksum per
column file and none for the manifest: a query reading a column checks that
column's whole payload once; `verify` checks everything there is.
Oracle: DuckDB over the same CSV.
"""

from __future__ import annotations

import shutil

import duckdb
import pytest

from conftest import REPO, approx, disp, run, run_json

FIX = REPO / "tests" / "fixtures"


@pytest.fixture()
def v2(tmp_path):
    ds = tmp_path / "v2.mtab"
    shutil.copytree(FIX / "v2.mtab", ds)
    return ds


def oracle(sql):
    con = duckdb.connect()
    con.execute(
        "CREATE TABLE t AS SELECT * FROM read_csv(?, header=true, types={'WT': 'DECIMAL(10,2)'})",
        [str(FIX / "v2.csv")],
    )
    return con.execute(sql).fetchall()


def test_version_2_dataset_answers_like_duckdb(v2):
    res = run_json("freq", v2, "SEX", "--weight", "WT")
    want = oracle("SELECT SEX, count(*), sum(WT)::DOUBLE FROM t GROUP BY 1 ORDER BY 1")
    assert [(r["value"], r["count"]) for r in res["rows"]] == [(s, n) for s, n, _ in want]
    assert [r["weighted"] for r in res["rows"]] == [approx(w) for _, _, w in want]
    assert [r["label"] for r in res["rows"]] == ["Male", "Female"]
    res = run_json("freq", v2, "STATE")
    want = oracle("SELECT STATE, count(*) FROM t GROUP BY 1 ORDER BY 1")
    assert [(disp(r), r["count"]) for r in res["rows"]] == want
    res = run_json("means", v2, "INC", "--by", "SEX", "--weight", "WT")
    want = oracle("SELECT SEX, count(*), sum(WT*INC)::DOUBLE/sum(WT)::DOUBLE FROM t "
                  "WHERE INC IS NOT NULL AND INC <> 9999999 GROUP BY 1 ORDER BY 1")
    assert [(g["n"], g["mean"]) for g in res["groups"]] == [(n, approx(m)) for _, n, m in want]
    run("verify", v2)


@pytest.mark.parametrize("var", ["AGE", "INC", "STATE"])
def test_version_2_damage_is_detected(v2, var):
    import json

    man = json.loads((v2 / "manifest.json").read_text())
    v = next(x for x in man["variables"] if x["name"] == var)
    path = v2 / v["file"]
    b = bytearray(path.read_bytes())
    b[4096 + 17] ^= 0x20
    path.write_bytes(bytes(b))
    p = run("freq", v2, var, ok=False)
    assert path.name in p.stderr and "checksum" in p.stderr
    p = run("verify", v2, ok=False)
    assert path.name in p.stderr


def test_version_2_dataset_can_be_labelled_and_reimported(v2, tmp_path):
    """A change to an old dataset keeps its version (its files are still
    version 2) and gives the manifest its checksum."""
    import json

    run("label", v2, "AGE", "0=newborn")
    man = json.loads((v2 / "manifest.json").read_text())
    assert man["version"] == 2 and man["checksum"].startswith("xxh3:")
    run("verify", v2)
    assert run_json("freq", v2, "AGE")["rows"][0]["label"] == "newborn"
    run("import", FIX / "v2.csv", v2, "--force")
    run("verify", v2)
