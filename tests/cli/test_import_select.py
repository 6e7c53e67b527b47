"""`microtab import FILE OUT --vars … --filter …`: the chosen variables and
the records that pass the filter, for every input format, against the
same selection made by pandas on what pyreadstat reads; a failed selection
leaves an existing OUTPUT untouched and no staging dataset behind."""

import numpy as np
import pandas as pd
import pyreadstat
import pytest

from conftest import run, run_json


def frame(n=3000, seed=4):
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "SERIAL": np.arange(1, n + 1, dtype=float),
        "AGE": rng.integers(0, 95, n).astype(float),
        "SEX": rng.integers(1, 3, n).astype(float),
        "INCTOT": rng.integers(-9000, 900_000, n).astype(float),
        "STATE": rng.choice(["CA", "NY", "TX"], n),
    })


@pytest.mark.parametrize("fmt", ["csv", "dta", "sav", "xpt"])
def test_vars_and_filter_select_while_importing(tmp_path, fmt):
    df = frame()
    src = tmp_path / f"d.{fmt}"
    if fmt == "csv":
        df.to_csv(src, index=False)
    elif fmt == "dta":
        pyreadstat.write_dta(df, str(src))
    elif fmt == "sav":
        pyreadstat.write_sav(df, str(src))
    else:
        pyreadstat.write_xport(df, str(src))
    out = tmp_path / "o.mtab"
    p = run("import", src, out, "--vars", "AGE,STATE", "--filter", "AGE(18-64) SEX=2")
    assert "kept" in p.stderr and ".import-" not in p.stderr
    got = run_json("list", out, "AGE", "STATE", "--all")["records"]
    want = df[(df.AGE >= 18) & (df.AGE <= 64) & (df.SEX == 2)]
    assert [v["name"] for v in run_json("info", out)["variables"]] == ["AGE", "STATE"]
    assert [(float(r["AGE"]), r["STATE"]) for r in got] == list(zip(want.AGE, want.STATE))
    assert not [x for x in tmp_path.iterdir() if ".import-" in x.name]


def test_a_failed_selection_leaves_the_existing_dataset(tmp_path):
    df = frame(200)
    src = tmp_path / "d.csv"
    df.to_csv(src, index=False)
    out = tmp_path / "o.mtab"
    run("import", src, out)
    before = run_json("info", out)["rows"]
    p = run("import", src, out, "--vars", "NOPE", "--force", ok=False)
    assert "unknown variable 'NOPE' in" in p.stderr and str(out) in p.stderr and ".import-" not in p.stderr
    p = run("import", src, out, "--filter", "AGE>", "--force", ok=False)
    assert "bad filter" in p.stderr
    assert run_json("info", out)["rows"] == before == 200
    assert not [x for x in tmp_path.iterdir() if ".import-" in x.name]
    # Without --force an existing dataset is kept, before the file is read.
    p = run("import", src, out, "--vars", "AGE", ok=False)
    assert "exists" in p.stderr
