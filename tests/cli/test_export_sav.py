"""`microtab export DS OUT.sav`: a dataset written as an SPSS system file
(bytecode-compressed), read back by pyreadstat, GNU PSPP and R haven, and
by microtab's own import: every value, variable label, value label and
user-missing value."""

import math
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pyreadstat
import pytest

from conftest import run, run_json
from test_export_dta import census, records

FIX = Path(__file__).resolve().parent.parent / "fixtures"


def test_values_labels_and_missing_values_read_back_by_pyreadstat(tmp_path):
    df, ds = census(tmp_path)
    out = tmp_path / "c.sav"
    run("export", ds, out)
    names = [v["name"] for v in run_json("info", ds)["variables"]]
    info = {v["name"]: v for v in run_json("info", ds)["variables"]}
    ours = records(ds, names)
    got, meta = pyreadstat.read_sav(str(out), user_missing=True)
    assert list(got.columns) == [n.replace(" ", "_") for n in names]
    assert len(got) == len(df)
    for i, r in enumerate(ours):
        for n in names:
            g, v = got[n.replace(" ", "_")].iloc[i], r[n]
            if v is None:
                assert g is None or g == "" or (isinstance(g, float) and math.isnan(g)), (n, i, g)
            elif isinstance(v, str):
                assert g == v, (n, i, g, v)
            else:
                assert float(g) == pytest.approx(float(v), rel=1e-15, abs=0), (n, i, g, v)
    # User-missing values: the codes, as SPSS missing values.
    assert meta.missing_ranges["SEX"] == [{"lo": 9.0, "hi": 9.0}]
    assert meta.missing_ranges["INCTOT"] == [{"lo": 9999999.0, "hi": 9999999.0}]
    # STATE's missing code: a text wider than 8 bytes has none in the file
    # microtab writes (noted).
    assert "STATE" not in meta.missing_ranges
    assert meta.variable_value_labels["SEX"] == {1.0: "Male", 2.0: "Female", 9.0: "Not stated"}
    assert meta.column_names_to_labels["SEX"] == "Sex of person"
    # Without user_missing, the codes are missing, as microtab's means have them.
    plain, _ = pyreadstat.read_sav(str(out))
    m = run_json("means", ds, "INCTOT", "--by", "SEX")["total"]["mean"]
    # (by SEX: records whose SEX is missing are left out, as in SPSS.)
    assert plain["INCTOT"][plain["SEX"].notna()].mean() == pytest.approx(m, rel=1e-12)
    assert info["PERWT"]["decimals"] == 2 and meta.original_variable_types["PERWT"] == "F12.2"


def test_pspp_and_haven_read_the_same_file(tmp_path):
    df, ds = census(tmp_path, n=500)
    out = tmp_path / "c.sav"
    run("export", ds, out)
    if shutil.which("pspp-convert") is None:
        pytest.skip("PSPP unavailable")
    csv = tmp_path / "c.csv"
    subprocess.run(["pspp-convert", str(out), str(csv)], check=True, capture_output=True)
    p = pd.read_csv(csv, keep_default_na=False)
    assert len(p) == 500
    assert p["SERIAL"].tolist() == df["SERIAL"].tolist()
    assert [float(x) for x in p["PERWT"]] == pytest.approx(df["PERWT"].tolist(), rel=1e-12)
    assert [s.strip() for s in p["STATE"]] == df["STATE"].tolist()
    script = ("suppressMessages(library(haven)); d <- read_sav('%s', user_na=TRUE); "
              "cat(sum(d$INCTOT == 9999999, na.rm=TRUE), attr(d$SEX, 'label'), "
              "names(attr(d$SEX, 'labels')), sep='|')") % out
    r = subprocess.run(["Rscript", "-e", script], capture_output=True, text=True)
    if r.returncode:
        pytest.skip("R haven unavailable: " + r.stderr[-300:])
    n_na, label, *labs = r.stdout.split("|")
    assert int(n_na) == int((df["INCTOT"] == 9999999).sum())
    assert label == "Sex of person" and labs == ["Male", "Female", "Not stated"]


def test_spss_files_round_trip_through_microtab(tmp_path):
    """SPSS fixtures (user-missing ranges, string labels, very long
    strings, dates) imported, exported and read by pyreadstat: the values
    pyreadstat read from the original."""
    for name in ["sample.sav", "missing_test.sav", "test_width.sav", "labelled-str.sav"]:
        ds = tmp_path / f"{name}.mtab"
        run("import", FIX / "sav" / name, ds)
        out = tmp_path / f"out-{name}"
        run("export", ds, out)
        want, wmeta = pyreadstat.read_sav(str(FIX / "sav" / name))
        got, gmeta = pyreadstat.read_sav(str(out))
        assert list(got.columns) == list(want.columns), name
        for c in want.columns:
            a = [None if (not isinstance(x, str) and pd.isna(x)) or x == "" else x for x in want[c]]
            b = [None if (not isinstance(x, str) and pd.isna(x)) or x == "" else x for x in got[c]]
            if all(isinstance(x, (float, int)) or x is None for x in a):
                assert [x is None for x in b] == [x is None for x in a], (name, c)
                assert [x for x in b if x is not None] == pytest.approx(
                    [x for x in a if x is not None], rel=1e-15), (name, c)
            else:
                assert [str(x).rstrip() if x is not None else None for x in b] == \
                    [str(x).rstrip() if x is not None else None for x in a], (name, c)
        for c, labs in wmeta.variable_value_labels.items():
            assert gmeta.variable_value_labels.get(c) == labs, (name, c)


def test_an_existing_file_is_kept_unless_forced(tmp_path):
    _, ds = census(tmp_path, n=50)
    out = tmp_path / "c.sav"
    out.write_bytes(b"keep me")
    p = run("export", ds, out, ok=False)
    assert "exists" in p.stderr and out.read_bytes() == b"keep me"
    run("export", ds, out, "--force", "--filter", "SEX=1", "--vars", "SEX", "AGE")
    got, _ = pyreadstat.read_sav(str(out))
    assert list(got.columns) == ["SEX", "AGE"] and set(got["SEX"]) == {1.0}


def test_no_labels_writes_codes_without_value_labels(tmp_path):
    from test_export_dta import check_no_labels
    d = check_no_labels(tmp_path, "sav", pyreadstat.read_sav, "(function(p) read_sav(p, user_na=TRUE))")
    assert (d["INCTOT"] == 9999999).any()
