"""Stata files from Python: ``mt.import_dta`` and ``mt.import_file``
(which recognises the format by its content) give the values, labels and
extended missing values pyreadstat reads; a damaged file raises
InputError naming the byte and leaves nothing."""

import warnings
from pathlib import Path

import pandas as pd
import pyreadstat
import pytest

import microtab as mt

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "dta"


@pytest.mark.parametrize("how", ["import_dta", "import_file"])
def test_import_dta_gives_pyreadstats_values(tmp_path, how):
    src = FIX / "sample.dta"
    ds = getattr(mt, how)(src, tmp_path / "d.mtab", progress=False)
    want, meta = pyreadstat.read_dta(str(src))
    got = ds.to_pandas()
    assert list(got.columns) == list(want.columns) and len(got) == len(want) == 5
    assert list(got["mynum"]) == list(want["mynum"])
    assert list(got["mychar"]) == list(want["mychar"])
    assert [None if pd.isna(d) else d.isoformat() for d in want["mydate"]] == \
        [None if pd.isna(d) else d for d in got["mydate"]]
    assert got["mylabl"].dtype == "int64"
    info = ds.variable("mylabl").info()
    assert info["label"] == meta.column_names_to_labels["mylabl"]
    assert {float(k): v for k, v in info["value_labels"].items()} == \
        {float(k): v for k, v in meta.variable_value_labels["mylabl"].items()}


def test_extended_missing_values_are_missing_in_frames(tmp_path):
    """.a, .h, .z are user-missing: absent from the values a frame holds
    (as pyreadstat reads them without user_missing), kept as codes."""
    ds = mt.import_dta(FIX / "tagged-na-double.dta", tmp_path / "t.mtab", progress=False)
    want, _ = pyreadstat.read_dta(str(FIX / "tagged-na-double.dta"))
    got = ds.to_pandas()
    assert [None if pd.isna(x) else x for x in got["x"]] == \
        [None if pd.isna(x) else x for x in want["x"]]
    assert len(ds.variable("x").info()["missing_codes"]) == 3


def test_dataset_label_is_the_title_and_damage_raises(tmp_path):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        mt.import_dta(FIX / "notes.dta", tmp_path / "n.mtab", progress=False)
    notes = [str(x.message) for x in w if issubclass(x.category, mt.ImportNote)]
    assert not any("This is a test dataset." in n for n in notes), notes
    ds = mt.open(tmp_path / "n.mtab")
    want = pyreadstat.read_dta(str(FIX / "notes.dta"), metadataonly=True)[1].file_label
    assert ds.title == want == "This is a test dataset." and ds.description is None
    # Set from Python: the CLI's info and an export to SPSS say the same.
    assert ds.set_title("A <b>title</b> & é", description="Two\nlines") is ds
    assert (ds.title, ds.description) == ("A <b>title</b> & é", "Two\nlines")
    assert mt.open(tmp_path / "n.mtab").info()["title"] == "A <b>title</b> & é"
    ds.to_spss(tmp_path / "n.sav")
    assert pyreadstat.read_sav(str(tmp_path / "n.sav"), metadataonly=True)[1].file_label == "A <b>title</b> & é"
    ds.set_title(description="")
    assert (ds.title, ds.description) == ("A <b>title</b> & é", None)
    ds.set_title("")
    assert ds.title is None
    with pytest.raises(mt.ArgumentError, match="nothing to do"):
        ds.set_title()
    with pytest.raises(mt.ArgumentError, match="title must be a str"):
        ds.set_title(3)
    bad = tmp_path / "bad.dta"
    bad.write_bytes((FIX / "sample.dta").read_bytes()[:900])
    with pytest.raises(mt.InputError, match="byte"):
        mt.import_dta(bad, tmp_path / "b.mtab", progress=False)
    assert not (tmp_path / "b.mtab").exists()
    csv = tmp_path / "a.csv"
    csv.write_text("x,y\n1,2\n")
    with pytest.raises(mt.InputError, match="not a Stata file"):
        mt.import_dta(csv, tmp_path / "a.mtab", progress=False)


@pytest.mark.parametrize("fmt", ["dta", "sav"])
def test_labels_false_writes_codes_without_value_labels(tmp_path, fmt):
    """``to_stata``/``to_spss(labels=False)``: pyreadstat reads the same
    values and variable labels as the default file's, and no value label."""
    src = FIX / "sample.dta"
    ds = mt.import_dta(src, tmp_path / "d.mtab", progress=False)
    write, read = (ds.to_stata, pyreadstat.read_dta) if fmt == "dta" else (ds.to_spss, pyreadstat.read_sav)
    default, labelled, bare = (tmp_path / f"{n}.{fmt}" for n in ("default", "labels", "bare"))
    write(default)
    write(labelled, labels=True)
    write(bare, labels=False)
    d, dm = read(str(default))
    lab, lm = read(str(labelled))
    b, bm = read(str(bare))
    _, want = pyreadstat.read_dta(str(src))
    assert dm.variable_value_labels["mylabl"] == lm.variable_value_labels["mylabl"]
    assert {float(k): v for k, v in dm.variable_value_labels["mylabl"].items()} == \
        {float(k): v for k, v in want.variable_value_labels["mylabl"].items()}
    pd.testing.assert_frame_equal(d, lab)
    assert bm.variable_value_labels == {} and bm.value_labels == {}
    pd.testing.assert_frame_equal(d, b)
    assert bm.column_names_to_labels == dm.column_names_to_labels
    assert bm.column_names_to_labels["mylabl"] == want.column_names_to_labels["mylabl"]
