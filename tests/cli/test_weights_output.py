"""Weights that are negative, zero or missing, and numbers printed for
people (issue 10, defects 10 and 13). Oracle: hand-computed values.
"""

from __future__ import annotations

from conftest import assert_one_error, disp, run, run_json, write


def dataset(tmp_path, name, text, *args):
    csv = write(tmp_path / f"{name}.csv", text)
    ds = tmp_path / f"{name}.mtab"
    run("import", csv, ds, *args)
    return ds


# G: group; W: a weight with a zero, a missing (empty) and a -1 user-missing code.
WEIGHTS = "G,W,X\n1,2,10\n1,0,20\n1,,30\n2,3,40\n2,-1,50\n2,5,60\n"


def test_zero_and_missing_weights_are_reported(tmp_path):
    ds = dataset(tmp_path, "w", WEIGHTS, "--missing", "W=-1")
    res = run_json("freq", ds, "G", "--weight", "W")
    # Rows used: those with W 2, 0, 3, 5 (the empty and the -1 left out).
    assert [(r["value"], r["count"], r["weighted"]) for r in res["rows"]] == [(1, 2, 2.0), (2, 2, 8.0)]
    assert res["weight_cases"] == {"negative": 0, "zero": 1, "missing": 2}
    text = run("freq", ds, "G", "--weight", "W").stdout
    assert "2 rows with missing W are left out" in text
    assert "1 rows with W = 0 are in N but add nothing" in text
    t = run_json("tab", ds, "G", "G", "--weight", "W")
    assert t["weight_cases"] == {"negative": 0, "zero": 1, "missing": 2}
    m = run_json("means", ds, "X", "--by", "G", "--weight", "W")
    assert m["weight_cases"] == {"negative": 0, "zero": 1, "missing": 2}
    assert [(g["n"], g["mean"]) for g in m["groups"]] == [(2, 10.0), (2, (3 * 40 + 5 * 60) / 8)]
    # Unweighted: no report.
    assert run_json("freq", ds, "G")["weight_cases"] is None
    # A clean weight: all zeros, no extra note.
    clean = dataset(tmp_path, "c", "G,W\n1,1\n2,2\n")
    assert run_json("freq", clean, "G", "--weight", "W")["weight_cases"] == {"negative": 0, "zero": 0, "missing": 0}
    assert "left out" not in run("freq", clean, "G", "--weight", "W").stdout


def test_negative_weights_are_an_error_unless_allowed(tmp_path):
    ds = dataset(tmp_path, "n", WEIGHTS)  # -1 is now an ordinary (negative) weight
    for cmd in (["freq", ds, "G"], ["tab", ds, "G", "G"], ["means", ds, "X", "--by", "G"]):
        p = run(*cmd, "--weight", "W", ok=False)
        assert_one_error(p, "W is negative in 1 of the rows", "--allow-negative-weights")
    res = run_json("freq", ds, "G", "--weight", "W", "--allow-negative-weights")
    assert [(r["value"], r["weighted"]) for r in res["rows"]] == [(1, 2.0), (2, 7.0)]
    assert res["weight_cases"] == {"negative": 1, "zero": 1, "missing": 1}
    # A filter that leaves the negative row out needs no option.
    res = run_json("freq", ds, "G", "--weight", "W", "--filter", "G(1)")
    assert res["weight_cases"]["negative"] == 0


def test_all_zero_and_all_missing_weights(tmp_path):
    ds = dataset(tmp_path, "z", "G,W,V\n1,0,\n2,0,\n")
    res = run_json("freq", ds, "G", "--weight", "W")
    assert [(r["count"], r["weighted"], r["percent"]) for r in res["rows"]] == [(1, 0.0, None), (1, 0.0, None)]
    assert res["weight_cases"]["zero"] == 2
    res = run_json("freq", ds, "G", "--weight", "V")
    assert res["rows"] == [] and res["weight_cases"]["missing"] == 2


def test_significant_digits_in_text_output(tmp_path):
    ds = dataset(tmp_path, "p", "G,X,W\n1,0.00087,0.4\n1,0.00087,0.1\n2,12345.5,1000\n")
    text = run("means", ds, "X", "--by", "G").stdout
    assert "0.00087" in text and "12,345.5" in text
    text = run("freq", ds, "G", "--weight", "W").stdout
    # Weighted counts with their decimals: 0.5 is not printed as 0 or 1.
    assert " 0.5 " in text and "1,000 " in text
    text = run("tab", ds, "G", "G", "--weight", "W").stdout
    assert " 0.5 " in text


def test_label_equal_to_its_value_is_printed_once(tmp_path):
    ds = dataset(tmp_path, "l", "AGE\n18\n19\n")
    run("label", ds, "AGE", "18=18", "19=nineteen")
    text = run("freq", ds, "AGE").stdout
    lines = [line.split() for line in text.splitlines()]
    assert ["18", "1", "50.0"] in lines
    assert ["19", "nineteen", "1", "50.0"] in lines


def test_info_shortens_long_texts(tmp_path):
    long = "x" * 300
    ds = dataset(tmp_path, "i", f"S\n{long}\nshort\n")
    text = run("info", ds).stdout
    assert long not in text and "xxxxxxxx…" in text
    assert all(len(line) < 200 for line in text.splitlines())
    # JSON keeps the full value.
    v = run_json("info", ds)["variables"][0]
    assert v["max"] == long
