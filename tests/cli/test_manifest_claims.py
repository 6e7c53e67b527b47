"""What a manifest says of its values is checked against the values.

A manifest edited by hand and resealed (its checksum recomputed, as a user
with the format document can) must not make microtab misread the data:
queries choose exact sums, recode tables and weight checks from each
variable's stored range, null count, kind and decimals.  The zone maps in
the column files (written from the values, covered by the files' own
checksums) hold the truth; `verify` reads every value.

Oracles: DuckDB over the same CSV, and Python's csv module.
"""

import csv
import json

import duckdb
import pytest
import xxhash

from conftest import approx, make_dataset, run, run_json

CSV = "AGE,W,INC,TXT\n" + "".join(
    f"{'' if i % 7 == 3 else i % 90},{1 + (i % 5) / 3!r},{(i * 37) % 1000}.{i % 100:02d},{'abc'[i % 3]}\n"
    for i in range(5000)
)


def reseal(ds, edit):
    """Apply ``edit`` to the parsed manifest, write it back and recompute
    its checksum exactly as docs/FORMAT.md describes (XXH3-64 of the text
    with the checksum's 16 hex digits as zeros)."""
    path = ds / "manifest.json"
    m = json.loads(path.read_text())
    edit(m)
    m["checksum"] = "xxh3:" + "0" * 16
    text = json.dumps(m, indent=2)
    digest = xxhash.xxh3_64_intdigest(text.encode())
    path.write_text(text.replace("xxh3:" + "0" * 16, f"xxh3:{digest:016x}", 1))


def var(m, name):
    return next(v for v in m["variables"] if v["name"] == name)


@pytest.fixture()
def ds(tmp_path):
    return make_dataset(tmp_path, "claims", CSV)


def oracle_age(csv_path):
    con = duckdb.connect()
    return dict(con.execute(
        f"SELECT AGE, count(*) FROM read_csv('{csv_path}') WHERE AGE IS NOT NULL GROUP BY 1").fetchall())


def freq_counts(res):
    return {int(r["value"]): r["count"] for r in res["rows"] if not r.get("missing")}


def test_the_untouched_dataset_verifies_and_answers(ds):
    csv_path, d = ds
    run("verify", d)
    assert freq_counts(run_json("freq", d, "AGE")) == oracle_age(csv_path)


@pytest.mark.parametrize("edit, needle", [
    (lambda m: var(m, "AGE").update(max=50), "AGE"),
    (lambda m: var(m, "AGE").update(min=5), "AGE"),
    (lambda m: var(m, "AGE").update(nulls=0, null_code=None), "AGE"),
    (lambda m: var(m, "TXT").update(max=1), "TXT"),
])
def test_a_narrower_claim_is_refused_by_every_query(ds, edit, needle):
    _, d = ds
    reseal(d, edit)
    v = "TXT" if needle == "TXT" else "AGE"
    for args in (["freq", d, v], ["tab", d, v, "TXT" if v == "AGE" else "AGE"],
                 ["means", d, "W", "--by", v], ["list", d, v, "--limit", "3"],
                 ["list", d, "W", "--filter", f"{v}({'a' if v == 'TXT' else 1})", "--limit", "3"]):
        p = run(*args, ok=False)
        assert "zone map" in p.stderr and needle in p.stderr, p.stderr
    p = run("verify", d, ok=False)
    assert needle in p.stderr


@pytest.mark.parametrize("lo, hi", [(-5, 500), (0, 255), (90, 255)])
def test_a_claim_reaching_the_null_code_is_refused(ds, lo, hi):
    # A claimed range that reaches AGE's null code (255) would make its
    # nulls values.
    _, d = ds
    reseal(d, lambda m: var(m, "AGE").update(min=lo, max=hi))
    p = run("freq", d, "AGE", ok=False)
    assert "AGE" in p.stderr and f"{lo} to {hi}" in p.stderr and "0 to 89" in p.stderr
    p = run("verify", d, ok=False)
    assert "AGE" in p.stderr


def test_a_wider_claim_answers_right_and_verify_names_it(ds):
    csv_path, d = ds
    reseal(d, lambda m: var(m, "AGE").update(min=-5, max=200))
    assert freq_counts(run_json("freq", d, "AGE")) == oracle_age(csv_path)
    p = run("verify", d, ok=False)
    assert "AGE" in p.stderr and "-5 to 200" in p.stderr and "0 to 89" in p.stderr


def test_a_float_range_edit_is_found_by_verify(ds):
    csv_path, d = ds
    # W's true minimum is 1: a claim of 2 would let a query skip checks.
    reseal(d, lambda m: var(m, "W").update(min=2.0))
    p = run("verify", d, ok=False)
    assert "variable W" in p.stderr and "values are 1 to 2.333" in p.stderr, p.stderr
    # The answers themselves do not depend on a float's claimed range.
    res = run_json("means", d, "W", "--by", "TXT")
    want = dict(duckdb.connect().execute(
        f"SELECT TXT, avg(W) FROM read_csv('{csv_path}') GROUP BY 1").fetchall())
    got = {g["by"][0]["value"]: g["mean"] for g in res["groups"]}
    assert got == {k: approx(v) for k, v in want.items()}


@pytest.mark.parametrize("edit, needle", [
    (lambda m: var(m, "AGE").update(kind="float"), "stored as integers"),
    (lambda m: var(m, "W").update(kind="int"), "stored as floats"),
    (lambda m: var(m, "TXT").update(kind="int"), "has a dictionary"),
    (lambda m: var(m, "AGE").update(kind="string"), "has no dictionary"),
    (lambda m: var(m, "TXT").update(decimals=2), "implied decimals"),
    (lambda m: var(m, "INC").update(decimals=40), "implied decimals"),
    (lambda m: var(m, "AGE").update(null_code=7), "null code"),
])
def test_a_kind_decimals_or_null_code_that_contradicts_the_storage_is_refused(ds, edit, needle):
    _, d = ds
    reseal(d, edit)
    for args in (["info", d], ["freq", d, "AGE"], ["verify", d]):
        p = run(*args, ok=False)
        assert needle in p.stderr, p.stderr


def test_names_with_spaces_and_commas_in_list_and_subset(tmp_path):
    rows = [(i, 3000 + i * 17, f"{180 + i % 30}") for i in range(40)]
    text = "id,Body Mass (g),\"Flipper Length, mm\"\n" + "".join(f"{a},{b},{c}\n" for a, b, c in rows)
    csv_path, d = make_dataset(tmp_path, "peng", text)
    expect = list(csv.reader(open(csv_path)))[1:6]
    for args in (["Body Mass (g)", "Flipper Length, mm"],
                 ['"Body Mass (g)","Flipper Length, mm"'],
                 ['"Body Mass (g)" "Flipper Length, mm"']):
        out = run("list", d, *args, "--limit", "5", "--format", "csv").stdout.splitlines()
        got = list(csv.reader(out))
        assert got[0] == ["record", "Body Mass (g)", "Flipper Length, mm"]
        assert [r[1:] for r in got[1:]] == [[b, c] for _, b, c in expect]
    out = tmp_path / "sub.csv"
    run("subset", d, out, "--vars", "Flipper Length, mm", "id")
    got = list(csv.reader(open(out)))
    assert got[0] == ["Flipper Length, mm", "id"]
    assert [r for r in got[1:6]] == [[c, a] for a, _, c in expect]
    import pyarrow.parquet as pq
    pq_out = tmp_path / "sub.parquet"
    run("export", d, pq_out, "--vars", "Flipper Length, mm", "id")
    t = pq.read_table(pq_out)
    assert t.column_names == ["Flipper Length, mm", "id"]
    assert [str(x) for x in t.column("id").to_pylist()[:5]] == [a for a, _, _ in expect]
