"""`microtab import FILE.sav|FILE.zsav`: SPSS system files against
pyreadstat (ReadStat): files SPSS, jamovi and haven wrote (pyreadstat's and
haven's fixtures), files pyreadstat and GNU PSPP write here (uncompressed,
bytecode and zlib-compressed, user-missing values and ranges, value labels
of numbers and texts, very long strings, dates), and damaged files."""

import datetime as dt
import math
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pyreadstat
import pytest

from conftest import mutated, run, run_json

FIX = Path(__file__).resolve().parent.parent / "fixtures" / "sav"
ORIGIN = dt.datetime(1582, 10, 14)


def shown(fmt, x):
    """An SPSS date, datetime or time value (seconds since 1582-10-14) as
    microtab's ISO text, computed by Python's datetime ("outside" beyond
    the years 1 to 9999)."""
    try:
        return _shown(fmt, x)
    except OverflowError:
        return "outside"


def _shown(fmt, x):
    kind = fmt.rstrip("0123456789.")
    if kind in ("DATE", "ADATE", "EDATE", "SDATE", "JDATE"):
        return (ORIGIN + dt.timedelta(days=math.floor(x / 86400))).date().isoformat()
    if kind in ("DATETIME", "YMDHMS"):
        s = (ORIGIN + dt.timedelta(seconds=x)).isoformat(timespec="microseconds")
        return s.rstrip("0").rstrip(".")
    if kind in ("TIME", "DTIME"):
        us = round(x * 1e6)
        sec, us = divmod(us, 1_000_000)
        out = f"{sec // 3600:02d}:{sec // 60 % 60:02d}:{sec % 60:02d}"
        return out + (f".{us:06d}".rstrip("0") if us else "")
    return None


def same_as_pyreadstat(ds, path, **kw):
    """Every value, label, value label and user-missing value of `ds`
    equal pyreadstat's reading of `path` (user-missing values as values,
    dates as their numbers)."""
    df, meta = pyreadstat.read_sav(str(path), user_missing=True,
                                   disable_datetime_conversion=True, **kw)
    info = {v["name"]: v for v in run_json("info", ds)["variables"]}
    assert list(info) == list(df.columns), (list(info), list(df.columns))
    assert run_json("info", ds)["rows"] == len(df)
    got = run_json("list", ds, *df.columns, "--all")["records"]
    fmts = meta.original_variable_types
    for i, row in enumerate(df.itertuples(index=False)):
        for name, v in zip(df.columns, row):
            g = got[i][name]
            if isinstance(v, str):
                want = v.rstrip(" ") or None
            elif v is None or (isinstance(v, float) and math.isnan(v)):
                want = None
            elif info[name]["kind"] == "string":
                want = shown(fmts[name], float(v))
                if want == "outside":
                    # A date beyond the years 1 to 9999: missing, noted.
                    assert g is None, (name, g)
                    continue
            else:
                want = float(v)
            assert g == want, (path.name, i, name, g, want)
    for name, label in meta.column_names_to_labels.items():
        assert info[name]["label"] == (label or None), (name, info[name]["label"], label)
    for name, labels in meta.variable_value_labels.items():
        ours = info[name]["value_labels"]
        if info[name]["kind"] == "string":
            for key, lab in labels.items():
                if str(key).rstrip(" "):
                    assert ours.get(str(key).rstrip(" ")) == lab, (name, key, lab, ours)
        else:
            ours = {float(k): lab for k, lab in ours.items()}
            for key, lab in labels.items():
                assert ours.get(float(key)) == lab, (name, key, lab, ours)
    # User-missing values: discrete ones are missing codes; a range's
    # codes are the values the data hold in it.
    for name, ranges in meta.missing_ranges.items():
        codes = info[name]["missing_codes"]
        if info[name]["kind"] == "string":
            words = {r["lo"].rstrip(" ") for r in ranges}
            vals = {r[name] for r in got if r[name] in words}
            assert len(codes) == len(vals), (name, codes, vals)
            continue
        col = [float(x) for x in df[name] if x is not None and not math.isnan(float(x))]
        want = set()
        for r in ranges:
            if r["lo"] == r["hi"]:
                want.add(float(r["lo"]))
            else:
                want |= {x for x in col if r["lo"] <= x <= r["hi"]}
        assert set(codes) == want, (name, codes, want)
    return df, meta, info


@pytest.mark.parametrize("name", sorted(p.name for p in FIX.glob("*sav")))
def test_files_spss_and_others_wrote_read_as_pyreadstat_reads_them(tmp_path, name):
    ds = tmp_path / "d.mtab"
    p = run("import", FIX / name, ds)
    same_as_pyreadstat(ds, FIX / name)
    if name == "tegulu.sav":
        assert "end inside a UTF-8 character" in p.stderr + p.stdout
    if name == "sample_missing.sav":
        assert "2000 THRU 3000" in p.stderr + p.stdout


def test_bytecode_zlib_and_plain_give_the_same_dataset(tmp_path):
    """sample.sav (bytecode) and sample.zsav (zlib) hold the same data."""
    a, b = tmp_path / "a.mtab", tmp_path / "b.mtab"
    run("import", FIX / "sample.sav", a)
    run("import", FIX / "sample.zsav", b)
    cols = [v["name"] for v in run_json("info", a)["variables"]]
    assert run_json("list", a, *cols, "--all")["records"] == run_json("list", b, *cols, "--all")["records"]


def frame(n, seed=3):
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({
        "id": np.arange(1, n + 1, dtype=float),
        "wt": np.round(rng.uniform(1, 500, n), 2),
        "x": rng.normal(size=n) * 1e3,
        "code": rng.choice([1.0, 2.0, 3.0, 8.0, 9.0], n),
        "name": rng.choice(["alpha", "b", "x y", "", "grüße"], n),
        "long": [("segment " * (k % 60)) + "end" for k in range(n)],
        "day": [dt.date(1990, 1, 1) + dt.timedelta(days=int(d)) for d in rng.integers(0, 20000, n)],
    })
    df.loc[df.index % 11 == 0, "x"] = np.nan
    return df


@pytest.mark.parametrize("compress", ["none", "bytecode", "zlib"])
def test_files_pyreadstat_writes(tmp_path, compress):
    df = frame(3000)
    src = tmp_path / ("w.zsav" if compress == "zlib" else "w.sav")
    pyreadstat.write_sav(df, str(src), compress=compress == "zlib", row_compress=compress == "bytecode",
                         column_labels={"wt": "weight", "name": "a name"},
                         variable_value_labels={"code": {1: "one", 2: "two", 8: "refused", 9: "no answer"}},
                         missing_ranges={"code": [8, 9], "x": [{"lo": 5000.0, "hi": 1e9}]})
    ds = tmp_path / "d.mtab"
    run("import", src, ds)
    _, _, info = same_as_pyreadstat(ds, src)
    assert info["wt"]["kind"] == "int" and info["wt"]["decimals"] == 2
    assert sorted(info["code"]["missing_codes"]) == [8.0, 9.0]
    freq = run_json("freq", ds, "code", "--include-missing")
    labs = {r["label"]: r["count"] for r in freq["rows"] if r.get("label")}
    assert labs["refused"] == int((df.code == 8).sum())
    m = run_json("means", ds, "wt", "--by", "code")
    keep = df.code.isin([1, 2, 3])
    assert m["total"]["mean"] == pytest.approx(df.wt[keep].mean(), rel=1e-12)


PSPP = r"""
DATA LIST FREE / id (F4) score (F8.2) grp (F2) town (A12).
BEGIN DATA
1 10.5 1 Oslo
2 -3.25 2 Bergen
3 99 9 Tromsø
4 7 1 "Trondheim"
5 -99 2 Oslo
END DATA.
VARIABLE LABELS score 'Test score' grp 'Group'.
VALUE LABELS grp 1 'first' 2 'second' 9 'unknown' /town 'Oslo' 'capital'.
MISSING VALUES score (LO THRU -50) grp (9) town ('Bergen').
SAVE OUTFILE='{dir}/plain.sav' /UNCOMPRESSED.
SAVE OUTFILE='{dir}/byte.sav' /COMPRESSED.
SAVE OUTFILE='{dir}/zlib.zsav' /ZCOMPRESSED.
"""


@pytest.mark.skipif(shutil.which("pspp") is None, reason="GNU PSPP is not installed")
def test_files_pspp_writes_the_same_three_ways(tmp_path):
    (tmp_path / "w.sps").write_text(PSPP.format(dir=tmp_path), encoding="utf-8")
    p = subprocess.run(["pspp", str(tmp_path / "w.sps")], capture_output=True, text=True, cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    lists = []
    for f in ("plain.sav", "byte.sav", "zlib.zsav"):
        ds = tmp_path / f"{f}.mtab"
        run("import", tmp_path / f, ds)
        same_as_pyreadstat(ds, tmp_path / f)
        lists.append(run_json("list", ds, "id", "score", "grp", "town", "--all")["records"])
        info = {v["name"]: v for v in run_json("info", ds)["variables"]}
        assert info["score"]["missing_codes"] == [-99.0]
        assert info["grp"]["missing_codes"] == [9.0]
        assert info["town"]["value_labels"] == {"Oslo": "capital"}
    assert lists[0] == lists[1] == lists[2]
    assert [r["town"] for r in lists[0]] == ["Oslo", "Bergen", "Tromsø", "Trondheim", "Oslo"]


def test_damaged_files_are_errors_that_leave_the_target(tmp_path):
    good = (FIX / "sample.sav").read_bytes()
    target = tmp_path / "t.mtab"
    run("import", FIX / "sample.sav", target)
    before = run_json("list", target, "mychar", "--all")
    bad_type = bytearray(good)
    bad_type[176:180] = (77).to_bytes(4, "little")
    cases = {
        "header": (good[:100], "truncated"),
        "dictionary": (good[:600], "truncated"),
        "record type": (bytes(bad_type), "type 77"),
        "data": (good[:-20], "inside record"),
    }
    z = (FIX / "sample.zsav").read_bytes()
    cases["zlib"] = (z[:-30], "zlib")
    for what, (data, needle) in cases.items():
        f = tmp_path / ("bad.zsav" if what == "zlib" else "bad.sav")
        f.write_bytes(data)
        p = run("import", f, target, "--force", ok=False)
        assert p.returncode == 1 and needle in p.stderr and f.name in p.stderr, (what, p.stderr)
        assert run_json("list", target, "mychar", "--all") == before, what
        run("import", f, tmp_path / "new.mtab", ok=False)
        assert not (tmp_path / "new.mtab").exists(), what


def test_mutated_files_are_read_or_refused_never_crash(tmp_path):
    rng = np.random.default_rng(30)
    for name in ("sample.sav", "sample.zsav", "test_width.sav", "missing_char.sav"):
        good = (FIX / name).read_bytes()
        for k in range(100):
            m = tmp_path / ("m.zsav" if name.endswith("zsav") else "m.sav")
            m.write_bytes(mutated(good, rng, k))
            p = run("import", m, tmp_path / "m.mtab", "--force", ok=None, timeout=30)
            assert p.returncode in (0, 1), (name, k, p.returncode, p.stderr)
            assert "panicked" not in p.stderr, (name, k, p.stderr)
