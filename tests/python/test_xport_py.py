"""SAS transport files from Python: ``mt.import_xport`` and
``mt.import_file`` (which recognises the format by its content) give the
values pyreadstat reads, with the member's label as an ImportNote; a
damaged file raises InputError naming the byte and leaves nothing."""

import math
import warnings
from pathlib import Path

import pandas as pd
import pyreadstat
import pytest

import microtab as mt

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "xport"


@pytest.mark.parametrize("how", ["import_xport", "import_file"])
def test_import_xport_gives_pyreadstats_values(tmp_path, how):
    src = FIX / "dates_xpt_v8.xpt"
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        ds = getattr(mt, how)(src, tmp_path / "d.mtab", progress=False)
    notes = [str(x.message) for x in w if issubclass(x.category, mt.ImportNote)]
    # The member's label is the dataset's title, not a note.
    assert not any("dataset label for the dates test dataset" in n for n in notes), notes
    assert ds.title == pyreadstat.read_xport(str(src), metadataonly=True)[1].file_label == \
        "dataset label for the dates test dataset"
    want, meta = pyreadstat.read_xport(str(src))
    got = ds.to_pandas()
    assert list(got.columns) == list(want.columns) and len(got) == len(want) == 19
    for a, b in zip(got["seconds"], want["seconds"]):
        assert a == b
    for a, b in zip(got["missings"], want["missings"]):
        assert (pd.isna(a) and math.isnan(b)) or a == b
    assert list(got["dates"]) == [d.isoformat() for d in want["dates"]]
    assert list(got["string_dt"]) == list(want["string_dt"])
    assert ds.variable("dt").info()["label"] == meta.column_names_to_labels["dt"]


def test_damaged_file_raises_and_writes_nothing(tmp_path):
    bad = tmp_path / "bad.xpt"
    bad.write_bytes((FIX / "sample.xpt").read_bytes()[:1700])
    with pytest.raises(mt.InputError, match="byte"):
        mt.import_xport(bad, tmp_path / "b.mtab", progress=False)
    assert not (tmp_path / "b.mtab").exists()


def test_import_xport_of_another_format_says_so(tmp_path):
    csv = tmp_path / "a.csv"
    csv.write_text("x,y\n1,2\n")
    with pytest.raises(mt.InputError, match="not a SAS transport file"):
        mt.import_xport(csv, tmp_path / "a.mtab", progress=False)
