"""Subsets (issue 13, item 5; SDA's SUBSET): `microtab subset DS OUT`
as a new dataset (tables equal DuckDB's on the filtered CSV, text
variables re-encoded, designs carried or not), and as a CSV with setup
files — the R one run by Rscript and the SPSS one by GNU PSPP, their
values, missing codes and labels checked against DuckDB and the
dataset's metadata."""

import csv
import io
import shutil
import subprocess
from decimal import Decimal

import duckdb
import pytest

from conftest import run, run_json
from test_derive import _make_csv


@pytest.fixture(scope="module")
def src(tmp_path_factory):
    d = tmp_path_factory.mktemp("subset")
    path = d / "s.csv"
    _make_csv(path, n=2000, seed=5)
    ds = d / "s.mtab"
    run("import", path, ds, "--missing", "A=999", "--type", "F=float")
    run("label", ds, "B", "1=One", "2=Two, \"quoted\"", "--var-label", "The B variable")
    run("label", ds, "S", "Ohio=Buckeye State")
    con = duckdb.connect()
    con.execute(
        f"CREATE TABLE t AS SELECT ID, NULLIF(A, 999) AS A, A AS A_RAW, B, D, F, S, W FROM read_csv('{path}', "
        "header=true, types={'ID': 'INTEGER', 'A': 'INTEGER', 'B': 'INTEGER', 'D': 'DECIMAL(18,2)', "
        "'F': 'DOUBLE', 'S': 'VARCHAR', 'W': 'DECIMAL(18,1)'})")
    return d, ds, con


def test_subset_dataset_matches_duckdb(src, tmp_path):
    _, ds, con = src
    out = tmp_path / "sub.mtab"
    run("subset", ds, out, "--vars", "ID,A,B,S,W", "--filter", "B(1-4) S(Ohio,Texas)")
    info = run_json("info", out)
    assert [v["name"] for v in info["variables"]] == ["ID", "A", "B", "S", "W"]
    n = con.execute("SELECT count(*) FROM t WHERE B BETWEEN 1 AND 4 AND S IN ('Ohio', 'Texas')").fetchone()[0]
    assert info["rows"] == n
    run("verify", out)
    # The text variable keeps only the values it still has.
    f = run_json("freq", out, "S")
    assert {r["value"]: r["count"] for r in f["rows"]} == dict(con.execute(
        "SELECT S, count(*) FROM t WHERE B BETWEEN 1 AND 4 AND S IN ('Ohio', 'Texas') GROUP BY 1").fetchall())
    assert [r["label"] for r in f["rows"] if r["value"] == "Ohio"] == ["Buckeye State"]
    # Weighted table, missing codes and labels as in the source.
    t = run_json("tab", out, "B", "S", "--weight", "W")["tables"][0]
    want = dict(((b, s), float(w)) for b, s, w in con.execute(
        "SELECT B, S, sum(W) FROM t WHERE B BETWEEN 1 AND 4 AND S IN ('Ohio', 'Texas') GROUP BY ALL").fetchall())
    for i, r in enumerate(t["rows"]):
        for j, c in enumerate(t["cols"]):
            assert abs(t["weighted"][i][j] - want.get((r["value"], c["value"]), 0.0)) < 1e-6
    a = run_json("freq", out, "A", "--include-missing")
    miss = [r for r in a["rows"] if r["missing"]]
    assert sum(r["count"] for r in miss) == con.execute(
        "SELECT count(*) FROM t WHERE B BETWEEN 1 AND 4 AND S IN ('Ohio', 'Texas') AND A IS NULL").fetchone()[0]
    # The same output again needs --force; the source itself is refused.
    assert "exists" in run("subset", ds, out, ok=False).stderr
    run("subset", ds, out, "--force", "--vars", "ID")
    assert "cannot replace the dataset" in run("subset", ds, ds, "--force", ok=False).stderr


def test_designs_carried_or_not(tmp_path):
    path = tmp_path / "r.csv"
    run("gen", "census", "--rows", "3000", "--seed", "2", "--repweights", "4", "--strata", "--out", path)
    ds = tmp_path / "r.mtab"
    run("import", path, ds)
    run("design", ds, "--weight", "PERWT", "--repweights", "REPWTP1-REPWTP4", "--type", "jk1")
    out = tmp_path / "a.mtab"
    run("subset", ds, out, "--filter", "AGE(18-*)")
    d = run_json("info", out)["design"]
    assert d and d["replicates"]["type"] == "jk1"
    # Domain estimates from the subset equal the full data's with a filter.
    whole = run_json("freq", ds, "SEX", "--filter", "AGE(18-*)")
    part = run_json("freq", out, "SEX")
    assert [r["weighted_se"]["se"] for r in whole["rows"]] == pytest.approx(
        [r["weighted_se"]["se"] for r in part["rows"]], rel=1e-12)
    p = run("subset", ds, tmp_path / "b.mtab", "--vars", "SEX,AGE,PERWT")
    assert "not carried over" in p.stderr and run_json("info", tmp_path / "b.mtab")["design"] is None
    run("design", ds, "--weight", "PERWT", "--strata", "STRATA", "--cluster", "SERIAL", "--lonely-psu", "certainty")
    p = run("subset", ds, tmp_path / "c.mtab", "--filter", "AGE(18-*)")
    assert "Taylor design is not carried over" in p.stderr
    run("subset", ds, tmp_path / "d.mtab")
    assert run_json("info", tmp_path / "d.mtab")["design"]["taylor"] is not None


def test_subset_csv_and_setup_files(src, tmp_path):
    _, ds, con = src
    out = tmp_path / "x.csv"
    run("subset", ds, out, "--vars", "ID", "A", "B", "D", "S", "--filter", "B(0-5)")
    for ext in ("do", "sps", "sas", "R", "codebook.txt"):
        assert (tmp_path / f"x.{ext}").exists()
    rows = list(csv.reader(io.StringIO(out.read_text())))
    assert rows[0] == ["ID", "A", "B", "D", "S"]
    want = con.execute("SELECT ID, A_RAW, B, D, S FROM t WHERE B BETWEEN 0 AND 5 ORDER BY ID").fetchall()
    assert len(rows) - 1 == len(want)
    for r, w in zip(rows[1:], want):
        assert int(r[0]) == w[0]
        assert (r[1] == "" and w[1] is None) or int(r[1]) == w[1]
        assert int(r[2]) == w[2]
        assert (r[3] == "" and w[3] is None) or Decimal(r[3]) == w[3]
        assert (r[4] or None) == w[4]
    # R reads it with missing codes as NA and the labels as attributes.
    script = tmp_path / "check.R"
    script.write_text(
        'setwd("%s")\nsource("x.R")\n'
        'cat(nrow(d), sum(is.na(d$A)), attr(d$B, "label"), names(attr(d$B, "labels")), sep="|")\n' % tmp_path)
    r = subprocess.run(["Rscript", str(script)], capture_output=True, text=True, check=True).stdout
    na_a = con.execute("SELECT count(*) FROM t WHERE B BETWEEN 0 AND 5 AND A IS NULL").fetchone()[0]
    assert r.split("|") == [str(len(want)), str(na_a), "The B variable", "One", 'Two, "quoted"']
    # PSPP runs the SPSS setup: same values, missing codes and labels.
    pspp = shutil.which("pspp")
    if pspp is None:
        pytest.skip("pspp is not installed (scripts/test.sh installs it)")
    (tmp_path / "run.sps").write_text(
        "INCLUDE FILE='x.sps'.\nSAVE TRANSLATE /OUTFILE='back.csv' /TYPE=CSV /FIELDNAMES /REPLACE.\n"
        "DISPLAY DICTIONARY.\n")
    p = subprocess.run([pspp, "-O", "format=txt", "run.sps"], cwd=tmp_path, capture_output=True, text=True)
    assert p.returncode == 0 and "error" not in p.stdout.lower(), p.stdout + p.stderr
    assert "999" in p.stdout and "Buckeye State" in p.stdout and 'Two, "quoted"' in p.stdout
    back = list(csv.reader(io.StringIO((tmp_path / "back.csv").read_text())))
    assert len(back) == len(rows)
    for a, b in zip(back[1:], rows[1:]):
        assert int(a[0]) == int(b[0]) and a[4].strip() == b[4]
        assert (a[3].strip() in ("", ".") and b[3] == "") or Decimal(a[3]) == Decimal(b[3])
