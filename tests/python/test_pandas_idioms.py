"""The dataset in pandas' idiom (issue 31): ``columns`` and ``shape`` as a
pandas frame of the same CSV has them (pandas as the oracle), a clear
error for a file given to ``open``, and tab completion that offers the
package's names, not the modules it imports."""

import pandas as pd
import pytest

import microtab as mt


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("idioms")
    csv = d / "people.csv"
    csv.write_text("AGE,SEX,INC,NAME\n34,1,1200.5,Ann\n,2,,Bo\n71,1,300,\n5,2,0,Cy\n")
    ds = mt.import_csv(csv, d / "people.mtab")
    return csv, ds


def test_columns_and_shape_are_pandas(data):
    csv, ds = data
    want = pd.read_csv(csv)
    assert ds.columns == list(want.columns)
    assert ds.shape == want.shape
    assert ds.to_pandas().shape == ds.shape


def test_open_a_file_says_to_import_it(data, tmp_path):
    csv, _ = data
    with pytest.raises(NotADirectoryError) as e:
        mt.open(csv)
    msg = str(e.value)
    assert "is a file, not a microtab dataset" in msg and "mt.import_file(" in msg and "'people.mtab'" in msg, msg
    # The advice works as typed.
    out = tmp_path / "people.mtab"
    got = mt.import_file(csv, out)
    assert got.shape == (4, 4)


def test_completion_offers_the_package_names():
    names = dir(mt)
    for leaked in ("np", "json", "os", "html", "Any", "Iterable", "Sequence"):
        assert leaked not in names, leaked
    for public in ("open", "import_file", "Dataset", "Crosstab", "QueryError", "dask"):
        assert public in names, public
    # Still importable as before.
    import microtab.dask  # noqa: F401


def test_without_pandas_the_error_says_how_to_install_it(data, monkeypatch):
    # As in an environment with the wheel alone (pandas is an extra).
    _, ds = data
    monkeypatch.setitem(__import__("sys").modules, "pandas", None)
    for call in (lambda: ds.freq("SEX").to_pandas(), lambda: ds.head(), lambda: ds["AGE"]):
        with pytest.raises(ModuleNotFoundError, match=r'pip install "microtab\[pandas\]"'):
            call()
    # What needs no pandas still works.
    assert ds.freq("SEX").to_dict()["total"]["count"] == 4
