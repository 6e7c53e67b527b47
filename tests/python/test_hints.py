"""Typed requests and typed errors in every front end (issue 28).

Names holding spaces, commas, parentheses and quotes are one name in the
CLI, over HTTP and in Python: freq, tab and means on a CSV whose header has
them, checked against pandas. And every hint a front end shows names an
option that front end has: each error is triggered in the CLI, over HTTP
and in Python, its hint read, and the hinted option then used in that same
front end, the answer checked against pandas/numpy (or the Taylor variance
computed by hand)."""

import json
import os
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

import microtab as mt

REPO = Path(__file__).resolve().parents[2]
BIN = Path(os.environ.get("MICROTAB_BIN", REPO / "target" / "release" / "microtab"))

MASS, FLIP, SPEC = "Body Mass (g)", "Flipper Length, mm", 'Species "quoted"'


def cli(*args, ok=True):
    p = subprocess.run([str(BIN), *map(str, args)], capture_output=True, text=True)
    assert (p.returncode == 0) == ok, p.stderr
    return p


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("hints")
    rng = np.random.default_rng(28)
    n = 400
    df = pd.DataFrame({
        MASS: rng.integers(1, 5, n),
        FLIP: rng.integers(1, 4, n),
        SPEC: rng.choice(["Adelie", "Gentoo, big", "Chinstrap (x)"], n),
        "G": rng.integers(1, 3, n),
        "X": rng.normal(50, 10, n).round(2),
        "W": rng.integers(1, 9, n),
        "W2": rng.integers(1, 5, n),
        "N": rng.integers(1, 9, n),
        "ID": np.arange(n),
    })
    df.loc[[3, 17], "N"] = -2
    # Strata 1..5, each a run of records; stratum 6 is one record (a
    # lonely PSU). SF: the same strata as decimals.
    s = np.repeat([1, 2, 3, 4, 5], n // 5)
    s[-1] = 6
    df["S"] = s
    df["SF"] = [f"{x}.5e0" for x in s]  # floating point (an exponent)
    csv = d / "h.csv"
    df.to_csv(csv, index=False)
    ds = d / "h.mtab"
    cli("import", csv, ds)
    return d, csv, ds, df


def weighted(df, by, w):
    return df.groupby(by)[w].sum().to_dict()


# ------------------------------------------------------------ names

def test_names_with_spaces_commas_parentheses_quotes_cli(data):
    _, _, ds, df = data
    f = json.loads(cli("freq", ds, MASS, "--format", "json").stdout)
    assert {r["value"]: r["count"] for r in f["rows"]} == df[MASS].value_counts().to_dict()
    # tab splits ROW and COL at commas outside quotes: a quoted name keeps
    # its comma.
    t = json.loads(cli("tab", ds, MASS, f'"{FLIP}"', "--format", "json").stdout)
    want = pd.crosstab(df[MASS], df[FLIP])
    tab = t["tables"][0]
    got = {(r["value"], c["value"]): tab["counts"][i][j]
           for i, r in enumerate(tab["rows"]) for j, c in enumerate(tab["cols"])}
    assert got == {(a, b): int(want.loc[a, b]) for a in want.index for b in want.columns}
    m = json.loads(cli("means", ds, "X", "--by", MASS, FLIP, "--format", "json").stdout)
    want = df.groupby([MASS, FLIP])["X"].mean()
    got = {tuple(c["value"] for c in g["by"]): g["mean"] for g in m["groups"]}
    assert got == pytest.approx({k: v for k, v in want.items()}, rel=1e-12)
    f = json.loads(cli("freq", ds, SPEC, "--format", "json").stdout)
    assert {r["value"]: r["count"] for r in f["rows"]} == df[SPEC].value_counts().to_dict()


def test_names_with_spaces_commas_parentheses_quotes_python(data):
    _, _, ds, df = data
    d = mt.open(ds)
    f = d.freq(MASS).to_dict()
    assert {r["value"]: r["count"] for r in f["rows"]} == df[MASS].value_counts().to_dict()
    f = d.freq(SPEC).to_dict()
    assert {r["value"]: r["count"] for r in f["rows"]} == df[SPEC].value_counts().to_dict()
    t = d.tab(FLIP, SPEC).to_dict()["tables"][0]
    want = pd.crosstab(df[FLIP], df[SPEC])
    got = {(r["value"], c["value"]): t["counts"][i][j]
           for i, r in enumerate(t["rows"]) for j, c in enumerate(t["cols"])}
    assert got == {(a, b): int(want.loc[a, b]) for a in want.index for b in want.columns}
    m = d.means("X", by=[MASS, FLIP]).to_dict()
    want = df.groupby([MASS, FLIP])["X"].mean()
    got = {tuple(c["value"] for c in g["by"]): g["mean"] for g in m["groups"]}
    assert got == pytest.approx({k: v for k, v in want.items()}, rel=1e-12)
    # One name, not a list: by=" Body Mass (g)" is one variable.
    m = d.means("X", by=MASS).to_dict()
    assert m["by"] == [MASS]


@pytest.fixture(scope="module")
def server(data):
    d, _, ds, _ = data
    root = d / "served"
    root.mkdir()
    cli("import", data[1], root / "h.mtab")
    cli("design", root / "h.mtab", "--weight", "W", "--strata", "S", "--lonely-psu", "certainty")
    cli("import", data[1], root / "plain.mtab")
    p = subprocess.Popen([str(BIN), "serve", root, "--port", "0"],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = p.stdout.readline()
    assert line.startswith("listening on http://127.0.0.1:"), line
    yield line.split()[2]
    p.terminate()
    p.wait(timeout=10)


def get(base, path, params):
    url = f"{base}/api/v1/datasets/{path}?{urllib.parse.urlencode(params)}"
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_names_with_spaces_commas_parentheses_quotes_http(data, server):
    df = data[3]
    s, f = get(server, "plain/freq", {"var": MASS})
    assert s == 200 and {r["value"]: r["count"] for r in f["rows"]} == df[MASS].value_counts().to_dict()
    s, t = get(server, "plain/tab", {"row": FLIP, "col": SPEC})
    assert s == 200, t
    t = t["tables"][0]
    want = pd.crosstab(df[FLIP], df[SPEC])
    got = {(r["value"], c["value"]): t["counts"][i][j]
           for i, r in enumerate(t["rows"]) for j, c in enumerate(t["cols"])}
    assert got == {(a, b): int(want.loc[a, b]) for a in want.index for b in want.columns}
    want = {k: v for k, v in df.groupby([MASS, FLIP])["X"].mean().items()}
    # Repeated parameters, and one list in the CLI's grammar (a quoted
    # name keeps its comma).
    for params in ([("var", "X"), ("by", MASS), ("by", FLIP)],
                   [("var", "X"), ("by", f'"{MASS}", "{FLIP}"')]):
        s, m = get(server, "plain/means", params)
        assert s == 200, m
        assert m["by"] == [MASS, FLIP]
        got = {tuple(c["value"] for c in g["by"]): g["mean"] for g in m["groups"]}
        assert got == pytest.approx(want, rel=1e-12)


# ------------------------------------------------------------ hints: negative weights

def test_negative_weights_hint_in_every_front_end(data, server):
    _, _, ds, df = data
    want = {g: float((x["X"] * x["N"]).sum() / x["N"].sum()) for g, x in df.groupby("G")}
    # CLI
    e = cli("means", ds, "X", "--by", "G", "--weight", "N", ok=False).stderr
    assert "N is negative in 2 of the rows" in e and "--allow-negative-weights" in e
    m = json.loads(cli("means", ds, "X", "--by", "G", "--weight", "N", "--allow-negative-weights",
                       "--format", "json").stdout)
    assert {g["by"][0]["value"]: g["mean"] for g in m["groups"]} == pytest.approx(want, rel=1e-12)
    # Python
    d = mt.open(ds)
    with pytest.raises(mt.QueryError) as e:
        d.means("X", by="G", weight="N")
    assert e.value.option == "allow_negative_weights"
    assert "allow_negative_weights=True" in e.value.hint and e.value.hint in str(e.value)
    m = d.means("X", by="G", weight="N", allow_negative_weights=True).to_dict()
    assert {g["by"][0]["value"]: g["mean"] for g in m["groups"]} == pytest.approx(want, rel=1e-12)
    # HTTP
    s, j = get(server, "plain/means", {"var": "X", "by": "G", "weight": "N"})
    assert s == 400 and j["kind"] == "negative_weights"
    assert j["option"] == {"option": "allow_negative_weights"}
    assert "allow_negative_weights=true" in j["hint"]
    s, m = get(server, "plain/means", {"var": "X", "by": "G", "weight": "N", "allow_negative_weights": "true"})
    assert s == 200, m
    assert {g["by"][0]["value"]: g["mean"] for g in m["groups"]} == pytest.approx(want, rel=1e-12)


# ------------------------------------------------------------ hints: too many cells

def test_max_cells_hint_in_every_front_end(data, server):
    _, _, ds, df = data
    n = len(df)
    e = cli("freq", ds, "ID", "--max-cells", "10", ok=False).stderr
    assert "--max-cells" in e
    f = json.loads(cli("freq", ds, "ID", "--max-cells", "1000", "--format", "json").stdout)
    assert sorted(r["value"] for r in f["rows"]) == sorted(df["ID"]) and f["total"]["count"] == n
    d = mt.open(ds)
    with pytest.raises(mt.TooLargeError) as e:
        d.freq("ID", max_cells=10)
    assert e.value.option == "max_cells" and "max_cells=" in e.value.hint
    f = d.freq("ID", max_cells=1000).to_dict()
    assert sorted(r["value"] for r in f["rows"]) == sorted(df["ID"])
    s, j = get(server, "plain/freq", {"var": "ID", "max_cells": "10"})
    assert s == 400 and j["option"]["option"] == "max_cells" and "max_cells=" in j["hint"]
    s, f = get(server, "plain/freq", {"var": "ID", "max_cells": "1000"})
    assert s == 200 and sorted(r["value"] for r in f["rows"]) == sorted(df["ID"])


# ------------------------------------------------------------ hints: existing targets

def test_force_hint_in_the_cli_and_python(data):
    d, csv, ds, df = data
    e = cli("import", csv, ds, ok=False).stderr
    assert "already exists" in e and "--force" in e
    cli("import", csv, ds, "--force")
    assert json.loads(cli("freq", ds, "G", "--format", "json").stdout)["total"]["count"] == len(df)
    with pytest.raises(FileExistsError) as e:
        mt.import_csv(csv, ds)
    assert e.value.option == "force" and "force=True" in e.value.hint
    assert mt.import_csv(csv, ds, force=True).rows == len(df)
    out = d / "h.parquet"
    mt.open(ds).to_parquet(out)
    with pytest.raises(FileExistsError) as e:
        mt.open(ds).to_parquet(out, columns=["G"])
    assert "force=True" in e.value.hint
    mt.open(ds).to_parquet(out, columns=["G"], force=True)
    assert pq.read_table(out).column_names == ["G"]
    e = cli("export", ds, out, ok=False).stderr
    assert "exists" in e and "--force" in e
    cli("export", ds, out, "--force")
    assert pq.read_table(out).num_rows == len(df)
    cat = d / "parts"
    mt.split(ds, cat, 2)
    with pytest.raises(FileExistsError) as e:
        mt.split(ds, cat, 3)
    assert "force=True" in e.value.hint
    assert len(mt.split(ds, cat, 3, force=True)["parts"]) == 3
    e = cli("split", ds, cat, "--parts", "2", ok=False).stderr
    assert "exists" in e and "--force" in e
    cli("split", ds, cat, "--parts", "2", "--force")
    assert mt.open_many(sorted(cat.glob("part-*"))).rows == len(df)


# ------------------------------------------------------------ hints: the design

def taylor_se(df, y, w="W", strata="S"):
    """The SE of the weighted total of y: each record its own PSU, a
    stratum of one PSU adds nothing (R's "certainty")."""
    v = 0.0
    for _, x in df.groupby(strata):
        z = (x[w] * x[y]).to_numpy(float)
        if len(z) > 1:
            v += len(z) / (len(z) - 1) * ((z - z.mean()) ** 2).sum()
    return v ** 0.5


def freq_se(f, value):
    r = next(r for r in f["rows"] if r["value"] == value)
    return r["weighted_se"]["se"]


def test_lonely_psu_and_column_type_hints_in_the_cli_and_python(data, tmp_path):
    _, csv, _, df = data
    df = df.assign(G1=(df["G"] == 1).astype(int))
    want = taylor_se(df, "G1")
    # CLI: a lonely PSU, then the float strata.
    ds = tmp_path / "c.mtab"
    cli("import", csv, ds)
    e = cli("design", ds, "--weight", "W", "--strata", "S", ok=False).stderr
    assert "stratum 6 of S has a single PSU" in e and "--lonely-psu" in e
    cli("design", ds, "--weight", "W", "--strata", "S", "--lonely-psu", "certainty")
    f = json.loads(cli("freq", ds, "G", "--format", "json").stdout)
    assert freq_se(f, 1) == pytest.approx(want, rel=1e-9)
    e = cli("design", ds, "--weight", "W", "--strata", "SF", "--lonely-psu", "certainty", ok=False).stderr
    assert "SF is stored as floating point" in e and "--type SF=string" in e
    cli("import", csv, ds, "--force", "--type", "SF=string")
    cli("design", ds, "--weight", "W", "--strata", "SF", "--lonely-psu", "certainty")
    f = json.loads(cli("freq", ds, "G", "--format", "json").stdout)
    assert freq_se(f, 1) == pytest.approx(want, rel=1e-9)
    # Python.
    p = mt.import_csv(csv, tmp_path / "p.mtab")
    with pytest.raises(mt.QueryError) as e:
        p.design("W", strata="S")
    assert e.value.option == "lonely_psu" and "lonely_psu=" in e.value.hint
    p.design("W", strata="S", lonely_psu="certainty")
    assert freq_se(p.freq("G").to_dict(), 1) == pytest.approx(want, rel=1e-9)
    with pytest.raises(mt.QueryError) as e:
        p.design("W", strata="SF", lonely_psu="certainty")
    assert e.value.option == "column_type" and 'types={"SF": "int"} (or "string")' in e.value.hint
    p = mt.import_csv(csv, tmp_path / "p.mtab", types={"SF": "string"}, force=True)
    p.design("W", strata="SF", lonely_psu="certainty")
    assert freq_se(p.freq("G").to_dict(), 1) == pytest.approx(want, rel=1e-9)


def test_no_design_hint_in_every_front_end(data, server, tmp_path):
    _, csv, _, df = data
    want = weighted(df, "G", "W2")
    ds = tmp_path / "d.mtab"
    cli("import", csv, ds)
    cli("design", ds, "--weight", "W", "--strata", "S", "--lonely-psu", "certainty")
    e = cli("freq", ds, "G", "--weight", "W2", ok=False).stderr
    assert "weights by W" in e and "--no-design" in e
    f = json.loads(cli("freq", ds, "G", "--weight", "W2", "--no-design", "--format", "json").stdout)
    assert {r["value"]: r["weighted"] for r in f["rows"]} == want
    d = mt.open(ds)
    with pytest.raises(mt.QueryError) as e:
        d.freq("G", weight="W2")
    assert e.value.option == "no_design" and "design=False" in e.value.hint
    f = d.freq("G", weight="W2", design=False).to_dict()
    assert {r["value"]: r["weighted"] for r in f["rows"]} == want
    s, j = get(server, "h/freq", {"var": "G", "weight": "W2"})
    assert s == 400 and j["kind"] == "design_weight" and j["option"] == {"option": "no_design"}
    assert "design=false" in j["hint"]
    s, f = get(server, "h/freq", {"var": "G", "weight": "W2", "design": "false"})
    assert s == 200 and {r["value"]: r["weighted"] for r in f["rows"]} == want
