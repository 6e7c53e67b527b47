"""tab: two-way (and controlled) tables vs DuckDB; statistics vs scipy."""

import math

import numpy as np
import pytest
from scipy.stats import chi2 as chi2_dist
from scipy.stats import chi2_contingency

from conftest import approx, control_value, disp, make_dataset, run_json, same_dataset


def check_table(t, cells, ctrl, weighted, pct=None):
    """Compare one entry of ``tables`` with oracle cells
    {(ctrl,row,col): (count, weighted)} restricted to control ``ctrl``."""
    mine = {(r, c): v for (k, r, c), v in cells.items() if k == ctrl}
    rows = sorted({r for r, _ in mine})
    cols = sorted({c for _, c in mine})
    assert [disp(x) for x in t["rows"]] == rows
    assert [disp(x) for x in t["cols"]] == cols
    assert all(x["missing"] is False for x in t["rows"] + t["cols"])
    n = np.array([[mine.get((r, c), (0, 0))[0] for c in cols] for r in rows], dtype=np.int64)
    assert t["counts"] == n.tolist()
    assert t["row_totals"]["counts"] == n.sum(axis=1).tolist()
    assert t["col_totals"]["counts"] == n.sum(axis=0).tolist()
    assert t["total"]["count"] == int(n.sum())
    if weighted:
        w = np.array([[mine.get((r, c), (0, 0.0))[1] or 0.0 for c in cols] for r in rows])
        assert np.array(t["weighted"], dtype=float) == approx(w)
        assert t["row_totals"]["weighted"] == approx(w.sum(axis=1).tolist())
        assert t["col_totals"]["weighted"] == approx(w.sum(axis=0).tolist())
        assert t["total"]["weighted"] == approx(float(w.sum()))
        base = w
    else:
        assert t["weighted"] is None
        base = n.astype(float)
    if pct is None:
        assert t["pct"] is None
    else:
        if pct == "row":
            exp = 100.0 * base / base.sum(axis=1, keepdims=True)
        elif pct == "col":
            exp = 100.0 * base / base.sum(axis=0, keepdims=True)
        else:
            exp = 100.0 * base / base.sum()
        assert np.array(t["pct"], dtype=float) == approx(exp)
    return base


def check_stats(st, base):
    chi2, p, dof, _ = chi2_contingency(base, correction=False)
    r, c = base.shape
    n = float(base.sum())
    assert st["df"] == (r - 1) * (c - 1) == dof
    assert st["chi2"] == approx(chi2)
    # p far in the tail (< 1e-12) is only compared absolutely
    assert st["p"] == approx(chi2_dist.sf(chi2, dof), abs=1e-12)
    assert st["n"] == approx(n)
    assert st["cramers_v"] == approx(math.sqrt(chi2 / (n * (min(r, c) - 1))))


@pytest.mark.parametrize("row,col", [("SEX", "EDUC"), ("RACE", "EMPSTAT"), ("MARST", "HISPAN")])
def test_tab_unweighted(census, row, col):
    res = run_json("tab", census.ds, row, col)
    assert res["row_var"] == row and res["col_var"] == col
    assert res["control_var"] is None and res["weight"] is None and res["filter"] is None
    assert res["pct"] is None
    assert same_dataset(res["dataset"], census.ds)
    assert len(res["tables"]) == 1
    t = res["tables"][0]
    assert t["control"] is None
    assert t["stats"] is None
    check_table(t, census.cells(row, col), None, weighted=False)


@pytest.mark.parametrize("pct", ["row", "col", "total"])
def test_tab_weighted_pct(census, pct):
    res = run_json("tab", census.ds, "SEX", "EDUC", "--weight", "PERWT", "--pct", pct)
    assert res["pct"] == pct and res["weight"] == "PERWT"
    check_table(res["tables"][0], census.cells("SEX", "EDUC", weight="PERWT"), None,
                weighted=True, pct=pct)


@pytest.mark.parametrize("pct", ["row", "col", "total"])
def test_tab_unweighted_pct(census, pct):
    res = run_json("tab", census.ds, "RACE", "MARST", "--pct", pct)
    check_table(res["tables"][0], census.cells("RACE", "MARST"), None, weighted=False, pct=pct)


def test_tab_filter_weighted(census):
    res = run_json("tab", census.ds, "RACE", "EMPSTAT", "--weight", "PERWT",
                   "--filter", "AGE(25-64)")
    assert res["filter"] == "AGE(25-64)"
    check_table(res["tables"][0],
                census.cells("RACE", "EMPSTAT", weight="PERWT", extra="AGE BETWEEN 25 AND 64"),
                None, weighted=True)


def test_tab_control(census):
    res = run_json("tab", census.ds, "STATEFIP", "SEX", "--control", "MARST")
    assert res["control_var"] == "MARST"
    cells = census.cells("STATEFIP", "SEX", control="MARST")
    ctrls = sorted({k for k, _, _ in cells})
    assert [control_value(t) for t in res["tables"]] == ctrls
    for t in res["tables"]:
        check_table(t, cells, control_value(t), weighted=False)


def test_tab_control_weighted_pct_stats(census):
    """Each control table lists only its own categories and has its own
    percentages and statistics. A filter makes some categories vanish in
    some control tables."""
    flt = "AGE(15-30)"
    res = run_json("tab", census.ds, "EMPSTAT", "MARST", "--control", "SEX",
                   "--weight", "PERWT", "--pct", "col", "--stats", "--filter", flt)
    cells = census.cells("EMPSTAT", "MARST", weight="PERWT", control="SEX",
                         extra="AGE BETWEEN 15 AND 30")
    ctrls = sorted({k for k, _, _ in cells})
    assert [control_value(t) for t in res["tables"]] == ctrls
    for t in res["tables"]:
        base = check_table(t, cells, control_value(t), weighted=True, pct="col")
        check_stats(t["stats"], base)


def test_tab_stats_weighted(census):
    res = run_json("tab", census.ds, "SEX", "EDUC", "--weight", "PERWT", "--stats")
    t = res["tables"][0]
    base = check_table(t, census.cells("SEX", "EDUC", weight="PERWT"), None, weighted=True)
    check_stats(t["stats"], base)


def test_tab_stats_unweighted(census):
    res = run_json("tab", census.ds, "RACE", "HISPAN", "--stats")
    t = res["tables"][0]
    base = check_table(t, census.cells("RACE", "HISPAN"), None, weighted=False)
    check_stats(t["stats"], base)


def test_tab_stats_2x2_no_continuity_correction(census):
    """A 2×2 table: scipy would apply Yates' correction by default; the
    contract says none."""
    flt = "EMPSTAT(1-2)"
    cells = census.cells("SEX", "EMPSTAT", extra="EMPSTAT BETWEEN 1 AND 2")
    assert len({c for _, _, c in cells}) == 2, "need EMPSTAT 1 and 2 in data"
    res = run_json("tab", census.ds, "SEX", "EMPSTAT", "--filter", flt, "--stats")
    t = res["tables"][0]
    base = check_table(t, cells, None, weighted=False)
    check_stats(t["stats"], base)


def test_tab_stats_small_hand_computed(tmp_path):
    """A 2×3 table with a moderate p-value, checked against numbers computed
    by hand from the formula (not only scipy)."""
    rows = [(1, "a")] * 10 + [(1, "b")] * 20 + [(1, "c")] * 30 + \
           [(2, "a")] * 20 + [(2, "b")] * 15 + [(2, "c")] * 25
    text = "G,H\n" + "".join(f"{g},{h}\n" for g, h in rows)
    _, ds = make_dataset(tmp_path, "small", text)
    res = run_json("tab", ds, "G", "H", "--stats", "--pct", "row")
    t = res["tables"][0]
    assert t["counts"] == [[10, 20, 30], [20, 15, 25]]
    assert [disp(c) for c in t["cols"]] == ["a", "b", "c"]
    obs = np.array([[10, 20, 30], [20, 15, 25]], dtype=float)
    exp = obs.sum(1, keepdims=True) * obs.sum(0, keepdims=True) / obs.sum()
    chi2 = float(((obs - exp) ** 2 / exp).sum())
    st = t["stats"]
    assert st["df"] == 2
    assert st["chi2"] == approx(chi2)
    assert st["p"] == approx(math.exp(-chi2 / 2))  # χ²(2) survival function
    assert st["n"] == approx(120.0)
    assert st["cramers_v"] == approx(math.sqrt(chi2 / 120.0))
    assert np.array(t["pct"]) == approx(100 * obs / obs.sum(1, keepdims=True))


def test_tab_weighted_count_matches_weighted_rows(tmp_path):
    """Rows with a missing weight are excluded from counts too (hand data)."""
    text = "A,B,W\n1,1,2.50\n1,2,\n2,1,1.25\n2,2,4.00\n1,1,0.75\n2,2,\n"
    _, ds = make_dataset(tmp_path, "w", text)
    res = run_json("tab", ds, "A", "B", "--weight", "W")
    t = res["tables"][0]
    assert t["counts"] == [[2, 0], [1, 1]]
    assert np.array(t["weighted"], dtype=float) == approx(np.array([[3.25, 0.0], [1.25, 4.0]]))
    assert t["total"] == {"count": 4, "weighted": approx(8.5)}
    res = run_json("tab", ds, "A", "B")
    assert res["tables"][0]["counts"] == [[2, 1], [1, 2]]


def random_columns(rng, n, **ranges):
    """`n` random integers per column, drawn in the order given:
    NAME=(low, high) with high excluded."""
    return {k: rng.integers(lo, hi, n) for k, (lo, hi) in ranges.items()}


def csv_text(cols):
    """CSV text of equal-length columns {name: values}."""
    rows = zip(*cols.values())
    return "\n".join([",".join(cols), *(",".join(map(str, r)) for r in rows)]) + "\n"


def numpy_cells(a, b, w, ok):
    """Oracle cells {(None, a, b): (count, Σw)} of the rows where ``ok``."""
    cells = {}
    for av in np.unique(a[ok]):
        for bv in np.unique(b[ok]):
            sel = ok & (a == av) & (b == bv)
            if sel.any():
                cells[(None, int(av), int(bv))] = (int(sel.sum()), float(w[sel].sum()))
    return cells


@pytest.mark.parametrize("weights", ["small-int", "huge-int", "decimal"])
@pytest.mark.parametrize("filters", [0, 1, 2])
def test_tab_fused_kernels_vs_numpy(tmp_path, weights, filters):
    """The fused byte-code kernels (count and weight packed in one word for
    small integer weights, separate sums for huge or decimal ones; two to
    four code columns with filters) against numpy on random data."""
    rng = np.random.default_rng(11)
    n = 150_000
    c = random_columns(rng, n, A=(1, 8), B=(0, 4), F1=(0, 100), F2=(1, 3))
    a, b, f1, f2 = c["A"], c["B"], c["F1"], c["F2"]
    if weights == "small-int":
        w = rng.integers(1, 5000, n).astype(float)
        wtxt = [str(int(x)) for x in w]
    elif weights == "huge-int":
        w = rng.integers(1, 4_000_000_000, n).astype(float)
        wtxt = [str(int(x)) for x in w]
    else:
        w = rng.integers(1, 500_000, n) / 100.0
        wtxt = [f"{x:.2f}" for x in w]
    _, ds = make_dataset(tmp_path, "k", csv_text({**c, "W": wtxt}))
    flt = ["F1(18-64)", "F1(18-64) F2(2)"][:filters]
    args = ["tab", ds, "A", "B", "--weight", "W"]
    if flt:
        args += ["--filter", flt[-1]]
    res = run_json(*args)
    ok = np.ones(n, dtype=bool)
    if filters >= 1:
        ok &= (f1 >= 18) & (f1 <= 64)
    if filters >= 2:
        ok &= f2 == 2
    check_table(res["tables"][0], numpy_cells(a, b, w, ok), None, weighted=True)


@pytest.mark.parametrize("filt", [
    "F1(18-64) F2(2) F3(0-1)",       # three ranges: one selection pass, then the kernel
    "F1(18-64) F3(0,2)",             # a non-contiguous code set: filters kept in the kernel
    "F1(30-*) F2(1)",
])
def test_tab_several_filters_vs_numpy(tmp_path, filt):
    c = random_columns(np.random.default_rng(5), 120_000,
                       A=(1, 6), B=(0, 3), F1=(0, 90), F2=(1, 3), F3=(0, 4), W=(1, 300))
    a, b, f1, f2, f3, w = (c[k] for k in ("A", "B", "F1", "F2", "F3", "W"))
    _, ds = make_dataset(tmp_path, "s", csv_text(c))
    res = run_json("tab", ds, "A", "B", "--weight", "W", "--filter", filt)
    ok = {
        "F1(18-64) F2(2) F3(0-1)": (f1 >= 18) & (f1 <= 64) & (f2 == 2) & (f3 <= 1),
        "F1(18-64) F3(0,2)": (f1 >= 18) & (f1 <= 64) & ((f3 == 0) | (f3 == 2)),
        "F1(30-*) F2(1)": (f1 >= 30) & (f2 == 1),
    }[filt]
    check_table(res["tables"][0], numpy_cells(a, b, w, ok), None, weighted=True)
