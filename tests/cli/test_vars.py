"""`microtab rename` and `microtab drop` (issue 13, item 2): metadata-only,
atomic; labels, missing codes and the survey design follow a renamed
variable; a design's variables cannot be dropped. Answers against DuckDB
on the same CSV."""

import duckdb

from conftest import run, run_json, write


def test_rename_and_drop(tmp_path):
    lines = ["A,B,W"] + [f"{i % 3 + 1},{i % 5},{1 + i % 7}" for i in range(300)]
    path = write(tmp_path / "v.csv", "\n".join(lines) + "\n")
    ds = tmp_path / "v.mtab"
    run("import", path, ds, "--missing", "B=4")
    run("label", ds, "A", "1=one", "2=two")
    run("design", ds, "--weight", "W")
    run("rename", ds, "a", "AGEGRP")
    run("rename", ds, "W", "WT")
    info = run_json("info", ds)
    names = [v["name"] for v in info["variables"]]
    assert names == ["AGEGRP", "B", "WT"] and info["design"]["weight"] == "WT"
    f = run_json("freq", ds, "AGEGRP")
    want = dict(duckdb.sql(f"SELECT A, sum(W) FROM read_csv('{path}') GROUP BY 1").fetchall())
    assert {r["value"]: r["weighted"] for r in f["rows"]} == {k: float(v) for k, v in want.items()}
    assert f["rows"][0]["label"] == "one"
    p = run("freq", ds, "A", ok=False)
    assert "unknown variable 'A'" in p.stderr and "AGEGRP" in p.stderr, p.stderr
    # B's missing code 4 stays with it.
    assert [r["value"] for r in run_json("freq", ds, "B")["rows"]] == [0, 1, 2, 3]
    for bad in ("X Y", "A(1)", "B"):
        assert run("rename", ds, "AGEGRP", bad, ok=False).returncode != 0
    p = run("drop", ds, "WT", ok=False)
    assert "survey design" in p.stderr
    run("drop", ds, "B")
    assert [v["name"] for v in run_json("info", ds)["variables"]] == ["AGEGRP", "WT"]
    assert "unknown variable 'B'" in run("freq", ds, "B", ok=False).stderr
    assert run("drop", ds, "AGEGRP", "WT", ok=False).returncode != 0
    run("verify", ds)
