"""Frames from Python (issue 27, items 3 and 4).

* One generation per frame: `to_pandas`, `to_polars`, `to_arrow` and the
  Arrow C stream raced against `microtab import --force` alternating two
  sources whose every column (and text dictionary) tells them apart:
  every frame equals one source exactly — oracle: `pandas.read_csv` of
  that source — or raises `ChangedError`, never a mix.
* Types that do not wrap: the default frames have the types
  `pandas.read_csv` / `polars.read_csv` / `pyarrow.csv` give the same CSV
  (int64, float64; nullable Int64/Float64 where pandas has missing
  values), so `AGE**2` and `INCTOT - 100000` are right; `dtypes="stored"`
  keeps the stored ones.
"""

from __future__ import annotations

import subprocess
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.csv as pacsv
import pytest

import microtab as mt

from test_api import BIN, cli  # noqa: E402


# ------------------------------------------------------------ one generation

def write_source(path: Path, which: int) -> None:
    """A source whose every column says which one it is: A (1) and B (2)
    differ in row count, in every value's range, in decimals, in missing
    values and in the text columns' dictionaries (same number of codes,
    other words, so codes read through the other dictionary show)."""
    n = 3000 if which == 1 else 2400
    words = ["alpha", "bravo", "charlie", "delta", "echo"] if which == 1 else \
        ["xray", "yankee", "zulu", "whiskey", "victor"]
    lines = ["SRC,ID,AGE,INC,W,F,T,M,K"]
    for i in range(n):
        if which == 1:
            row = [1, i, i % 90, i * 7 - 5000, f"{1 + i % 50}.25", repr(i / 3),
                   words[i % 5], "" if i % 3 == 0 else str(i % 40), i % 2]
        else:
            row = [2, 100000 + i, 100 + i % 90, 1_000_000 + i * 13, f"{2 + i % 30}.5", repr(-i / 7),
                   words[(i * 3) % 5], "" if i % 4 == 0 else str(200 + i % 50), int(i % 3 == 0)]
        lines.append(",".join(map(str, row)))
    path.write_text("\n".join(lines) + "\n")


def canon_pandas(df: pd.DataFrame) -> dict:
    """Column name -> list of Python values, NA as None."""
    out = {}
    for c in df.columns:
        s = df[c]
        out[c] = [None if pd.isna(x) else (x if isinstance(x, str) else float(x)) for x in s.tolist()]
    return out


def canon_table(t: pa.Table) -> dict:
    out = {}
    for name in t.column_names:
        col = t.column(name)
        if pa.types.is_dictionary(col.type):
            col = col.cast(pa.string())
        out[name] = [None if x is None else (x if isinstance(x, str) else float(x)) for x in col.to_pylist()]
    return out


def test_frames_hold_one_generation_while_import_force_replaces_it(tmp_path):
    srcs = {w: tmp_path / f"src{w}.csv" for w in (1, 2)}
    for w, p in srcs.items():
        write_source(p, w)
    # The oracle: pandas.read_csv of each source, all rows and the rows
    # the filter K(1) keeps.
    want, want_k = {}, {}
    for w, p in srcs.items():
        df = pd.read_csv(p)
        want[w] = canon_pandas(df)
        want_k[w] = canon_pandas(df[df.K == 1].reset_index(drop=True))
    ds_path = tmp_path / "race.mtab"
    cli("import", srcs[1], ds_path)

    stop = threading.Event()
    imports = [0]
    errors = []

    def writer():
        w = 2
        while not stop.is_set():
            p = subprocess.run([str(BIN), "import", "--force", str(srcs[w]), str(ds_path)],
                               capture_output=True, text=True)
            if p.returncode != 0:
                errors.append(p.stderr)
                return
            imports[0] += 1
            w = 3 - w

    t = threading.Thread(target=writer)
    t.start()
    seen = {1: 0, 2: 0}
    changed = 0
    ds = mt.open(ds_path)   # one handle, following the dataset
    try:
        for i in range(360):
            how = i % 6
            try:
                if how == 0:
                    got = canon_pandas(ds.to_pandas())
                elif how == 1:
                    got = canon_pandas(ds.to_pandas(filter="K(1)"))
                elif how == 2:
                    got = canon_table(ds.to_polars().to_arrow())
                elif how == 3:
                    got = canon_table(ds.to_arrow())
                elif how == 4:
                    got = canon_table(pa.table(ds.arrow(filter="K(1)")))
                else:
                    got = canon_pandas(mt.open(ds_path).to_pandas(dtypes="stored"))
            except mt.ChangedError as e:
                assert "changed by another process" in str(e)
                changed += 1
                continue
            src = got["SRC"][0] if got["SRC"] else None
            assert src in (1.0, 2.0), got["SRC"][:3]
            oracle = (want_k if how in (1, 4) else want)[int(src)]
            for c in oracle:
                assert got[c] == oracle[c], (i, how, c, int(src))
            assert set(got) == set(oracle)
            seen[int(src)] += 1
    finally:
        stop.set()
        t.join()
    assert not errors, errors
    # The race happened: the dataset was replaced many times and frames
    # of both sources were read.
    assert imports[0] >= 4, imports
    assert seen[1] > 0 and seen[2] > 0, (seen, changed, imports)
    print(f"frames: {seen}, ChangedError: {changed}, imports: {imports[0]}")


def test_a_generation_replaced_before_it_is_held_is_a_clear_error(tmp_path):
    """The native snapshot a call works from, its generation replaced
    before the call opened its files: ChangedError (never the new files'
    values under the old manifest); the Dataset's own calls then read the
    new generation whole (oracle: pandas.read_csv of each source)."""
    srcs = {w: tmp_path / f"src{w}.csv" for w in (1, 2)}
    for w, p in srcs.items():
        write_source(p, w)
    ds = tmp_path / "d.mtab"
    cli("import", srcs[1], ds)
    d = mt.open(ds)
    old = d._current()
    assert canon_pandas(d.to_pandas()) == canon_pandas(pd.read_csv(srcs[1]))
    cli("import", "--force", srcs[2], ds)
    for read in (lambda: old.snap.frame(["ID", "T"], None, True),
                 lambda: old.snap.frame(["ID"], "K(1)", False),
                 lambda: old.snap.dictionary("T"),
                 lambda: old.snap.column("AGE"),
                 lambda: old.snap.select("K(1)")):
        with pytest.raises(mt.ChangedError, match="changed by another process"):
            read()
    assert canon_pandas(d.to_pandas()) == canon_pandas(pd.read_csv(srcs[2]))
    assert canon_table(d.to_arrow()) == canon_pandas(pd.read_csv(srcs[2]))
    b = pd.read_csv(srcs[2])
    assert d.column("ID").tolist() == b.ID.tolist()
    assert d.select("K(1)").tolist() == (b.K == 1).tolist()


def test_text_missing_values_come_from_the_variables_generation(tmp_path):
    """A Variable read before a replacement gives its own generation's
    text for its missing codes (or ChangedError), not the new
    dictionary's entry at the same position."""
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    a.write_text("S\nred\nNA_\nblue\n")
    b.write_text("S\nAAA\nNA_\nzzz\n")
    ds = tmp_path / "d.mtab"
    cli("import", a, ds, "--missing", "S=NA_")
    v = mt.open(ds).variable("S")
    cli("import", "--force", b, ds, "--missing", "S=NA_")
    try:
        assert v.missing_values == ["NA_"]
    except mt.ChangedError:
        pass
    # A fresh look sees the new generation.
    assert mt.open(ds).to_pandas()["S"].tolist() == ["AAA", pd.NA, "zzz"]


# ------------------------------------------------------------------- types

@pytest.fixture(scope="module")
def typed(tmp_path_factory):
    """A census-like CSV with narrow stored types (AGE u8, EDUC u8 …),
    user-missing codes, empty values, implied decimals and floats."""
    d = tmp_path_factory.mktemp("frames")
    csv = d / "c.csv"
    cli("gen", "census", "--rows", "20000", "--seed", "11", "--out", csv)
    # Add a column with empty values, one of floats and one of text with empties.
    df = pd.read_csv(csv)
    rng = np.random.default_rng(5)
    hole = rng.random(len(df)) < 0.1
    df["HOLES"] = pd.array(np.where(hole, 0, rng.integers(0, 250, len(df))), dtype="Int64")
    df.loc[hole, "HOLES"] = pd.NA
    df["RATIO"] = rng.random(len(df)).round(6) * 3
    df.loc[rng.random(len(df)) < 0.05, "RATIO"] = np.nan
    df["WORD"] = np.where(rng.random(len(df)) < 0.2, None, rng.choice(["a", "b", "c"], len(df)))
    df.to_csv(csv, index=False)
    ds = d / "c.mtab"
    cli("import", csv, ds, "--missing", "INCTOT=9999999")
    return csv, ds


def test_default_pandas_types_are_read_csvs_and_do_not_wrap(typed):
    csv, ds = typed
    d = mt.open(ds)
    assert d.variable("AGE").type == "u8"     # the narrow stored type that used to wrap
    got = d.to_pandas()
    plain = pd.read_csv(csv, na_values={"INCTOT": [9999999]})
    nullable = pd.read_csv(csv, na_values={"INCTOT": [9999999]}, dtype_backend="numpy_nullable")
    assert list(got.columns) == list(plain.columns)
    for c in plain.columns:
        if plain[c].dtype == object or pd.api.types.is_string_dtype(plain[c].dtype):
            assert got[c].dtype == "string", c
            assert got[c].tolist() == nullable[c].astype("string").tolist(), c
            continue
        if plain[c].isna().any():
            # read_csv turns integers with holes into float64; ours keep
            # them exact as read_csv's numpy_nullable types do.
            assert got[c].dtype == nullable[c].dtype, (c, got[c].dtype, nullable[c].dtype)
        else:
            assert got[c].dtype == plain[c].dtype, (c, got[c].dtype, plain[c].dtype)
        pd.testing.assert_series_equal(got[c].astype("Float64"), nullable[c].astype("Float64"),
                                       check_exact=True, check_names=False)
    # The reported wrap-arounds.
    assert (got.AGE ** 2).max() == (plain.AGE ** 2).max() == plain.AGE.max() ** 2
    assert (got.AGE ** 2).max() > 255
    inc = got.INCTOT - 100000
    want = plain.INCTOT - 100000
    assert inc.min() == want.min() < 0
    assert inc.dropna().tolist() == want.dropna().astype(np.int64).tolist()
    assert (got.HOLES * 1000).max() == (plain.HOLES * 1000).max()


def test_filtered_frame_matches_read_csv(typed):
    csv, ds = typed
    got = mt.open(ds).to_pandas(["AGE", "INCTOT", "PERWT", "WORD"], filter="AGE(30-40) SEX(2)")
    plain = pd.read_csv(csv, na_values={"INCTOT": [9999999]}, dtype_backend="numpy_nullable")
    want = plain[(plain.AGE >= 30) & (plain.AGE <= 40) & (plain.SEX == 2)].reset_index(drop=True)
    assert len(got) == len(want) > 0
    assert got.AGE.dtype == np.int64 and got.PERWT.dtype == np.float64
    for c in ["AGE", "INCTOT", "PERWT"]:
        assert got[c].astype("Float64").tolist() == want[c].astype("Float64").tolist(), c
    assert got.WORD.tolist() == want.WORD.astype("string").tolist()


def test_stored_dtypes_keep_the_stored_types(typed):
    csv, ds = typed
    d = mt.open(ds)
    got = d.to_pandas(dtypes="stored")
    plain = pd.read_csv(csv, na_values={"INCTOT": [9999999]}, dtype_backend="numpy_nullable")
    names = {"u8": "UInt8", "i8": "Int8", "u16": "UInt16", "i16": "Int16", "u32": "UInt32",
             "i32": "Int32", "i64": "Int64", "f32": "Float32", "f64": "Float64"}
    for v in map(d.variable, d.variables):
        if v.kind == "string":
            continue
        want = "Float64" if v.decimals else names[v.type]
        assert str(got[v.name].dtype) == want, (v.name, got[v.name].dtype, want)
        assert got[v.name].astype("Float64").tolist() == plain[v.name].astype("Float64").tolist(), v.name
    # The stored types are the compact ones, and they do wrap: that is
    # what the option is for (memory), and why it is not the default.
    assert str(got.AGE.dtype) == "UInt8"
    with pytest.raises(ValueError, match="dtypes"):
        d.to_pandas(dtypes="narrow")


def test_polars_and_arrow_types_are_read_csvs(typed):
    csv, ds = typed
    d = mt.open(ds)
    got = d.to_polars()
    want = pl.read_csv(csv, null_values={"INCTOT": "9999999"})
    for c in want.columns:
        if want[c].dtype == pl.String:
            assert got[c].cast(pl.String).to_list() == [None if x == "" else x for x in want[c].to_list()], c
            continue
        assert got[c].dtype == want[c].dtype, (c, got[c].dtype, want[c].dtype)
        assert got[c].to_list() == want[c].to_list(), c
    assert got.select((pl.col("AGE") ** 2).max()).item() == want.select((pl.col("AGE") ** 2).max()).item()
    assert got.select((pl.col("AGE") * pl.col("AGE")).max()).item() > 255
    assert got.select((pl.col("INCTOT") - 100000).min()).item() < 0
    assert got.select((pl.col("INCTOT") - 100000).min()).item() == \
        want.select((pl.col("INCTOT") - 100000).min()).item()

    t = d.to_arrow()
    wt = pacsv.read_csv(csv, convert_options=pacsv.ConvertOptions(null_values=["", "9999999"],
                                                                  strings_can_be_null=True))
    for name in wt.column_names:
        if pa.types.is_string(wt.schema.field(name).type) or pa.types.is_large_string(wt.schema.field(name).type):
            assert t.column(name).cast(pa.string()).to_pylist() == wt.column(name).to_pylist(), name
            continue
        assert t.schema.field(name).type == wt.schema.field(name).type, name
        assert t.column(name).to_pylist() == wt.column(name).to_pylist(), name

    # dtypes="stored": the stored types, handed over as built.
    st = d.to_arrow(dtypes="stored")
    assert st.schema.field("AGE").type == pa.uint8()
    assert d.to_polars(["AGE"], dtypes="stored")["AGE"].dtype == pl.UInt8
    assert st.column("AGE").to_pylist() == wt.column("AGE").to_pylist()
    with pytest.raises(ValueError, match="dtypes"):
        d.arrow(dtypes="int64")
