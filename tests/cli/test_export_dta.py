"""`microtab export DS OUT.dta`: a dataset written as a Stata file
(release 118), read back by pyreadstat, pandas and R haven (three
readers, two of them independent of microtab's own), and by microtab's own
import: every value, variable label, value label and missing value."""

import math
import subprocess

import numpy as np
import pandas as pd
import pyreadstat
import pytest

from conftest import run, run_json

TYPES = {"byte": "int8", "int": "int16", "long": "int32"}


def census(tmp_path, n=3000, seed=5):
    """A census-like CSV: codes with labels and a missing code, a weight
    with two decimals, income with its N/A code 9999999, a float, text
    with a missing code, a big integer, a name Stata cannot take."""
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({
        "SERIAL": np.arange(1, n + 1) * 1000,
        "AGE": rng.integers(0, 99, n),
        "SEX": rng.choice([1, 2, 9], n),
        "PERWT": np.round(rng.uniform(1, 400, n), 2),
        "INCTOT": np.where(rng.random(n) < 0.1, 9999999, rng.integers(-5000, 500000, n)),
        "X": rng.normal(size=n),
        "STATE": rng.choice(["Ohio", "Texas", "Unknown", "Nueva León"], n),
        "BIG": rng.integers(3_000_000_000, 4_000_000_000, n),
        "per cent": np.round(rng.uniform(0, 1, n), 3),
    })
    df.loc[df.index % 17 == 0, "X"] = np.nan
    df["AGE"] = df["AGE"].astype("Int64")
    df.loc[df.index % 23 == 0, "AGE"] = pd.NA
    src = tmp_path / "census.csv"
    df.to_csv(src, index=False)
    ds = tmp_path / "census.mtab"
    run("import", src, ds, "--missing", "SEX=9", "--missing", "INCTOT=9999999",
        "--missing", "STATE=Unknown")
    run("label", ds, "SEX", "1=Male", "2=Female", "9=Not stated", "--var-label", "Sex of person")
    run("label", ds, "AGE", "--var-label", "Age in years")
    return df, ds


def records(ds, names):
    return run_json("list", ds, *names, "--all")["records"]


def test_values_labels_and_missing_values_read_back_by_three_readers(tmp_path):
    df, ds = census(tmp_path)
    out = tmp_path / "c.dta"
    p = run("export", ds, out)
    assert "per_cent" in p.stderr  # the renamed variable, noted
    names = [v["name"] for v in run_json("info", ds)["variables"]]
    ours = records(ds, names)
    info = {v["name"]: v for v in run_json("info", ds)["variables"]}
    got, meta = pyreadstat.read_dta(str(out), user_missing=True)
    assert list(got.columns) == [n.replace(" ", "_") for n in names]
    assert len(got) == len(df)
    # Types: the narrowest Stata integer that holds the values.
    assert meta.readstat_variable_types["AGE"] == "int8"
    assert meta.readstat_variable_types["SEX"] == "int8"
    assert meta.readstat_variable_types["SERIAL"] == "int32"
    assert meta.readstat_variable_types["BIG"] == "double"
    assert meta.readstat_variable_types["PERWT"] == "double"
    for i, r in enumerate(ours):
        for n in names:
            g = got[n.replace(" ", "_")].iloc[i]
            v = r[n]
            if v is None:
                assert g is None or (isinstance(g, float) and math.isnan(g)) or g == "", (n, i, g)
            elif info[n]["missing_codes"] and info[n]["kind"] != "string" and \
                    float(v) in [float(c) for c in info[n]["missing_codes"]]:
                # A missing code: a letter, labelled by the code's label
                # or the code.
                assert isinstance(g, str) and len(g) == 1, (n, i, g)
                lab = meta.variable_value_labels[n][g]
                assert lab == info[n]["value_labels"].get(str(v), str(v)), (n, lab)
            elif isinstance(v, str):
                assert g == v, (n, i, g, v)
            else:
                assert float(g) == pytest.approx(float(v), rel=1e-15, abs=0), (n, i, g, v)
    assert meta.column_names_to_labels["SEX"] == "Sex of person"
    assert meta.column_names_to_labels["AGE"] == "Age in years"
    assert meta.variable_value_labels["SEX"][1] == "Male"
    # pandas (its own reader): the same numbers, missing values as NaN.
    pd_df = pd.read_stata(out, convert_categoricals=False)
    assert pd_df["PERWT"].tolist() == pytest.approx(df["PERWT"].tolist(), rel=1e-15)
    inc = df["INCTOT"].where(df["INCTOT"] != 9999999)
    assert pd_df["INCTOT"].isna().tolist() == inc.isna().tolist()
    assert pd_df["INCTOT"].dropna().tolist() == inc.dropna().tolist()
    assert pd_df["STATE"].tolist() == df["STATE"].tolist()
    assert pd_df["BIG"].tolist() == df["BIG"].astype(float).tolist()


def test_r_haven_reads_tagged_missing_values_and_labels(tmp_path):
    _, ds = census(tmp_path, n=500)
    out = tmp_path / "c.dta"
    run("export", ds, out)
    script = (
        "suppressMessages(library(haven)); d <- read_dta('%s'); "
        "cat(sum(is_tagged_na(d$INCTOT, 'a')), sum(is.na(d$AGE) & !is_tagged_na(d$AGE)), "
        "sum(is_tagged_na(d$SEX, 'a')), names(attr(d$SEX, 'labels')), attr(d$AGE, 'label'), sep='|')"
    ) % out
    p = subprocess.run(["Rscript", "-e", script], capture_output=True, text=True)
    if p.returncode:
        pytest.skip("R haven unavailable: " + p.stderr[-300:])
    inc_na, age_na, sex_9, *rest = p.stdout.split("|")
    freq = {(r["value"]): r["count"] for r in run_json("freq", ds, "SEX", "--include-missing")["rows"]}
    assert int(sex_9) == freq[9]
    assert int(inc_na) == sum(1 for r in records(ds, ["INCTOT"]) if r["INCTOT"] == 9999999)
    assert int(age_na) == sum(1 for r in records(ds, ["AGE"]) if r["AGE"] is None)
    assert rest[:3] == ["Male", "Female", "Not stated"] and rest[-1] == "Age in years"


def test_export_then_import_gives_the_dataset_back(tmp_path):
    _, ds = census(tmp_path, n=2000)
    out = tmp_path / "c.dta"
    run("export", ds, out)
    back = tmp_path / "back.mtab"
    run("import", out, back)
    names = [v["name"] for v in run_json("info", ds)["variables"] if v["name"] != "per cent"]
    a, b = records(ds, names), records(back, names)
    for ra, rb in zip(a, b):
        for n in names:
            if n in ("SEX", "INCTOT") and ra[n] in (9, 9999999):
                assert rb[n] is not None  # a labelled missing code
                continue
            assert rb[n] == ra[n] or (isinstance(ra[n], float) and rb[n] == pytest.approx(ra[n], rel=1e-15)), (n, ra[n], rb[n])
    # Means agree: missing codes stay out of both.
    m1 = run_json("means", ds, "INCTOT", "--by", "SEX")["total"]["mean"]
    m2 = run_json("means", back, "INCTOT", "--by", "SEX")["total"]["mean"]
    assert m1 == pytest.approx(m2, rel=1e-12)


def test_stata_and_sas_letters_survive_a_round_trip(tmp_path):
    from pathlib import Path
    fix = Path(__file__).resolve().parent.parent / "fixtures"
    ds = tmp_path / "m.mtab"
    run("import", fix / "dta" / "missing_test.dta", ds)
    out = tmp_path / "m.dta"
    run("export", ds, out)
    want, _ = pyreadstat.read_dta(str(fix / "dta" / "missing_test.dta"), user_missing=True)
    got, _ = pyreadstat.read_dta(str(out), user_missing=True)
    norm = lambda x: x if isinstance(x, str) else (None if pd.isna(x) else float(x))  # noqa: E731
    for c in want.columns:
        assert [norm(x) for x in got[c]] == [norm(x) for x in want[c]], c


def test_filter_vars_and_long_text(tmp_path):
    df, ds = census(tmp_path, n=1000)
    long_csv = tmp_path / "long.csv"
    pd.DataFrame({"id": [1, 2, 3], "t": ["x" * 3000, "short", ""]}).to_csv(long_csv, index=False)
    lds = tmp_path / "long.mtab"
    run("import", long_csv, lds)
    out = tmp_path / "l.dta"
    run("export", lds, out)
    got, meta = pyreadstat.read_dta(str(out))
    assert got["t"].tolist() == ["x" * 3000, "short", ""]
    assert pd.read_stata(out)["t"].tolist() == ["x" * 3000, "short", ""]
    out = tmp_path / "f.dta"
    run("export", ds, out, "--vars", "AGE,PERWT", "--filter", "SEX=1")
    got, _ = pyreadstat.read_dta(str(out))
    want = df[df.SEX == 1]
    assert list(got.columns) == ["AGE", "PERWT"] and len(got) == len(want)
    assert got["PERWT"].tolist() == pytest.approx(want["PERWT"].tolist(), rel=1e-15)


def test_an_existing_file_is_kept_unless_forced(tmp_path):
    _, ds = census(tmp_path, n=100)
    out = tmp_path / "c.dta"
    out.write_bytes(b"keep me")
    p = run("export", ds, out, ok=False)
    assert "exists" in p.stderr and "--force" in p.stderr
    assert out.read_bytes() == b"keep me"
    p = run("export", ds, out, "--vars", "NOPE", "--force", ok=False)
    assert "NOPE" in p.stderr and out.read_bytes() == b"keep me"
    assert not list(tmp_path.glob(".c.dta.tmp-*"))
    run("export", ds, out, "--force")
    assert len(pyreadstat.read_dta(str(out))[0]) == 100


def test_dates_go_out_as_stata_dates_and_come_back(tmp_path):
    """A Stata file's %td and %tc columns (ISO text in the dataset) go out
    as %td and %tc numbers: pandas and pyreadstat read the same dates."""
    df = pd.DataFrame({
        "d": pd.to_datetime(["1960-01-01", "2018-05-06", "1880-05-06", None]),
        "t": pd.to_datetime(["2020-12-09 14:05:00", "1960-01-01 00:00:01.5", None, "1999-12-31 23:59:59"],
                        format="ISO8601"),
        "n": [1, 2, 3, 4],
    })
    src = tmp_path / "d.dta"
    df.to_stata(src, write_index=False, version=118, convert_dates={"d": "td", "t": "tc"})
    ds = tmp_path / "d.mtab"
    run("import", src, ds)
    out = tmp_path / "out.dta"
    run("export", ds, out)
    got, meta = pyreadstat.read_dta(str(out))
    assert meta.original_variable_types["d"] == "%td" and meta.original_variable_types["t"] == "%tc"
    back = pd.read_stata(out)
    assert back["d"].tolist()[:3] == df["d"].tolist()[:3] and pd.isna(back["d"][3])
    assert back["t"][0] == df["t"][0] and back["t"][1] == df["t"][1] and pd.isna(back["t"][2])


def test_names_labels_and_vars_review_cases(tmp_path):
    """A valid name keeps its name (`my_var`) and the invalid one that
    would become it takes another; Unicode letters stay; negative labelled
    values keep their labels; a variable named twice is an error."""
    src = tmp_path / "n.csv"
    src.write_text("my var,my_var,ñame,str7,code\n1,2,3,4,-2000000000\n5,6,7,8,5\n")
    ds = tmp_path / "n.mtab"
    run("import", src, ds)
    run("label", ds, "code", "--", "-2000000000=very low", "5=five")
    out = tmp_path / "n.dta"
    p = run("export", ds, out)
    got, meta = pyreadstat.read_dta(str(out))
    assert list(got.columns) == ["my_var_2", "my_var", "ñame", "_str7", "code"], list(got.columns)
    assert got["my_var"].tolist() == [2, 6] and got["my_var_2"].tolist() == [1, 5]
    assert meta.variable_value_labels["code"] == {-2000000000: "very low", 5: "five"}
    assert "my var is named my_var_2" in p.stderr
    p = run("export", ds, tmp_path / "x.dta", "--vars", "code,CODE", ok=False)
    assert "named twice" in p.stderr


def test_missing_given_twice_for_a_column_keeps_both_codes(tmp_path):
    """`--missing code=99 --missing code=9`: both are missing codes (the
    second was dropped before): means leave both out, as numpy does."""
    src = tmp_path / "m.csv"
    vals = [1, 2, 9, 99, 3, 9, 99, 4]
    src.write_text("code\n" + "\n".join(map(str, vals)) + "\n")
    ds = tmp_path / "m.mtab"
    run("import", src, ds, "--missing", "code=99", "--missing", "code=9")
    info = run_json("info", ds)["variables"][0]
    assert sorted(info["missing_codes"]) == [9, 99]
    m = run_json("means", ds, "code", "--by", "code")["total"]["mean"]
    assert m == pytest.approx(np.mean([v for v in vals if v not in (9, 99)]), rel=1e-12)


def haven_summary(path, reader):
    """R haven's view of `path`: per column its variable label, whether it
    has value labels, and its values as text (tagged missing values as
    `NA(a)`), one line per column."""
    script = (
        "suppressMessages(library(haven)); d <- %s('%s'); "
        "for (n in names(d)) { x <- d[[n]]; "
        "v <- if (is.numeric(x)) ifelse(is_tagged_na(x), paste0('NA(', na_tag(x), ')'), "
        "format(unclass(x), digits=15, trim=TRUE)) else as.character(x); "
        "cat(n, if (is.null(attr(x, 'label', exact=TRUE))) '' else attr(x, 'label', exact=TRUE), "
        "length(attr(x, 'labels')), paste(v, collapse=','), sep='\\t'); cat('\\n') }"
    ) % (reader, path)
    p = subprocess.run(["Rscript", "-e", script], capture_output=True, text=True)
    if p.returncode:
        pytest.skip("R haven unavailable: " + p.stderr[-300:])
    out = {}
    for line in p.stdout.splitlines():
        name, label, nlabels, values = line.split("\t")
        out[name] = (label, int(nlabels), values)
    return out


def check_no_labels(tmp_path, ext, read, reader):
    """`--labels` is the default spelled out; `--no-labels` keeps values,
    variable labels and missing values and drops every value-label set,
    as pyreadstat and R haven read the files."""
    _, ds = census(tmp_path, n=800)
    run("label", ds, "INCTOT", "9999999=N/A", "0=None")
    default, labels, bare = (tmp_path / f"{n}.{ext}" for n in ("default", "labels", "bare"))
    run("export", ds, default)
    run("export", ds, labels, "--labels")
    run("export", ds, bare, "--no-labels", "--labels", "--no-labels")  # the last one wins
    d, dm = read(str(default), user_missing=True)
    lab, lm = read(str(labels), user_missing=True)
    b, bm = read(str(bare), user_missing=True)
    pd.testing.assert_frame_equal(d, lab)
    assert dm.variable_value_labels == lm.variable_value_labels
    assert dm.variable_value_labels["SEX"][1] == "Male"
    assert dm.variable_value_labels["INCTOT"]
    # No value labels at all, the same values, variable labels and
    # missing-value declarations.
    assert bm.variable_value_labels == {} and bm.value_labels == {}
    pd.testing.assert_frame_equal(d, b)
    assert bm.column_names_to_labels == dm.column_names_to_labels
    assert bm.column_names_to_labels["SEX"] == "Sex of person"
    assert bm.missing_ranges == dm.missing_ranges
    assert getattr(bm, "missing_user_values", None) == getattr(dm, "missing_user_values", None)
    # R haven, reader independent of pyreadstat's readstat.
    hd, hb = haven_summary(default, reader), haven_summary(bare, reader)
    assert hd.keys() == hb.keys()
    for n in hd:
        assert hb[n][0] == hd[n][0], n           # variable label
        assert hb[n][1] == 0, n                  # no value labels
        assert hb[n][2] == hd[n][2], n           # values, missing ones alike
    assert hd["SEX"][1] == 3 and hd["SEX"][0] == "Sex of person"
    # And microtab reads back the codes, without their labels (its import
    # of a .dta names a missing letter by itself).
    back = tmp_path / "back.mtab"
    run("import", bare, back)
    info = {v["name"]: v for v in run_json("info", back)["variables"]}
    assert set(info["SEX"]["value_labels"].values()) <= {".a"}
    assert info["SEX"]["label"] == "Sex of person"
    return d


def test_no_labels_writes_codes_without_value_label_sets(tmp_path):
    d = check_no_labels(tmp_path, "dta", pyreadstat.read_dta, "read_dta")
    # The missing codes are still Stata's missing letters.
    assert (d["SEX"] == "a").any() and (d["INCTOT"] == "a").any()
