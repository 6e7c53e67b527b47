"""Cells' z-statistics (SDA's coloured cells): the difference between a
cell's column (row) percentage and the same percentage of the whole table,
over its standard error.

* under a replicate design, R survey's `svycontrast` of the totals
  evaluated on every replicate (`return.replicates = TRUE`);
* under a Taylor linearization design, R survey's delta method on the
  totals' design covariance;
* without a design, the adjusted residual, computed here from DuckDB's
  counts as the difference of proportions over its SE under independence
  (unweighted), and with weights normalized to the record count.

R's numbers come from an R script run here on the same CSV; to 1e-6."""

import csv

import duckdb
import pytest

from conftest import rscript, run, run_json
from test_survey import R, close, rep_data  # noqa: F401
from test_taylor import taylor_data  # noqa: F401

R_SCRIPT = r"""
suppressMessages(library(survey))
args <- commandArgs(trailingOnly=TRUE)
d <- read.csv(args[1]); out <- args[2]; kind <- args[3]
d$EDUC <- factor(d$EDUC); d$SEX <- factor(d$SEX)
d$CELL <- interaction(d$EDUC, d$SEX, sep="_")
d$one <- 1
des <- if (kind == "replicate") {
  svrepdesign(data=d, weights=~W, repweights=d[, paste0("RW", 1:as.integer(args[4]))],
              type="JK1", mse=TRUE)
} else {
  svydesign(ids=~C, strata=~S, weights=~W, data=d, nest=TRUE)
}
tt <- if (kind == "replicate") svytotal(~CELL + EDUC + SEX + one, des, return.replicates=TRUE) else
  svytotal(~CELL + EDUC + SEX + one, des)
q <- function(x) as.name(x)
rows <- list()
for (e in levels(d$EDUC)) for (s in levels(d$SEX)) {
  cell <- q(paste0("CELL", e, "_", s)); r <- q(paste0("EDUC", e)); c <- q(paste0("SEX", s))
  if (coef(tt)[[as.character(cell)]] == 0) next
  col <- svycontrast(tt, list(z=bquote(.(cell) / .(c) - .(r) / one)))
  row <- svycontrast(tt, list(z=bquote(.(cell) / .(r) - .(c) / one)))
  rows[[length(rows) + 1]] <- data.frame(
    key=paste0(e, "_", s),
    col=coef(col)[[1]] / SE(col)[[1]], row=coef(row)[[1]] / SE(row)[[1]])
}
write.csv(do.call(rbind, rows), out, row.names=FALSE)
"""


def r_z(d, csv_path, kind):
    rows = rscript(d / "z.R", R_SCRIPT, csv_path, d / f"z_{kind}.csv", kind, R)
    return {r["key"]: (float(r["col"]), float(r["row"])) for r in rows}


def z_cells(j):
    """{"EDUC_SEX": z} of the one table of a `tab EDUC SEX` answer."""
    (t,) = j["tables"]
    return {f"{r['value']}_{c['value']}": t["z"][i][k]
            for i, r in enumerate(t["rows"]) for k, c in enumerate(t["cols"])}


def check_against(got, want, which):
    assert set(got) == set(want), (sorted(got), sorted(want))
    for k, z in got.items():
        assert close(z, want[k][which]), (k, z, want[k][which])


def test_replicate_design_z_match_r(rep_data):  # noqa: F811
    d, csv_path, ds = rep_data
    run("design", ds, "--weight", "W", "--repweights", f"RW1-RW{R}", "--type", "jk1")
    want = r_z(d, csv_path, "replicate")
    col = run_json("tab", ds, "EDUC", "SEX", "--z", "--pct", "col")
    assert col["z_method"] == "design" and col["z_along"] == "col"
    check_against(z_cells(col), want, 0)
    # Without percentages: along columns too (SDA's default).
    check_against(z_cells(run_json("tab", ds, "EDUC", "SEX", "--z")), want, 0)
    row = run_json("tab", ds, "EDUC", "SEX", "--z", "--pct", "row")
    assert row["z_along"] == "row"
    check_against(z_cells(row), want, 1)


def test_taylor_design_z_match_r(taylor_data):  # noqa: F811
    d, csv_path, ds = taylor_data
    run("design", ds, "--weight", "W", "--strata", "S", "--cluster", "C")
    want = r_z(d, csv_path, "taylor")
    col = run_json("tab", ds, "EDUC", "SEX", "--z", "--pct", "col")
    assert col["z_method"] == "design"
    check_against(z_cells(col), want, 0)
    check_against(z_cells(run_json("tab", ds, "EDUC", "SEX", "--z", "--pct", "row")), want, 1)
    # With the Rao–Scott test asked for too: the same z.
    check_against(z_cells(run_json("tab", ds, "EDUC", "SEX", "--z", "--pct", "row", "--stats")), want, 1)


def srs_oracle(csv_path, weight):
    """Adjusted residuals from DuckDB's (weighted) counts: the difference
    of a cell's column proportion and its row's overall proportion over
    its SE under independence, weights scaled to the records."""
    w = weight or "1"
    cells = duckdb.sql(f"SELECT EDUC, SEX, sum({w}), count(*) FROM read_csv_auto('{csv_path}') "
                       "GROUP BY ALL").fetchall()
    n = sum(c[3] for c in cells)
    tot = sum(float(c[2]) for c in cells)
    k = n / tot
    m = {(e, s): float(x) * k for e, s, x, _ in cells}
    rs, cs = {}, {}
    for (e, s), x in m.items():
        rs[e] = rs.get(e, 0) + x
        cs[s] = cs.get(s, 0) + x
    out = {}
    for (e, s), x in m.items():
        p_r = rs[e] / n
        out[f"{e}_{s}"] = ((x / cs[s] - p_r) / (p_r * (1 - p_r) * (1 / cs[s] - 1 / n)) ** 0.5,) * 2
    return out


@pytest.mark.parametrize("weight", [None, "W"])
def test_srs_z_are_adjusted_residuals(rep_data, tmp_path, weight):  # noqa: F811
    d, csv_path, _ = rep_data
    ds = tmp_path / "plain.mtab"
    run("import", csv_path, ds)
    args = ["--weight", weight] if weight else []
    j = run_json("tab", ds, "EDUC", "SEX", "--z", "--pct", "row", *args)
    assert j["z_method"] == ("srs-weighted" if weight else "srs")
    want = srs_oracle(csv_path, weight)
    check_against(z_cells(j), want, 0)


def test_z_undefined_for_one_column(rep_data, tmp_path):  # noqa: F811
    d, csv_path, _ = rep_data
    ds = tmp_path / "plain.mtab"
    run("import", csv_path, ds)
    j = run_json("tab", ds, "EDUC", "SEX", "--z", "--filter", "SEX(1)")
    (t,) = j["tables"]
    assert len(t["cols"]) == 1
    assert all(z is None for row in t["z"] for z in row)


def test_z_is_asked_for_and_shown(rep_data, tmp_path):  # noqa: F811
    d, csv_path, _ = rep_data
    ds = tmp_path / "plain.mtab"
    run("import", csv_path, ds)
    j = run_json("tab", ds, "EDUC", "SEX")
    assert "z" not in j["tables"][0] and "z_method" not in j
    want = srs_oracle(csv_path, None)
    # CSV: a z column.
    out = run("tab", ds, "EDUC", "SEX", "--z", "--format", "csv").stdout
    rows = list(csv.DictReader(out.splitlines()))
    assert len(rows) == len(want)
    for r in rows:
        assert close(float(r["z"]), want[f"{r['row']}_{r['col']}"][0])
    # Text: a z line under each row, and what z means.
    text = run("tab", ds, "EDUC", "SEX", "--z").stdout
    assert "z=" in text and "over its standard error under simple random sampling" in text
