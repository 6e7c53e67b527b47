"""SAS data sets from Python: ``mt.import_sas7bdat`` and ``mt.import_file``
give the values, labels and special missing values pyreadstat reads."""

from pathlib import Path

import pandas as pd
import pyreadstat
import pytest

import microtab as mt

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "sas7bdat"


@pytest.mark.parametrize("how", ["import_sas7bdat", "import_file"])
@pytest.mark.parametrize("name", ["pyreadstat_sample.sas7bdat", "pyreadstat_sample_bincompressed.sas7bdat"])
def test_import_sas7bdat_gives_pyreadstats_values(tmp_path, how, name):
    ds = getattr(mt, how)(FIX / name, tmp_path / "d.mtab", progress=False)
    want, _ = pyreadstat.read_sas7bdat(str(FIX / name))
    got = ds.to_pandas()
    assert list(got.columns) == list(want.columns) and len(got) == len(want) == 5
    assert list(got["mynum"]) == list(want["mynum"])
    assert list(got["mychar"]) == list(want["mychar"])
    assert [None if pd.isna(d) else d.isoformat() for d in want["mydate"]] == \
        [None if pd.isna(d) else d for d in got["mydate"]]


def test_a_catalog_gives_value_labels_and_special_missing_values_are_missing(tmp_path):
    ds = mt.import_sas7bdat(FIX / "pyreadstat_missing_test.sas7bdat", tmp_path / "m.mtab",
                            catalog=FIX / "pyreadstat_missing_formats.sas7bcat", progress=False)
    _, meta = pyreadstat.read_sas7bdat(str(FIX / "pyreadstat_missing_test.sas7bdat"),
                                       catalog_file=str(FIX / "pyreadstat_missing_formats.sas7bcat"))
    got = ds.to_pandas()
    # .A … ._ are missing in a frame, as pyreadstat gives them without user_missing.
    want, _ = pyreadstat.read_sas7bdat(str(FIX / "pyreadstat_missing_test.sas7bdat"))
    for c in want.columns:
        assert [None if pd.isna(x) else x for x in got[c]] == [None if pd.isna(x) else x for x in want[c]], c
    info = ds.variable("var1").info()
    assert list(info["value_labels"].values()) == list(meta.variable_value_labels["var1"].values())


def test_a_catalog_for_another_format_raises(tmp_path):
    csv = tmp_path / "a.csv"
    csv.write_text("x\n1\n")
    with pytest.raises(mt.InputError, match="sas7bdat"):
        mt.import_file(csv, tmp_path / "d.mtab", catalog=FIX / "pyreadstat_missing_formats.sas7bcat",
                       progress=False)


def test_to_stata_writes_what_pyreadstat_reads_back(tmp_path):
    """A SAS data set's special missing values go out as Stata's letters."""
    ds = mt.import_sas7bdat(FIX / "pyreadstat_missing_test.sas7bdat", tmp_path / "m.mtab", progress=False)
    w = ds.to_stata(tmp_path / "m.dta")
    assert w["rows"] == 1 and w["variables"] == 9
    got, _ = pyreadstat.read_dta(str(tmp_path / "m.dta"), user_missing=True)
    want, _ = pyreadstat.read_sas7bdat(str(FIX / "pyreadstat_missing_test.sas7bdat"), user_missing=True)
    assert [got[c][0] for c in ["var1", "var2", "var3", "var4", "var5", "var6"]] == \
        [want[c][0].lower() for c in ["var1", "var2", "var3", "var4", "var5", "var6"]]
    sample = mt.import_sas7bdat(FIX / "pyreadstat_sample.sas7bdat", tmp_path / "s.mtab", progress=False)
    sample.to_stata(tmp_path / "s.dta", ["mynum", "mychar"], filter="mynum>0")
    got, _ = pyreadstat.read_dta(str(tmp_path / "s.dta"))
    assert got["mynum"].tolist() == [1.1, 1.2, 1000.3] and got["mychar"].tolist() == ["a", "b", "e"]
    with pytest.raises(mt.InputError, match="exists"):
        sample.to_stata(tmp_path / "s.dta")


def test_to_spss_writes_what_pyreadstat_reads_back(tmp_path):
    sample = mt.import_sas7bdat(FIX / "pyreadstat_sample.sas7bdat", tmp_path / "s.mtab", progress=False)
    w = sample.to_spss(tmp_path / "s.sav", ["mynum", "mychar", "mydate"], filter="mynum>0")
    assert w["rows"] == 3
    got, meta = pyreadstat.read_sav(str(tmp_path / "s.sav"))
    assert got["mynum"].tolist() == [1.1, 1.2, 1000.3] and got["mychar"].tolist() == ["a", "b", "e"]
    assert [None if pd.isna(d) else d.isoformat() for d in got["mydate"]] == ["2018-05-06", "1880-05-06", None]
