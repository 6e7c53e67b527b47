"""SPSS portable files from Python: ``mt.import_por`` and ``mt.import_file``
give the values, labels and user-missing codes pyreadstat reads."""

from pathlib import Path

import pandas as pd
import pyreadstat
import pytest

import microtab as mt

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "por"


@pytest.mark.parametrize("how", ["import_por", "import_file"])
def test_import_por_gives_pyreadstats_values(tmp_path, how):
    ds = getattr(mt, how)(FIX / "sample.por", tmp_path / "d.mtab", progress=False)
    want, meta = pyreadstat.read_por(str(FIX / "sample.por"))
    got = ds.to_pandas()
    assert list(got.columns) == list(want.columns) and len(got) == len(want) == 5
    assert list(got["MYNUM"]) == list(want["MYNUM"])
    assert list(got["MYCHAR"]) == list(want["MYCHAR"])
    assert [None if pd.isna(d) else d.isoformat() for d in want["MYDATE"]] == \
        [None if pd.isna(d) else d for d in got["MYDATE"]]
    info = ds.variable("MYLABL").info()
    assert {float(k): v for k, v in info["value_labels"].items()} == \
        {float(k): v for k, v in meta.variable_value_labels["MYLABL"].items()}
    assert info["label"] == "labeled"


def test_damaged_files_raise_input_errors_naming_the_byte(tmp_path):
    bad = tmp_path / "bad.por"
    bad.write_bytes((FIX / "sample.por").read_bytes()[:700])
    with pytest.raises(mt.InputError, match=r"byte \d+: .*truncated"):
        mt.import_por(bad, tmp_path / "b.mtab", progress=False)
    assert not (tmp_path / "b.mtab").exists()
