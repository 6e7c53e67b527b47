"""`microtab import FILE.dta`: Stata files of every release from 104 to 119
against pyreadstat (ReadStat) and pandas' own reader: files Stata wrote
(pyreadstat's and haven's fixtures), files R haven, pandas and
pyreadstat write here (every version they write, both byte orders,
strLs, extended missing values `.a`–`.z` and their labels, dates),
files of the old releases (104–111) written byte by byte and read by both
oracles first, many records over several batches, and damaged files."""

import datetime as dt
import math
import struct
from pathlib import Path

import numpy as np
import pandas as pd
import pyreadstat
import pytest

from conftest import mutated, rscript, run, run_json

FIX = Path(__file__).resolve().parent.parent / "fixtures" / "dta"


def tagged_code(ty, k):
    """microtab's code of the extended missing value number `k` (1 = .a)
    in a column of ReadStat type `ty`: Stata's own integer codes, or
    Stata's double codes in float and double columns."""
    if ty == "int8":
        return 101 + k
    if ty == "int16":
        return 32741 + k
    if ty == "int32":
        return 2147483621 + k
    return struct.unpack("<d", struct.pack("<Q", 0x7FE0000000000000 + (k << 40)))[0]


def expected(v):
    """pyreadstat's value as `microtab list --format json` gives it: ISO
    text for dates and datetimes (a `%tcHH:MM:SS` time, which pyreadstat
    reads as a time of day, is the datetime on 1960-01-01, as Stata, pandas
    and haven read it), empty text missing."""
    if v is None or v is pd.NaT or (isinstance(v, float) and math.isnan(v)):
        return None
    if isinstance(v, str):
        return v or None
    if isinstance(v, (pd.Timestamp, dt.datetime)):
        return v.isoformat(timespec="microseconds").rstrip("0").rstrip(".")
    if isinstance(v, dt.time):
        return "1960-01-01T" + v.isoformat(timespec="microseconds").rstrip("0").rstrip(".")
    if isinstance(v, dt.date):
        return v.isoformat()
    return float(v)


def same_as_oracles(ds, path, encoding=None):
    """Every value, variable label, value label and extended missing value
    of the dataset `ds` imported from `path` equal pyreadstat's reading
    (`user_missing=True`: `.a`–`.z` as their letters); every number equal
    pandas' reading."""
    kw = {"encoding": encoding} if encoding else {}
    df, meta = pyreadstat.read_dta(str(path), user_missing=True, **kw)
    types = meta.readstat_variable_types
    got = run_json("list", ds, *df.columns, "--all")["records"] if len(df.columns) else []
    info = {v["name"]: v for v in run_json("info", ds)["variables"]}
    assert list(info) == list(df.columns)
    assert run_json("info", ds)["rows"] == len(df)
    for i, row in enumerate(df.itertuples(index=False)):
        for name, v in zip(df.columns, row):
            g = got[i][name]
            if isinstance(v, str) and types[name] != "string":
                # An extended missing value: its code, a missing code.
                k = ord(v) - ord("a") + 1
                if info[name]["kind"] == "string":
                    assert g == "." + v, (path, i, name, g, v)
                else:
                    assert g == tagged_code(types[name], k), (path, i, name, g, v)
                    assert g in info[name]["missing_codes"], (path, name, g)
                continue
            want = expected(v)
            if isinstance(want, float):
                assert g == want, (path, i, name, g, want)
            else:
                assert g == want, (path, i, name, g, want)
    for name, label in meta.column_names_to_labels.items():
        assert info[name]["label"] == (label or None), (name, info[name]["label"], label)
    for name, labels in meta.variable_value_labels.items():
        ours = {float(k): lab for k, lab in info[name]["value_labels"].items()}
        for key, lab in labels.items():
            if isinstance(key, str):
                key = tagged_code(types[name], ord(key) - ord("a") + 1)
            assert ours.get(float(key)) == lab, (path, name, key, lab, ours)
    # pandas reads numbers on its own (every missing value as NaN).
    pdf = pd.read_stata(path, convert_categoricals=False, convert_dates=False)
    for name in pdf.columns:
        if info[name]["kind"] == "string" or pdf[name].dtype == object:
            continue
        vals = pdf[name].to_numpy(dtype="float64")
        for i, x in enumerate(vals):
            g = got[i][name]
            if math.isnan(x):
                assert g is None or g in info[name]["missing_codes"], (path, i, name, g)
            else:
                assert g == x, (path, i, name, g, x)
    return df, info


@pytest.mark.parametrize("name", sorted(p.name for p in FIX.glob("*.dta")))
def test_files_stata_wrote_read_as_pyreadstat_and_pandas_read_them(tmp_path, name):
    ds = tmp_path / "d.mtab"
    p = run("import", FIX / name, ds)
    _, info = same_as_oracles(ds, FIX / name)
    if name == "sample.dta":
        assert info["mynum"]["kind"] == "int" and info["mynum"]["decimals"] == 1
        assert info["mydate"]["kind"] == "string"
    if name == "notes.dta":
        # The dataset label is the title (pyreadstat reads it so).
        assert pyreadstat.read_dta(str(FIX / name), metadataonly=True)[1].file_label == "This is a test dataset."
        assert run_json("info", ds)["title"] == "This is a test dataset."
    if name.startswith("tagged-na"):
        # .a, .h, .z: three missing codes; .a and .z labelled by the file,
        # .h by its tag.
        x = info["x"]
        assert len(x["missing_codes"]) == 3
        labels = sorted(x["value_labels"].values())
        assert labels == [".h", ".zebra", "apple"], labels
        freq = run_json("freq", ds, "x", "--include-missing")
        cats = {c["label"]: c["count"] for c in freq["rows"] if c.get("label")}
        assert cats == {"apple": 1, ".h": 1, ".zebra": 1}, cats


R_WRITE = r"""
suppressMessages(library(haven))
a <- commandArgs(trailingOnly=TRUE)
dir <- a[1]
set.seed(5)
n <- 500
i <- seq_len(n)
d <- data.frame(id = i, wt = round(runif(n, 100, 9000), 2), big = round(rnorm(n) * 1e9),
                tiny = rnorm(n) * 1e-30,
                name = sample(c("alpha", "b", " lead", "x y", ""), n, TRUE),
                day = as.Date("2001-01-01") + sample(-30000:30000, n), stringsAsFactors = FALSE)
d$score <- labelled(ifelse(i %% 7 == 0, tagged_na("a"), ifelse(i %% 11 == 0, tagged_na("z"),
                    ifelse(i %% 13 == 0, NA, round(rnorm(n, 50, 10), 1)))),
                    c(refused = tagged_na("a"), "top" = 99))
d$sex <- labelled(ifelse(i %% 17 == 0, tagged_na("b"), as.integer(1 + i %% 2)),
                  c(male = 1L, female = 2L, "not asked" = tagged_na("b")))
d$when <- as.POSIXct("2020-03-01 12:00:00", tz = "UTC") + sample(0:1e8, n)
attr(d$wt, "label") <- "Sampling weight"
for (v in 8:15) write_dta(d, file.path(dir, sprintf("v%d.dta", v)), version = v)
write.csv(data.frame(x = 1), a[2])
"""


@pytest.fixture(scope="module")
def haven_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("dta")
    rscript(d / "write.R", R_WRITE, d, d / "done.csv")
    return d


@pytest.mark.parametrize("version", range(8, 16))
def test_files_haven_writes_match_the_oracles(haven_files, tmp_path, version):
    src = haven_files / f"v{version}.dta"
    ds = tmp_path / "d.mtab"
    run("import", src, ds)
    df, info = same_as_oracles(ds, src)
    assert info["id"]["kind"] == "int" and info["wt"]["decimals"] == 2
    assert info["tiny"]["kind"] == "float" and info["day"]["kind"] == "string"
    # .a and .z counted apart as labelled missing values; the mean leaves
    # every missing value out.
    freq = run_json("freq", ds, "score", "--include-missing")
    cats = {c["label"]: c["count"] for c in freq["rows"] if c.get("label")}
    vals = df.score
    assert cats.get("refused") == int((vals == "a").sum())
    assert cats.get(".z") == int((vals == "z").sum())
    nums = pd.to_numeric(vals.where(~vals.isin(["a", "z"])), errors="coerce").to_numpy(dtype=float)
    got = run_json("means", ds, "score", "--by", "name")["total"]["mean"]
    assert got == pytest.approx(np.nanmean(nums[df.name.ne("").to_numpy()]), rel=1e-12)
    freq = run_json("freq", ds, "sex", "--include-missing")
    cats = {c["label"]: c["count"] for c in freq["rows"] if c.get("label")}
    assert cats == {"male": int((df.sex == 1).sum()), "female": int((df.sex == 2).sum()),
                    "not asked": int((df.sex == "b").sum())}, cats


def pandas_frame(n=300, seed=1, unicode=True):
    rng = np.random.default_rng(seed)
    words = ["alpha", "b", "x y", "", "long text " * 3] + (["grüße", "日本"] if unicode else ["café"])
    df = pd.DataFrame({
        "i8": rng.integers(-100, 100, n).astype("int8"),
        "i16": rng.integers(-30000, 30000, n).astype("int16"),
        "i32": rng.integers(-2_000_000_000, 2_000_000_000, n).astype("int32"),
        "f32": (rng.normal(size=n) * 100).astype("float32"),
        "f64": rng.normal(size=n) * 1e6,
        "dec": np.round(rng.uniform(0, 1000, n), 3),
        "s": rng.choice(words, n),
        "day": pd.to_datetime("2000-01-01") + pd.to_timedelta(rng.integers(-20000, 20000, n), unit="D"),
        "ts": pd.to_datetime("2010-06-01") + pd.to_timedelta(rng.integers(0, 10**9, n), unit="ms"),
    })
    df.loc[df.index % 9 == 0, "f64"] = np.nan
    df.loc[df.index % 10 == 0, "f32"] = np.nan
    return df


@pytest.mark.parametrize("version", [114, 117, 118, 119])
@pytest.mark.parametrize("order", ["<", ">"])
def test_files_pandas_writes_match_the_oracles(tmp_path, version, order):
    df = pandas_frame(unicode=version >= 118)
    if version >= 117:
        df["long"] = [("strL text " * (k % 50)) + str(k % 7) for k in range(len(df))]
        df.loc[df.index % 5 == 0, "long"] = ""
    src = tmp_path / "p.dta"
    kw = {"convert_strl": ["long"]} if version >= 117 else {}
    df.to_stata(src, version=version, byteorder=order, write_index=False,
                convert_dates={"day": "td", "ts": "tc"},
                variable_labels={"i8": "a byte", "s": "some text"}, **kw)
    ds = tmp_path / "d.mtab"
    run("import", src, ds)
    same_as_oracles(ds, src)


def test_files_pyreadstat_writes_with_tagged_missing_values(tmp_path):
    df = pd.DataFrame({"x": [1.5, 2.0, None, 4.0], "n": [1, 2, 3, 1]})
    src = tmp_path / "r.dta"
    pyreadstat.write_dta(df, str(src), variable_value_labels={"n": {1: "one", 2: "two"}},
                         column_labels=["the x", "the n"], missing_user_values={"x": ["a"]})
    ds = tmp_path / "d.mtab"
    run("import", src, ds)
    same_as_oracles(ds, src)


# ---------------------------------------------------------------- old releases


def old_dta(release, columns, n, big=False, label="old data"):
    """A Stata file of release 104–116 written byte by byte from
    `columns`: [(name, type, values, format)], type one of b i l f d or
    strN; None values are `.`."""
    bo = ">" if big else "<"
    name_w = 9 if release < 110 else 33
    fmt_w = 7 if release == 104 else (12 if release < 114 else 49)
    lab_w = 32 if release < 108 else 81
    out = bytearray()
    out += bytes([release, 1 if big else 2, 1, 0])
    out += struct.pack(bo + "HI", len(columns), n)
    out += label.encode().ljust(lab_w, b"\0")
    if release >= 105:
        out += b"01 Jan 2000 10:00\0"
    old = release < 111
    codes = {"b": (b"b", 0xFB, "b"), "i": (b"i", 0xFC, "h"), "l": (b"l", 0xFD, "i"),
             "f": (b"f", 0xFE, "f"), "d": (b"d", 0xFF, "d")}
    for _, t, _, _ in columns:
        if t.startswith("str"):
            w = int(t[3:])
            out.append(0x7F + w if old else w)
        else:
            out += codes[t][0] if old else bytes([codes[t][1]])
    for name, *_ in columns:
        out += name.encode().ljust(name_w, b"\0")
    out += b"\0\0" * (len(columns) + 1)
    for _, _, _, f in columns:
        out += f.encode().ljust(fmt_w, b"\0")
    out += b"\0" * (name_w * len(columns))
    for name, *_ in columns:
        out += f"label of {name}".encode().ljust(lab_w, b"\0")
    if release >= 105:
        out += b"\0" + (b"\0" * (4 if release >= 110 else 2))
    miss = {"b": 0x7F if release < 113 else 101, "i": 0x7FFF if release < 113 else 32741,
            "l": 0x7FFFFFFF if release < 113 else 2147483621}
    for r in range(n):
        for _, t, vals, _ in columns:
            v = vals[r]
            if t.startswith("str"):
                out += (v or "").encode("latin-1").ljust(int(t[3:]), b"\0")
            elif t in "bil":
                out += struct.pack(bo + codes[t][2], miss[t] if v is None else v)
            elif v is None:
                out += struct.pack(bo + ("I" if t == "f" else "Q"),
                                   0x7F000000 if t == "f" else 0x7FE0000000000000)
            else:
                out += struct.pack(bo + codes[t][2], v)
    return bytes(out)


@pytest.mark.parametrize("release", [104, 105, 108, 110, 111, 113, 114, 115])
@pytest.mark.parametrize("big", [False, True])
def test_old_releases_written_byte_by_byte(tmp_path, release, big):
    n = 40
    rng = np.random.default_rng(release)
    b = [None if k % 7 == 0 else int(x) for k, x in enumerate(rng.integers(-100, 100, n))]
    i = [None if k % 5 == 0 else int(x) for k, x in enumerate(rng.integers(-30000, 30000, n))]
    l = [int(x) for x in rng.integers(-2**31 + 1, 2**31 - 30, n)]
    f = [None if k % 3 == 0 else float(np.float32(x)) for k, x in enumerate(rng.normal(size=n))]
    d = [None if k % 4 == 0 else float(x) for k, x in enumerate(rng.normal(size=n) * 1e5)]
    s = [["", "a", "café", "xyz"][k % 4] for k in range(n)]
    day = [None if k % 6 == 0 else int(x) for k, x in enumerate(rng.integers(-5000, 20000, n))]
    cols = [("b", "b", b, "%8.0g"), ("i", "i", i, "%8.0g"), ("l", "l", l, "%12.0g"),
            ("f", "f", f, "%9.0g"), ("d", "d", d, "%10.0g"), ("s", "str5", s, "%9s"),
            ("day", "l", day, "%d" if release < 110 else "%td")]
    src = tmp_path / f"old{release}.dta"
    src.write_bytes(old_dta(release, cols, n, big))
    # Both oracles read the file as it was meant.
    df, _ = pyreadstat.read_dta(str(src))
    assert [None if pd.isna(x) else int(x) for x in df.i] == i
    assert list(pd.read_stata(src, convert_dates=False).l) == l
    ds = tmp_path / "d.mtab"
    run("import", src, ds)
    got = run_json("list", ds, "b", "i", "l", "f", "d", "s", "day", "--all")["records"]
    for col, vals, *_ in [(c[0], c[2]) for c in cols]:
        if col == "day":
            want = [None if v is None else (dt.date(1960, 1, 1) + dt.timedelta(days=v)).isoformat()
                    for v in vals]
        elif col == "s":
            want = [v or None for v in vals]
        else:
            want = vals
        assert [r[col] for r in got] == want, (release, col)
    same_as_oracles(ds, src)


# ---------------------------------------------------------------- many records


def test_many_records_over_several_batches(tmp_path):
    """200,000 records: several batches decoded on every core, appended in
    file order."""
    n = 200_000
    rng = np.random.default_rng(9)
    df = pd.DataFrame({"id": np.arange(n, dtype="int32"), "x": rng.normal(size=n),
                       "g": rng.integers(0, 5, n).astype("int8")})
    df.loc[df.index % 1000 == 0, "x"] = np.nan
    src = tmp_path / "big.dta"
    df.to_stata(src, version=118, write_index=False)
    ds = tmp_path / "d.mtab"
    run("import", src, ds)
    got = run_json("list", ds, "id", "--all")["records"]
    assert [r["id"] for r in got] == list(range(n))
    m = run_json("means", ds, "x", "--by", "g")
    assert len(m["groups"]) == 5
    for row in m["groups"]:
        g = row["by"][0]["value"]
        assert row["mean"] == pytest.approx(df.x[df.g == g].mean(), rel=1e-12)
    assert m["total"]["mean"] == pytest.approx(df.x.mean(), rel=1e-12)


# ---------------------------------------------------------------- damaged


def test_damaged_files_are_errors_that_leave_the_target(tmp_path):
    df = pd.DataFrame({"a": np.arange(20, dtype="int32"), "s": ["x" * (k % 4) for k in range(20)],
                       "L": ["long " * k for k in range(20)]})
    good_p = tmp_path / "good.dta"
    df.to_stata(good_p, version=118, write_index=False, convert_strl=["L"],
                value_labels={"a": {1: "one", 2: "two"}})
    good = good_p.read_bytes()
    target = tmp_path / "t.mtab"
    run("import", good_p, target)
    before = run_json("list", target, "a", "--all")
    data = good.find(b"<data>") + 6
    row = 4 + 4 + 8  # long, str4, strL
    cases = {
        "truncated record": (good[:data + 3 * row + 5], "truncated"),
        "truncated header": (good[:150], "truncated"),
    }
    k = bytearray(good)
    kat = good.find(b"<K>") + 3
    k[kat:kat + 2] = struct.pack("<H", 65000)
    cases["absurd K"] = (bytes(k), "65000 variables")
    nn = bytearray(good)
    nat = good.find(b"<N>") + 3
    nn[nat:nat + 8] = struct.pack("<Q", 10**15)
    cases["absurd N"] = (bytes(nn), "1000000000000000 records")
    rel = bytearray(good)
    rel[good.find(b"<release>") + 9:good.find(b"<release>") + 12] = b"120"
    cases["release"] = (bytes(rel), "120")
    lbl = bytearray(good)
    at = good.find(b"<lbl>") + 5 + 4 + 129 + 3
    lbl[at + 8:at + 12] = struct.pack("<I", 10_000)  # the first label's text offset
    cases["label points nowhere"] = (bytes(lbl), "points to byte 10000")
    strl = bytearray(good)
    strl[data + 3 * row + 8:data + 3 * row + 16] = struct.pack("<HIH", 3, 77777, 0)
    cases["strL not in table"] = (bytes(strl), "not in the file's strL table")
    gso = bytearray(good)
    g = good.find(b"GSO")
    gso[g:g + 3] = b"GS0"
    cases["strL table"] = (bytes(gso), "GSO")
    for what, (data_, needle) in cases.items():
        f = tmp_path / "bad.dta"
        f.write_bytes(data_)
        p = run("import", f, target, "--force", ok=False)
        assert p.returncode == 1 and needle in p.stderr and "bad.dta" in p.stderr, (what, p.stderr)
        assert "byte " in p.stderr, (what, p.stderr)
        assert run_json("list", target, "a", "--all") == before, what
        run("import", f, tmp_path / "new.mtab", ok=False)
        assert not (tmp_path / "new.mtab").exists(), what
    # A record error names the record and the variable.
    p = run("import", tmp_path / "bad.dta", tmp_path / "n.mtab", ok=False)
    f = tmp_path / "bad.dta"
    f.write_bytes(cases["strL not in table"][0])
    p = run("import", f, tmp_path / "n.mtab", ok=False)
    assert "record 4, variable L" in p.stderr, p.stderr


def test_wrong_magic_and_csv_options(tmp_path):
    f = tmp_path / "not.dta"
    f.write_bytes(b"a,b\n1,2\n")
    p = run("import", f, tmp_path / "n.mtab", ok=False)
    assert "not a Stata file" in p.stderr and "byte 0" in p.stderr, p.stderr
    p = run("import", FIX / "sample.dta", tmp_path / "o.mtab", "--missing", "mynum=1.1", ok=False)
    assert "cannot be given" in p.stderr and "missing codes" in p.stderr, p.stderr


def test_text_that_does_not_decode_needs_its_encoding(tmp_path):
    """A release 118 file is UTF-8: Latin-1 bytes in it are an error naming
    the record and variable, and --encoding reads them."""
    df = pd.DataFrame({"s": ["abc", "xyz", "cafe"]})
    src = tmp_path / "u.dta"
    df.to_stata(src, version=118, write_index=False)
    raw = src.read_bytes()
    data = raw.find(b"<data>")
    bad = raw[:data] + raw[data:].replace(b"cafe", b"caf\xe9", 1)
    src.write_bytes(bad)
    p = run("import", src, tmp_path / "l.mtab", ok=False)
    assert "record 3, variable s" in p.stderr and "UTF-8" in p.stderr, p.stderr
    run("import", src, tmp_path / "l.mtab", "--encoding", "latin1")
    got = [r["s"] for r in run_json("list", tmp_path / "l.mtab", "s", "--all")["records"]]
    assert got == ["abc", "xyz", "café"]
    df2, _ = pyreadstat.read_dta(str(src), encoding="latin1")
    assert list(df2.s) == got


def test_names_that_differ_only_in_case_are_kept_apart(tmp_path):
    """Stata tells `x` from `X`; microtab does not: the second is renamed,
    with a note, and keeps its values."""
    df = pd.DataFrame({"x": [1, 2, 3], "X": [4.5, 5.5, 6.5], "X_2": ["a", "b", "c"]})
    src = tmp_path / "case.dta"
    pyreadstat.write_dta(df, str(src))
    ds = tmp_path / "d.mtab"
    p = run("import", src, ds)
    assert "variable X repeats an earlier name" in p.stderr + p.stdout and "X_3" in p.stderr + p.stdout
    got = run_json("list", ds, "x", "X_3", "X_2", "--all")["records"]
    assert [(r["x"], r["X_3"], r["X_2"]) for r in got] == [(1, 4.5, "a"), (2, 5.5, "b"), (3, 6.5, "c")]


def test_mutated_files_are_read_or_refused_never_crash(tmp_path):
    """Random damage to files of releases 115, 117, 118 and 119 (with
    strLs and value labels): every import succeeds or fails with a clear
    error (exit 1), never a crash, and a failure leaves no dataset."""
    src = tmp_path / "s119.dta"
    df = pd.DataFrame({"a": np.arange(30, dtype="int16"), "L": ["t " * k for k in range(30)],
                       "f": np.linspace(0, 1, 30)})
    df.to_stata(src, version=119, write_index=False, convert_strl=["L"],
                value_labels={"a": {1: "one", 2: "two"}})
    files = [FIX / "datetime-d.dta", FIX / "sample.dta", FIX / "tagged-na-int.dta", src]
    rng = np.random.default_rng(2026)
    for f in files:
        good = f.read_bytes()
        for k in range(120):
            m = tmp_path / "m.dta"
            m.write_bytes(mutated(good, rng, k))
            out = tmp_path / "m.mtab"
            p = run("import", m, out, "--force", ok=None, timeout=30)
            assert p.returncode in (0, 1), (f.name, k, p.returncode, p.stderr)
            assert "panicked" not in p.stderr, (f.name, k, p.stderr)
            if p.returncode == 1:
                assert "m.dta" in p.stderr, (f.name, k, p.stderr)


def test_an_early_error_in_a_large_file_is_reported_not_hung(tmp_path):
    """A bad value in the first of many batches (a review found the import
    waiting forever): the error comes at once, and nothing is left."""
    src = tmp_path / "hang.dta"
    pd.DataFrame({"s": ["a"] * 1_400_000}).to_stata(src, version=118, write_index=False)
    d = bytearray(src.read_bytes())
    d[d.find(b"<data>") + 6] = 0xFF
    src.write_bytes(bytes(d))
    p = run("import", src, tmp_path / "h.mtab", ok=False, timeout=60)
    assert "record 1, variable s" in p.stderr and "UTF-8" in p.stderr, p.stderr
    assert not [x for x in tmp_path.iterdir() if "importing" in x.name]


R_LABELS = r"""
suppressMessages(library(haven))
a <- commandArgs(trailingOnly=TRUE)
df <- data.frame(id = 1:4)
df$score <- labelled(c(0, 10, 7.5, 10), labels = c("Not at all" = 0, "Completely" = 10))
df$q <- labelled(c(1.5, 2, 2.5, 3), labels = c(two = 2, refused = tagged_na("r")))
# Days since 1960 shown as %td, 14976 (2001-01-01) labelled.
df$day <- labelled(c(14976, NA, 14978, 14609), labels = c(start = 14976))
attr(df$day, "format.stata") <- "%td"
df$t <- as.POSIXct(c("1650-01-01 00:00:00", "2300-06-01 12:00:00", "1960-01-01 00:00:00", NA),
                   format = "%Y-%m-%d %H:%M:%S", tz = "UTC") +
  c(0.001, 0, 0, 0)
write_dta(df, file.path(a[1], "labels.dta"), version = 15)
write.csv(data.frame(x = 1), a[2])
"""


def test_labels_of_exact_decimals_and_absent_tags(tmp_path):
    """Labels of a float column stored as exact decimals key the values as
    the column shows them (10.0); a labelled .r no record holds is left out
    with a note (not a code no column can hold); labels of dates are noted;
    %tc far from 1960 keeps its milliseconds exact."""
    rscript(tmp_path / "l.R", R_LABELS, tmp_path, tmp_path / "done.csv")
    ds = tmp_path / "d.mtab"
    p = run("import", tmp_path / "labels.dta", ds)
    info = {v["name"]: v for v in run_json("info", ds)["variables"]}
    assert info["score"]["decimals"] == 1
    freq = run_json("freq", ds, "score")
    labs = {r["label"]: r["count"] for r in freq["rows"] if r.get("label")}
    assert labs == {"Not at all": 1, "Completely": 2}, freq["rows"]
    assert info["q"]["missing_codes"] == [] and info["q"]["value_labels"] == {"2.0": "two"}
    assert "variable q: the labels of .r (set q) are left out" in p.stderr + p.stdout
    assert "variable day: the labels of" in p.stderr + p.stdout
    got = [r["t"] for r in run_json("list", ds, "t", "--all")["records"]]
    assert got == ["1650-01-01T00:00:00.001", "2300-06-01T12:00:00", "1960-01-01T00:00:00", None]


def test_a_release_117_file_written_as_utf8_is_noted(tmp_path):
    """Stata wrote Windows-1252 before release 118, haven writes UTF-8:
    when every text beyond ASCII is valid UTF-8 a note says so, and the
    encoding given reads it."""
    r = r"""
suppressMessages(library(haven))
a <- commandArgs(trailingOnly=TRUE)
write_dta(data.frame(txt = c("grüße", "abc", "café")), file.path(a[1], "u13.dta"), version = 13)
write.csv(data.frame(x = 1), a[2])
"""
    rscript(tmp_path / "u.R", r, tmp_path, tmp_path / "done.csv")
    src = tmp_path / "u13.dta"
    p = run("import", src, tmp_path / "a.mtab")
    assert "are all valid UTF-8" in p.stderr + p.stdout, p.stderr
    run("import", src, tmp_path / "b.mtab", "--encoding", "utf-8")
    got = [r["txt"] for r in run_json("list", tmp_path / "b.mtab", "txt", "--all")["records"]]
    assert got == ["grüße", "abc", "café"]
    df, _ = pyreadstat.read_dta(str(src), encoding="utf-8")
    assert list(df.txt) == got
