"""``vars=`` and ``filter=`` on every Python import function: the chosen
variables and the records that pass the filter, for CSV (against DuckDB's
SQL on the same file), Stata and SPSS files written by pyreadstat, text
data described by SPSS syntax and fixed-width data with a DDI codebook
(against pandas on what pyreadstat and ``read_fwf`` read); a bad name or
filter raises the package's error naming it, leaves an existing ``out``
as it was (``force=True`` too) and no staging dataset behind."""

import duckdb
import numpy as np
import pandas as pd
import pyreadstat
import pytest

import microtab as mt

FILTER = "AGE(18-64) SEX=2"

DDI = """<?xml version="1.0" encoding="UTF-8"?>
<codeBook xmlns="ddi:codebook:2_5"><fileDscr><fileTxt><fileStrc type="rectangular"/></fileTxt></fileDscr><dataDscr>
<var name="SERIAL"><location StartPos="1" EndPos="5"/><varFormat type="numeric"/></var>
<var name="AGE"><location StartPos="6" EndPos="7"/><varFormat type="numeric"/></var>
<var name="SEX"><location StartPos="8" EndPos="8"/><varFormat type="numeric"/>
  <catgry><catValu>1</catValu><labl>Male</labl></catgry><catgry><catValu>2</catValu><labl>Female</labl></catgry></var>
<var name="INCTOT"><location StartPos="9" EndPos="15"/><varFormat type="numeric"/></var>
<var name="STATE"><location StartPos="16" EndPos="17"/><varFormat type="character"/></var>
</dataDscr></codeBook>
"""

SPS = """DATA LIST FILE='d.dat' /SERIAL 1-5 AGE 6-7 SEX 8 INCTOT 9-15 STATE 16-17 (A).
VALUE LABELS SEX 1 'Male' 2 'Female'.
"""

FORMATS = ["csv", "dta", "sav", "setup", "fixed"]


def frame(n=3000, seed=11):
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "SERIAL": np.arange(1, n + 1),
        "AGE": rng.integers(0, 95, n),
        "SEX": rng.integers(1, 3, n),
        "INCTOT": rng.integers(-9000, 900_000, n),
        "STATE": rng.choice(["CA", "NY", "TX"], n),
    })


def fixed_width(df, path):
    path.write_text("".join(f"{r.SERIAL:5d}{r.AGE:2d}{r.SEX:1d}{r.INCTOT:7d}{r.STATE:2s}\n"
                            for r in df.itertuples()))


def source(tmp_path, fmt, df):
    """The file of `fmt` holding `df`, and how to import it with `kw`."""
    if fmt == "csv":
        src = tmp_path / "d.csv"
        df.to_csv(src, index=False)
        return lambda out, **kw: mt.import_csv(src, out, progress=False, **kw)
    if fmt == "dta":
        src = tmp_path / "d.dta"
        pyreadstat.write_dta(df, str(src))
        return lambda out, **kw: mt.import_dta(src, out, progress=False, **kw)
    if fmt == "sav":
        src = tmp_path / "d.sav"
        pyreadstat.write_sav(df, str(src))
        return lambda out, **kw: mt.import_sav(src, out, progress=False, **kw)
    dat = tmp_path / "d.dat"
    fixed_width(df, dat)
    if fmt == "setup":
        sps = tmp_path / "d.sps"
        sps.write_text(SPS)
        return lambda out, **kw: mt.import_setup(dat, sps, out, progress=False, **kw)
    xml = tmp_path / "d.xml"
    xml.write_text(DDI)
    return lambda out, **kw: mt.import_fixed(dat, xml, out, progress=False, **kw)


def oracle(tmp_path, fmt, df):
    """The source as an independent reader reads it back."""
    if fmt == "dta":
        return pyreadstat.read_dta(str(tmp_path / "d.dta"))[0]
    if fmt == "sav":
        return pyreadstat.read_sav(str(tmp_path / "d.sav"))[0]
    if fmt in ("setup", "fixed"):
        return pd.read_fwf(tmp_path / "d.dat", colspecs=[(0, 5), (5, 7), (7, 8), (8, 15), (15, 17)],
                           names=list(df.columns), header=None, dtype={"STATE": str})
    return None


def staged(tmp_path):
    return [x.name for x in tmp_path.iterdir() if ".import-" in x.name]


@pytest.mark.parametrize("fmt", FORMATS)
def test_vars_and_filter_select_while_importing(tmp_path, fmt):
    df = frame()
    imp = source(tmp_path, fmt, df)
    ds = imp(tmp_path / "o.mtab", vars="AGE, STATE", filter=FILTER)
    assert ds.variables == ["AGE", "STATE"]
    got = ds.to_pandas()
    if fmt == "csv":
        want = duckdb.sql(f"SELECT AGE, STATE FROM read_csv('{tmp_path / 'd.csv'}') "
                          "WHERE AGE BETWEEN 18 AND 64 AND SEX = 2 ORDER BY SERIAL").df()
    else:
        src = oracle(tmp_path, fmt, df)
        want = src[(src.AGE >= 18) & (src.AGE <= 64) & (src.SEX == 2)][["AGE", "STATE"]]
    assert len(got) == len(want) > 300
    assert [float(x) for x in got["AGE"]] == [float(x) for x in want["AGE"]]
    assert list(got["STATE"]) == [s.strip() for s in want["STATE"]]
    assert not staged(tmp_path)
    # A list of names, and the variables alone: every record.
    ds = imp(tmp_path / "v.mtab", vars=["INCTOT", "SERIAL"])
    got = ds.to_pandas()
    assert list(got.columns) == ["INCTOT", "SERIAL"]
    assert [int(x) for x in got["INCTOT"]] == df["INCTOT"].tolist()
    # The filter alone: every variable.
    ds = imp(tmp_path / "f.mtab", filter="STATE=NY INCTOT>500000")
    got = ds.to_pandas()
    want = df[(df.STATE == "NY") & (df.INCTOT > 500000)]
    assert list(got.columns) == list(df.columns)
    assert [int(x) for x in got["SERIAL"]] == want["SERIAL"].tolist()
    assert not staged(tmp_path)


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_bad_name_or_filter_leaves_the_existing_dataset(tmp_path, fmt):
    df = frame(400)
    imp = source(tmp_path, fmt, df)
    out = tmp_path / "o.mtab"
    imp(out, vars=["AGE"])
    before = sorted(p.name for p in out.rglob("*"))

    def untouched():
        assert sorted(p.name for p in out.rglob("*")) == before
        ds = mt.open(out)
        assert ds.variables == ["AGE"]
        assert len(ds.to_pandas()) == 400
        assert not staged(tmp_path)

    with pytest.raises(mt.QueryError, match="NOPE") as e:
        imp(out, vars="AGE NOPE", force=True)
    assert str(out) in str(e.value) and ".import-" not in str(e.value)
    untouched()
    with pytest.raises(mt.QueryError, match="NOPE"):
        imp(out, filter="NOPE=1", force=True)
    untouched()
    with pytest.raises(mt.QueryError, match="filter"):
        imp(out, filter="AGE>", force=True)
    untouched()
    # Without force: the existing dataset is kept, before the file is read.
    with pytest.raises(FileExistsError, match="exists") as e:
        imp(out, vars=["SEX"])
    assert "force=True" in str(e.value)
    untouched()
    with pytest.raises(mt.ArgumentError, match="vars"):
        imp(out, vars=[1, 2], force=True)
    untouched()
    # And with force, a good selection replaces it.
    ds = imp(out, vars=["SEX"], filter="SEX=1", force=True)
    assert set(ds.to_pandas()["SEX"]) == {1} and not staged(tmp_path)


def test_import_file_and_others_take_the_selection(tmp_path):
    """``import_file`` (the format by content) and ``import_xport``."""
    df = frame(500)
    pyreadstat.write_xport(df.astype({"SERIAL": float, "AGE": float, "SEX": float, "INCTOT": float}),
                           str(tmp_path / "d.xpt"))
    pyreadstat.write_sav(df, str(tmp_path / "d.sav"))
    want = df[(df.AGE >= 18) & (df.AGE <= 64) & (df.SEX == 2)]
    for ds in (mt.import_file(tmp_path / "d.sav", tmp_path / "a.mtab", vars="SERIAL", filter=FILTER,
                              progress=False),
               mt.import_xport(tmp_path / "d.xpt", tmp_path / "b.mtab", vars="SERIAL", filter=FILTER,
                               progress=False)):
        assert [int(x) for x in ds.to_pandas()["SERIAL"]] == want["SERIAL"].tolist()
    assert not staged(tmp_path)
