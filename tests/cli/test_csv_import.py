"""CSV import: type inference, CSV dialect details, edge-case files, and the
on-disk column files (numpy.memmap at offset 4096) vs the CSV."""

import json
import random

import numpy as np
import pytest

from conftest import approx, check_freq, disp, make_dataset, run, run_json, read_column_file, write

INT_TYPES = {
    "u8": (0, 2**8 - 1, 8), "i8": (-2**7, 2**7 - 1, 8),
    "u16": (0, 2**16 - 1, 16), "i16": (-2**15, 2**15 - 1, 16),
    "u32": (0, 2**32 - 1, 32), "i32": (-2**31, 2**31 - 1, 32),
    "u64": (0, 2**64 - 1, 64), "i64": (-2**63, 2**63 - 1, 64),
}
DTYPES = {"u8": "<u1", "i8": "<i1", "u16": "<u2", "i16": "<i2", "u32": "<u4", "i32": "<i4",
          "u64": "<u8", "i64": "<i8", "f32": "<f4", "f64": "<f8"}


def narrowest(vmin, vmax, has_null):
    """Integer types acceptable as 'narrowest': the smallest width holding
    all values; if nulls exist, also the smallest width holding all values
    plus one spare sentinel value (below or above)."""
    def fits(lo, hi):
        return {t for t, (a, b, _) in INT_TYPES.items() if a <= lo and hi <= b}
    ok = fits(vmin, vmax)
    bits = min(INT_TYPES[t][2] for t in ok)
    acc = {t for t in ok if INT_TYPES[t][2] == bits}
    if has_null:
        ok2 = fits(vmin - 1, vmax) | fits(vmin, vmax + 1)
        bits2 = min(INT_TYPES[t][2] for t in ok2)
        acc |= {t for t in ok2 if INT_TYPES[t][2] == bits2}
    return acc


def info_vars(ds):
    info = run_json("info", ds)
    return info, {v["name"]: v for v in info["variables"]}


def manifest_vars(ds):
    m = json.loads((ds / "manifest.json").read_text())
    return {v.get("name", i): v for i, v in enumerate(m["variables"])}


TYPE_CODES = {"u8": 1, "i8": 2, "u16": 3, "i16": 4, "u32": 5, "i32": 6, "i64": 7, "f32": 8, "f64": 9}


def read_column(ds, name, var, rows):
    """Read a column file with numpy (docs/FORMAT.md: 4096-byte header, then
    the little-endian values or bit-packed blocks; conftest.read_column_file)."""
    path = ds / manifest_vars(ds)[name]["file"]
    head = path.read_bytes()[:32]
    assert head[:8] == b"MTABCOL\0"
    assert int.from_bytes(head[12:16], "little") == TYPE_CODES[var["type"]]
    assert int.from_bytes(head[16:24], "little") == rows
    return read_column_file(path, manifest_vars(ds)[name], rows)


def check_column_file(ds, name, var, values, rows):
    """``values``: list of python values from the CSV (None = empty)."""
    raw = read_column(ds, name, var, rows)
    mv = manifest_vars(ds)[name]
    nn = np.array([v is not None for v in values], dtype=bool)
    if var["type"].startswith("f"):
        assert np.isnan(raw[~nn]).all()
    elif (~nn).any():
        # system-missing is stored as the manifest's null_code
        assert (raw[~nn] == mv["null_code"]).all()
    if var["kind"] == "string":
        d = mv["dictionary"]
        if isinstance(d, str):  # path of a JSON array, relative to the dataset
            d = json.loads((ds / d).read_text())
        assert d == sorted(d, key=lambda s: s.encode("utf-8"))
        assert [d[c] for c in raw[nn].tolist()] == [v for v in values if v is not None]
        return
    if var["type"].startswith("f"):
        got = raw[nn].astype(float)
        exp = np.array([v for v in values if v is not None], dtype=float)
        assert got == approx(exp)
    elif var["decimals"]:
        scale = 10 ** var["decimals"]
        exp = [round(float(v) * scale) for v in values if v is not None]
        assert raw[nn].tolist() == exp
    else:
        assert raw[nn].tolist() == [int(v) for v in values if v is not None]


# --------------------------------------------------------------------------

def test_type_inference(tmp_path):
    rng = random.Random(3)
    n = 300
    cols = {
        "A": [rng.choice([1, 2]) for _ in range(n)],
        "B": [rng.randint(-5, 300) for _ in range(n)],
        "C": [rng.randint(0, 70000) for _ in range(n)],
        "D": [rng.choice([1, 2, None]) for _ in range(n)],
        "E": [rng.randint(0, 255) for _ in range(n)],
        "F": [rng.randint(-128, 127) for _ in range(n)],
        "G": [rng.randint(0, 5_000_000_000) for _ in range(n)],
        "H": [rng.randint(-40000, 40000) for _ in range(n)],
    }
    cols["A"][:2] = [1, 2]
    cols["B"][:2] = [-5, 300]
    cols["C"][:2] = [0, 70000]
    cols["E"][:3] = [0, 255, None]       # full u8 range plus a null
    cols["F"][:2] = [-128, 127]
    names = list(cols)
    text = ",".join(names) + "\n" + "".join(
        ",".join("" if cols[c][i] is None else str(cols[c][i]) for c in names) + "\n"
        for i in range(n))
    _, ds = make_dataset(tmp_path, "types", text)
    info, v = info_vars(ds)
    assert info["rows"] == n
    assert [x["name"] for x in info["variables"]] == names
    for c in names:
        vals = [x for x in cols[c] if x is not None]
        has_null = len(vals) < n
        assert v[c]["kind"] == "int", c
        assert v[c]["decimals"] == 0
        assert v[c]["type"] in narrowest(min(vals), max(vals), has_null), (c, v[c]["type"])
        assert v[c]["min"] == min(vals) and v[c]["max"] == max(vals)
        assert v[c]["nulls"] == n - len(vals)
        check_column_file(ds, c, v[c], cols[c], n)
    # the brief's examples, spelled out
    assert v["A"]["type"] in ("u8", "i8")
    assert v["B"]["type"] == "i16"
    assert v["C"]["type"] in ("u32", "i32")


def test_decimals_and_strings_types(tmp_path):
    text = "P,S,M\n123.45,x,2.5\n0.01,yy,1.25\n-7.10,x,\n99999.99,,3\n"
    _, ds = make_dataset(tmp_path, "dec", text)
    _, v = info_vars(ds)
    assert v["P"]["decimals"] == 2
    assert v["P"]["min"] == approx(-7.10) and v["P"]["max"] == approx(99999.99)
    if v["P"]["type"] in INT_TYPES:  # scaled integers: -710..9999999
        assert v["P"]["type"] in narrowest(-710, 9999999, False)
    check_column_file(ds, "P", v["P"], ["123.45", "0.01", "-7.10", "99999.99"], 4)
    assert v["S"]["kind"] == "string" and v["S"]["nulls"] == 1
    res = run_json("freq", ds, "P")
    assert [r["value"] for r in res["rows"]] == [-7.1, 0.01, 123.45, 99999.99]
    res = run_json("freq", ds, "M")  # mixed number of decimals
    assert [r["value"] for r in res["rows"]] == [1.25, 2.5, 3]


def test_census_info_and_column_files(census):
    info, v = info_vars(census.ds)
    n = census.one("SELECT count(*) FROM census")[0]
    assert info["rows"] == n
    cols = [d[0] for d in census.con.execute("SELECT * FROM census LIMIT 0").description]
    assert [x["name"] for x in info["variables"]] == cols
    for c in cols:
        mn, mx, nulls = census.one(f'SELECT min("{c}"), max("{c}"), count(*) - count("{c}") FROM census')
        var = v[c]
        assert var["nulls"] == nulls, c
        if c == "INCTOT":
            assert var["missing_codes"] == [9999999]
            # min/max over non-null values; whether the code counts is unspecified
            mx_valid = census.one("SELECT max(INCTOT) FROM census WHERE INCTOT <> 9999999")[0]
            assert var["max"] in (mx, mx_valid)
        else:
            assert var["missing_codes"] == []
            assert var["max"] == approx(mx), c
        assert var["min"] == approx(mn), c
        if c == "PERWT":
            assert var["decimals"] == 2
            raw_min, raw_max = round(mn * 100), round(mx * 100)
        else:
            assert var["kind"] == "int" and var["decimals"] == 0, c
            raw_min, raw_max = mn, mx
        if var["type"] in INT_TYPES:
            assert var["type"] in narrowest(raw_min, raw_max, nulls > 0), (c, var["type"])
        vals = census.con.execute(f'SELECT "{c}"::VARCHAR FROM census').fetchall()
        check_column_file(census.ds, c, var, [x[0] for x in vals], n)


def test_string_column_freq_vs_duckdb(tmp_path, census):
    rng = random.Random(11)
    words = ["Boston", "New York", "São Paulo", "東京", "Zürich", "a", "b,c", "AAA", "zz"]
    lines = ["CITY,W,K"]
    for i in range(5000):
        c = rng.choice(words + [""])
        q = '"' + c + '"' if ("," in c or " " in c) else c
        w = f"{rng.randint(1, 50000) / 100:.2f}"
        lines.append(f"{q},{w},{i % 7}")
    csv_path, ds = make_dataset(tmp_path, "cities", "\n".join(lines) + "\n")
    con = census.con.cursor()
    exp = con.execute(
        "SELECT CITY, count(*), sum(W)::DOUBLE FROM read_csv(?, header=true, "
        "types={'CITY': 'VARCHAR', 'W': 'DECIMAL(18,2)'}) WHERE CITY IS NOT NULL GROUP BY 1",
        [str(csv_path)]).fetchall()
    exp = sorted(exp, key=lambda r: r[0].encode("utf-8"))
    res = run_json("freq", ds, "CITY")
    check_freq(res, [(a, b, None) for a, b, _ in exp], weighted=False)
    res = run_json("freq", ds, "CITY", "--weight", "W")
    check_freq(res, exp, weighted=True)
    info, v = info_vars(ds)
    assert v["CITY"]["kind"] == "string"
    vals = [r[0] for r in con.execute(
        "SELECT CITY FROM read_csv(?, header=true, types={'CITY': 'VARCHAR'})",
        [str(csv_path)]).fetchall()]
    if v["CITY"]["type"] in DTYPES:
        check_column_file(ds, "CITY", v["CITY"], vals, 5000)


QUOTED = ('ID,TXT,N\n'
          '1,"a,b",10\n'
          '2,"say ""hi""",20\n'
          '3,"line1\nline2",30\n'
          '4,plain,40\n'
          '5,"a,b",50\n')
QUOTED_EXP = [("a,b", 2), ("line1\nline2", 1), ("plain", 1), ('say "hi"', 1)]


@pytest.mark.parametrize("eol", ["\n", "\r\n"], ids=["LF", "CRLF"])
def test_quoted_fields(tmp_path, eol):
    text = QUOTED.replace("\n", eol) if eol != "\n" else QUOTED
    if eol == "\r\n":  # keep the embedded newline inside the quoted field as-is
        text = text.replace('"line1\r\nline2"', '"line1\nline2"')
    _, ds = make_dataset(tmp_path, "q", text)
    info, v = info_vars(ds)
    assert info["rows"] == 5
    assert [x["name"] for x in info["variables"]] == ["ID", "TXT", "N"]
    assert v["N"]["kind"] == "int"  # no stray \r in the last column
    res = run_json("freq", ds, "TXT")
    assert [(disp(r), r["count"]) for r in res["rows"]] == QUOTED_EXP
    check_column_file(ds, "TXT", v["TXT"], ["a,b", 'say "hi"', "line1\nline2", "plain", "a,b"], 5)
    res = run_json("freq", ds, "N")
    assert [r["value"] for r in res["rows"]] == [10, 20, 30, 40, 50]


def test_crlf_numeric_and_empty_last_field(tmp_path):
    _, ds = make_dataset(tmp_path, "crlf", "A,B\r\n1,2\r\n3,\r\n5,6\r\n")
    info, v = info_vars(ds)
    assert info["rows"] == 3 and v["B"]["nulls"] == 1 and v["B"]["kind"] == "int"
    assert [(r["value"], r["count"]) for r in run_json("freq", ds, "B")["rows"]] == [(2, 1), (6, 1)]


def test_utf8_bom(tmp_path):
    _, ds = make_dataset(tmp_path, "bom", b"\xef\xbb\xbfID,X\n1,2\n2,2\n")
    info, v = info_vars(ds)
    assert [x["name"] for x in info["variables"]] == ["ID", "X"]
    assert v["ID"]["kind"] == "int"
    res = run_json("freq", ds, "ID")
    assert [(r["value"], r["count"]) for r in res["rows"]] == [(1, 1), (2, 1)]


@pytest.mark.parametrize("delim", [";", "\t"], ids=["semicolon", "tab"])
def test_delimiters(tmp_path, delim):
    text = f"A{delim}B{delim}C\n1{delim}x,y{delim}1.5\n2{delim}z w{delim}2.5\n2{delim}x,y{delim}\n"
    _, ds = make_dataset(tmp_path, "d", text, "--delimiter", delim)
    info, v = info_vars(ds)
    assert [x["name"] for x in info["variables"]] == ["A", "B", "C"]
    assert info["rows"] == 3
    assert [(disp(r), r["count"]) for r in run_json("freq", ds, "B")["rows"]] == [
        ("x,y", 2), ("z w", 1)]
    assert [(r["value"], r["count"]) for r in run_json("freq", ds, "A")["rows"]] == [(1, 1), (2, 2)]
    assert v["C"]["nulls"] == 1


def test_header_only(tmp_path):
    _, ds = make_dataset(tmp_path, "empty", "A,B\n")
    info, v = info_vars(ds)
    assert info["rows"] == 0
    assert [x["name"] for x in info["variables"]] == ["A", "B"]
    assert v["A"]["min"] is None and v["A"]["max"] is None
    res = run_json("freq", ds, "A")
    assert res["rows"] == [] and res["total"]["count"] == 0
    res = run_json("means", ds, "A", "--by", "B")
    assert res["groups"] == [] and res["total"]["n"] == 0


def test_one_row(tmp_path):
    _, ds = make_dataset(tmp_path, "one", "A,B,C\n3,hello,2.50\n")
    info, v = info_vars(ds)
    assert info["rows"] == 1
    assert v["A"]["min"] == 3 == v["A"]["max"]
    assert [(disp(r), r["count"], r["percent"]) for r in run_json("freq", ds, "B")["rows"]] == [
        ("hello", 1, approx(100.0))]
    res = run_json("freq", ds, "A", "--weight", "C")
    assert res["rows"][0]["weighted"] == approx(2.5)
    m = run_json("means", ds, "A", "--by", "B")
    assert m["total"]["n"] == 1 and m["total"]["mean"] == approx(3.0) and m["total"]["sd"] is None


def test_all_missing_column(tmp_path):
    _, ds = make_dataset(tmp_path, "allmiss", "A,B\n1,\n2,\n3,\n")
    info, v = info_vars(ds)
    assert v["B"]["nulls"] == 3
    assert v["B"]["min"] is None and v["B"]["max"] is None
    assert run_json("freq", ds, "B")["rows"] == []
    res = run_json("freq", ds, "B", "--include-missing")
    assert [(r["value"], r["count"], r["missing"]) for r in res["rows"]] == [(None, 3, True)]
    assert run_json("freq", ds, "A", "--filter", "B(1-*)")["rows"] == []


def test_single_value_column(tmp_path):
    _, ds = make_dataset(tmp_path, "single", "A,B\n5,1\n5,2\n5,3\n")
    info, v = info_vars(ds)
    assert v["A"]["min"] == 5 == v["A"]["max"]
    assert v["A"]["type"] in narrowest(5, 5, False)
    res = run_json("freq", ds, "A")
    assert [(r["value"], r["count"], r["percent"]) for r in res["rows"]] == [(5, 3, approx(100.0))]
    m = run_json("means", ds, "A", "--by", "B")
    assert [g["sd"] for g in m["groups"]] == [None] * 3
    assert m["total"]["sd"] == approx(0.0)


def test_type_override(tmp_path):
    text = "ZIP,N\n01234,1\n90210,2\n01234,3\n"
    _, ds = make_dataset(tmp_path, "zip", text, "--type", "ZIP=string", "--type", "N=float")
    _, v = info_vars(ds)
    assert v["ZIP"]["kind"] == "string"
    assert [(disp(r), r["count"]) for r in run_json("freq", ds, "ZIP")["rows"]] == [
        ("01234", 2), ("90210", 1)]
    assert v["N"]["kind"] == "float"
    # Zero-padded codes are text unless asked otherwise (issue 10: "01" and
    # "1" must not merge silently); --type ZIP=int reads them as numbers.
    _, ds2 = make_dataset(tmp_path, "zip2", text)
    assert [(disp(r), r["count"]) for r in run_json("freq", ds2, "ZIP")["rows"]] == [
        ("01234", 2), ("90210", 1)]
    _, ds3 = make_dataset(tmp_path, "zip3", text, "--type", "ZIP=int")
    assert [(r["value"], r["count"]) for r in run_json("freq", ds3, "ZIP")["rows"]] == [
        (1234, 2), (90210, 1)]


def test_force_replaces_dataset(tmp_path):
    _, ds = make_dataset(tmp_path, "f", "A\n1\n1\n")
    gen1 = run_json("info", ds)["generation"]
    write(tmp_path / "g.csv", "A\n2\n3\n4\n")
    run("import", tmp_path / "g.csv", ds, "--force")
    info = run_json("info", ds)
    assert info["rows"] == 3
    assert info["generation"] > gen1
    assert [r["value"] for r in run_json("freq", ds, "A")["rows"]] == [2, 3, 4]


def test_large_integers_exact(tmp_path):
    """64-bit integers beyond 2**53 are held exactly (i64) and every row is
    counted with its exact value."""
    vals = [2**53 + 1, 2**53, -(2**53 + 1), 1, 2**62 + 1, -(2**63 - 1)]
    text = "A,B\n" + "".join(f"{v},{i % 2}\n" for i, v in enumerate(vals))
    _, ds = make_dataset(tmp_path, "bigint", text)
    _, v = info_vars(ds)
    assert v["A"]["type"] == "i64" and v["A"]["kind"] == "int"
    check_column_file(ds, "A", v["A"], [str(x) for x in vals], len(vals))
    assert v["A"]["min"] == min(vals) and v["A"]["max"] == max(vals)
    res = run_json("freq", ds, "A")
    assert [(r["value"], r["count"]) for r in res["rows"]] == [(x, 1) for x in sorted(vals)]
    assert res["total"]["count"] == len(vals)
    res = run_json("freq", ds, "A", "--filter", f"A>{2**53}")
    assert [r["value"] for r in res["rows"]] == [2**53 + 1, 2**62 + 1]
    t = run_json("tab", ds, "A", "B")["tables"][0]
    assert [r["value"] for r in t["rows"]] == sorted(vals)
    assert t["total"]["count"] == len(vals)
