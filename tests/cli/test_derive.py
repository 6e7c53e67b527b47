"""Permanent new variables (issue 13, item 2): `microtab compute` and
`microtab recode`, and case listing (`microtab list`, item 5) that reads
them back. Every computed value is compared, record by record, with DuckDB
evaluating the same expression in SQL on the same CSV (NULLIF for the
missing codes, CASE for our missing-propagation rules); rounding of floats
with Python's decimal module on the very f64 value. A SIGKILLed compute
leaves the dataset as it was."""

import csv
import io
import math
import os
import random
import signal
import subprocess
import time
from decimal import ROUND_HALF_UP, Decimal

import duckdb
import pytest

from conftest import BIN, run, run_json


def _make_csv(path, n=3000, seed=11):
    rnd = random.Random(seed)
    states = ["Ohio", "New York", "Texas", "Iowa", ""]
    lines = ["ID,A,B,D,F,S,W"]
    for i in range(1, n + 1):
        a = "" if rnd.random() < 0.05 else ("999" if rnd.random() < 0.05 else str(rnd.randint(-50, 200)))
        b = str(rnd.randint(0, 9))
        d = "" if rnd.random() < 0.05 else f"{rnd.randint(-99999, 99999) / 100:.2f}"
        f = "" if rnd.random() < 0.05 else repr(rnd.choice([rnd.uniform(-10, 1e4), rnd.uniform(0, 1e-3), 0.0, 2.5, 1.005, -2.5]))
        s = rnd.choice(states)
        w = f"{rnd.randint(10, 900) / 10:.1f}"
        lines.append(",".join([str(i), a, b, d, f, f'"{s}"' if " " in s else s, w]))
    # Edge rows: zeros, halves, the extremes.
    lines += [f"{n + 1},0,0,0.00,0.5,Ohio,1.0", f"{n + 2},200,9,-999.99,-0.5,Texas,90.0",
              f"{n + 3},-50,1,0.50,1e-300,Iowa,1.0", f"{n + 4},1,0,-0.50,-1.5,,1.0"]
    path.write_text("\n".join(lines) + "\n")
    return n + 4


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("derive")
    src = d / "d.csv"
    rows = _make_csv(src)
    ds = d / "d.mtab"
    run("import", src, ds, "--missing", "A=999", "--type", "F=float")
    con = duckdb.connect()
    con.execute(
        f"CREATE TABLE t AS SELECT ID, NULLIF(A, 999) AS A, B, D, F, S, W FROM read_csv('{src}', header=true, "
        "types={'ID': 'INTEGER', 'A': 'INTEGER', 'B': 'INTEGER', 'D': 'DECIMAL(18,2)', 'F': 'DOUBLE', "
        "'S': 'VARCHAR', 'W': 'DECIMAL(18,1)'})")
    assert con.execute("SELECT count(*) FROM t").fetchone()[0] == rows
    return ds, con, rows


def listed(ds, *vars_, filt=None):
    args = ["list", ds, *vars_, "--all", "--format", "csv"]
    if filt:
        args += ["--filter", filt]
    out = run(*args).stdout
    rows = list(csv.reader(io.StringIO(out)))
    return rows[0], rows[1:]


def values(ds, var):
    head, rows = listed(ds, "ID", var)
    return {int(r[1]): (None if r[2] == "" else r[2]) for r in rows}


def info_var(ds, name):
    for v in run_json("info", ds)["variables"]:
        if v["name"] == name:
            return v
    raise KeyError(name)


def sql_values(con, sql):
    return dict(con.execute(f"SELECT ID, {sql} FROM t").fetchall())


def _same_exact(got, want):
    if want is None or got is None:
        return got is None and want is None
    if isinstance(want, bool):
        want = int(want)
    return Decimal(got) == Decimal(str(want))


def _same_float(got, want, rel=1e-14):
    if want is None or got is None:
        return got is None and want is None
    g = float(got)
    return g == want or abs(g - want) <= rel * max(abs(want), 1e-300)


# (microtab expression, SQL, exact?)
CASES = [
    ("A + B", "A + B", True),
    ("A - B * 3", "A - B * 3", True),
    ("A * D", "A * D", True),
    ("D - 2.5 * B", "D - 2.5 * B", True),
    ("-D + W", "-D + W", True),
    ("abs(D) ^ 2", "abs(D) * abs(D)", True),
    ("round(D)", "round(D)", True),
    ("round(D, 1)", "round(D, 1)", True),
    ("round(A, -1)", "round(A, -1)", True),
    ("floor(D)", "floor(D)", True),
    ("ceil(D)", "ceil(D)", True),
    ("trunc(D)", "trunc(D)", True),
    ("mod(A, 7)", "((A % 7) + 7) % 7", True),
    ("mod(A, -7)", "CASE WHEN A % 7 = 0 THEN 0 WHEN A < 0 THEN A % 7 ELSE A % 7 - 7 END", True),
    ("min(A, B * 10)", "CASE WHEN A IS NULL THEN NULL ELSE least(A, B * 10) END", True),
    ("max(D, A, 0)", "CASE WHEN A IS NULL OR D IS NULL THEN NULL ELSE greatest(D, A, 0) END", True),
    ("if(A >= 100, D, -D)", "CASE WHEN A IS NULL THEN NULL WHEN A >= 100 THEN D ELSE -D END", True),
    ("A > 10 and S == \"Ohio\"", "(A > 10) AND (S = 'Ohio')", True),
    ("A > 10 or S != \"Ohio\"", "(A > 10) OR (S <> 'Ohio')", True),
    ("not (B = 3)", "NOT (B = 3)", True),
    ("A(10-20, 50) or B(1-3)", "(A BETWEEN 10 AND 20 OR A = 50) OR (B BETWEEN 1 AND 3)", True),
    ("S(\"New York\", Iowa)", "S IN ('New York', 'Iowa')", True),
    ("missing(A) + missing(D) + missing(S)", "(A IS NULL)::INT + (D IS NULL)::INT + (S IS NULL)::INT", True),
    ("inrange(D, -1, 1)", "D BETWEEN -1 AND 1", True),
    ("B ^ 3 - 2 * B", "B * B * B - 2 * B", True),
    ("A / B", "CASE WHEN B = 0 THEN NULL ELSE A::DOUBLE / B END", False),
    ("D / W", "D::DOUBLE / W::DOUBLE", False),
    ("ln(F)", "CASE WHEN F > 0 THEN ln(F) END", False),
    ("log10(D)", "CASE WHEN D > 0 THEN log10(D::DOUBLE) END", False),
    ("sqrt(A)", "CASE WHEN A >= 0 THEN sqrt(A) END", False),
    ("exp(B) + F * 2", "exp(B) + F * 2", False),
    ("F / 3", "F / 3", False),
    ("2 ^ B", "pow(2, B)::DOUBLE", False),
    ("float(A) * F", "A * F", False),
]


@pytest.mark.parametrize("expr,sql,exact", CASES, ids=[c[0] for c in CASES])
def test_compute_matches_duckdb(data, expr, sql, exact):
    ds, con, rows = data
    run("compute", ds, f"NEW = {expr}", "--replace")
    got = values(ds, "NEW")
    want = sql_values(con, sql)
    assert len(got) == rows
    same = _same_exact if exact else _same_float
    bad = [(i, got[i], want[i]) for i in want if not same(got[i], want[i])]
    assert not bad, f"{expr}: {len(bad)} records differ, e.g. {bad[:5]}"
    v = info_var(ds, "NEW")
    assert v["nulls"] == sum(1 for x in want.values() if x is None)


def test_rounding_floats_half_away_from_zero(data):
    ds, con, _ = data
    run("compute", ds, "R2 = round(F, 2)", "--replace")
    got = values(ds, "R2")
    for i, f in sql_values(con, "F").items():
        if f is None:
            assert got[i] is None
            continue
        want = (Decimal(f * 100).quantize(Decimal(1), rounding=ROUND_HALF_UP) / 100)
        assert Decimal(got[i]) == want, (i, f, got[i])
    v = info_var(ds, "R2")
    # A rounded float within ±2^53 is stored as an exact 2-decimal integer.
    assert v["kind"] == "int" and v["decimals"] == 2


def test_types_are_narrow_and_labels_kept(data):
    ds, con, _ = data
    run("compute", ds, "ADULT = A >= 18", "--var-label", "Adult (A >= 18)",
        "--value-label", "1=Adult", "--value-label", "0=Not adult")
    v = info_var(ds, "ADULT")
    assert v["type"] in ("u8", "i8") and v["label"] == "Adult (A >= 18)"
    f = run_json("freq", ds, "ADULT")
    want = dict(con.execute("SELECT (A >= 18)::INT, count(*) FROM t WHERE A IS NOT NULL GROUP BY 1").fetchall())
    assert {r["value"]: r["count"] for r in f["rows"]} == want
    assert {r["value"]: r["label"] for r in f["rows"]} == {0: "Not adult", 1: "Adult"}
    run("compute", ds, "SUM2 = A + B")
    assert info_var(ds, "SUM2")["type"] == "i16"
    # The new variables are ordinary variables: tables, filters, means.
    t = run_json("tab", ds, "ADULT", "B", "--filter", "SUM2(0-100)", "--weight", "W")
    n = con.execute("SELECT count(*) FROM t WHERE A + B BETWEEN 0 AND 100").fetchone()[0]
    assert t["tables"][0]["total"]["count"] == n
    run("verify", ds)


def test_compute_errors_are_clear(data):
    ds, _, _ = data
    cases = [
        (["NEW2 = A +"], "expected a value"),
        (["NEW2 = NOPE * 2"], "NOPE"),
        (["NEW2 = S + 1"], "text variable"),
        (["NEW2 = A < B < 3"], "chained"),
        (["NEW2 = A * A * A * A * A * A * A * A * A * A"], "float()"),
        (["NEW2 = round(D, B)"], "round(x, n)"),
        (["NEW2 = foo(A)"], "neither a function"),
        (["A = B"], "already has a variable A"),
        (["2X = B"], "cannot be a variable name"),
        (["NEW2 A B"], "NAME = EXPRESSION"),
        (["NEW2 = S < \"Ohio\""], "only == and !="),
    ]
    before = run_json("info", ds)["generation"]
    for args, needle in cases:
        p = run("compute", ds, *args, ok=False)
        assert needle in p.stderr, (args, p.stderr)
        assert "panicked" not in p.stderr
    # Nothing changed.
    assert run_json("info", ds)["generation"] == before
    # float() computes what would overflow 64-bit integers.
    run("compute", ds, "BIG = float(A) * A * A * A * A * A * A * A * A * A", "--replace")
    assert info_var(ds, "BIG")["kind"] == "float"


def test_recode_one_variable(data):
    ds, con, _ = data
    run("recode", ds, "A3", "--from", "A", '*-17 "Young"; 18-64; 65-* "Old"')
    got = values(ds, "A3")
    want = sql_values(con, "CASE WHEN A <= 17 THEN 1 WHEN A <= 64 THEN 2 WHEN A >= 65 THEN 3 END")
    assert all(_same_exact(got[i], want[i]) for i in want)
    f = run_json("freq", ds, "A3")
    assert [r["label"] for r in f["rows"]] == ["Young", "18-64", "Old"]
    # Missing inputs get the --missing code, kept as a missing code.
    run("recode", ds, "A3", "--from", "A", '*-17 "Young"; 18-64; 65-* "Old"', "--missing", "9", "--replace")
    got = values(ds, "A3")
    assert all(got[i] == "9" for i in want if want[i] is None)
    assert info_var(ds, "A3")["missing_codes"] == [9]
    f = run_json("freq", ds, "A3")
    assert sum(r["count"] for r in f["rows"]) == con.execute("SELECT count(*) FROM t WHERE A IS NOT NULL").fetchone()[0]


def test_overlapping_recode_rules_are_noted_and_the_first_wins(data):
    ds, con, _ = data
    # 10-17 is in rules 1 and 2; D (2 decimals) overlaps on 0.50-1.00;
    # a '*' before a last rule leaves it nothing.
    p = run("recode", ds, "OV", "--from", "A", "*-17; 10-64; 65-*")
    notes = [l for l in p.stderr.splitlines() if l.startswith("note:")]
    assert notes == ["note: recode rules 1 '*-17' and 2 '10-64' both take A 10-17: a record gets the code of the first rule it matches"], p.stderr
    got = values(ds, "OV")
    want = sql_values(con, "CASE WHEN A <= 17 THEN 1 WHEN A <= 64 THEN 2 WHEN A >= 65 THEN 3 END")
    assert all(_same_exact(got[i], want[i]) for i in want)
    p = run("recode", ds, "OD", "--from", "D", "-1-1; 0.5-2; 3-9")
    assert "note: recode rules 1 '-1-1' and 2 '0.5-2' both take D 0.50-1.00: a record gets the code of the first rule it matches" in p.stderr, p.stderr
    got = values(ds, "OD")
    want = sql_values(con, "CASE WHEN D BETWEEN -1 AND 1 THEN 1 WHEN D BETWEEN 0.5 AND 2 THEN 2 WHEN D BETWEEN 3 AND 9 THEN 3 END")
    assert all(_same_exact(got[i], want[i]) for i in want)
    p = run("recode", ds, "OS", "--from", "A", "0-9; *; 50-60")
    assert "note: recode rule 2 '*' takes every record the rules before it leave, so rule 3 never gives a code" in p.stderr, p.stderr
    # Rules that do not overlap: no note.
    p = run("recode", ds, "NO", "--from", "A", "*-17; 18-64; 65-*")
    assert "note:" not in p.stderr, p.stderr


def test_recode_several_variables_other_and_codes(data):
    ds, con, _ = data
    rules = '10 = A(0-50) S(Ohio) "Young Ohio"; 20 = A(51-*) S(Ohio); 30 = S("New York", Iowa); 99 = *'
    run("recode", ds, "AS", "--from", "A,S", rules)
    got = values(ds, "AS")
    want = sql_values(con, "CASE WHEN A IS NULL OR S IS NULL THEN NULL "
                           "WHEN A BETWEEN 0 AND 50 AND S = 'Ohio' THEN 10 WHEN A >= 51 AND S = 'Ohio' THEN 20 "
                           "WHEN S IN ('New York', 'Iowa') THEN 30 ELSE 99 END")
    assert all(_same_exact(got[i], want[i]) for i in want), [(i, got[i], want[i]) for i in want if not _same_exact(got[i], want[i])][:5]
    # Other cases keep an input's value; decimal codes.
    run("recode", ds, "AO", "--from", "A", "1.5 = 0-10; 2 = 11-20", "--other", "A")
    got = values(ds, "AO")
    want = sql_values(con, "CASE WHEN A BETWEEN 0 AND 10 THEN 1.5 WHEN A BETWEEN 11 AND 20 THEN 2 ELSE A END")
    assert all(_same_exact(got[i], want[i]) for i in want)
    assert info_var(ds, "AO")["decimals"] == 1
    # Conditions with comparisons; unmatched records are missing.
    run("recode", ds, "NEG", "--from", "D", 'D < 0 "negative"; D > 100')
    got = values(ds, "NEG")
    want = sql_values(con, "CASE WHEN D < 0 THEN 1 WHEN D > 100 THEN 2 END")
    assert all(_same_exact(got[i], want[i]) for i in want)


def test_recode_errors(data):
    ds, _, _ = data
    for args, needle in [
        (["R", "--from", "A", "1 = 0-5; 6-9"], "every recode rule its code"),
        (["R", "--from", "A", "B(1)"], "not one of the recode's input variables"),
        (["R", "--from", "A,B,D,F,S,W,ID", "*"], "one to six"),
        (["R", "--from", "A", "0-5", "--other", "S"], "expected a code or one of the input"),
        (["R", "--from", "S", "1-5"], "text variable"),
        (["R", "--from", "A", ""], "at least one rule"),
    ]:
        p = run("recode", ds, *args, ok=False)
        assert needle in p.stderr, (args, p.stderr)


def test_list_matches_duckdb(data):
    ds, con, _ = data
    head, rows = listed(ds, "ID", "A", "D", "S", filt="A(100-*) S(Ohio)")
    assert head == ["record", "ID", "A", "D", "S"]
    want = con.execute("SELECT ID, A, D, S FROM t WHERE A >= 100 AND S = 'Ohio' ORDER BY ID").fetchall()
    assert [(int(r[1]), int(r[2]), Decimal(r[3]) if r[3] else None, r[4] or None) for r in rows] == \
           [(i, a, d, s) for i, a, d, s in want]
    # --limit, the record numbers, labels, and JSON.
    out = run("list", ds, "ID", "A3", "--limit", "3", "--labels").stdout
    assert "first 3 matching records" in out
    j = run_json("list", ds, "ID,A", "--filter", "ID(5-7)")
    assert [r["record"] for r in j["records"]] == [5, 6, 7] and not j["truncated"]
    assert "no records match" in run("list", ds, "A", "--filter", "A>1000").stdout


def test_kill_during_compute_leaves_dataset_whole(tmp_path):
    csv_path = tmp_path / "c.csv"
    run("gen", "census", "--rows", "3000000", "--seed", "5", "--out", csv_path)
    ds = tmp_path / "c.mtab"
    run("import", csv_path, ds, "--missing", "INCTOT=9999999")
    before = run_json("info", ds)
    freq_before = run_json("freq", ds, "EDUC", "--weight", "PERWT")
    t0 = time.monotonic()
    run("compute", ds, "PROBE = INCTOT * PERWT")
    full = time.monotonic() - t0
    run("drop", ds, "PROBE")
    base = run_json("info", ds)
    for frac in (0.1, 0.3, 0.5, 0.7, 0.9):
        p = subprocess.Popen([str(BIN), "compute", str(ds), "X = INCTOT * PERWT + AGE"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        time.sleep(frac * full)
        p.send_signal(signal.SIGKILL)
        p.wait()
        now = run_json("info", ds)
        names = [v["name"] for v in now["variables"]]
        if "X" in names:
            # It finished before the kill: a whole new generation.
            assert now["generation"] == base["generation"] + 1
            run("verify", ds)
            run("drop", ds, "X")
            base = run_json("info", ds)
        else:
            assert now["generation"] == base["generation"]
            assert [v["name"] for v in now["variables"]] == [v["name"] for v in before["variables"]]
        run("verify", ds)
        assert run_json("freq", ds, "EDUC", "--weight", "PERWT")["rows"] == freq_before["rows"]
    # The next writer completes and removes what killed ones left.
    run("compute", ds, "X = INCTOT * PERWT + AGE")
    files = os.listdir(ds / "vars")
    used = {v["file"].split("/")[-1] for v in run_json("info", ds)["variables"]}
    assert not [f for f in files if f.endswith(".col") and f not in used and ".part" in f]
    run("verify", ds)


def test_review_edges(tmp_path):
    """Defects a hostile review found, each against its oracle."""
    src = tmp_path / "e.csv"
    src.write_text("ID,EXP,F,M\n1,3,1e200,2147483649\n2,7,2,1\n3,1,-1e200,-5\n4,5,1e308,0\n")
    ds = tmp_path / "e.mtab"
    run("import", src, ds, "--type", "F=float")
    # A variable named like a function: upper-case is the variable's range test,
    # lower-case the function.
    run("compute", ds, "R = EXP(1-5)")
    assert values(ds, "R") == {1: "1", 2: "0", 3: "1", 4: "1"}
    run("compute", ds, "L = round(exp(0), 0) + EXP")
    assert values(ds, "L") == {1: "4", 2: "8", 3: "2", 4: "6"}
    run("rename", ds, "EXP", "exp")
    p = run("compute", ds, "Q = exp(1-5)", ok=False)
    assert "`exp`(1-5)" in p.stderr
    # A value equal to a narrow type's null code is a value, not missing.
    run("compute", ds, "N = if(F * F > 0, 255, 0)")
    got = values(ds, "N")
    assert got[2] == "255" and got[1] is None and got[3] is None
    f = run_json("freq", ds, "N")
    assert {r["value"]: r["count"] for r in f["rows"]} == {255: 1}
    # Exact decimals in CSV listings.
    run("compute", ds, "X = M * 1.000000001")
    want = {i: Decimal(m) * Decimal("1.000000001") for i, m in [(1, 2147483649), (2, 1), (3, -5), (4, 0)]}
    assert {i: Decimal(v) for i, v in values(ds, "X").items()} == want
    # Floats near the top of the f64 range.
    run("compute", ds, "RF = round(F, 2)", "--replace")
    run("compute", ds, "MF = mod(F, 3)")
    fs = {1: 1e200, 2: 2.0, 3: -1e200, 4: 1e308}
    assert {i: float(v) for i, v in values(ds, "RF").items()} == fs
    assert {i: float(v) for i, v in values(ds, "MF").items()} == {i: x % 3 for i, x in fs.items()}
    # Pathological nesting is an error, not a crash.
    for e in ["(" * 5000 + "1" + ")" * 5000, "+".join(["ID"] * 7000), "-" * 100000 + "1"]:
        p = run("compute", ds, f"D = {e}", ok=False)
        assert "nest" in p.stderr and "panicked" not in p.stderr
    # Names expressions can read; --replace keeps the name as spelled.
    for bad in ["R-1", "and", "it's"]:
        assert "cannot be a variable name" in run("compute", ds, f"{bad} = 1", ok=False).stderr
    run("compute", ds, "x = ID + 1", "--replace")
    assert "X" in [v["name"] for v in run_json("info", ds)["variables"]]
    # A reversed range is refused everywhere, not an empty answer.
    assert "reversed" in run("recode", ds, "RR", "--from", "ID", "1 = 3-1", ok=False).stderr
    assert "reversed" in run("freq", ds, "ID", "--filter", "ID(3-1)", ok=False).stderr
    # --missing may not reuse a rule's code.
    assert "choose another code" in run("recode", ds, "RM", "--from", "ID", "1 = 1-2; 9 = 3-4",
                                        "--missing", "9", ok=False).stderr
    assert "not a microtab dataset" in run("compute", tmp_path / "nope.mtab", "A = 1", ok=False).stderr.lower() \
        or "no such" in run("compute", tmp_path / "nope.mtab", "A = 1", ok=False).stderr.lower()
