"""The Python package (issue 14, step 1): `pip install ./crates/python`,
then every number checked against DuckDB on the same CSV, columns and
frames against DuckDB's, answers equal to the CLI's JSON (one analysis
layer), and each error kind its own exception class."""

import json
import os
import subprocess
import sys
import threading
from decimal import Decimal
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import microtab as mt

REPO = Path(__file__).resolve().parents[2]
BIN = Path(os.environ.get("MICROTAB_BIN", REPO / "target" / "release" / "microtab"))

# The census the test folders share (tests/census_data.py).
sys.path.append(str(REPO / "tests"))
from census_data import census_dataset, duck_census, microtab, replicate_design  # noqa: E402,F401


# Run the binary, asserting it succeeded.
cli = microtab


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    csv, ds = census_dataset(tmp_path_factory.mktemp("api"), 50000, 9, reps=4)
    cli("label", ds, "SEX", "1=Male", "2=Female")
    plain = ds.parent / "p.mtab"
    cli("import", csv, plain, "--plain", "--missing", "INCTOT=9999999")
    return ds, plain, duck_census(csv)


def test_open_and_metadata(data):
    ds, _, _ = data
    d = mt.open(ds)
    assert d.rows == 50000 and "AGE" in d.variables
    assert d.variable("sex").value_labels == {"1": "Male", "2": "Female"}
    assert d.variable("INCTOT").missing_codes == [9999999]
    assert "50,000 records" in repr(d)


def test_freq_tab_means_match_duckdb(data):
    ds, _, con = data
    d = mt.open(ds)
    f = d.freq("EDUC", weight="PERWT", filter="AGE(25-64)").to_pandas()
    want = con.execute("SELECT EDUC, count(*), sum(PERWT) FROM c WHERE AGE BETWEEN 25 AND 64 "
                       "GROUP BY 1 ORDER BY 1").fetchall()
    assert list(f["value"]) == [w[0] for w in want]
    assert list(f["count"]) == [w[1] for w in want]
    assert np.allclose(f["weighted"], [float(w[2]) for w in want], rtol=1e-12)
    t = d.tab("SEX", "AGE(r: 0-17; 18-64; 65-*)", weight="PERWT", pct="row")
    df = t.to_pandas()
    want = {(s, g): (n, float(w)) for s, g, n, w in con.execute(
        "SELECT SEX, CASE WHEN AGE <= 17 THEN 1 WHEN AGE <= 64 THEN 2 ELSE 3 END, count(*), sum(PERWT) "
        "FROM c GROUP BY ALL").fetchall()}
    for r in df.itertuples():
        n, w = want[(r.row, r.col)]
        assert r.count == n and abs(r.weighted - w) < 1e-6
    assert t.counts().shape == (2, 3) and t.counts().sum() == 50000
    # Row percentages add to 100 within each row.
    assert np.allclose(df.groupby("row")["pct"].sum(), 100)
    m = d.means("INCTOT", by=["SEX"], weight="PERWT", median=True).to_pandas()
    want = dict(con.execute("SELECT SEX, sum(PERWT * INCTOT) / sum(PERWT) FROM c WHERE INCTOT <> 9999999 "
                            "GROUP BY 1").fetchall())
    for r in m.itertuples():
        assert abs(r.mean - float(want[r.SEX])) <= 1e-9 * abs(float(want[r.SEX]))
    assert "p50" in m.columns and list(m["SEX_label"]) == ["Male", "Female"]


def same(a, b, path=""):
    """Equal JSON, floats to 1e-12 relative: the executable takes exp/log
    from the libm crate (no libm.so to load at a cold start), the
    extension from the system's libm; they may differ in the last bit."""
    if isinstance(a, float) or isinstance(b, float):
        assert isinstance(a, (int, float)) and isinstance(b, (int, float)), path
        assert a == b or abs(a - b) <= 1e-12 * max(abs(a), abs(b)), (path, a, b)
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), path
        for k in a:
            same(a[k], b[k], f"{path}/{k}")
    elif isinstance(a, list):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            same(x, y, f"{path}[{i}]")
    else:
        assert a == b, (path, a, b)


def test_answers_equal_the_cli(data):
    """One analysis layer: the package's answer is the CLI's JSON."""
    ds, _, _ = data
    cli("design", ds, "--weight", "PERWT", "--repweights", "REPWTP1-REPWTP4", "--type", "jk1")
    try:
        d = mt.open(ds)
        got = d.tab("SEX", "EDUC", pct="col", stats=True).to_dict()
        want = json.loads(cli("tab", ds, "SEX", "EDUC", "--pct", "col", "--stats", "--format", "json").stdout)
        same(got, want)
        f = d.freq("MARST").to_pandas()
        assert "weighted_se" in f.columns and f["weighted_se"].notna().all()
        plain = d.freq("MARST", design=False).to_pandas()
        assert "weighted_se" not in plain.columns
    finally:
        cli("design", ds, "--clear")


def test_columns_and_frames_match_duckdb(data):
    ds, plain, con = data
    want_age = np.array([r[0] for r in con.execute("SELECT AGE FROM c").fetchall()])
    for path in (ds, plain):
        d = mt.open(path)
        age = d.column("AGE")
        assert np.array_equal(np.asarray(age), want_age)
    # A plain column is a memory map of the file (no copy).
    assert isinstance(mt.open(plain).column("AGE"), np.memmap)
    assert not isinstance(mt.open(ds).column("AGE"), np.memmap)
    f = mt.open(ds).to_pandas(["PERWT", "INCTOT", "SEX"], labels=True)
    rows = con.execute("SELECT PERWT, INCTOT, SEX FROM c").fetchall()
    assert [Decimal(str(x)) for x in f["PERWT"].head(1000)] == [r[0] for r in rows[:1000]]
    inc = f["INCTOT"]
    assert inc.isna().sum() == sum(1 for r in rows if r[1] == 9999999)
    assert list(inc.dropna().astype("int64")[:100]) == [r[1] for r in rows if r[1] != 9999999][:100]
    assert set(f["SEX"].cat.categories) == {"Male", "Female"}


def test_errors_are_typed(data, tmp_path):
    ds, _, _ = data
    d = mt.open(ds)
    with pytest.raises(mt.QueryError, match="NOPE"):
        d.freq("NOPE")
    with pytest.raises(mt.QueryError, match="bad filter"):
        d.freq("SEX", filter="AGE(25-")
    assert issubclass(mt.TooLargeError, mt.QueryError) and issubclass(mt.QueryError, mt.MicrotabError)
    with pytest.raises(mt.TooLargeError):
        d._ask({"analysis": "tab", "row": "SERIAL", "col": "PERNUM", "max_cells": 1000})
    with pytest.raises(FileNotFoundError):
        mt.open(tmp_path / "nope.mtab")
    # A damaged column: CorruptError, not a wrong number.
    bad = tmp_path / "bad.mtab"
    subprocess.run(["cp", "-r", str(ds), str(bad)], check=True)
    col = bad / mt.open(bad).variable("AGE")._e["file"]
    b = bytearray(col.read_bytes())
    b[5000] ^= 0xFF
    col.write_bytes(bytes(b))
    with pytest.raises(mt.CorruptError):
        mt.open(bad).freq("AGE")


def test_queries_from_threads(data):
    """Queries release the GIL: threads run them side by side, each right."""
    ds, _, _ = data
    d = mt.open(ds)
    want = d.freq("EDUC", weight="PERWT").to_dict()
    out = []
    ts = [threading.Thread(target=lambda: out.append(d.freq("EDUC", weight="PERWT").to_dict())) for _ in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert out == [want] * 4


def test_filtered_frames_and_codebook(data):
    ds, _, con = data
    d = mt.open(ds)
    f = d.to_pandas(["AGE", "SEX", "INCTOT"], filter="AGE(25-64) SEX(2)")
    want = con.execute("SELECT AGE, SEX, INCTOT FROM c WHERE AGE BETWEEN 25 AND 64 AND SEX = 2").fetchall()
    assert len(f) == len(want)
    assert list(f["AGE"]) == [w[0] for w in want]
    assert int(d.select("AGE(25-64) SEX(2)").sum()) == len(want)
    cb = d.codebook()
    assert list(cb["name"]) == d.variables
    assert cb.set_index("name").loc["INCTOT", "missing_codes"] == [9999999]


IPUMS = REPO.parent / "shared" / "data" / "ipums"


@pytest.mark.parametrize("name", ["cps_00006", "cps_00361"])
def test_import_fixed_matches_ipumspy(name, tmp_path):
    """import_fixed + to_pandas against ipumspy's read_microdata: every
    variable, value for value (missing codes NA here, codes there)."""
    import warnings
    readers = pytest.importorskip("ipumspy.readers")
    if not (IPUMS / f"{name}.xml").exists():
        pytest.skip(f"{name} not in {IPUMS}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ddi = readers.read_ipums_ddi(IPUMS / f"{name}.xml")
        theirs = readers.read_microdata(ddi, IPUMS / f"{name}.dat.gz")
    d = mt.import_fixed(IPUMS / f"{name}.dat.gz", IPUMS / f"{name}.xml", tmp_path / "x.mtab")
    ours = d.to_pandas()
    assert len(ours) == len(theirs) and list(ours.columns) == list(theirs.columns)
    for col in ours.columns:
        v = d.variable(col)
        o, t = ours[col], theirs[col]
        na = o.isna().to_numpy()
        if v.kind == "string":
            assert list(o[~na]) == list(t[~na].astype(str)), col
            continue
        tv = pd.to_numeric(t, errors="coerce").to_numpy(dtype=float)
        ov = o.to_numpy(dtype=float, na_value=np.nan)
        assert np.allclose(ov[~na], tv[~na], rtol=0, atol=10.0 ** -(v.decimals + 1)), col
        # Where microtab says missing, ipumspy has a missing code or nothing.
        codes = {c / 10 ** v.decimals for c in v.missing_codes}
        assert all(np.isnan(x) or x in codes for x in tv[na]), col
    # The CPS replicate weights (if any) make a design, as the CLI's import.
    if any(n.startswith("REPWTP") for n in d.variables):
        assert d.design() is not None


def test_import_csv_errors_and_options(tmp_path):
    src = tmp_path / "a.csv"
    src.write_text("ID,X,Z\n1,5,01\n2,9999,02\n3,7,x\n")
    d = mt.import_csv(src, tmp_path / "a.mtab", missing={"X": 9999}, types={"Z": "string"})
    f = d.to_pandas()
    assert f["X"].isna().tolist() == [False, True, False] and list(f["Z"]) == ["01", "02", "x"]
    with pytest.raises(mt.InputError, match=r"line 4.*X"):
        bad = tmp_path / "b.csv"
        bad.write_text("ID,X\n1,5\n2,6\n3,seven\n")
        mt.import_csv(bad, tmp_path / "b.mtab", types={"X": "int"})
    assert not (tmp_path / "b.mtab").exists()
    with pytest.raises(FileNotFoundError):
        mt.import_csv(tmp_path / "none.csv", tmp_path / "c.mtab")
    with pytest.raises(FileExistsError, match="exists"):
        mt.import_csv(src, tmp_path / "a.mtab")


def test_review_fixes(data, tmp_path):
    """A hostile review's findings: a changed dataset is re-read, empty
    answers keep their columns, frames are writable, labels ordered by
    code, clear errors."""
    ds, _, _ = data
    d = mt.open(ds)
    work = tmp_path / "w.mtab"
    subprocess.run(["cp", "-r", str(ds), str(work)], check=True)
    w = mt.open(work)
    small = tmp_path / "s.csv"
    small.write_text("SEX,AGE\n1,5\n2,70\n")
    cli("import", small, work, "--force")
    assert w.rows == 2 and w.select("AGE(60-*)").tolist() == [False, True]
    assert w.to_pandas("AGE")["AGE"].tolist() == [5, 70]
    e = d.tab("SEX", "EDUC", filter="AGE(200)").to_pandas()
    assert len(e) == 0 and {"row", "col", "count"} <= set(e.columns)
    assert len(d.freq("SEX", filter="AGE(200)").to_pandas().columns) >= 5
    f = d.to_pandas(["AGE", "PERWT"])
    f.loc[0, "AGE"] = 5
    f.loc[0, "PERWT"] = 1.5
    assert f.loc[0, "AGE"] == 5
    c = d.to_pandas(["SEX"], labels=True)["SEX"]
    assert list(c.cat.categories) == ["Male", "Female"] and c.cat.ordered
    with pytest.raises(mt.QueryError, match="pct_ci"):
        d.tab("SEX", "EDUC", pct="row", pct_ci="wilson")
    with pytest.raises(ValueError, match="percent"):
        d.means("INCTOT", by="SEX", percentiles=[0.5])
    # No grouping: the mean of all the records (as the CLI's means without --by).
    whole = d.means("INCTOT", by=None).to_pandas()
    assert len(whole) == 1
    assert whole.loc[0, "mean"] == pytest.approx(d.to_pandas(["INCTOT"])["INCTOT"].mean(), rel=1e-12)
    with pytest.raises(FileExistsError):
        mt.import_csv(small, work)


R_DESIGN = r"""
suppressMessages(library(survey))
a <- commandArgs(TRUE)
d <- read.csv(a[1])
d$G <- factor(d$G)
des <- if (a[3] == "taylor") {
  svydesign(ids = ~PSU, strata = ~ST, weights = ~W, fpc = ~FPC, data = d, nest = TRUE)
} else {
  svrepdesign(data = d, weights = ~W, repweights = "^RW[0-9]+$", type = "Fay", rho = 0.5, mse = FALSE)
}
t <- svytotal(~G, des)
p <- svymean(~G, des)
m <- svyby(~Y, ~G, des, svymean)
out <- data.frame(what = c(rep("total", 3), rep("pct", 3), rep("mean", 3)),
                  g = rep(1:3, 3),
                  est = c(coef(t), 100 * coef(p), coef(m)),
                  se = c(SE(t), 100 * SE(p), SE(m)))
write.csv(out, a[2], row.names = FALSE)
"""


@pytest.mark.parametrize("kind", ["taylor", "fay"])
def test_design_set_from_python_matches_r_survey(kind, tmp_path):
    """ds.design(...) stores a design; freq/means SEs then equal R
    survey's (svydesign with strata, PSUs and an FPC; svrepdesign Fay)."""
    rng = np.random.default_rng(5)
    n = 3000
    st = rng.integers(1, 6, n)
    psu = st * 100 + rng.integers(1, 8, n)
    order = np.lexsort((psu, st))
    df = pd.DataFrame({"ST": st, "PSU": psu, "FPC": st * 20 + 40,
                       "W": rng.integers(50, 400, n), "G": rng.integers(1, 4, n),
                       "Y": rng.integers(0, 90000, n)}).iloc[order].reset_index(drop=True)
    for r in range(1, 9):
        df[f"RW{r}"] = (df["W"] * rng.choice([0.5, 1.5], n)).round(2)
    csv = tmp_path / "d.csv"
    df.to_csv(csv, index=False)
    script = tmp_path / "d.R"
    script.write_text(R_DESIGN)
    out = tmp_path / "r.csv"
    subprocess.run(["Rscript", str(script), str(csv), str(out), kind], check=True, capture_output=True)
    want = pd.read_csv(out)
    ds = mt.import_csv(csv, tmp_path / "d.mtab")
    assert ds.design() is None
    if kind == "taylor":
        d = ds.design("W", strata="ST", cluster="PSU", fpc="FPC")
        assert d["taylor"]["strata"] == "ST" and d["weight"] == "W"
    else:
        d = ds.design("W", repweights="RW1-RW8", type="fay", rho=0.5, mse=False)
        assert d["replicates"]["weights"] == [f"RW{r}" for r in range(1, 9)]
    # Stored: a fresh handle and the CLI see it.
    assert mt.open(ds.path).design() == d
    f = ds.freq("G").to_pandas()
    m = ds.means("Y", by="G").to_pandas()
    for g in (1, 2, 3):
        row = f[f["value"] == g].iloc[0]
        w = want.set_index(["what", "g"])
        assert row["weighted"] == pytest.approx(w.loc[("total", g), "est"], rel=1e-9)
        assert row["weighted_se"] == pytest.approx(w.loc[("total", g), "se"], rel=1e-6)
        assert row["percent"] == pytest.approx(w.loc[("pct", g), "est"], rel=1e-9)
        assert row["percent_se"] == pytest.approx(w.loc[("pct", g), "se"], rel=1e-6)
        mr = m[m["G"] == g].iloc[0]
        assert mr["mean"] == pytest.approx(w.loc[("mean", g), "est"], rel=1e-9)
        assert mr["mean_se"] == pytest.approx(w.loc[("mean", g), "se"], rel=1e-6)
    # Bad designs are QueryErrors naming the problem; clear removes it.
    with pytest.raises(mt.QueryError, match="rho"):
        ds.design("W", repweights="RW1-RW8", type="fay")
    with pytest.raises(mt.QueryError, match="NOPE"):
        ds.design("NOPE")
    with pytest.raises(mt.QueryError, match="Taylor"):
        ds.design("W", repweights=["RW1", "RW2"], strata="ST")
    assert ds.design() == d
    assert ds.design(clear=True) is None and mt.open(ds.path).design() is None
    assert "weighted_se" not in ds.freq("G").to_pandas().columns


def test_several_datasets_as_one_and_import_progress(tmp_path):
    """open_many answers parts as the whole: counts, weighted totals and
    replicate SEs equal those of one dataset of all the records; an
    import reports its progress to a callable, ending at the file size."""
    whole = tmp_path / "w.csv"
    cli("gen", "census", "--rows", "30000", "--seed", "3", "--repweights", "4", "--out", whole)
    lines = whole.read_text().splitlines(keepends=True)
    parts = []
    (tmp_path / "parts").mkdir()
    for k, (a, b) in enumerate([(1, 12001), (12001, 30001)]):
        p = tmp_path / f"p{k}.csv"
        p.write_text(lines[0] + "".join(lines[a:b]))
        calls = []
        d = mt.import_csv(p, tmp_path / f"parts/p{k}.mtab", missing={"INCTOT": 9999999},
                          progress=lambda done, total, calls=calls: calls.append((done, total)))
        assert calls and calls[-1] == (p.stat().st_size, p.stat().st_size)
        assert all(x <= y for (x, _), (y, _) in zip(calls, calls[1:]))
        d.design("PERWT", repweights="REPWTP1-REPWTP4")
        parts.append(d)
    one = mt.import_csv(whole, tmp_path / "w.mtab", missing={"INCTOT": 9999999}, progress=False)
    one.design("PERWT", repweights="REPWTP1-REPWTP4")
    many = mt.open_many(str(tmp_path / "parts" / "*.mtab"))
    assert many.rows == one.rows == 30000 and len(many.datasets) == 2
    a = many.tab("SEX", "EDUC", weight="PERWT", pct="row").to_pandas()
    b = one.tab("SEX", "EDUC", weight="PERWT", pct="row").to_pandas()
    assert a["count"].tolist() == b["count"].tolist()
    for c in ["weighted", "pct", "weighted_se", "pct_se"]:
        assert np.allclose(a[c], b[c], rtol=1e-12, atol=0), c
    m1 = many.means("INCTOT", by="SEX").to_pandas()
    m2 = one.means("INCTOT", by="SEX").to_pandas()
    assert np.allclose(m1[["mean", "mean_se"]], m2[["mean", "mean_se"]], rtol=1e-12)
    with pytest.raises(mt.QueryError, match="same dataset"):
        mt.open_many([parts[0].path, parts[0].path])
    with pytest.raises(FileNotFoundError):
        mt.open_many(str(tmp_path / "none" / "*.mtab"))


def test_dataset_display_and_missing_values(tmp_path):
    src = tmp_path / "m.csv"
    src.write_text("W,S,T\n1.25,a,1\n99.99,b,2\n2.50,NA_,3\n")
    d = mt.import_csv(src, tmp_path / "m.mtab", missing={"W": 99.99, "S": "NA_"})
    assert len(d) == 3
    assert d.variable("W").missing_values == [Decimal("99.99")]
    assert d.variable("S").missing_values == ["NA_"]
    assert d.variable("T").missing_values == []
    page = d._repr_html_()
    assert "3 records" in page and "<td>W</td>" in page and "99.99" in page and "NA_" in page


def test_float_arguments_are_checked_in_python(data, tmp_path):
    """Issue 27: `level=nan` reached the native side as JSON it could not
    parse. Every float argument is checked before: a ValueError naming
    the argument (NaN, infinities, out of range, not a number)."""
    ds, _, _ = data
    d = mt.open(ds)
    nan, inf = float("nan"), float("inf")
    # A ValueError, and a QueryError as the native side's request errors.
    assert issubclass(mt.ArgumentError, ValueError) and issubclass(mt.ArgumentError, mt.QueryError)
    for bad in (nan, inf, -inf, 0, 0.0, -0.5, 1, 1.0, 95, 100, 250, "x", None, True):
        with pytest.raises(ValueError, match="level"):
            d.freq("SEX", level=bad)
        with pytest.raises(ValueError, match="level"):
            d.tab("SEX", "EDUC", level=bad)
        with pytest.raises(ValueError, match="level"):
            d.means("AGE", by="SEX", level=bad)
        with pytest.raises(ValueError, match="level"):
            mt.open_many([ds]).freq("SEX", level=bad)
    with pytest.raises(ValueError, match=r"95%.*level=0\.95"):
        d.freq("SEX", level=95)
    for bad in (nan, inf, 0, 100, "x"):
        with pytest.raises(ValueError, match="percentiles"):
            d.means("AGE", by="SEX", percentiles=[10, bad])
    for kw in ({"rho": nan}, {"rho": inf}, {"scale": nan}, {"scale": "x"}, {"rscales": [1.0, nan, 1.0, 1.0]}):
        with pytest.raises(ValueError, match=next(iter(kw))):
            d.design("PERWT", repweights="REPWTP1-REPWTP4", type="fay" if "rho" in kw else "other", **kw)
    with pytest.raises(ValueError, match="infer_rows"):
        mt.import_csv(tmp_path / "x.csv", tmp_path / "x.mtab", infer_rows=nan)
    # Nothing was changed by the refused calls, and a good level works:
    # the normal quantile of level 0.9 against 0.95 (scipy as the oracle)
    # scales the interval of the same SE.
    assert d.design() is None
    d.design("PERWT", repweights="REPWTP1-REPWTP4", type="jk1")
    try:
        m90 = d.means("AGE", by="SEX", level=0.9).to_pandas()
        m95 = d.means("AGE", by="SEX").to_pandas()
    finally:
        d.design(clear=True)
    assert m90["mean"].tolist() == m95["mean"].tolist()
    assert m90["mean_se"].tolist() == m95["mean_se"].tolist()
    r = (m90["mean"] - m90["mean_lo"]) / (m95["mean"] - m95["mean_lo"])
    # The interval is the same SE times t quantiles of df = 3 (four JK1
    # replicates of full rank; docs/SURVEY.md "Intervals").
    from scipy.stats import t as student
    assert np.allclose(r, student.ppf(0.95, 3) / student.ppf(0.975, 3), rtol=1e-9), r.tolist()
