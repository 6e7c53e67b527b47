"""Names with spaces, commas, parentheses and quotes, written the one way
every grammar reads them (docs/CLI.md, "Names with spaces, commas,
parentheses or quotes"): backticks, or double quotes where a name is
expected, a quote inside doubled; a whole name given alone is that
variable. freq, tab, means, list, filters, temporary recodes, recode and
compute are checked against pandas over the same CSV."""

import csv
import io
import json
import random

import pandas as pd
import pytest

from conftest import approx, disp, run, run_json

MASS = "Mass, body (g)"
ISLE = 'Isle "A" (x)'
ISLES = ["Biscoe", "Dream", "New, Isle", "Torgersen"]


def tick(name):
    return "`" + name.replace("`", "``") + "`"


def dq(name):
    return '"' + name.replace('"', '""') + '"'


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("names")
    rng = random.Random(11)
    rows = []
    for i in range(1, 4001):
        mass = "" if rng.random() < 0.05 else str(rng.randint(2500, 6500))
        rows.append([i, mass, rng.choice(ISLES), f"{rng.uniform(0.5, 3):.3f}"])
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["ID", MASS, ISLE, "W"])
    w.writerows(rows)
    src = d / "p.csv"
    src.write_text(buf.getvalue())
    ds = d / "p.mtab"
    run("import", src, ds)
    df = pd.read_csv(src, dtype={ISLE: str})
    names = [v["name"] for v in run_json("info", ds)["variables"]]
    assert names == ["ID", MASS, ISLE, "W"]
    return ds, df


def freq_counts(res):
    return {disp(r): r["count"] for r in res["rows"]}


def test_freq_whole_name_and_recodes(data):
    ds, df = data
    assert freq_counts(run_json("freq", ds, ISLE)) == df[ISLE].value_counts().to_dict()
    want = {"light": int((df[MASS] < 4000).sum()), "4000-*": int((df[MASS] >= 4000).sum())}
    for name in (tick(MASS), dq(MASS)):
        res = run_json("freq", ds, f'{name}(r: *-3999 "light"; 4000-*)')
        assert freq_counts(res) == want, name
    # A value list of the quoted name keeps the variable's own categories.
    res = run_json("freq", ds, f'{dq(ISLE)}("New, Isle",Dream)')
    assert freq_counts(res) == {
        k: int((df[ISLE] == k).sum()) for k in ("Dream", "New, Isle")}


def test_tab_and_means_by_quoted_names(data):
    ds, df = data
    t = run_json("tab", ds, tick(ISLE), f"{tick(MASS)}(r: *-3999; 4000-*)")["tables"][0]
    heavy = pd.cut(df[MASS], [-1, 3999, 10**9], labels=[1, 2])
    want = pd.crosstab(df[ISLE], heavy)
    assert [disp(r) for r in t["rows"]] == ISLES
    for i, r in enumerate(t["rows"]):
        for j, c in enumerate(t["cols"]):
            assert t["counts"][i][j] == want.loc[disp(r), c["value"]]
    ok = df[df[MASS].notna()]
    for by in (tick(ISLE), dq(ISLE)):
        m = run_json("means", ds, MASS, "--by", by, "--weight", "W")
        assert [disp(g["by"][0]) for g in m["groups"]] == ISLES, by
        for g in m["groups"]:
            part = ok[ok[ISLE] == disp(g["by"][0])]
            assert g["n"] == len(part)
            assert g["mean"] == approx((part[MASS] * part["W"]).sum() / part["W"].sum())


def test_filters_list_and_compute(data):
    ds, df = data
    flt = f'{tick(MASS)}(3000-4000) {dq(ISLE)}("New, Isle",Dream)'
    want = df[df[MASS].between(3000, 4000) & df[ISLE].isin(["New, Isle", "Dream"])]
    out = run("list", ds, "ID", MASS, ISLE, "--all", "--format", "csv", "--filter", flt).stdout
    rows = list(csv.reader(io.StringIO(out)))
    assert rows[0] == ["record", "ID", MASS, ISLE]
    got = [(int(r[1]), int(r[2]), r[3]) for r in rows[1:]]
    assert got == [(int(a), int(b), c) for a, b, c in want[["ID", MASS, ISLE]].itertuples(index=False)]
    # The same names within one list argument, quoted either way.
    out2 = run("list", ds, f"ID,{dq(MASS)} {tick(ISLE)}", "--all", "--format", "csv", "--filter", flt).stdout
    assert out2 == out
    # compute: backticks name the variables; a quoted value in a range test.
    run("compute", ds, f"KG = {tick(MASS)} / 1000 + {tick(ISLE)}(\"New, Isle\")")
    out = run("list", ds, "ID", "KG", "--all", "--format", "csv").stdout
    got = {int(r[1]): (None if r[2] == "" else float(r[2])) for r in list(csv.reader(io.StringIO(out)))[1:]}
    for i, mass, isle in df[["ID", MASS, ISLE]].itertuples(index=False):
        want_v = None if pd.isna(mass) else mass / 1000 + (isle == "New, Isle")
        assert (got[i] is None and want_v is None) or got[i] == pytest.approx(want_v, rel=1e-15)


def test_recode_from_names_with_commas(data):
    ds, df = data
    run("recode", ds, "HEAVY", "--from", MASS, '1 = *-3999 "light"; 2 = 4000-*')
    run("recode", ds, "HI", "--from", f"{dq(MASS)},{tick(ISLE)}",
        f'1 = {tick(MASS)}(4000-*) {dq(ISLE)}("New, Isle"); 2 = *')
    out = run("list", ds, "ID", "HEAVY", "HI", "--all", "--format", "csv").stdout
    got = {int(r[1]): (r[2], r[3]) for r in list(csv.reader(io.StringIO(out)))[1:]}
    for i, mass, isle in df[["ID", MASS, ISLE]].itertuples(index=False):
        heavy = "" if pd.isna(mass) else ("1" if mass <= 3999 else "2")
        hi = "" if pd.isna(mass) else ("1" if mass >= 4000 and isle == "New, Isle" else "2")
        assert got[i] == (heavy, hi), (i, mass, isle)


def test_tab_takes_an_unquoted_whole_name_with_a_comma(data):
    """`tab` splits its row and column lists at commas, except an argument
    that is a variable's whole name (`Mass, body (g)` is one variable)."""
    ds, df = data
    t = run_json("tab", ds, ISLE, MASS)["tables"][0]
    want = pd.crosstab(df[ISLE], df[MASS])
    assert [disp(r) for r in t["rows"]] == ISLES
    assert [int(c["value"]) for c in t["cols"]] == [int(v) for v in want.columns]
    for i, r in enumerate(t["rows"]):
        for j, c in enumerate(t["cols"]):
            assert t["counts"][i][j] == want.loc[disp(r), c["value"]]
    # A list still splits: one table per column variable.
    out = run("tab", ds, ISLE, f"W(r: *-1.5; 1.5-*),{tick(MASS)}(r: *-3999; 4000-*)",
              "--format", "json").stdout
    tables = [json.loads(line)["tables"][0] for line in out.splitlines() if line.strip()]
    assert len(tables) == 2
    light = pd.cut(df["W"], [-1, 1.5, 10], labels=[1, 2])  # 1.5 is in the first rule
    want = pd.crosstab(df[ISLE], light)
    for i, r in enumerate(tables[0]["rows"]):
        for j, c in enumerate(tables[0]["cols"]):
            assert tables[0]["counts"][i][j] == want.loc[disp(r), c["value"]]
