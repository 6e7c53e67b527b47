"""Measures of association of `tab --stats` (issue 13, item 4) against
scipy on the records themselves — the likelihood-ratio chi-square,
Kendall's tau-b and tau-c, Somers' d both ways, Pearson's r and
Spearman's rho — weighted (integer weights, as repeated records) and not;
gamma and lambda against hand-counted pairs and maxima."""

import random

import numpy as np
import pytest
from scipy import stats

from conftest import run, run_json, write


@pytest.fixture(scope="module")
def ordinal(tmp_path_factory):
    d = tmp_path_factory.mktemp("assoc")
    rng = random.Random(4)
    rows = []
    for _ in range(2000):
        a = rng.randint(1, 5)
        b = min(4, max(0, a - 1 + rng.choice([-2, -1, 0, 0, 1, 1, 2]))) * 10  # codes 0..40
        w = rng.randint(1, 9)
        rows.append((a, b, w))
    path = write(d / "o.csv", "A,B,W\n" + "\n".join(f"{a},{b},{w}" for a, b, w in rows) + "\n")
    ds = d / "o.mtab"
    run("import", path, ds)
    return ds, np.array(rows, dtype=float)


def close(a, b, rel=1e-9):
    return a is not None and abs(a - b) <= rel * max(abs(b), 1e-12)


@pytest.mark.parametrize("weighted", [False, True])
def test_ordinal_measures_match_scipy(ordinal, weighted):
    ds, data = ordinal
    args = ["tab", ds, "A", "B", "--stats"] + (["--weight", "W"] if weighted else [])
    t = run_json(*args)["tables"][0]
    a = t["association"]
    reps = data[:, 2].astype(int) if weighted else np.ones(len(data), dtype=int)
    x, y = np.repeat(data[:, 0], reps), np.repeat(data[:, 1], reps)
    assert close(a["tau_b"], stats.kendalltau(x, y).statistic)
    assert close(a["tau_c"], stats.kendalltau(x, y, variant="c").statistic)
    assert close(a["somers_d_col"], stats.somersd(x, y).statistic)
    assert close(a["somers_d_row"], stats.somersd(y, x).statistic)
    assert close(a["pearson_r"], stats.pearsonr(x, y).statistic)
    assert close(a["spearman_rho"], stats.spearmanr(x, y).statistic)
    table = np.array(t["weighted"] if weighted else t["counts"], dtype=float)
    g2, p, _, _ = stats.chi2_contingency(table, correction=False, lambda_="log-likelihood")
    assert close(a["lr_chi2"], g2) and close(a["lr_p"], p, 1e-6)
    # Eta: the share of the dependent codes' variance between groups.
    for dep, grp, key in ((y, x, "eta_col"), (x, y, "eta_row")):
        m = dep.mean()
        within = sum(((dep[grp == g] - dep[grp == g].mean()) ** 2).sum() for g in np.unique(grp))
        assert close(a[key], (1 - within / ((dep - m) ** 2).sum()) ** 0.5), key
    assert "Gamma =" in run(*args).stdout


def test_gamma_and_lambda_by_hand(tmp_path):
    """The 2 × 3 table [[3, 1, 0], [1, 2, 4]] (rows A = 1, 2; columns B =
    1, 2, 3). Concordant pairs P = 3·(2 + 4) + 1·4 = 22, discordant Q =
    1·1 + 0·(1 + 2) = 1: gamma = 21/23. Lambda (col|row): row maxima 3 + 4
    = 7, largest column total 4, N = 11: (7 − 4)/(11 − 4) = 3/7; (row|col):
    column maxima 3 + 2 + 4 = 9, largest row total 7: (9 − 7)/(11 − 7) =
    1/2; symmetric (7 + 9 − 4 − 7)/(22 − 4 − 7) = 5/11. tau-b = (P − Q)/
    sqrt((n0 − n1)(n0 − n2)) with n0 = 55, n1 = 6 + 21 = 27, n2 = 6 + 3 +
    6 = 15: 21/sqrt(28 · 40)."""
    cells = [[3, 1, 0], [1, 2, 4]]
    lines = ["A,B"] + [f"{i + 1},{j + 1}" for i in range(2) for j in range(3) for _ in range(cells[i][j])]
    path = write(tmp_path / "h.csv", "\n".join(lines) + "\n")
    ds = tmp_path / "h.mtab"
    run("import", path, ds)
    a = run_json("tab", ds, "A", "B", "--stats")["tables"][0]["association"]
    assert close(a["gamma"], 21 / 23)
    assert close(a["lambda_col"], 3 / 7) and close(a["lambda_row"], 1 / 2) and close(a["lambda"], 5 / 11)
    assert close(a["tau_b"], 21 / (28 * 40) ** 0.5)
    # Text codes: no Pearson's r; the ordinal measures still apply.
    lines = ["A,B"] + [f"{'xy'[i]},{'pqr'[j]}" for i in range(2) for j in range(3) for _ in range(cells[i][j])]
    path = write(tmp_path / "s.csv", "\n".join(lines) + "\n")
    run("import", path, tmp_path / "s.mtab")
    a = run_json("tab", tmp_path / "s.mtab", "A", "B", "--stats")["tables"][0]["association"]
    assert a["pearson_r"] is None and close(a["gamma"], 21 / 23)


def test_p_values_below_df_and_empty_rows(tmp_path):
    """Found by review: a chi-square below its (large) df had p NaN; tau-c
    counted a row whose weights are all 0."""
    rng = random.Random(8)
    lines = ["A,B"] + [f"{rng.randint(1, 20)},{rng.randint(1, 20)}" for _ in range(60)]
    path = write(tmp_path / "s.csv", "\n".join(lines) + "\n")
    run("import", path, tmp_path / "s.mtab")
    t = run_json("tab", tmp_path / "s.mtab", "A", "B", "--stats")["tables"][0]
    table = np.array(t["counts"], dtype=float)
    chi2, p, dof, _ = stats.chi2_contingency(table, correction=False)
    g2, lp, _, _ = stats.chi2_contingency(table, correction=False, lambda_="log-likelihood")
    assert close(t["stats"]["p"], p, 1e-6) and close(t["association"]["lr_p"], lp, 1e-6)
    rows = [(1, 1, 2), (1, 2, 1), (2, 1, 0), (2, 3, 0), (3, 2, 3), (3, 3, 1), (1, 3, 2), (3, 1, 1)]
    path = write(tmp_path / "z.csv", "R,C,W\n" + "\n".join(f"{r},{c},{w}" for r, c, w in rows) + "\n")
    run("import", path, tmp_path / "z.mtab")
    a = run_json("tab", tmp_path / "z.mtab", "R", "C", "--weight", "W", "--stats")["tables"][0]["association"]
    w = np.array([x[2] for x in rows])
    x = np.repeat([r[0] for r in rows], w)
    y = np.repeat([r[1] for r in rows], w)
    assert close(a["tau_c"], stats.kendalltau(x, y, variant="c").statistic)
