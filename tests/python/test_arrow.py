"""Arrow and Parquet: `microtab export` / `import x.parquet`, the Arrow C
stream interface (pyarrow, Polars, DuckDB), checked against DuckDB over
the source CSV, pyarrow's reader, and ipumspy; round trips keep labels,
missing codes, implied decimals and the design."""

from __future__ import annotations

import json
import os
import subprocess
import warnings
from decimal import Decimal
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import polars as pl
import pytest

import microtab as mt
from test_api import census_dataset, duck_census, replicate_design

REPO = Path(__file__).resolve().parents[2]
BIN = Path(os.environ.get("MICROTAB_BIN", REPO / "target" / "release" / "microtab"))
IPUMS = REPO.parent / "shared" / "data" / "ipums"


def cli(*args, ok=True):
    p = subprocess.run([str(BIN), *map(str, args)], capture_output=True, text=True)
    if ok:
        assert p.returncode == 0, p.stderr
    return p


def tab_json(ds, *args):
    d = json.loads(cli("tab", ds, *args, "--format", "json").stdout)
    d.pop("dataset", None)
    return d


def freq_json(ds, *args):
    d = json.loads(cli("freq", ds, *args, "--format", "json").stdout)
    d.pop("dataset", None)
    return d


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("arrow")
    csv, ds = census_dataset(d, 60000, 4, reps=4)
    cli("label", ds, "SEX", "1=Male", "2=Female", "--var-label", "Sex of person")
    cli("label", ds, "EDUC", "0=None", "6=Grade 12", "11=5+ years of college")
    replicate_design(ds, 4)
    return d, ds, duck_census(csv)


def test_export_matches_duckdb_over_the_csv(data):
    d, ds, con = data
    out = d / "all.parquet"
    cli("export", ds, out)
    # DuckDB reads our file; every column equals the CSV's, missing codes
    # as NULL, implied decimals as doubles.
    cols = [r[0] for r in con.execute("DESCRIBE c").fetchall()]
    for c in cols:
        want = "NULL" if c == "INCTOT" else None
        expr = f"CASE WHEN {c} = 9999999 THEN NULL ELSE {c} END" if want else c
        if c == "PERWT":
            expr = "CAST(PERWT AS DOUBLE)"
        diff = con.execute(f"""
            SELECT count(*) FROM (SELECT row_number() OVER () AS r, {expr} AS v FROM c) a
            FULL JOIN (SELECT row_number() OVER () AS r, {c} AS v FROM read_parquet('{out}')) b
            USING (r) WHERE a.v IS DISTINCT FROM b.v""").fetchone()[0]
        assert diff == 0, c
    # pyarrow reads the metadata: labels, missing codes, the design.
    meta = json.loads(pq.read_metadata(out).metadata[b"microtab"])
    v = {x["name"]: x for x in meta["variables"]}
    assert v["SEX"]["value_labels"] == {"1": "Male", "2": "Female"}
    assert v["SEX"]["label"] == "Sex of person"
    assert v["INCTOT"]["missing_codes"] == [9999999]
    assert v["PERWT"]["decimals"] == 2
    assert meta["design"]["replicates"]["weights"] == [f"REPWTP{i}" for i in range(1, 5)]
    assert pq.read_schema(out).field("SEX").type == pa.uint8()


def test_round_trip_keeps_everything(data):
    d, ds, _ = data
    out = d / "rt.parquet"
    cli("export", ds, out)
    back = d / "rt.mtab"
    cli("import", out, back)
    a, b = mt.open(ds), mt.open(back)
    assert a.variables == b.variables and a.rows == b.rows
    for name in a.variables:
        va, vb = a.variable(name), b.variable(name)
        assert (va.kind, va.decimals, va.missing_codes, va.value_labels, va.label) == \
            (vb.kind, vb.decimals, vb.missing_codes, vb.value_labels, vb.label), name
        assert np.array_equal(a.column(name), b.column(name)), name
    assert b.design() == a.design()
    # The same answers, standard errors included (the replicate design).
    assert tab_json(back, "SEX", "EDUC", "--stats") == tab_json(ds, "SEX", "EDUC", "--stats")
    assert freq_json(back, "INCTOT(r: 0-9999; 10000-*)", "--include-missing") == \
        freq_json(ds, "INCTOT(r: 0-9999; 10000-*)", "--include-missing")


def test_export_options_against_duckdb(data):
    d, ds, con = data
    out = d / "sub.parquet"
    cli("export", ds, out, "--vars", "SEX,AGE,PERWT,INCTOT", "--filter", "AGE(25-64) SEX(2)",
        "--keep-missing-codes", "--exact-decimals", "--compression", "zstd")
    got = con.execute(f"SELECT * FROM read_parquet('{out}')").fetchall()
    want = con.execute("SELECT SEX, AGE, PERWT, INCTOT FROM c WHERE AGE BETWEEN 25 AND 64 AND SEX = 2").fetchall()
    assert got == want
    assert isinstance(got[0][2], Decimal)
    assert pq.read_schema(out).field("PERWT").type == pa.decimal128(6, 2) or \
        pa.types.is_decimal(pq.read_schema(out).field("PERWT").type)
    # A filtered export does not carry the replicate design? It does (a
    # domain's SEs need only the weights); without the weights it does not.
    meta = json.loads(pq.read_metadata(out).metadata[b"microtab"])
    assert "design" not in meta and meta["filter"] == "AGE(25-64) SEX(2)"
    # Labels as dictionary-encoded text.
    lab = d / "lab.parquet"
    cli("export", ds, lab, "--vars", "SEX,EDUC", "--labels")
    t = pq.read_table(lab)
    assert pa.types.is_dictionary(t.schema.field("SEX").type)
    want = con.execute("SELECT CASE SEX WHEN 1 THEN 'Male' ELSE 'Female' END, "
                       "CASE EDUC WHEN 0 THEN 'None' WHEN 6 THEN 'Grade 12' WHEN 11 THEN '5+ years of college' "
                       "ELSE CAST(EDUC AS VARCHAR) END FROM c").fetchall()
    assert list(zip(t.column("SEX").to_pylist(), t.column("EDUC").to_pylist())) == want
    # An existing file is kept without --force; no temporary file is left.
    before = lab.read_bytes()
    p = cli("export", ds, lab, "--vars", "SEX", ok=False)
    assert p.returncode != 0 and "exists" in p.stderr and lab.read_bytes() == before
    p = cli("export", ds, d / "bad.parquet", "--filter", "NOPE(1)", ok=False)
    assert p.returncode != 0 and "NOPE" in p.stderr
    assert not list(d.glob(".*.tmp")) and not (d / "bad.parquet").exists()


def test_import_files_from_other_writers(tmp_path):
    """Parquet from DuckDB (snappy), Polars (zstd), pyarrow (gzip, lz4,
    dictionaries, dates, booleans, decimals, nulls): tables vs DuckDB."""
    con = duckdb.connect()
    con.execute("""CREATE TABLE t AS SELECT
        i AS id, (i % 7)::TINYINT AS small, (i * 7919 % 100003)::BIGINT - 50000 AS big,
        CASE WHEN i % 11 = 0 THEN NULL ELSE (i % 5)::INTEGER END AS withnull,
        ((i % 1000) / 8.0)::DECIMAL(9,3) AS dec, (i % 13) / 3.0 AS dbl,
        ['ohio','texas','maine', NULL][i % 4 + 1] AS state, i % 2 = 0 AS flag,
        DATE '2020-01-01' + (i % 400)::INTEGER AS day
        FROM range(0, 30000) r(i)""")
    files = {}
    files["duckdb"] = tmp_path / "d.parquet"
    con.execute(f"COPY t TO '{files['duckdb']}' (FORMAT parquet)")
    arrow = con.sql("SELECT * FROM t").to_arrow_table()
    files["polars"] = tmp_path / "p.parquet"
    pl.from_arrow(arrow).write_parquet(files["polars"])
    files["pyarrow-gzip"] = tmp_path / "g.parquet"
    pq.write_table(arrow, files["pyarrow-gzip"], compression="gzip", row_group_size=7000)
    files["pyarrow-lz4-dict"] = tmp_path / "l.parquet"
    t2 = arrow.set_column(arrow.schema.get_field_index("state"), "state",
                          pa.compute.dictionary_encode(arrow.column("state")))
    pq.write_table(t2, files["pyarrow-lz4-dict"], compression="lz4")
    for kind, f in files.items():
        out = tmp_path / f"{kind}.mtab"
        cli("import", f, out)
        ds = mt.open(out)
        assert ds.rows == 30000, kind
        assert ds.variable("dec").decimals == 3 and ds.variable("state").kind == "string", kind
        fr = ds.to_pandas()
        want = con.execute("SELECT * FROM t ORDER BY id").df()
        for c in ["id", "small", "big", "withnull"]:
            assert fr[c].astype("Float64").tolist() == want[c].astype("Float64").tolist(), (kind, c)
        assert np.allclose(fr["dec"].to_numpy(float), want["dec"].astype(float)), kind
        assert np.array_equal(fr["dbl"].to_numpy(float), want["dbl"].to_numpy(float)), kind
        assert fr["state"].fillna("∅").tolist() == want["state"].fillna("∅").tolist(), kind
        assert fr["flag"].tolist() == want["flag"].astype(int).tolist(), kind
        assert fr["day"].tolist() == [str(x.date()) for x in pd.to_datetime(want["day"])], kind
        # A weighted crosstab on the imported data vs DuckDB on the source.
        tab = ds.tab("state", "small", weight="dec").to_pandas()
        w = con.execute("SELECT state, small, count(*), sum(dec)::DOUBLE FROM t WHERE state IS NOT NULL "
                        "GROUP BY ALL").fetchall()
        got = {(r.row, int(r.col)): (r["count"], r.weighted) for _, r in tab.iterrows() if r["count"]}
        assert got == {(s, c): (n, pytest.approx(x)) for s, c, n, x in w}, kind


def test_import_refuses_what_it_cannot_store(tmp_path):
    f = tmp_path / "x.parquet"
    pq.write_table(pa.table({"a": [1, 2], "l": [[1], [2, 3]]}), f)
    p = cli("import", f, tmp_path / "x.mtab", ok=False)
    assert p.returncode != 0 and "column l" in p.stderr and "list" in p.stderr.lower()
    assert not (tmp_path / "x.mtab").exists()
    pq.write_table(pa.table({"u": pa.array([1, 2**63 + 5], pa.uint64())}), f)
    p = cli("import", f, tmp_path / "x.mtab", ok=False)
    assert "record 2, column u" in p.stderr and "64-bit" in p.stderr
    with pytest.raises(mt.InputError, match="column l"):
        pq.write_table(pa.table({"a": [1, 2], "l": [[1], [2, 3]]}), f)
        mt.import_parquet(f, tmp_path / "y.mtab")
    p = cli("import", f, tmp_path / "z.mtab", "--type", "a=int", ok=False)
    assert "Parquet" in p.stderr


def test_arrow_stream_to_pyarrow_polars_duckdb(data):
    d, ds, con = data
    m = mt.open(ds)
    cols = ["SEX", "AGE", "PERWT", "INCTOT", "EDUC"]
    frame = m.to_pandas(cols)
    t = pa.table(m.arrow(cols))
    assert t.num_rows == m.rows and t.column_names == cols
    for c in cols:
        assert t.column(c).to_pandas().astype("Float64").tolist() == frame[c].astype("Float64").tolist(), c
    # Polars and DuckDB read the same stream.
    p = pl.DataFrame(m.arrow(cols))
    assert p.shape == (m.rows, 5) and p["INCTOT"].null_count() == int(frame["INCTOT"].isna().sum())
    assert m.to_polars(cols).equals(p)
    v = m.arrow(["SEX", "INCTOT", "PERWT"], filter="AGE(18-*)")
    got = duckdb.sql("SELECT SEX, avg(INCTOT), sum(PERWT) FROM v GROUP BY SEX ORDER BY SEX").fetchall()
    want = con.execute("SELECT SEX, avg(INCTOT) FILTER (WHERE INCTOT <> 9999999), sum(PERWT)::DOUBLE "
                       "FROM c WHERE AGE >= 18 GROUP BY SEX ORDER BY SEX").fetchall()
    assert [(a, pytest.approx(b), pytest.approx(c)) for a, b, c in want] == got
    # The whole dataset is a stream too.
    assert duckdb.sql("SELECT count(*) FROM m").fetchall()[0][0] == m.rows
    # Labels as categories; a Python to_parquet equal to the CLI's export.
    lab = m.to_arrow(["SEX"], labels=True).column("SEX").to_pylist()[:4]
    assert set(lab) <= {"Male", "Female"}
    m.to_parquet(d / "py.parquet", cols, filter="AGE(18-*)")
    cli("export", ds, d / "cli.parquet", "--vars", ",".join(cols), "--filter", "AGE(18-*)")
    assert pq.read_table(d / "py.parquet").equals(pq.read_table(d / "cli.parquet"))
    with pytest.raises(FileExistsError):
        m.to_parquet(d / "py.parquet", cols)
    back = mt.import_parquet(d / "py.parquet", d / "py.mtab")
    # Without its replicate weights the design stays behind; with them a
    # filtered export carries it (a domain's SEs need only the weights).
    assert back.design() is None and back.variable("SEX").value_labels == {"1": "Male", "2": "Female"}
    reps = [f"REPWTP{i}" for i in range(1, 5)]
    m.to_parquet(d / "rep.parquet", cols + reps, filter="AGE(18-*)")
    back = mt.import_parquet(d / "rep.parquet", d / "rep.mtab")
    assert back.design() == m.design()
    assert back.freq("SEX").to_dict()["rows"] == m.freq("SEX", filter="AGE(18-*)").to_dict()["rows"]
    # Results: tidy frames as Arrow, Polars, and a DuckDB source.
    f = m.freq("EDUC", weight="PERWT")
    assert pa.table(f).num_rows == len(f.rows)
    assert f.to_polars()["count"].to_list() == [r["count"] for r in f.rows]
    assert duckdb.sql("SELECT sum(count) FROM f").fetchall()[0][0] == m.rows


def test_ipumspy_parquet_with_ddi(tmp_path):
    """An IPUMS extract as ipumspy writes it to Parquet (codes, implied
    decimals as floats), imported with its DDI, equals the fixed-width
    import: labels, missing codes and values."""
    readers = pytest.importorskip("ipumspy.readers")
    name = "cps_00006"
    if not (IPUMS / f"{name}.xml").exists():
        pytest.skip("no IPUMS extract")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ddi = readers.read_ipums_ddi(IPUMS / f"{name}.xml")
        df = readers.read_microdata(ddi, IPUMS / f"{name}.dat.gz")
    f = tmp_path / "x.parquet"
    df.to_parquet(f)
    a = mt.import_fixed(IPUMS / f"{name}.dat.gz", IPUMS / f"{name}.xml", tmp_path / "fixed.mtab")
    cli("import", f, tmp_path / "pq.mtab", "--ddi", IPUMS / f"{name}.xml")
    b = mt.open(tmp_path / "pq.mtab")
    assert a.variables == b.variables
    for v in a.variables:
        va, vb = a.variable(v), b.variable(v)
        assert (va.decimals, va.value_labels, va.missing_codes) == (vb.decimals, vb.value_labels,
                                                                    vb.missing_codes), v
    pd.testing.assert_frame_equal(a.to_pandas(), b.to_pandas(), check_dtype=False)


def test_review_findings(data, tmp_path):
    """A hostile review's findings: metadata of a column whose type
    changed is not applied; labels of extreme integers; missing codes of
    a labelled export; exports into the dataset; stale temporary files;
    typed errors."""
    import pyarrow.compute as pc
    d, ds, con = data
    m = mt.open(ds)
    # 1. pyarrow keeps the file's metadata through set_column: INCTOT is
    # now a double, and its nulls must stay nulls (not 9999999).
    t = m.to_arrow(["SEX", "INCTOT"])
    t = t.set_column(1, "INCTOT", pc.multiply(t["INCTOT"], 1.05))
    f = tmp_path / "edit.parquet"
    pq.write_table(t, f)
    back = mt.import_parquet(f, tmp_path / "edit.mtab")
    got = back.means("INCTOT", by="SEX", design=False).to_pandas()["mean"].tolist()
    want = [r[0] for r in duckdb.sql(f"SELECT avg(INCTOT) FROM read_parquet('{f}') GROUP BY SEX ORDER BY SEX").fetchall()]
    assert got == pytest.approx(want, rel=1e-12)
    assert back.variable("INCTOT").missing_codes == []
    # 2. Labels of integers beyond 2^53 are exact.
    src = tmp_path / "ext.csv"
    src.write_text("X\n-9223372036854775000\n0\n9223372036854775000\n")
    cli("import", src, tmp_path / "ext.mtab")
    cli("label", tmp_path / "ext.mtab", "X", "0=zero")
    e = mt.open(tmp_path / "ext.mtab")
    assert pa.table(e.arrow(["X"], labels=True)).column("X").to_pylist() == \
        ["-9223372036854775000", "zero", "9223372036854775000"]
    # 3. A labelled export with kept codes: the codes come back as missing
    # text values, so percentages are those of the source.
    src = tmp_path / "mc.csv"
    src.write_text("MC\n" + "1\n" * 6 + "2\n" * 3 + "97\n" * 5 + "98\n" * 4 + "\n")
    cli("import", src, tmp_path / "mc.mtab", "--missing", "MC=97,98")
    cli("label", tmp_path / "mc.mtab", "MC", "1=Yes", "2=No", "97=Refused")
    cli("export", tmp_path / "mc.mtab", tmp_path / "mc.parquet", "--labels", "--keep-missing-codes")
    cli("import", tmp_path / "mc.parquet", tmp_path / "mc2.mtab")
    pct = {r["label"] or r["value"]: r["percent"] for r in mt.open(tmp_path / "mc2.mtab").freq("MC").rows}
    assert pct == {"Yes": pytest.approx(600 / 9), "No": pytest.approx(300 / 9)}
    # 4. Never into the dataset being exported; not as CSV.
    p = cli("export", ds, Path(ds) / "vars" / "x.parquet", "--force", ok=False)
    assert p.returncode != 0 and "inside the dataset" in p.stderr
    assert mt.open(ds).rows == m.rows
    p = cli("export", ds, tmp_path / "x.csv", ok=False)
    assert p.returncode != 0 and "Parquet" in p.stderr
    # 5. A killed export's temporary file is removed by the next export.
    stale = tmp_path / ".out.parquet.999999999.tmp"
    stale.write_bytes(b"partial")
    cli("export", ds, tmp_path / "out.parquet", "--vars", "SEX")
    assert not stale.exists()
    # 6. Typed errors.
    with pytest.raises(mt.QueryError, match="no variables"):
        m.to_parquet(tmp_path / "none.parquet", [])
    with pytest.raises(mt.QueryError, match="named twice"):
        m.to_arrow(["SEX", "SEX"])
    with pytest.raises(mt.QueryError, match="scale"):
        m.design("PERWT", repweights="REPWTP1-REPWTP4", type="other", scale=float("nan"))
    with pytest.raises(FileNotFoundError):
        mt.open_many([])
    with pytest.raises(FileExistsError, match="force=True"):
        m.to_parquet(tmp_path / "out.parquet", ["SEX"])
