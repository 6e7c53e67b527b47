"""IPUMS fixed-width + DDI import (issue 4), checked against ipumspy.

Oracle: ``ipumspy.readers.read_ipums_ddi`` + ``read_microdata`` (and
``read_hierarchical_microdata``) read the same extracts; pandas computes the
weighted frequencies from ipumspy's frame. The extracts live in
``../shared/data/ipums`` beside the repository; without them these tests
are skipped.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import warnings
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from conftest import REPO, approx, assert_one_error, r_estimates, read_column_file, rscript, run, run_json

# MICROTAB_IPUMS_DATA: another folder of extracts (NAME.xml + NAME.dat.gz).
DATA = Path(os.environ.get("MICROTAB_IPUMS_DATA", REPO.parent / "shared" / "data" / "ipums")).resolve()
EXTRACTS = sorted(p.name[: -len(".xml")] for p in DATA.glob("*.xml")) if DATA.is_dir() else []

pytestmark = pytest.mark.skipif(
    not EXTRACTS, reason=f"IPUMS test extracts not found in {DATA} (../shared/data/ipums)"
)

ipumspy_readers = pytest.importorskip("ipumspy.readers") if EXTRACTS else None

# Weight variable per extract (the person weight each one carries).
PERSON_WEIGHTS = ("WTSUPP", "WTFINL", "ASECWT", "PERWT", "WTFINL")

DTYPES = {"u8": "u1", "i8": "i1", "u16": "<u2", "i16": "<i2", "u32": "<u4",
          "i32": "<i4", "i64": "<i8", "f32": "<f4", "f64": "<f8"}


# --------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------

def ipums(name):
    """(codebook, DataFrame) as ipumspy reads the extract. A hierarchical
    extract gives the rectangular person frame microtab makes of it: every
    P record with the variables of the H record before it (ipumspy keeps
    each record's line number as the frame index)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ddi = ipumspy_readers.read_ipums_ddi(DATA / f"{name}.xml")
        data = DATA / f"{name}.dat.gz"
        if ddi.file_description.structure != "hierarchical":
            return ddi, ipumspy_readers.read_microdata(ddi, data)
        frames = ipumspy_readers.read_hierarchical_microdata(ddi, data)
    return ddi, rectangular(ddi, frames)


def rectangular(ddi, frames, row="P", top="H"):
    rows, tops = frames[row], frames[top]
    own = set(rows.columns)
    extra = [c for c in tops.columns if c not in own]
    left = rows.rename_axis("_line").reset_index()
    right = tops[extra].rename_axis("_line").reset_index()
    df = pd.merge_asof(left, right, on="_line", direction="backward").set_index("_line")
    order = [d.name for d in ddi.data_description if d.name in df.columns]
    return df[order].reset_index(drop=True)


def manifest(ds):
    return json.loads((Path(ds) / "manifest.json").read_text())


def column(ds, var):
    """A variable's values as stored: (raw array, manifest entry, strings or None).
    Raw values are read straight from the column file (numpy.memmap, as
    docs/FORMAT.md describes), not through microtab."""
    v = next(x for x in manifest(ds)["variables"] if x["name"] == var)
    rows = manifest(ds)["rows"]
    raw = read_column_file(Path(ds) / v["file"], v, rows)
    strings = None
    if v["kind"] == "string":
        d = json.loads((Path(ds) / v["dictionary"]).read_text())
        nc = v.get("null_code")
        strings = [None if (nc is not None and c == nc) else d[c] for c in raw.tolist()]
    return raw, v, strings


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    """Every extract imported once from its .dat.gz: {name: dataset path}."""
    d = tmp_path_factory.mktemp("ipums")
    out = {}
    for name in EXTRACTS:
        ds = d / f"{name}.mtab"
        run("import", DATA / f"{name}.dat.gz", ds, "--ddi", DATA / f"{name}.xml")
        out[name] = ds
    return out


def need(name):
    if name not in EXTRACTS:
        pytest.skip(f"{name} not in {DATA}")
    return name


def weight_of(ddi, df):
    """A person weight of the extract (None if it has none)."""
    for w in PERSON_WEIGHTS:
        if w in df.columns:
            return w
    return next(
        (d.name for d in ddi.data_description if (d.shift or 0) > 0 and "WT" in d.name and d.name in df.columns),
        None,
    )


def label_key(desc, code):
    """The displayed value ipumspy's code of ``desc`` has in microtab."""
    if desc.vartype == "character":
        return str(code).strip()
    dec = desc.shift or 0
    return str(code) if dec == 0 else f"{code / 10**dec:.{dec}f}"


def shown(desc, value):
    """A value of ``desc`` in ipumspy's frame as microtab displays it."""
    if desc.vartype == "character":
        return str(value)
    return label_key(desc, round(value * 10 ** (desc.shift or 0)))


def categorical(ddi, df):
    """Variables worth a frequency table: labelled or with few values."""
    out = []
    for v in ddi.data_description:
        if v.name in df.columns and (v.codes or df[v.name].nunique() <= 60):
            out.append(v.name)
    return out


# --------------------------------------------------------------------------
# values
# --------------------------------------------------------------------------

@pytest.mark.parametrize("name", EXTRACTS)
def test_every_value_equals_ipumspy(imported, name):
    ddi, df = ipums(name)
    ds = imported[name]
    m = manifest(ds)
    assert m["rows"] == len(df)
    assert [v["name"] for v in m["variables"]] == list(df.columns)
    for desc in ddi.data_description:
        if desc.name not in df.columns:
            continue
        raw, v, strings = column(ds, desc.name)
        exp = df[desc.name]
        assert len(raw) == len(exp), desc.name
        if desc.vartype == "character":
            assert v["kind"] == "string", desc.name
            assert strings == [None if pd.isna(x) else x for x in exp], desc.name
            continue
        assert v["kind"] == "int", desc.name
        dec = desc.shift or 0
        assert v["decimals"] == dec, desc.name
        # Blank fields: system-missing here, NA in ipumspy.
        na = exp.isna().to_numpy()
        nulls = raw == v["null_code"] if v.get("null_code") is not None else np.zeros(len(raw), bool)
        assert np.array_equal(nulls, na), desc.name
        raw, exp = raw[~na].astype(np.int64), exp[~na]
        if dec == 0:
            # Exact, including the 14-digit identifiers (CPSID, CPSIDP).
            assert np.array_equal(raw, exp.to_numpy(dtype=np.int64)), desc.name
        else:
            # Implied decimals: stored exactly as the integer in the file;
            # ipumspy divides by 10^dcml into a float.
            scaled = np.round(exp.to_numpy(dtype=np.float64) * 10**dec).astype(np.int64)
            assert np.array_equal(raw, scaled), desc.name
            assert np.allclose(raw / 10**dec, exp.to_numpy(dtype=np.float64), rtol=0, atol=1e-9)


@pytest.mark.parametrize("name", EXTRACTS)
def test_labels_descriptions_from_codebook(imported, name):
    ddi, df = ipums(name)
    by_name = {v["name"]: v for v in manifest(imported[name])["variables"]}
    for desc in ddi.data_description:
        if desc.name not in df.columns:
            continue
        v = by_name[desc.name]
        assert v.get("label") == (desc.label or "").strip() or None
        assert (v.get("description") or "") == (desc.description or "").strip()
        vl = v.get("value_labels", {})
        for label, code in desc.codes.items():
            if not label:
                continue  # IPUMS writes <labl/> for unlabelled codes (HRSERSUF)
            assert vl.get(label_key(desc, code)) == label.strip(), (desc.name, code, label)


@pytest.mark.parametrize("name", EXTRACTS)
def test_weighted_frequencies_equal_pandas(imported, name):
    ddi, df = ipums(name)
    ds = imported[name]
    w = weight_of(ddi, df)
    if w is None:
        df = df.assign(_one=1.0)
    for var in categorical(ddi, df):
        desc = ddi.get_variable_info(var)
        labels = {label_key(desc, c): lab.strip() for lab, c in desc.codes.items() if lab}
        g = df.groupby(var, sort=True)[w or "_one"].agg(["size", "sum"])
        # WTSUPP is negative in two of cps_00006's records (real CPS
        # data): weights may only be negative when asked (issue 10).
        res = run_json("freq", ds, var, *(["--weight", w, "--allow-negative-weights"] if w else []))
        rows = [r for r in res["rows"] if not r["missing"]]
        assert [r["value"] for r in rows] == list(g.index), var
        assert [r["count"] for r in rows] == g["size"].tolist(), var
        total = g["sum"].sum()
        for r, (val, exp) in zip(rows, g.iterrows()):
            if w:
                assert r["weighted"] == approx(exp["sum"]), (var, val)
            assert r["percent"] == approx(100 * exp["sum"] / total), (var, val)
            assert r["label"] == labels.get(shown(desc, val)), (var, val)
        assert res["total"]["count"] == int(df[var].notna().sum())
        if w:
            assert res["total"]["weighted"] == approx(df.loc[df[var].notna(), w].sum())


@pytest.mark.parametrize("name", EXTRACTS)
def test_weighted_crosstab_equals_pandas(imported, name):
    ddi, df = ipums(name)
    cats = [c for c in categorical(ddi, df) if df[c].nunique() > 1]
    w = weight_of(ddi, df)
    if len(cats) < 2 or w is None:
        pytest.skip("needs two categorical variables and a weight")
    row, col = cats[0], cats[1]
    exp = df.groupby([row, col])[w].agg(["size", "sum"])
    res = run_json("tab", imported[name], row, col, "--weight", w, "--allow-negative-weights")
    t = res["tables"][0]
    got = {}
    for i, r in enumerate(t["rows"]):
        for j, c in enumerate(t["cols"]):
            if t["counts"][i][j]:
                got[(r["value"], c["value"])] = (t["counts"][i][j], t["weighted"][i][j])
    assert set(got) == set(exp.index)
    for k, (n, s) in exp.iterrows():
        assert got[k][0] == n and got[k][1] == approx(s)


def test_user_missing_codes_exclude_from_statistics(imported, tmp_path):
    """INCTOT's codebook names 99999999 (N.I.U.) and 99999998 (Missing) only
    in prose; `microtab missing` declares them."""
    name = need("cps_00006")
    ds = tmp_path / "c.mtab"
    shutil.copytree(imported[name], ds)
    before = {v["name"]: v["checksum"] for v in manifest(ds)["variables"]}
    gen = manifest(ds)["generation"]
    run("missing", ds, "INCTOT", "99999999", "99999998")
    m = manifest(ds)
    assert m["generation"] == gen + 1
    assert {v["name"]: v["checksum"] for v in m["variables"]} == before
    _, df = ipums(name)
    valid = df[~df.INCTOT.isin([99999999, 99999998])]
    res = run_json("means", ds, "INCTOT", "--by", "STATEFIP", "--weight", "WTSUPP", "--allow-negative-weights")
    for g in res["groups"]:
        sub = valid[valid.STATEFIP == g["by"][0]["value"]]
        assert g["n"] == len(sub)
        assert g["mean"] == approx(np.average(sub.INCTOT, weights=sub.WTSUPP))
    res = run_json("freq", ds, "INCTOT", "--include-missing")
    miss = {r["value"]: r["count"] for r in res["rows"] if r["missing"]}
    assert miss == {99999998: int((df.INCTOT == 99999998).sum()), 99999999: int((df.INCTOT == 99999999).sum())}
    run("missing", ds, "INCTOT", "--clear")
    res = run_json("freq", ds, "INCTOT", "--include-missing")
    assert not any(r["missing"] for r in res["rows"])
    assert res["total"]["count"] == len(df)


def test_label_command(imported, tmp_path):
    name = need("cps_00006")
    ds = tmp_path / "l.mtab"
    shutil.copytree(imported[name], ds)
    ddi, df = ipums(name)
    var = "STATEFIP"
    code = int(df[var].iloc[0])
    run("label", ds, var, f"{code:02d}=Home state", "99=", "--var-label", "State of residence")
    v = next(x for x in manifest(ds)["variables"] if x["name"] == var)
    assert v["label"] == "State of residence"
    assert v["value_labels"][str(code)] == "Home state"
    assert "99" not in v["value_labels"]
    res = run_json("freq", ds, var)
    row = next(r for r in res["rows"] if r["value"] == code)
    assert row["label"] == "Home state" and row["count"] == int((df[var] == code).sum())
    run("label", ds, var, "--clear")
    assert "value_labels" not in next(x for x in manifest(ds)["variables"] if x["name"] == var)
    # Implied decimals: labels key by the displayed value.
    wvar = next(d.name for d in ddi.data_description if (d.shift or 0) > 0)
    x = df[wvar].iloc[0]
    run("label", ds, wvar, f"{x}=first")
    dec = next(d.shift for d in ddi.data_description if d.name == wvar)
    assert next(v for v in manifest(ds)["variables"] if v["name"] == wvar)["value_labels"] == {f"{x:.{dec}f}": "first"}
    p = run("label", ds, wvar, "1.000001=x", ok=False)
    assert_one_error(p, wvar)


# --------------------------------------------------------------------------
# input forms: plain .dat, .csv.gz
# --------------------------------------------------------------------------

def test_plain_dat_equals_gzip(imported, tmp_path):
    name = need("cps_00361")
    dat = tmp_path / f"{name}.dat"
    dat.write_bytes(gzip.decompress((DATA / f"{name}.dat.gz").read_bytes()))
    ds = tmp_path / "plain.mtab"
    run("import", dat, ds, "--ddi", DATA / f"{name}.xml")
    a = [(v["name"], v["checksum"], v.get("value_labels")) for v in manifest(ds)["variables"]]
    b = [(v["name"], v["checksum"], v.get("value_labels")) for v in manifest(imported[name])["variables"]]
    assert a == b


def test_csv_gz_import(tmp_path):
    name = need("cps_00361")
    ddi, df = ipums(name)
    csv = tmp_path / "x.csv"
    df.to_csv(csv, index=False)
    gz = tmp_path / "x.csv.gz"
    gz.write_bytes(gzip.compress(csv.read_bytes()))
    run("import", csv, tmp_path / "plain.mtab")
    run("import", gz, tmp_path / "gz.mtab")
    a = [(v["name"], v["type"], v["checksum"]) for v in manifest(tmp_path / "plain.mtab")["variables"]]
    b = [(v["name"], v["type"], v["checksum"]) for v in manifest(tmp_path / "gz.mtab")["variables"]]
    assert a == b
    w = weight_of(ddi, df)
    res = run_json("freq", tmp_path / "gz.mtab", "AGE", "--weight", w, "--allow-negative-weights")
    assert res["total"]["weighted"] == approx(df[w].sum())


def test_csv_extract_with_codebook(tmp_path):
    """IPUMS also delivers extracts as CSV (decimals written out); with
    --ddi the codebook types the alphabetic variables and labels them all."""
    name = need("cps_00361")
    ddi, df = ipums(name)
    gz = tmp_path / "x.csv.gz"
    gz.write_bytes(gzip.compress(df.to_csv(index=False).encode()))
    ds = tmp_path / "x.mtab"
    run("import", gz, ds, "--ddi", DATA / f"{name}.xml")
    by_name = {v["name"]: v for v in manifest(ds)["variables"]}
    for desc in ddi.data_description:
        v = by_name[desc.name]
        assert v.get("label") == desc.label
        assert v["kind"] == ("string" if desc.vartype == "character" else "int")
        raw, v, strings = column(ds, desc.name)
        if strings is not None:
            assert strings == [None if pd.isna(x) else x for x in df[desc.name]]
        else:
            exp = df[desc.name].to_numpy(dtype=np.float64)
            assert np.allclose(raw / 10 ** v["decimals"], exp, rtol=0, atol=1e-9), desc.name
        for label, code in desc.codes.items():
            if label and desc.vartype != "character":
                assert v["value_labels"][str(code)] == label


# --------------------------------------------------------------------------
# HTML codebook
# --------------------------------------------------------------------------

class _Cells(HTMLParser):
    """Collects table rows (lists of cell texts) and all text."""

    def __init__(self):
        super().__init__()
        self.rows, self.text, self._row, self._cell = [], [], None, None

    def handle_starttag(self, tag, attrs):
        if tag == "tr":
            self._row = []
        elif tag in ("td", "th") and self._row is not None:
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self._row.append("".join(self._cell).strip())
            self._cell = None
        elif tag == "tr" and self._row is not None:
            self.rows.append(self._row)
            self._row = None

    def handle_data(self, data):
        self.text.append(data)
        if self._cell is not None:
            self._cell.append(data)


def test_html_codebook(imported, tmp_path):
    name = need("cps_00006")
    ddi, df = ipums(name)
    w = weight_of(ddi, df)
    out = tmp_path / "book.html"
    run("codebook", imported[name], "--html", out, "--weight", w)
    html = out.read_text()
    assert html.startswith("<!DOCTYPE html>")
    assert not re.search(r"""(src|href)=["']?(https?:|//)""", html), "must be self-contained"
    p = _Cells()
    p.feed(html)
    text = " ".join(" ".join(p.text).split())
    for d in ddi.data_description:
        assert d.name in text and d.label in text
        first = " ".join((d.description or "").split())[:60]
        assert first in text, d.name
    # A labelled value's row: code, label, count, weighted count as pandas has them.
    var = "STATEFIP"
    desc = ddi.get_variable_info(var)
    g = df.groupby(var)[w].agg(["size", "sum"])
    found = 0
    for lab, code in desc.codes.items():
        rows = [r for r in p.rows if len(r) >= 6 and r[0] == str(code) and r[1].startswith(lab)]
        assert rows, (var, code, lab)
        n, s = (g.loc[code, "size"], g.loc[code, "sum"]) if code in g.index else (0, 0.0)
        assert rows[0][2] == f"{n:,}" and rows[0][4] == f"{s:,.2f}", rows[0]
        found += n > 0
    assert found == len(g)


# --------------------------------------------------------------------------
# hierarchical files
# --------------------------------------------------------------------------

HH_VARS = ("MONTH", "HWTFINL", "CPSID", "ASECFLAG", "STATEFIP", "HRSERSUF")


def make_hierarchical(tmp_path):
    """Turns the rectangular cps_00361 extract into a hierarchical one (H
    records with household variables, each followed by its P records), with
    a matching DDI; plus a household without persons."""
    name = need("cps_00361")
    ns = "ddi:codebook:2_5"
    ET.register_namespace("", ns)
    ET.register_namespace("xsi", "http://www.w3.org/2001/XMLSchema-instance")
    tree = ET.parse(DATA / f"{name}.xml")
    root = tree.getroot()
    q = lambda t: f"{{{ns}}}{t}"  # noqa: E731
    strc = root.find(f".//{q('fileStrc')}")
    strc.attrib["type"] = "hierarchical"
    for rt, lab, key in (("P", "Person Record", "SERIAL"), ("H", "Household Record", None)):
        g = ET.SubElement(strc, q("recGrp"), {"recidvar": "RECTYPE", "rectype": rt})
        if key:
            g.attrib["keyvar"] = key
        ET.SubElement(g, q("labl")).text = lab
    dd = root.find(q("dataDscr"))
    old = {v.attrib["name"]: v for v in dd.findall(q("var"))}
    spans = {n: (int(v.find(q("location")).attrib["StartPos"]), int(v.find(q("location")).attrib["EndPos"])) for n, v in old.items()}
    rec = ET.Element(q("var"), {"ID": "RECTYPE", "name": "RECTYPE", "dcml": "0", "intrvl": "discrete", "files": "ExtractData"})
    ET.SubElement(rec, q("location"), {"StartPos": "1", "EndPos": "1", "width": "1"})
    ET.SubElement(rec, q("labl")).text = "Record type"
    ET.SubElement(rec, q("txt")).text = "H household, P person"
    ET.SubElement(rec, q("concept")).text = "Technical"
    ET.SubElement(rec, q("varFormat"), {"schema": "other", "type": "character"})
    dd.insert(0, rec)
    common, h_only = ["YEAR", "SERIAL"], list(HH_VARS)
    p_only = [n for n in old if n not in common and n not in h_only]
    for group, rt in ((common, "H P"), (h_only, "H"), (p_only, "P")):
        for n in group:
            old[n].attrib["rectype"] = rt
    rec.attrib["rectype"] = "H P"
    # Columns: RECTYPE, the common ones, then each type's own from column
    # 2+len(common), so H and P variables share columns.
    def place(names, start):
        for n in names:
            a, b = spans[n]
            loc = old[n].find(q("location"))
            loc.attrib.update({"StartPos": str(start), "EndPos": str(start + b - a), "width": str(b - a + 1)})
            start += b - a + 1
        return start
    after_common = place(common, 2)
    place(h_only, after_common)
    place(p_only, after_common)
    xml = tmp_path / "hier.xml"
    tree.write(xml, encoding="UTF-8", xml_declaration=True)

    lines = gzip.decompress((DATA / f"{name}.dat.gz").read_bytes()).decode("latin-1").splitlines()
    cut = lambda line, n: line[spans[n][0] - 1 : spans[n][1]]  # noqa: E731
    out = []
    last_key = None
    for line in lines:
        key = (cut(line, "YEAR"), cut(line, "SERIAL"))
        head = "".join(cut(line, n) for n in common)
        if key != last_key:
            out.append("H" + head + "".join(cut(line, n) for n in h_only))
            last_key = key
        out.append("P" + head + "".join(cut(line, n) for n in p_only))
    # A vacant household: an H record with no persons, before the last one.
    vacant = "H" + cut(lines[0], "YEAR") + "99999" + "".join(cut(lines[0], n) for n in h_only)
    last_h = max(i for i, l in enumerate(out) if l.startswith("H"))
    out.insert(last_h, vacant)
    dat = tmp_path / "hier.dat"
    dat.write_text("\n".join(out) + "\n", encoding="latin-1")
    return xml, dat, p_only


def test_hierarchical_rectangularised_to_persons(tmp_path):
    xml, dat, p_only = make_hierarchical(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ddi = ipumspy_readers.read_ipums_ddi(xml)
        frames = ipumspy_readers.read_hierarchical_microdata(ddi, dat)
    H, P = frames["H"], frames["P"]
    # Person file: each P record with the household variables of the H
    # record it follows (file order = ipumspy's index order).
    hh = H.set_index(["YEAR", "SERIAL"])
    exp = P.join(hh[list(HH_VARS)], on=["YEAR", "SERIAL"])
    ds = tmp_path / "p.mtab"
    run("import", dat, ds, "--ddi", xml)
    m = manifest(ds)
    assert m["rows"] == len(P)
    names = [v["name"] for v in m["variables"]]
    assert set(names) == set(exp.columns)
    for n in names:
        raw, v, strings = column(ds, n)
        e = exp[n]
        if strings is not None:
            assert strings == [None if pd.isna(x) else x for x in e], n
        else:
            vals = raw.astype(np.float64) / 10 ** v["decimals"]
            assert np.allclose(vals, e.to_numpy(dtype=np.float64), rtol=0, atol=1e-9), n
    # Household file: every H record, including the vacant one.
    dh = tmp_path / "h.mtab"
    run("import", dat, dh, "--ddi", xml, "--rectype", "H")
    mh = manifest(dh)
    assert mh["rows"] == len(H)
    assert not set(p_only) & {v["name"] for v in mh["variables"]}
    raw, v, _ = column(dh, "HWTFINL")
    assert np.allclose(raw / 10 ** v["decimals"], H.HWTFINL.to_numpy(dtype=np.float64), rtol=0, atol=1e-9)
    res = run_json("freq", dh, "STATEFIP", "--weight", "HWTFINL")
    assert res["total"]["count"] == len(H)
    assert res["total"]["weighted"] == approx(H.HWTFINL.sum())


def test_hierarchical_unknown_record_type(tmp_path):
    xml, dat, _ = make_hierarchical(tmp_path)
    lines = dat.read_text(encoding="latin-1").splitlines()
    lines[40] = "X" + lines[40][1:]
    bad = tmp_path / "bad.dat"
    bad.write_text("\n".join(lines) + "\n", encoding="latin-1")
    target = tmp_path / "bad.mtab"
    p = run("import", bad, target, "--ddi", xml, ok=None)
    msg = assert_one_error(p, "bad.dat", "line 41", "RECTYPE", '"X"', "H", "P")
    assert not target.exists()
    p = run("import", dat, target, "--ddi", xml, "--rectype", "Q", ok=None)
    assert_one_error(p, "hier.xml", "Q")
    assert not target.exists()


# --------------------------------------------------------------------------
# bad input: one `error:` line naming file, record and variable; exit 1;
# nothing created at the target
# --------------------------------------------------------------------------

def failed(tmp_path, data, xml, *needles):
    d = tmp_path / "work"
    d.mkdir(exist_ok=True)
    before = sorted(p.name for p in d.iterdir())
    target = d / "out.mtab"
    p = run("import", data, target, "--ddi", xml, ok=None)
    msg = assert_one_error(p, *needles)
    assert not target.exists(), "failed import left something at the target"
    assert sorted(p.name for p in d.iterdir()) == before, "failed import left files behind"
    return msg


def ipums_lines(name="cps_00006"):
    need(name)
    return gzip.decompress((DATA / f"{name}.dat.gz").read_bytes()).decode("latin-1").splitlines()


def test_line_too_short(tmp_path):
    lines = ipums_lines()
    lines[56] = lines[56][:30]
    data = tmp_path / "short.dat"
    data.write_text("\n".join(lines) + "\n")
    failed(tmp_path, data, DATA / "cps_00006.xml", "short.dat", "line 57", "WTSUPP", "26-35")


def test_non_digit_in_numeric_field(tmp_path):
    lines = ipums_lines()
    ln = lines[1233]
    lines[1233] = ln[:38] + "x" + ln[39:]  # inside INCTOT (columns 36-43)
    data = tmp_path / "nondigit.dat.gz"
    data.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))
    msg = failed(tmp_path, data, DATA / "cps_00006.xml", "nondigit.dat.gz", "line 1234", "INCTOT", "36-43")
    assert "x" in msg


def test_position_past_end_of_line(tmp_path):
    text = (DATA / "cps_00006.xml").read_text()
    text2 = text.replace('<location StartPos="36" width="8" EndPos="43"/>', '<location StartPos="36" width="10" EndPos="45"/>')
    assert text2 != text
    xml = tmp_path / "wide.xml"
    xml.write_text(text2)
    failed(tmp_path, DATA / "cps_00006.dat.gz", xml, "cps_00006.dat.gz", "line 1", "INCTOT", "36-45", "43 characters")


def test_truncated_gzip(tmp_path):
    z = (DATA / "cps_00006.dat.gz").read_bytes()
    data = tmp_path / "trunc.dat.gz"
    data.write_bytes(z[: len(z) * 2 // 3])
    msg = failed(tmp_path, data, DATA / "cps_00006.xml", "trunc.dat.gz", "gzip")
    m = re.search(r"after line (\d+)", msg)
    assert m and 0 < int(m.group(1)) < len(ipums_lines()), msg


@pytest.mark.parametrize(
    "content, needle",
    [
        ("<!DOCTYPE html><html><body><p>hello</p></body></html>", "not a DDI codebook"),
        ('<?xml version="1.0"?><catalog><book id="1"/></catalog>', "<catalog>"),
        ("YEAR 1-4\nSERIAL 5-9\n", "not a DDI codebook"),
        ('<?xml version="1.0"?><codeBook><dataDscr><var name="A"><location StartPos="1"', "XML"),
    ],
    ids=["html", "other-xml", "text", "truncated-xml"],
)
def test_xml_that_is_not_ddi(tmp_path, content, needle):
    xml = tmp_path / "notddi.xml"
    xml.write_text(content)
    failed(tmp_path, DATA / "cps_00006.dat.gz", xml, "notddi.xml", needle)


def test_truncated_codebook_is_an_error(tmp_path):
    """A DDI cut short anywhere before </codeBook> is an error naming the
    codebook and where it ends, never a dataset that silently lacks the
    variables after the cut (issue 10, defect 7)."""
    name = need("cps_00006")
    xml = (DATA / f"{name}.xml").read_bytes()
    end = xml.rindex(b"</codeBook>")
    cuts = sorted({int(len(xml) * f) for f in (0.1, 0.3, 0.5, 0.7, 0.9)} | {end, end + 5})
    for cut in cuts:
        bad = write_bytes(tmp_path / f"cut{cut}.xml", xml[:cut])
        p = run("import", DATA / f"{name}.dat.gz", "--ddi", bad, tmp_path / f"c{cut}.mtab", ok=None)
        if cut >= end + len(b"</codeBook>"):
            assert p.returncode == 0, p.stderr
            continue
        msg = assert_one_error(p, bad.name)
        assert re.search(r"line \d+", msg), msg
        assert not (tmp_path / f"c{cut}.mtab").exists()


def test_huge_missing_range_is_bounded(tmp_path):
    """An invalrng spanning all of i64 is not expanded (it allocated
    without bound): it is narrowed to the values the data hold, and only
    when those are too many is it left unused, with a note."""
    xml = write_bytes(tmp_path / "r.xml", b"""<codeBook><dataDscr>
<var name="A"><location StartPos="1" EndPos="3"/>
<invalrng><range min="-9223372036854775808" max="9223372036854775807"/></invalrng></var>
<var name="B"><location StartPos="4" EndPos="5"/>
<invalrng><range min="90" max="99"/></invalrng></var>
<var name="C"><location StartPos="6" EndPos="11"/>
<invalrng><range min="0" max="999999999999"/></invalrng></var>
</dataDscr></codeBook>""")
    # A: every value is in its range -> all missing.  C: the data hold
    # 10,001 different values of its range: too many to list, not used.
    lines = [b"  1 1     1", b"  295200000", b"  399    17"]
    lines += [b"  1 1%6d" % (100 + i) for i in range(10_000)]
    dat = write_bytes(tmp_path / "r.dat", b"\n".join(lines) + b"\n")
    p = run("import", dat, "--ddi", xml, tmp_path / "r.mtab", timeout=20)
    assert "variable C: missing-value range 0..999999999999" in p.stderr and "not used" in p.stderr
    assert "variable A" not in p.stderr
    res = run_json("freq", tmp_path / "r.mtab", "B")
    assert [r["value"] for r in res["rows"]] == [1]
    res = run_json("freq", tmp_path / "r.mtab", "A")
    assert res["total"]["count"] == 0
    res = run_json("freq", tmp_path / "r.mtab", "C")
    assert res["total"]["count"] == len(lines)


def test_open_ended_missing_range_excludes_its_values(tmp_path):
    """IPUMS-style open-ended missing ranges ("9999990 and above") are
    honoured whatever their width: every value of the data in the range is
    excluded, checked against values computed here."""
    xml = write_bytes(tmp_path / "o.xml", b"""<codeBook><dataDscr>
<var name="INC"><location StartPos="1" EndPos="8"/>
<invalrng><range min="9999990" max="99999999"/></invalrng></var>
</dataDscr></codeBook>""")
    vals = [0, 5, 9999989, 9999990, 9999999, 99999999, 12345, 9999999]
    dat = write_bytes(tmp_path / "o.dat", b"".join(b"%8d\n" % v for v in vals))
    run("import", dat, "--ddi", xml, tmp_path / "o.mtab", timeout=20)
    res = run_json("freq", tmp_path / "o.mtab", "INC")
    kept = sorted(set(v for v in vals if not 9999990 <= v <= 99999999))
    assert [r["value"] for r in res["rows"]] == kept
    assert res["total"]["count"] == 4


def write_bytes(path, data):
    path.write_bytes(data)
    return path


TAYLOR_R = r"""
suppressMessages(library(survey))
args <- commandArgs(trailingOnly=TRUE)
d <- read.csv(args[1]); out <- args[2]
d$INCTOT[d$INCTOT >= 99999998] <- NA
des <- svydesign(ids=~SERIAL, strata=~YEAR, weights=~HWTSUPP, data=d, nest=TRUE)
df <- degf(des)
rows <- list()
add <- function(what, key, est, se, lo=NA, hi=NA) {
  rows[[length(rows) + 1]] <<- data.frame(what=what, key=key, est=est, se=se, lo=lo, hi=hi)
}
t <- svytotal(~factor(STATEFIP), des)
for (k in sort(unique(d$STATEFIP))) {
  nm <- paste0("factor(STATEFIP)", k)
  add("w", k, coef(t)[[nm]], SE(t)[[nm]])
  p <- svyciprop(as.formula(paste0("~I(STATEFIP==", k, ")")), des, method="xlogit", df=df)
  ci <- confint(p)
  add("pct", k, 100 * coef(p)[[1]], 100 * SE(p)[[1]], 100 * ci[1], 100 * ci[2])
}
m <- svyby(~INCTOT, ~STATEFIP, des, svymean, na.rm=TRUE)
ci <- confint(m, df=df)
for (i in seq_len(nrow(m))) add("mean", m$STATEFIP[i], m$INCTOT[i], m$se[i], ci[i, 1], ci[i, 2])
q <- svyquantile(~INCTOT, des, 0.5, na.rm=TRUE, ci=TRUE, df=df)[[1]]
add("median", "Total", q[1, 1], q[1, 4], q[1, 2], q[1, 3])
write.csv(do.call(rbind, rows), out, row.names=FALSE)
"""


def test_taylor_design_on_a_real_extract_matches_r(tmp_path):
    """cps_00006 (real CPS records, 1962–63) as a stratified cluster design:
    strata YEAR, PSUs the households (SERIAL within YEAR), the household
    weight HWTSUPP (4 implied decimals). Weighted counts and percentages of
    STATEFIP, mean INCTOT by STATEFIP (99999998/99999999 missing) and the
    overall median, against R survey on the records as ipumspy reads them."""
    name = need("cps_00006")
    _, df = ipums(name)
    ds = tmp_path / "c.mtab"
    run("import", DATA / f"{name}.dat.gz", "--ddi", DATA / f"{name}.xml", ds)
    run("missing", ds, "INCTOT", "99999998", "99999999")
    run("design", ds, "--weight", "HWTSUPP", "--strata", "YEAR", "--cluster", "SERIAL")
    data = tmp_path / "c.csv"
    df[["YEAR", "SERIAL", "HWTSUPP", "STATEFIP", "INCTOT"]].to_csv(data, index=False)
    want = r_estimates(rscript(tmp_path / "t.R", TAYLOR_R, data, tmp_path / "r.csv"))

    def near(a, b):
        return abs(a - b) <= 1e-6 * max(abs(b), 1e-9)

    f = run_json("freq", ds, "STATEFIP")
    assert f["design"]["method"] == "taylor"
    for r in f["rows"]:
        k = str(r["value"])
        est, se, _, _ = want[("w", k)]
        assert near(r["weighted"], est) and near(r["weighted_se"]["se"], se), (r, est, se)
        est, se, lo, hi = want[("pct", k)]
        u = r["percent_se"]
        assert near(r["percent"], est) and near(u["se"], se) and near(u["lo"], lo) and near(u["hi"], hi), (r, want[("pct", k)])
    m = run_json("means", ds, "INCTOT", "--by", "STATEFIP", "--median")
    for g in m["groups"]:
        est, se, lo, hi = want[("mean", str(g["by"][0]["value"]))]
        u = g["mean_se"]
        assert near(g["mean"], est) and near(u["se"], se) and near(u["lo"], lo) and near(u["hi"], hi), (g, est, se)
    est, se, lo, hi = want[("median", "Total")]
    q = m["total_quantiles"][0]
    assert near(q["value"], est) and near(q["se"]["lo"], lo) and near(q["se"]["hi"], hi), (q, est, lo, hi)
    assert abs(q["se"]["se"] - se) <= 1e-6 * max(se, 1.0)
