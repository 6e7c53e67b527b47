"""Output formats: CSV parses and matches the JSON numbers (which are checked
against DuckDB); table output shows the values; --repeat; closed pipes."""

import csv
import io
import re
import signal
import subprocess

import pytest

from conftest import BIN, approx, check_freq, control_value, disp, module_dataset, run, run_json


def parse_csv(text):
    return list(csv.reader(io.StringIO(text)))


def fnum(s):
    return None if s == "" else float(s)


def same_value(csv_field, json_value):
    if json_value is None:
        return csv_field == ""
    if isinstance(json_value, str):
        return csv_field == json_value
    return float(csv_field) == approx(float(json_value))


# Names with a space, a comma and quotes, an empty name and an empty weight.
CITIES_CSV = ('CITY,G,W\n'
              'Boston,1,1.50\n"New York",2,2.25\n"a,b",1,0.50\nBoston,2,1.00\n'
              '"say ""hi""",1,3.00\n,2,1.00\nBoston,1,\n')

strds = module_dataset(CITIES_CSV)


def test_freq_csv_matches_json(census):
    args = ["freq", census.ds, "EDUC", "--weight", "PERWT", "--filter", "AGE(18-*)"]
    js = run_json(*args)
    check_freq(js, census.freq("EDUC", weight="PERWT", extra="AGE >= 18"), weighted=True)
    rows = parse_csv(run(*args, "--format", "csv").stdout)
    assert rows[0] == ["value", "label", "missing", "count", "weighted", "percent"]
    assert len(rows) - 1 == len(js["rows"])
    for f, r in zip(rows[1:], js["rows"]):
        assert same_value(f[0], r["value"])
        assert f[1] == ""
        assert f[2].lower() == "false"
        assert int(f[3]) == r["count"]
        assert fnum(f[4]) == approx(r["weighted"])
        assert fnum(f[5]) == approx(r["percent"])


def test_freq_csv_unweighted_missing_and_strings(strds):
    args = ["freq", strds, "CITY", "--include-missing"]
    js = run_json(*args)
    assert [(disp(r), r["count"]) for r in js["rows"]] == [
        ("Boston", 3), ("New York", 1), ("a,b", 1), ('say "hi"', 1), (None, 1)]
    rows = parse_csv(run(*args, "--format", "csv").stdout)
    assert rows[0] == ["value", "label", "missing", "count", "weighted", "percent"]
    body = rows[1:]
    assert len(body) == 5
    assert [b[0] if b[1] == "" else b[1] for b in body][:4] == ["Boston", "New York", "a,b", 'say "hi"']
    assert [b[2].lower() for b in body] == ["false"] * 4 + ["true"]
    assert [int(b[3]) for b in body] == [3, 1, 1, 1, 1]
    assert all(b[4] == "" for b in body)  # no weight
    assert [fnum(b[5]) for b in body] == [approx(50.0)] + [approx(100 / 6)] * 3 + [None]


def test_tab_csv_matches_json(census):
    args = ["tab", census.ds, "SEX", "MARST", "--control", "RACE", "--weight", "PERWT",
            "--pct", "row", "--filter", "AGE(30-40)"]
    js = run_json(*args)
    cells = census.cells("SEX", "MARST", weight="PERWT", control="RACE",
                         extra="AGE BETWEEN 30 AND 40")
    rows = parse_csv(run(*args, "--format", "csv").stdout)
    assert rows[0] == ["control", "control_label", "row", "row_label", "col", "col_label",
                       "count", "weighted", "pct"]
    got = {}
    for f in rows[1:]:
        key = (int(f[0]), int(f[2]), int(f[4]))
        assert key not in got
        got[key] = (int(f[6]), fnum(f[7]), fnum(f[8]))
    # every non-empty cell is there and equals DuckDB; other lines are zero cells
    for k, (n, w) in cells.items():
        assert got[k][0] == n and got[k][1] == approx(w)
    for k, v in got.items():
        if k not in cells:
            assert v[0] == 0 and v[1] in (0.0, None)
    # ... and equals the JSON
    for t in js["tables"]:
        c = control_value(t)
        for i, r in enumerate(t["rows"]):
            for j, col in enumerate(t["cols"]):
                # zero cells may be printed as lines or left out
                n, w, p = got.get((c, r["value"], col["value"]), (0, 0.0, 0.0))
                assert n == t["counts"][i][j]
                assert w == approx(t["weighted"][i][j])
                assert p == approx(t["pct"][i][j])


def test_tab_csv_no_control(strds):
    args = ["tab", strds, "G", "CITY"]
    rows = parse_csv(run(*args, "--format", "csv").stdout)
    js = run_json(*args)
    body = rows[1:]
    assert all(b[0] == "" for b in body)
    got = {(int(b[2]), b[4] if b[5] == "" else b[5]): int(b[6]) for b in body}
    assert {k: v for k, v in got.items() if v} == {
        (1, "Boston"): 2, (1, "a,b"): 1, (1, 'say "hi"'): 1, (2, "Boston"): 1, (2, "New York"): 1}
    assert all(b[7] == "" and b[8] == "" for b in body)  # no weight, no pct
    t = js["tables"][0]
    assert sum(map(sum, t["counts"])) == 6


def test_means_csv_matches_json(census):
    args = ["means", census.ds, "INCTOT", "--by", "SEX,EDUC", "--weight", "PERWT"]
    js = run_json(*args)
    rows = parse_csv(run(*args, "--format", "csv").stdout)
    assert rows[0] == ["SEX", "EDUC", "mean", "sd", "n", "sum_weights"]
    assert rows[-1][0] == "Total"
    body = rows[1:-1]
    assert len(body) == len(js["groups"])
    for f, g in zip(body, js["groups"]):
        assert [int(f[0]), int(f[1])] == [b["value"] for b in g["by"]]
        assert fnum(f[2]) == approx(g["mean"])
        assert fnum(f[3]) == approx(g["sd"]) if g["sd"] is not None else f[3] == ""
        assert int(f[4]) == g["n"]
        assert fnum(f[5]) == approx(g["sum_weights"])
    t = rows[-1]
    assert fnum(t[-4]) == approx(js["total"]["mean"])
    assert fnum(t[-3]) == approx(js["total"]["sd"])
    assert int(t[-2]) == js["total"]["n"]
    assert fnum(t[-1]) == approx(js["total"]["sum_weights"])
    # the total equals DuckDB's weighted mean
    (m,) = census.one("SELECT sum(INCTOT*PERWT)::DOUBLE/sum(PERWT)::DOUBLE FROM census "
                      "WHERE INCTOT <> 9999999 AND SEX IS NOT NULL AND EDUC IS NOT NULL "
                      "AND PERWT IS NOT NULL AND INCTOT IS NOT NULL")
    assert js["total"]["mean"] == approx(m)


def _has_count(text, n):
    return re.search(rf"(?<![\d.,]){n:,}(?![\d,])", text) or \
        re.search(rf"(?<![\d.,]){n}(?![\d,])", text)


def test_table_format_freq(census):
    out = run("freq", census.ds, "EDUC").stdout
    assert out == run("freq", census.ds, "EDUC", "--format", "table").stdout
    assert "EDUC" in out
    for v, n, _ in census.freq("EDUC"):
        assert re.search(rf"(?<![\d.]){v}(?![\d.])", out), v
        assert _has_count(out, n), n


def test_table_format_strings_and_tab(strds, census):
    out = run("freq", strds, "CITY", "--include-missing").stdout
    for s in ["Boston", "New York", "a,b", 'say "hi"']:
        assert s in out
    out = run("tab", census.ds, "SEX", "EDUC").stdout
    assert "SEX" in out and "EDUC" in out
    for (_, r, c), (n, _) in census.cells("SEX", "EDUC").items():
        assert _has_count(out, n), (r, c, n)
    out = run("means", census.ds, "AGE", "--by", "SEX").stdout
    for s, n in census.q("SELECT SEX, count(*) FROM census WHERE AGE IS NOT NULL "
                         "AND SEX IS NOT NULL GROUP BY 1"):
        assert _has_count(out, n)


TIMING = re.compile(r"timing: runs=(\d+) median=([\d.]+)\s*(ns|µs|us|ms|s) "
                    r"min=([\d.]+)\s*(ns|µs|us|ms|s) max=([\d.]+)\s*(ns|µs|us|ms|s)")
UNIT = {"ns": 1e-9, "µs": 1e-6, "us": 1e-6, "ms": 1e-3, "s": 1.0}


@pytest.mark.parametrize("args", [
    ["freq", "EDUC", "--weight", "PERWT"],
    ["tab", "SEX", "EDUC", "--weight", "PERWT", "--stats", "--format", "json"],
    ["means", "INCTOT", "--by", "EDUC", "--format", "csv"],
])
def test_repeat(census, args):
    cmd, rest = args[0], args[1:]
    once = run(cmd, census.ds, *rest)
    rep = run(cmd, census.ds, *rest, "--repeat", "3")
    assert rep.stdout == once.stdout
    m = TIMING.search(rep.stderr)
    assert m, rep.stderr
    assert int(m.group(1)) == 3
    med, mn, mx = (float(m.group(i)) * UNIT[m.group(i + 1)] for i in (2, 4, 6))
    assert 0 < mn <= med <= mx < 60
    assert "timing:" not in once.stderr


def test_closed_stdout_pipe_is_not_an_error(census):
    """`microtab freq … | head -1`: large output, reader goes away."""
    p = subprocess.Popen([str(BIN), "freq", str(census.ds), "SERIAL"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout.readline()
    p.stdout.close()
    err = p.stderr.read().decode("utf-8", "replace")
    p.wait(timeout=60)
    assert p.returncode in (0, -signal.SIGPIPE), (p.returncode, err)
    assert err == "", err


def test_means_without_by(census):
    """Without --by, means is the mean of all the records (R's svymean(~x,
    d)): well-formed output (one rectangular CSV line, no label column)
    with DuckDB's numbers."""
    p = run("means", census.ds, "AGE", "--format", "csv")
    rows = parse_csv(p.stdout)
    assert rows[0] == ["mean", "sd", "n", "sum_weights"]
    assert len(rows) == 2 and len(rows[1]) == 4, f"ragged CSV: {rows}"
    m, sd, n = census.one("SELECT avg(AGE), stddev_samp(AGE), count(*) FROM census WHERE AGE IS NOT NULL")
    assert fnum(rows[1][0]) == approx(m) and fnum(rows[1][1]) == approx(sd)
    assert int(rows[1][2]) == n
    text = run("means", census.ds, "AGE").stdout
    assert "Total" not in text and f"{n:,}" in text
