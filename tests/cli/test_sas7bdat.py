"""`microtab import FILE.sas7bdat [--catalog FILE.sas7bcat]`: SAS data sets
against pyreadstat (ReadStat) and R haven: files SAS wrote (pyreadstat's,
haven's and pandas' fixtures, the American Housing Survey 2013 public-use
files), every layout (32- and 64-bit, either byte order, uncompressed, RLE
and RDC), special missing values, format catalogs, code pages, files R
haven writes here, and damaged files."""

import datetime as dt
import json
import math
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pyreadstat
import pytest

from conftest import mutated, run, run_json

FIX = Path(__file__).resolve().parent.parent / "fixtures" / "sas7bdat"
EPOCH = dt.date(1960, 1, 1)


def iso(v):
    """pyreadstat's date, datetime or time as microtab's ISO text."""
    if isinstance(v, (pd.Timestamp, dt.datetime)):
        s = v.isoformat(timespec="microseconds")
        return s.rstrip("0").rstrip(".")
    if isinstance(v, dt.time):
        s = v.isoformat(timespec="microseconds")
        return s.rstrip("0").rstrip(".")
    return v.isoformat()


def same_as_pyreadstat(ds, path, catalog=None):
    """Every value, variable label, value label and special missing value
    of `ds` equal pyreadstat's reading of `path`."""
    kw = {"catalog_file": str(catalog)} if catalog else {}
    df, meta = pyreadstat.read_sas7bdat(str(path), user_missing=True, **kw)
    raw, _ = pyreadstat.read_sas7bdat(str(path), disable_datetime_conversion=True)
    info = {v["name"]: v for v in run_json("info", ds)["variables"]}
    assert list(info) == list(df.columns), (list(info), list(df.columns))
    assert run_json("info", ds)["rows"] == len(df)
    got = run_json("list", ds, *df.columns, "--all")["records"] if len(df.columns) else []
    labels = meta.variable_value_labels
    for i, row in enumerate(df.itertuples(index=False)):
        for k, (name, v) in enumerate(zip(df.columns, row)):
            g = got[i][name]
            kind = info[name]["kind"]
            if isinstance(v, str) and meta.readstat_variable_types[name] == "double":
                # A special missing value (pyreadstat: its letter, or the
                # catalog's label of it): a missing code labelled `.A`…
                # (or by the catalog), or the text `.A` in a date column.
                tag = next((t for t, lab in labels.get(name, {}).items() if lab == v), v)
                if kind == "string":
                    assert g == f".{tag}", (path.name, i, name, g, v)
                else:
                    assert g in info[name]["missing_codes"], (path.name, i, name, g, v)
                    assert info[name]["value_labels"][json.dumps(g).replace("e+", "e")] == (
                        labels.get(name, {}).get(tag, f".{tag}")), (name, g, v)
                continue
            if isinstance(v, str):
                want = v.rstrip(" ") or None
                if labels.get(name) and v in labels[name].values() and kind == "string":
                    # pyreadstat shows a catalog's label in place of the
                    # value: ours keeps the value, labelled.
                    assert info[name]["value_labels"].get(g) == v, (name, g, v)
                    continue
            elif v is None or pd.isna(v):
                want = None
            elif isinstance(v, (pd.Timestamp, dt.datetime, dt.date, dt.time)):
                want = iso(v)
            elif kind == "string":
                # A date format pyreadstat leaves as a number (YEAR4.,
                # MMYY7.): the day's ISO date.
                days = raw.iloc[i, k]
                want = (EPOCH + dt.timedelta(days=math.floor(days))).isoformat()
            else:
                want = float(v)
            if isinstance(want, float) and isinstance(g, (int, float)):
                assert g == pytest.approx(want, rel=1e-15, abs=0), (path.name, i, name, g, want)
            else:
                assert g == want, (path.name, i, name, g, want)
    for name, label in meta.column_names_to_labels.items():
        assert info[name]["label"] == (label or None), (name, info[name]["label"], label)
    for name, labs in labels.items():
        ours = info[name]["value_labels"]
        for key, lab in labs.items():
            if isinstance(key, str) and info[name]["kind"] != "string":
                continue  # a special missing value's, checked above
            k = str(key).rstrip(" ") if info[name]["kind"] == "string" else None
            if k is None:
                assert {float(a): b for a, b in ours.items()}.get(float(key)) == lab, (name, key, ours)
            else:
                assert ours.get(k) == lab, (name, key, ours)
    return df, meta, info


FILES = sorted(p.name for p in FIX.glob("*.sas7bdat"))


@pytest.mark.parametrize("name", FILES)
def test_files_sas_wrote_read_as_pyreadstat_reads_them(tmp_path, name):
    ds = tmp_path / "d.mtab"
    run("import", FIX / name, ds)
    same_as_pyreadstat(ds, FIX / name)


@pytest.mark.parametrize("data,catalog", [
    ("pyreadstat_missing_test.sas7bdat", "pyreadstat_missing_formats.sas7bcat"),
    ("pyreadstat_test_data_linux.sas7bdat", "pyreadstat_test_formats_linux.sas7bcat"),
    ("pyreadstat_test_data_win.sas7bdat", "pyreadstat_test_formats_win.sas7bcat"),
])
def test_a_format_catalog_gives_value_labels(tmp_path, data, catalog):
    ds = tmp_path / "d.mtab"
    run("import", FIX / data, ds, "--catalog", FIX / catalog)
    _, meta, info = same_as_pyreadstat(ds, FIX / data, FIX / catalog)
    assert meta.variable_value_labels
    for name in meta.variable_value_labels:
        assert info[name]["value_labels"], name


def test_special_missing_values_of_the_housing_survey(tmp_path):
    """AHS 2013 codes don't-know and refused as .D and .R: distinct missing
    codes, left out of means, shown with --include-missing."""
    ds = tmp_path / "d.mtab"
    run("import", FIX / "AHS2013_omov.sas7bdat", ds)
    df, _ = pyreadstat.read_sas7bdat(str(FIX / "AHS2013_omov.sas7bdat"), user_missing=True)
    col = df["DBOUTREAS"]
    tags = col[col.map(lambda v: isinstance(v, str))].value_counts().to_dict()
    assert set(tags) == {"D", "R"}
    info = {v["name"]: v for v in run_json("info", ds)["variables"]}["DBOUTREAS"]
    assert sorted(info["value_labels"].values()) == [".D", ".R"]
    assert len(info["missing_codes"]) == 2
    freq = run_json("freq", ds, "DBOUTREAS", "--include-missing")
    cats = {c["label"]: c["count"] for c in freq["rows"] if c.get("label")}
    assert cats == {".D": tags["D"], ".R": tags["R"]}, cats
    sysmis = int(col.map(lambda v: not isinstance(v, str) and pd.isna(v)).sum())
    assert next((c["count"] for c in freq["rows"] if c["value"] is None), 0) == sysmis
    # The mean leaves every missing value out (numpy over the values).
    values = [float(v) for v in col if not isinstance(v, str) and not pd.isna(v)]
    m = run_json("means", ds, "DBOUTREAS", "--by", "DBOUTREAS")
    assert m["total"]["mean"] == pytest.approx(np.mean(values), rel=1e-12)


def test_tagged_catalog_labels_of_special_missing_values(tmp_path):
    """haven's tagged-na catalog labels .A and .Z; the data hold .A .H .Z.
    Each tag is its own missing code; each label haven reads is ours or
    named in a note (the catalog reader cannot tell these labels' letters)."""
    ds = tmp_path / "d.mtab"
    p = run("import", FIX / "haven_tagged-na.sas7bdat", ds, "--catalog", FIX / "haven_tagged-na.sas7bcat")
    info = {v["name"]: v for v in run_json("info", ds)["variables"]}["x"]
    r = subprocess.run(["Rscript", "-e", (
        "library(haven); d <- read_sas('%s', catalog_file='%s'); x <- d$x; "
        "cat(na_tag(x), sep='\\n'); cat('--\\n'); cat(names(attr(x,'labels')), sep='\\n')")
        % (FIX / "haven_tagged-na.sas7bdat", FIX / "haven_tagged-na.sas7bcat")],
        capture_output=True, text=True)
    if r.returncode:
        pytest.skip("R haven unavailable: " + r.stderr[-300:])
    tags, labels = r.stdout.split("--\n")
    tags = sorted({t.upper() for t in tags.split() if t != "NA"})
    assert tags == ["A", "H", "Z"]
    assert len(info["missing_codes"]) == len(tags), info
    assert sorted(v for v in info["value_labels"].values() if v.startswith(".")) == [f".{t}" for t in tags] or \
        len(info["value_labels"]) == len(tags)
    for lab in labels.split():
        assert lab in info["value_labels"].values() or f'"{lab}"' in p.stderr, (lab, p.stderr)


def test_a_catalog_for_another_format_is_refused(tmp_path):
    csv = tmp_path / "a.csv"
    csv.write_text("x\n1\n")
    p = run("import", csv, tmp_path / "d.mtab", "--catalog", FIX / "haven_tagged-na.sas7bcat", ok=False)
    assert p.returncode != 0 and "sas7bdat" in p.stderr and "catalog" in p.stderr


def test_a_catalog_beside_the_file_is_noted(tmp_path):
    shutil.copy(FIX / "haven_tagged-na.sas7bdat", tmp_path / "t.sas7bdat")
    shutil.copy(FIX / "haven_tagged-na.sas7bcat", tmp_path / "t.sas7bcat")
    p = run("import", tmp_path / "t.sas7bdat", tmp_path / "d.mtab")
    assert "t.sas7bcat" in p.stderr and "catalog" in p.stderr


def test_recognised_by_content_whatever_its_name(tmp_path):
    src = tmp_path / "survey.dat"
    shutil.copy(FIX / "pandas_test13.sas7bdat", src)
    a, b = tmp_path / "a.mtab", tmp_path / "b.mtab"
    run("import", src, a)
    run("import", FIX / "pandas_test13.sas7bdat", b)
    cols = [v["name"] for v in run_json("info", a)["variables"]]
    assert run_json("list", a, *cols, "--all")["records"] == run_json("list", b, *cols, "--all")["records"]


def test_rle_rdc_and_uncompressed_layouts_agree(tmp_path):
    """pandas' test files hold the same data in every layout: 32/64-bit,
    either byte order, uncompressed, RLE and RDC."""
    out = []
    for name in ["pandas_test2", "pandas_test3", "pandas_test9", "pandas_test12",
                 "pandas_test13", "pandas_test14"]:
        ds = tmp_path / f"{name}.mtab"
        run("import", FIX / f"{name}.sas7bdat", ds)
        cols = [v["name"] for v in run_json("info", ds)["variables"]]
        out.append(run_json("list", ds, *cols, "--all")["records"])
    assert all(o == out[0] for o in out[1:])


def test_code_pages_named_by_the_file_or_given(tmp_path):
    """Big5 text: one file names its code page (CP950), the other wrongly
    says Windows-1252 (read as pyreadstat reads it, unless the encoding is
    given)."""
    for name in ["big5_cp950.sas7bdat", "big5_testbig5.sas7bdat"]:
        ds = tmp_path / f"{name}.mtab"
        run("import", FIX / name, ds)
        same_as_pyreadstat(ds, FIX / name)
    assert run_json("list", tmp_path / "big5_cp950.sas7bdat.mtab", "VAR1")["records"][0]["VAR1"] == "我愛你"
    ds = tmp_path / "given.mtab"
    run("import", FIX / "big5_testbig5.sas7bdat", ds, "--encoding", "big5")
    assert run_json("list", ds, "VAR1")["records"][0]["VAR1"] == "我愛你"
    p = run("import", FIX / "big5_testbig5.sas7bdat", ds, "--force", "--encoding", "klingon", ok=False)
    assert "klingon" in p.stderr and "encoding" in p.stderr


def r_write_sas(tmp_path, n):
    """A data set R haven writes (uncompressed, 64-bit), of `n` records."""
    out = tmp_path / "gen.sas7bdat"
    script = f"""
    suppressMessages(library(haven)); set.seed(7); n <- {n}
    df <- data.frame(id = seq_len(n), wt = round(runif(n, 1, 500), 2),
                     x = rnorm(n) * 1e3, code = sample(c(1, 2, 3, 8, 9), n, TRUE),
                     name = sample(c("alpha", "b", "x y", "", "grüße"), n, TRUE),
                     day = as.Date("1990-01-01") + sample(0:20000, n, TRUE),
                     stringsAsFactors = FALSE)
    df$x[seq(1, n, 11)] <- NA
    df$big <- df$id * 1e9
    suppressWarnings(write_sas(df, "{out}"))
    """
    r = subprocess.run(["Rscript", "-e", script], capture_output=True, text=True)
    if r.returncode:
        pytest.skip("R haven unavailable: " + r.stderr[-300:])
    return out


def test_a_large_file_haven_writes_across_many_batches(tmp_path):
    src = r_write_sas(tmp_path, 150_000)
    ds = tmp_path / "d.mtab"
    run("import", src, ds)
    df, _ = pyreadstat.read_sas7bdat(str(src))
    got = run_json("list", ds, "id", "wt", "x", "code", "name", "day", "big", "--all")["records"]
    assert len(got) == len(df)
    for g, (i, w, x, c, nm, d, b) in zip(got, df.itertuples(index=False)):
        assert g["id"] == i and g["wt"] == w and g["code"] == c and g["big"] == b
        assert (g["x"] is None) if pd.isna(x) else g["x"] == pytest.approx(x, rel=1e-15)
        assert g["name"] == (nm or None)
        assert g["day"] == d.isoformat()
    m = run_json("means", ds, "x", "--by", "code")["total"]["mean"]
    assert m == pytest.approx(df["x"].mean(), rel=1e-12)


def test_damaged_files_are_errors_naming_the_file_and_leave_a_dataset_untouched(tmp_path):
    src = FIX / "pandas_test9.sas7bdat"  # RLE, 64-bit
    data = src.read_bytes()
    ds = tmp_path / "d.mtab"
    run("import", FIX / "pyreadstat_sample.sas7bdat", ds)
    before = run_json("list", ds, "mychar", "mynum", "--all")
    cases = {
        "truncated": data[: len(data) // 2],
        "header only": data[:1024],
        "magic only": data[:32],
        "wrong magic": b"\x01" + data[1:],
    }
    for what, b in cases.items():
        bad = tmp_path / f"bad-{what.replace(' ', '_')}.sas7bdat"
        bad.write_bytes(b)
        p = run("import", bad, ds, "--force", ok=False)
        assert p.returncode != 0, what
        assert bad.name in p.stderr, (what, p.stderr)
        assert "panicked" not in p.stderr, (what, p.stderr)
        assert run_json("list", ds, "mychar", "mynum", "--all") == before, what


def test_mutated_files_are_read_or_refused_never_crash(tmp_path):
    """Random byte damage to RLE, RDC and uncompressed files, both byte
    orders: each import succeeds or fails with an error naming the file,
    and a failed one writes no dataset."""
    rng = np.random.default_rng(31)
    for name in ("pandas_test12.sas7bdat", "pandas_test14.sas7bdat",
                 "pyreadstat_sample.sas7bdat", "AHS2013_ratiov.sas7bdat"):
        good = (FIX / name).read_bytes()
        for k in range(60):
            m = tmp_path / "m.sas7bdat"
            m.write_bytes(mutated(good, rng, k))
            target = tmp_path / "m.mtab"
            p = run("import", m, target, "--force", ok=None, timeout=60)
            assert p.returncode in (0, 1), (name, k, p.returncode, p.stderr)
            assert "panicked" not in p.stderr, (name, k, p.stderr)
            if p.returncode:
                assert m.name in p.stderr, (name, k, p.stderr)
                assert not target.exists(), (name, k)
            shutil.rmtree(target, ignore_errors=True)


def test_a_catalog_that_defines_none_of_the_formats_is_noted(tmp_path):
    p = run("import", FIX / "pyreadstat_sample.sas7bdat", tmp_path / "d.mtab",
            "--catalog", FIX / "pyreadstat_missing_formats.sas7bcat")
    assert "defines none of the formats" in p.stderr, p.stderr
