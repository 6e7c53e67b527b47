"""One description of a dataset for every front end: `microtab info
--format json`, `GET /api/v1/datasets/NAME` (`microtab serve`) and
Python's `Dataset.info()` give the same object, and its facts (labels,
missing codes, decimals, ranges, empty values, design) are the ones the
source file and the commands that labelled it say — checked against the
CSV read by pandas and against what the test wrote by hand. The I/O
settings `microtab tune` writes are read by all three the same way."""

from __future__ import annotations

import json
import os
import subprocess
import urllib.request
from decimal import Decimal
from pathlib import Path

import pandas as pd
import pytest

import microtab as mt

REPO = Path(__file__).resolve().parents[2]
BIN = Path(os.environ.get("MICROTAB_BIN", REPO / "target" / "release" / "microtab"))

# Hand-written: what each column is, as a person reading the file knows it.
CSV = """ID,SEX,W,INC,NAME,ST,PSU,PW
1,1,1.25,100,Ann,1,1,1.5
2,2,2.50,9999999,Bob,1,1,2.0
3,2,0.75,250,NA_,1,2,1.5
4,1,3.00,,Cy,1,2,3.25
5,2,1.10,40,Di,2,3,1.0
6,1,99.99,75,Ed,2,3,2.5
7,2,1.00,9999999,Flo,2,4,1.75
8,1,2.20,60,,2,4,2.0
"""

def cli(*args, env=None, ok=True):
    p = subprocess.run([str(BIN), *map(str, args)], capture_output=True, text=True,
                       env={**os.environ, **(env or {})})
    assert (p.returncode == 0) == ok, p.stderr
    return p


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("describe")
    src = d / "people.csv"
    src.write_text(CSV)
    root = d / "served"
    root.mkdir()
    ds = root / "people.mtab"
    cli("import", src, ds, "--missing", "INC=9999999", "--missing", "NAME=NA_", "--missing", "W=99.99")
    cli("label", ds, "SEX", "1=Male", "2=Female", "--var-label", "Sex of the person")
    cli("design", ds, "--weight", "PW", "--strata", "ST", "--cluster", "PSU")
    return d, root, ds, src


class Server:
    def __init__(self, root, env=None):
        self.p = subprocess.Popen([str(BIN), "serve", root, "--port", "0"], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, env={**os.environ, **(env or {})})
        line = self.p.stdout.readline()
        self.base = line.split()[2] if line.startswith("listening on") else None
        self.error = None if self.base else self.p.stderr.read()

    def get(self, path):
        with urllib.request.urlopen(self.base + path, timeout=30) as r:
            return json.loads(r.read())

    def close(self):
        if self.p.poll() is None:
            self.p.terminate()
        self.p.wait(timeout=10)


def three(root, ds, env=None, monkeypatch=None):
    """The description from the CLI, HTTP and Python, in that order."""
    c = json.loads(cli("info", ds, "--format", "json", env=env).stdout)
    s = Server(root, env)
    try:
        h = s.get("/api/v1/datasets/people")
    finally:
        s.close()
    if monkeypatch is not None:
        for k, v in (env or {}).items():
            monkeypatch.setenv(k, v)
    p = mt.open(ds).info()
    return c, h, p


def test_three_front_ends_give_the_source_files_facts(data):
    _, root, ds, src = data
    c, h, p = three(root, ds)
    # The same object (each names the dataset its own way; the server does
    # not show its settings file's path).
    assert c["dataset"] == str(ds) and p["dataset"] == str(ds) and h["dataset"] == "people"
    assert h["io_settings"]["file"] is None
    for d in (c, h, p):
        d.pop("dataset")
        d["io_settings"].pop("file")
    assert c == h == p
    # Its facts, against the file as pandas reads it and what was labelled.
    df = pd.read_csv(src, keep_default_na=False, na_values=[""], dtype={"NAME": str})
    assert c["rows"] == len(df)
    v = {x["name"]: x for x in c["variables"]}
    assert [x["name"] for x in c["variables"]] == list(df.columns)
    assert v["SEX"]["label"] == "Sex of the person"
    assert v["SEX"]["value_labels"] == {"1": "Male", "2": "Female"}
    assert v["W"]["decimals"] == 2 and v["W"]["kind"] == "int"
    assert v["INC"]["missing_codes"] == [9999999]
    assert v["W"]["missing_codes"] == [99.99]
    assert v["NAME"]["missing_codes"] == ["NA_"] and v["NAME"]["kind"] == "string"
    assert v["PW"]["decimals"] == 2 and v["PW"]["min"] == 1.0 and v["PW"]["max"] == 3.25
    for name in ("ID", "SEX", "W", "INC", "ST", "PSU", "PW"):
        col = pd.to_numeric(df[name])
        assert v[name]["nulls"] == int(col.isna().sum()), name
        assert v[name]["min"] == pytest.approx(col.min()) and v[name]["max"] == pytest.approx(col.max()), name
    assert v["NAME"]["nulls"] == int(df["NAME"].isna().sum()) == 1
    assert {v["NAME"]["min"], v["NAME"]["max"]} <= set(df["NAME"].dropna())
    # The design as `microtab design` was told, strata and PSUs counted.
    d = c["design"]
    assert d["weight"] == "PW" and d["taylor"]["strata"] == "ST" and d["taylor"]["cluster"] == "PSU"
    n_strata, n_psus = df["ST"].nunique(), df.groupby("ST")["PSU"].nunique().sum()
    assert f"strata ST ({n_strata})" in c["design_summary"]
    assert f"PSUs PSU ({n_psus})" in c["design_summary"]
    assert f"t intervals with {n_psus - n_strata} df" in c["design_summary"]
    # The text `info` prints says the same design.
    assert f"survey design: {c['design_summary']}" in cli("info", ds).stdout
    # Python's variables and codebook are the same description.
    dd = mt.open(ds)
    assert dd.variable("W").missing_values == [Decimal("99.99")]
    assert dd.variable("NAME").missing_values == ["NA_"]
    assert dd.variable("W").min == 0.75 and dd.variable("INC").max == 9999999
    cb = dd.codebook().set_index("name")
    assert cb.loc["INC", "missing_codes"] == [9999999] and cb.loc["W", "max"] == 99.99
    # The HTTP variable entry is the same entry.
    s = Server(root)
    try:
        assert s.get("/api/v1/datasets/people/variables/W")["variable"] == v["W"]
    finally:
        s.close()


def test_codebook_entries_are_the_info_entries(data):
    _, _, ds, _ = data
    info = json.loads(cli("info", ds, "--format", "json").stdout)
    cb = json.loads(cli("codebook", ds, "--format", "json").stdout)
    for a, b in zip(info["variables"], cb["variables"]):
        assert {k: b[k] for k in a} == a
    # Top values of INC: 9999999 twice, flagged missing (hand-counted).
    inc = next(x for x in cb["variables"] if x["name"] == "INC")
    assert inc["top"][0] == {"value": 9999999, "label": None, "missing": True, "count": 2}


def test_html_codebook_is_one_for_file_and_page(data, tmp_path):
    _, root, ds, _ = data
    out = tmp_path / "cb.html"
    cli("codebook", ds, "--html", out)
    page_file = out.read_text()
    s = Server(root)
    try:
        with urllib.request.urlopen(s.base + "/analysis/people/codebook", timeout=30) as r:
            page = r.read().decode()
    finally:
        s.close()
    # Both: one entry per variable with the same facts.
    for html in (page_file, page):
        for name in ("ID", "SEX", "W", "INC", "NAME"):
            assert f'id="var-{name}" data-name="{name}"' in html
        assert "<dt>Missing codes</dt><dd>99.99</dd>" in html
        assert "<dt>Range</dt><dd>0.75 … 99.99</dd>" in html
        assert "numeric, 2 decimals; stored as" in html
        assert "Sex of the person" in html
    # The file has every frequency; the page fetches them (its script).
    assert "<td class=\"code\">9999999</td>" in page_file and 'class="freq"' not in page_file
    assert 'class="freq"' in page and "/static/app.js" in page


SETTINGS = {"read_path": "pread", "block_size": 131072, "segment_bytes": 262144,
            "readahead_segments": 3, "tuned": {"by": "hand, as microtab tune writes it"}}


def test_tuned_settings_apply_in_every_front_end(data, monkeypatch):
    d, root, ds, _ = data
    cfg = d / "io.json"
    cfg.write_text(json.dumps(SETTINGS))
    env = {"MICROTAB_CONFIG": str(cfg)}
    for got in three(root, ds, env, monkeypatch):
        s = got["io_settings"]
        assert (s["read_path"], s["block_size"], s["segment_bytes"], s["readahead_segments"]) == \
            ("pread", 131072, 262144, 3)
        assert s["origin"] == "tuned" and s["env"] == []
    # An environment variable overrides the file, everywhere.
    env["MICROTAB_READ_PATH"] = "mmap"
    for got in three(root, ds, env, monkeypatch):
        s = got["io_settings"]
        assert s["read_path"] == "mmap" and s["block_size"] == 131072
        assert s["env"] == ["MICROTAB_READ_PATH"]
    # Queries read them: answers are those of the defaults, and a file that
    # is not a settings file stops a query in each front end.
    want = json.loads(cli("freq", ds, "SEX", "--format", "json", env={"MICROTAB_CONFIG": str(d / "none")}).stdout)
    got = mt.open(ds).freq("SEX").to_dict()
    assert [r["count"] for r in got["rows"]] == [r["count"] for r in want["rows"]] == [4, 4]
    cfg.write_text("{not json")
    monkeypatch.delenv("MICROTAB_READ_PATH")
    err = cli("freq", ds, "SEX", env={"MICROTAB_CONFIG": str(cfg)}, ok=False).stderr
    assert str(cfg) in err and "not a microtab I/O settings file" in err
    with pytest.raises(mt.MicrotabError, match="not a microtab I/O settings file"):
        mt.open(ds).freq("SEX")
    s = Server(root, {"MICROTAB_CONFIG": str(cfg)})
    try:
        assert s.base is None and "not a microtab I/O settings file" in s.error
    finally:
        s.close()


IPUMS = Path(os.environ.get("MICROTAB_IPUMS_DIR", REPO.parent / "shared" / "data" / "ipums"))


def test_ddi_description_matches_ipumspy(tmp_path):
    """An IPUMS extract described by all three front ends as ipumspy reads
    its DDI codebook: labels, implied decimals, value labels."""
    readers = pytest.importorskip("ipumspy.readers")
    if not (IPUMS / "cps_00006.xml").exists():
        pytest.skip(f"cps_00006 not in {IPUMS}")
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ddi = readers.read_ipums_ddi(IPUMS / "cps_00006.xml")
    root = tmp_path / "served"
    root.mkdir()
    ds = root / "cps.mtab"
    cli("import", IPUMS / "cps_00006.dat.gz", ds, "--ddi", IPUMS / "cps_00006.xml")
    c = json.loads(cli("info", ds, "--format", "json").stdout)
    s = Server(root)
    try:
        h = s.get("/api/v1/datasets/cps")
    finally:
        s.close()
    p = mt.open(ds).info()
    for d in (c, h, p):
        d.pop("dataset")
        d["io_settings"].pop("file")
    assert c == h == p
    v = {x["name"]: x for x in c["variables"]}
    for d in ddi.data_description:
        assert v[d.name]["label"] == d.label, d.name
        assert v[d.name]["decimals"] == (d.shift or 0), d.name
    codes = ddi.get_variable_info("STATEFIP").codes
    assert v["STATEFIP"]["value_labels"] == {str(code): label for label, code in codes.items()}
