"""SPSS system files from Python: ``mt.import_sav`` and ``mt.import_file``
give the values, labels and user-missing codes pyreadstat reads."""

from pathlib import Path

import pandas as pd
import pyreadstat
import pytest

import microtab as mt

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "sav"


@pytest.mark.parametrize("how", ["import_sav", "import_file"])
@pytest.mark.parametrize("name", ["sample.sav", "sample.zsav"])
def test_import_sav_gives_pyreadstats_values(tmp_path, how, name):
    ds = getattr(mt, how)(FIX / name, tmp_path / "d.mtab", progress=False)
    want, meta = pyreadstat.read_sav(str(FIX / name))
    got = ds.to_pandas()
    assert list(got.columns) == list(want.columns) and len(got) == len(want) == 5
    assert list(got["mynum"]) == list(want["mynum"])
    assert list(got["mychar"]) == list(want["mychar"])
    assert [None if pd.isna(d) else d.isoformat() for d in want["mydate"]] == \
        [None if pd.isna(d) else d for d in got["mydate"]]
    info = ds.variable("mylabl").info()
    assert {float(k): v for k, v in info["value_labels"].items()} == \
        {float(k): v for k, v in meta.variable_value_labels["mylabl"].items()}


def test_user_missing_values_are_missing_in_frames(tmp_path):
    ds = mt.import_sav(FIX / "missing_test.sav", tmp_path / "m.mtab", progress=False)
    want, _ = pyreadstat.read_sav(str(FIX / "missing_test.sav"))
    got = ds.to_pandas()
    assert [None if pd.isna(x) else x for x in got["var1"]] == \
        [None if pd.isna(x) else x for x in want["var1"]]
    assert ds.variable("var1").info()["missing_codes"] == [1.0]
