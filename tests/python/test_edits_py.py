"""The dataset-changing commands from Python (``label``, ``missing``,
``compute``, ``recode``, ``rename``, ``drop``, ``subset``): the same
library functions and checks as the CLI — the CLI run on a copy of the
dataset is the oracle of the metadata and of the refusals, pandas of the
values."""

import json
import os
import shutil
import subprocess

import numpy as np
import pandas as pd
import pytest

import microtab as mt

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
CLI = os.environ.get("MICROTAB_BIN", os.path.join(ROOT, "target", "release", "microtab"))
needs_cli = pytest.mark.skipif(not os.path.exists(CLI), reason="the CLI binary is not built")


@pytest.fixture()
def pair(tmp_path):
    """The same dataset twice: one changed from Python, one by the CLI."""
    rng = np.random.default_rng(9)
    n = 600
    df = pd.DataFrame({"AGE": rng.integers(0, 90, n), "SEX": rng.integers(1, 3, n),
                       "INC": rng.integers(0, 100000, n), "W": rng.uniform(1, 3, n).round(2),
                       "CITY": rng.choice(["Oslo", "Bergen"], n)})
    df.loc[:9, "INC"] = 9999999
    csv = tmp_path / "d.csv"
    df.to_csv(csv, index=False)
    py = mt.import_csv(csv, tmp_path / "py.mtab")
    shutil.copytree(py.path, tmp_path / "cli.mtab")
    return df, py, str(tmp_path / "cli.mtab")


def cli(*args, ok=True):
    r = subprocess.run([CLI, *map(str, args)], capture_output=True, text=True)
    if ok:
        assert r.returncode == 0, r.stderr
    return r


def variables(path):
    m = json.load(open(os.path.join(path, "manifest.json")))
    keep = ("name", "label", "value_labels", "missing_codes", "kind", "decimals")
    return [{k: v.get(k) for k in keep} for v in m["variables"]]


@needs_cli
def test_labels_and_missing_codes_are_the_cli_s(pair):
    df, py, other = pair
    v = py.label("SEX", {1: "Male", 2: "Female"}, var_label="Sex")
    cli("label", other, "SEX", "1=Male", "2=Female", "--var-label", "Sex")
    assert v.value_labels == {"1": "Male", "2": "Female"} and v.label == "Sex"
    py.label("SEX", {2: None})
    cli("label", other, "SEX", "2=")
    py.label("CITY", {"Oslo": "Capital", "Nowhere": "Not in the data"})
    cli("label", other, "CITY", "Oslo=Capital", "Nowhere=Not in the data")
    m = py.missing("INC", [9999999])
    cli("missing", other, "INC", "9999999")
    assert m.missing_values == [9999999]
    assert variables(py.path) == variables(other)
    # The code is missing now: pandas' mean of the other records.
    got = py.means("INC", by="SEX").to_pandas().set_index("SEX")["mean"]
    want = df[df.INC != 9999999].groupby("SEX").INC.mean()
    np.testing.assert_allclose(got.to_numpy(), want.to_numpy(), rtol=1e-12)
    py.missing("INC", clear=True)
    cli("missing", other, "INC", "--clear")
    py.label("SEX", clear=True, var_label="")
    cli("label", other, "SEX", "--clear", "--var-label", "")
    assert variables(py.path) == variables(other)


@needs_cli
def test_refusals_are_the_cli_s(pair):
    df, py, other = pair
    cases = [
        (lambda: py.label("SEX", {"x": "y"}), ("label", other, "SEX", "x=y")),
        (lambda: py.missing("CITY", ["Paris"]), ("missing", other, "CITY", "Paris")),
        (lambda: py.rename("AGE", "SEX"), ("rename", other, "AGE", "SEX")),
        (lambda: py.rename("AGE", "1AGE"), ("rename", other, "AGE", "1AGE")),
        (lambda: py.label("NOPE", {1: "a"}), ("label", other, "NOPE", "1=a")),
        (lambda: py.compute("AGE = SEX + 1"), ("compute", other, "AGE", "=", "SEX", "+", "1")),
    ]
    for call, args in cases:
        with pytest.raises(mt.MicrotabError) as e:
            call()
        r = cli(*args, ok=False)
        assert r.returncode != 0
        first = r.stderr.splitlines()[0].removeprefix("error: ")
        # The same check says the same thing (the CLI may add its own tip).
        msg = str(e.value).replace(py.path, other)
        assert first.split(" (")[0].split("; ")[0] in msg, (first, msg)
    with pytest.raises(ValueError, match="nothing to do"):
        py.label("SEX")
    with pytest.raises(ValueError, match="clear=True"):
        py.missing("INC")
    assert variables(py.path) == variables(other)


@needs_cli
def test_compute_recode_rename_drop_subset(pair, tmp_path):
    df, py, other = pair
    py.compute("ADULT = AGE >= 18", label="Adult", value_labels={0: "No", 1: "Yes"})
    cli("compute", other, "ADULT", "=", "AGE", ">=", "18", "--var-label", "Adult",
        "--value-label", "0=No", "--value-label", "1=Yes")
    py.compute("INCW", "INC * W")
    cli("compute", other, "INCW = INC * W")
    py.recode("AGEG", "AGE", ['0-17 "Child"', '18-64 "Adult"', '65-* "Senior"'])
    cli("recode", other, "AGEG", "--from", "AGE", '0-17 "Child"; 18-64 "Adult"; 65-* "Senior"')
    assert variables(py.path) == variables(other)
    got = py.to_pandas(["ADULT", "INCW", "AGEG"])
    assert (got["ADULT"].to_numpy() == (df.AGE >= 18).astype(int).to_numpy()).all()
    np.testing.assert_allclose(got["INCW"].to_numpy(float), (df.INC * df.W).to_numpy(), rtol=1e-9)
    want = np.select([df.AGE <= 17, df.AGE <= 64], [1, 2], 3)
    assert (got["AGEG"].to_numpy() == want).all()
    with pytest.raises(mt.QueryError):
        py.compute("ADULT = AGE > 20")            # exists: replace=True needed
    py.compute("ADULT = AGE > 20", replace=True)
    assert (py["ADULT"].to_numpy() == (df.AGE > 20).astype(int).to_numpy()).all()
    assert py.rename("INCW", "INC_W").name == "INC_W"
    cli("rename", other, "INCW", "INC_W")
    assert py.drop("INC_W", ["AGEG"]) == ["INC_W", "AGEG"]
    cli("drop", other, "INC_W", "AGEG")
    assert py.columns == ["AGE", "SEX", "INC", "W", "CITY", "ADULT"]
    py.design("W")
    with pytest.raises(mt.QueryError, match="part of the survey design.*design\\(clear=True\\)"):
        py.drop("W")
    py.design(clear=True)
    with pytest.raises(mt.QueryError, match="every variable"):
        py.drop(py.columns)
    sub = py.subset(tmp_path / "old.mtab", ["AGE", "CITY"], filter="AGE >= 65")
    assert sub.shape == (int((df.AGE >= 65).sum()), 2)
    assert sub.to_pandas()["CITY"].astype(str).tolist() == df.loc[df.AGE >= 65, "CITY"].tolist()
    with pytest.raises(FileExistsError):
        py.subset(tmp_path / "old.mtab", ["AGE"])


@needs_cli
def test_overlapping_recode_rules_warn_as_the_cli_notes(pair):
    df, py, other = pair
    rules = "0-17; 10-64; 65-*"
    with pytest.warns(mt.RecodeNote) as seen:
        py.recode("G", "AGE", rules)
    r = cli("recode", other, "G", "--from", "AGE", rules)
    notes = [l[len("note: "):] for l in r.stderr.splitlines() if l.startswith("note: ")]
    assert [str(w.message) for w in seen] == notes and "AGE 10-17" in notes[0], notes
    # The first rule wins where they overlap (numpy, by hand).
    want = np.select([df.AGE <= 17, df.AGE <= 64, df.AGE >= 65], [1, 2, 3])
    assert (py.column("G") == want).all()
    # No overlap: no warning.
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error", mt.RecodeNote)
        py.recode("H", "AGE", "0-17; 18-64; 65-*")
