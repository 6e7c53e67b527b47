"""Setup files from Python: ``mt.import_setup`` reads text data through SPSS
syntax (checked against what GNU PSPP itself reads with the same syntax) and
a Stata dictionary plus do-file (checked against pandas.read_fwf)."""

import shutil
import subprocess

import numpy as np
import pandas as pd
import pyreadstat
import pytest

import microtab as mt

SPS = """DATA LIST FILE='d.dat' /ID 1-4 SEX 5 INC 6-12 (2) NAME 13-18 (A).
VARIABLE LABELS SEX 'Sex' /INC 'Income'.
VALUE LABELS SEX 1 'Male' 2 'Female' 9 'Not stated'.
MISSING VALUES SEX (9) /INC (LO THRU -1000).
"""


def data(tmp_path, n=4000, seed=2):
    """Fixed-width records; columns count bytes ("Zoë" takes 4)."""
    rng = np.random.default_rng(seed)
    lines = []
    for i in range(n):
        name = str(rng.choice(["ab", "Zoë", ""])).encode("utf-8").ljust(6)
        lines.append(f"{i + 1:4d}{rng.choice([1, 2, 9])}{rng.integers(-500000, 9000000):7d}".encode() + name)
    p = tmp_path / "d.dat"
    p.write_bytes(b"\n".join(lines) + b"\n")
    return p


@pytest.mark.skipif(shutil.which("pspp") is None, reason="PSPP runs the syntax as the oracle")
def test_import_setup_reads_what_pspp_reads(tmp_path):
    dat = data(tmp_path)
    sps = tmp_path / "d.sps"
    sps.write_text(SPS, encoding="utf-8")
    ds = mt.import_setup(dat, sps, tmp_path / "d.mtab", progress=False)
    (tmp_path / "run.sps").write_text(SPS + f"SAVE OUTFILE='{tmp_path / 'o.sav'}'.\n", encoding="utf-8")
    subprocess.run(["pspp", "-b", "run.sps"], cwd=tmp_path, check=True, capture_output=True, timeout=300)
    want, meta = pyreadstat.read_sav(str(tmp_path / "o.sav"))
    got = ds.to_pandas()
    assert len(got) == len(want) == 4000
    assert list(got["ID"]) == list(want["ID"])
    # Missing values are missing in a frame, as pyreadstat gives them.
    for c in ["SEX", "INC"]:
        g = [None if pd.isna(x) else float(x) for x in got[c]]
        w = [None if pd.isna(x) else float(x) for x in want[c]]
        assert g == pytest.approx(w, abs=1e-9), c
    assert [x if isinstance(x, str) else "" for x in got["NAME"]] == [x.rstrip() for x in want["NAME"]]
    info = ds.variable("SEX").info()
    assert info["label"] == meta.column_names_to_labels["SEX"]
    assert info["value_labels"] == {"1": "Male", "2": "Female", "9": "Not stated"}


def test_import_setup_takes_a_dictionary_and_a_do_file(tmp_path):
    dat = data(tmp_path, n=500)
    (tmp_path / "d.dct").write_text(
        "infix dictionary using d.dat {\n int id 1-4\n byte sex 5\n double inc 6-12\n str6 name 13-18\n}\n",
        encoding="utf-8")
    (tmp_path / "d.do").write_text(
        'replace inc = inc / 100\nlabel define s 1 "Male" 2 "Female"\nlabel values sex s\n'
        "recode sex (9 = .)\n", encoding="utf-8")
    with pytest.warns(mt.ImportNote) as notes:
        ds = mt.import_setup(dat, [tmp_path / "d.dct", tmp_path / "d.do"], tmp_path / "d.mtab", progress=False)
    want = pd.read_fwf(dat, colspecs=[(0, 4), (4, 5), (5, 12)], names=["id", "sex", "inc"], header=None)
    got = ds.to_pandas()
    assert list(got["id"]) == list(want["id"])
    assert list(got["sex"]) == list(want["sex"])
    assert list(got["inc"]) == pytest.approx(list(want["inc"] / 100), abs=1e-9)
    assert ds.variable("sex").info()["value_labels"] == {"1": "Male", "2": "Female"}
    # The recode is not run, and the import says so.
    assert any("recode" in str(n.message) and "not run" in str(n.message) for n in notes)


def test_hierarchical_setup_rows_and_rectype(tmp_path):
    """IPUMS's own hierarchical SPSS setup (tests/fixtures/setup): a row per
    person with the household's variables, or with ``rectype="H"`` a row
    per household; pandas.read_fwf reads the same columns of those lines."""
    fix = __import__("pathlib").Path(__file__).resolve().parents[1] / "fixtures" / "setup"
    dat = fix / "xx9999a.dat"
    lines = dat.read_text().splitlines()
    fwf = pd.read_fwf(dat, colspecs=[(0, 1), (1, 7), (79, 80), (66, 67), (68, 71)], header=None,
                      names=["RECTYPE", "DWNUM", "URBAN", "RELATE", "AGE"], dtype=str)
    is_h = fwf.RECTYPE == "H"
    fwf["URBAN"] = fwf.URBAN.where(is_h).ffill()
    persons = fwf[~is_h].reset_index(drop=True)
    ds = mt.import_setup(dat, fix / "_hier_xx9999a.sps", tmp_path / "p.mtab", keep_niu=True, progress=False)
    assert len(ds) == sum(ln.startswith("P") for ln in lines) == 1777
    df = ds.to_pandas(["DWNUM", "URBAN", "RELATE", "AGE"])
    for c in ["DWNUM", "URBAN", "RELATE", "AGE"]:
        assert df[c].astype("int64").tolist() == persons[c].astype(int).tolist(), c
    with pytest.warns(mt.ImportNote) as notes:
        hh = mt.import_setup(dat, fix / "_hier_xx9999a.sps", tmp_path / "h.mtab", rectype="H", progress=False)
    said = [str(w.message) for w in notes if "are not imported" in str(w.message)]
    # The person records' variables are left out; the note names the one type kept once.
    assert said and said[0].startswith("the variables of records of types other than H are not imported: "), said
    assert "AGE" in said[0]
    assert len(hh) == 364
    assert "AGE" not in hh.variables
    assert hh.to_pandas(["URBAN"])["URBAN"].astype("int64").tolist() == \
        fwf[is_h].URBAN.astype(int).tolist()
