"""`microtab import FILE.parquet OUT --vars … --filter …`: the Parquet import
runs in the sibling `microtab-arrow`, which the selection waits for (it
once took the process's place, so the selection never ran: OUT was never
written and the staging dataset stayed). Oracle: pandas' selection on the
frame pyarrow wrote."""

import pyarrow as pa
import pyarrow.parquet as pq

from conftest import run, run_json
from test_import_select import frame


def test_vars_and_filter_select_a_parquet_import(tmp_path):
    df = frame()
    src = tmp_path / "d.parquet"
    pq.write_table(pa.Table.from_pandas(df, preserve_index=False), src)
    out = tmp_path / "o.mtab"
    p = run("import", src, out, "--vars", "AGE,STATE", "--filter", "AGE(18-64) SEX=2")
    assert "kept" in p.stderr and ".import-" not in p.stderr
    want = df[(df.AGE >= 18) & (df.AGE <= 64) & (df.SEX == 2)]
    assert [v["name"] for v in run_json("info", out)["variables"]] == ["AGE", "STATE"]
    got = run_json("list", out, "AGE", "STATE", "--all")["records"]
    assert [(float(r["AGE"]), r["STATE"]) for r in got] == list(zip(want.AGE, want.STATE))
    assert not [x for x in tmp_path.iterdir() if ".import" in x.name]
    # A bad name: the existing OUT stays, no staging left.
    p = run("import", src, out, "--vars", "NOPE", "--force", ok=False)
    assert "NOPE" in p.stderr and ".import-" not in p.stderr
    assert run_json("info", out)["rows"] == len(want)
    assert not [x for x in tmp_path.iterdir() if ".import" in x.name]
