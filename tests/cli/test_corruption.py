"""Damaged datasets are detected, never answered (issue 10, defect 4).

Every kind of file a dataset holds — the manifest, plain and bit-packed
column files (header, payload, stripe checksum table), string
dictionaries — has bytes flipped at many places (every region of every
file, and random places), or is truncated or replaced by another file.
After each damage:

* every query that reads the damaged file fails, exit 1, with one error
  line naming the file (none prints a number);
* `microtab verify` fails and names the file;
* the undamaged dataset answers exactly as before (checked against the
  values written into the CSV).
"""

from __future__ import annotations

import json
import os
import random
import shutil

import pytest

from conftest import disp, run, run_json, write

ROWS = 70_000  # three checksummed stripes of 32,768 rows, the last partial


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    d = tmp_path_factory.mktemp("corrupt")
    rng = random.Random(11)
    lines = ["CODE,WIDE,F,S,W"]
    rows = []
    for i in range(ROWS):
        code = rng.randint(1, 9)
        wide = rng.randint(0, 2**32 - 1)  # full u32 range: a plain column
        f = rng.random() * 100
        s = rng.choice(["alpha", "beta", "gamma", "delta"])
        w = rng.randint(100, 999) / 100
        rows.append((code, wide, f, s, w))
        lines.append(f"{code},{wide},{f!r},{s},{w:.2f}")
    csv = write(d / "c.csv", "\n".join(lines) + "\n")
    ds = d / "c.mtab"
    run("import", csv, ds)
    man = json.loads((ds / "manifest.json").read_text())
    vars_ = {v["name"]: v for v in man["variables"]}
    assert vars_["CODE"].get("packing") and not vars_["WIDE"].get("packing")
    return ds, rows, vars_


def query_for(var):
    """A query that reads variable ``var``'s files."""
    if var in ("F",):
        return ["means", "F", "--by", "CODE", "--weight", "W"]
    if var == "W":
        return ["freq", "CODE", "--weight", "W"]
    return ["freq", var]


def answers(ds):
    """The JSON answer of a query reading each variable (float means
    rounded to 12 digits: parallel float sums may differ in the last bit
    from run to run)."""
    out = {}
    for v in ("CODE", "WIDE", "F", "S", "W"):
        q = query_for(v)
        res = json.loads(run(q[0], ds, *q[1:], "--format", "json").stdout)
        out[v] = json.dumps(res, sort_keys=True, default=str)
        if v == "F":
            out[v] = json.dumps(round_floats(res), sort_keys=True)
    return out


def round_floats(x):
    if isinstance(x, float):
        return float(f"{x:.12g}")
    if isinstance(x, dict):
        return {k: round_floats(v) for k, v in x.items()}
    if isinstance(x, list):
        return [round_floats(v) for v in x]
    return x


@pytest.fixture(scope="module")
def intact(dataset):
    ds, rows, _ = dataset
    got = answers(ds)
    # The intact dataset answers like the CSV (hand-computed oracle).
    from collections import Counter

    res = json.loads(got["CODE"])

    assert {r["value"]: r["count"] for r in res["rows"]} == dict(Counter(r[0] for r in rows))
    res = json.loads(got["S"])
    assert {disp(r): r["count"] for r in res["rows"]} == dict(Counter(r[3] for r in rows))
    return got


def files_of(ds, vars_):
    """(label, path, variable whose queries read it) for every file."""
    out = [("manifest", ds / "manifest.json", None)]
    for name, v in vars_.items():
        out.append((f"{name} column", ds / v["file"], name))
        if v.get("dictionary"):
            out.append((f"{name} dictionary", ds / v["dictionary"], name))
    return out


def offsets(path, rng, n_random=12):
    """Byte offsets to damage: every region of the file, and random ones."""
    size = path.stat().st_size
    picks = {0, size - 1, size // 2}
    if path.suffix == ".col":
        picks |= {8, 12, 16, 24, 32, 36, 40, 48, 52, 56, 100, 2000, 4088, 4095}  # header fields, padding, its checksum
        picks |= {4096, 4097, size - 8, size - 9, size - 16}  # payload start, stripe table
    picks |= {rng.randrange(size) for _ in range(n_random)}
    return sorted(p for p in picks if 0 <= p < size)


def assert_detected(ds, path, var, what):
    """Every query reading ``var`` (all of them for the manifest) and
    `verify` fail, naming the damaged file."""
    name = path.name
    queries = [query_for(var)] if var else [query_for("CODE"), ["info"]]
    for q in queries:
        p = run(q[0], ds, *q[1:], "--format", "json", ok=None)
        assert p.returncode == 1, f"{what}: `{' '.join(q)}` answered:\n{p.stdout[:300]}"
        assert p.stdout == "", f"{what}: printed a result"
        lines = p.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error:"), p.stderr
        assert name in lines[0], f"{what}: error does not name {name}: {lines[0]}"
    p = run("verify", ds, ok=None)
    assert p.returncode == 1, f"{what}: verify passed"
    assert name in p.stderr, p.stderr


def test_every_byte_flip_is_detected(dataset, intact):
    ds, _, vars_ = dataset
    rng = random.Random(5)
    tried = 0
    for label, path, var in files_of(ds, vars_):
        original = path.read_bytes()
        for off in offsets(path, rng):
            for mask in (0x01, 0x80, 0xFF):
                b = bytearray(original)
                b[off] ^= mask
                path.write_bytes(bytes(b))
                try:
                    assert_detected(ds, path, var, f"{label}: byte {off} ^ {mask:#x}")
                finally:
                    path.write_bytes(original)
                tried += 1
    assert tried > 300
    # Restored: answers exactly as before, and verify passes.
    assert answers(ds) == intact
    run("verify", ds)


@pytest.mark.parametrize("cut", ["empty", "one byte", "half", "header only", "table"])
def test_truncated_files_are_detected(dataset, intact, cut):
    ds, _, vars_ = dataset
    for label, path, var in files_of(ds, vars_):
        original = path.read_bytes()
        n = len(original)
        keep = {"empty": 0, "one byte": n - 1, "half": n // 2, "header only": min(4096, n - 1), "table": n - 8}[cut]
        path.write_bytes(original[:keep])
        try:
            assert_detected(ds, path, var, f"{label} truncated to {keep} bytes")
        finally:
            path.write_bytes(original)
    assert answers(ds) == intact


def test_swapped_and_missing_files_are_detected(dataset, intact, tmp_path):
    """A column file replaced by another variable's (same size, valid in
    itself), or by the same variable's file of another dataset, or removed."""
    ds, rows, vars_ = dataset
    code, s = ds / vars_["CODE"]["file"], ds / vars_["S"]["file"]
    # The same data imported again with one value changed: a valid file
    # of the same type and size, but another dataset's.
    lines = (ds.parent / "c.csv").read_text().splitlines()
    first = lines[1].split(",")
    first[0] = str(int(first[0]) % 9 + 1)
    lines[1] = ",".join(first)
    other = tmp_path / "other.mtab"
    run("import", write(tmp_path / "o.csv", "\n".join(lines) + "\n"), other)
    other_code = other / json.loads((other / "manifest.json").read_text())["variables"][0]["file"]
    originals = {p: p.read_bytes() for p in (code, s)}
    try:
        shutil.copyfile(other_code, code)
        assert_detected(ds, code, "CODE", "CODE file from another dataset")
        code.write_bytes(originals[code])
        shutil.copyfile(code, s)
        p = run("freq", ds, "S", ok=False)
        assert s.name in p.stderr
        s.write_bytes(originals[s])
        os.remove(code)
        p = run("freq", ds, "CODE", ok=False)
        assert code.name in p.stderr
        assert run("verify", ds, ok=False).returncode == 1
    finally:
        for p, b in originals.items():
            p.write_bytes(b)
    assert answers(ds) == intact


def test_verify_reports_every_damaged_file(dataset, intact):
    ds, _, vars_ = dataset
    damaged = [ds / vars_[n]["file"] for n in ("CODE", "F")]
    originals = {p: p.read_bytes() for p in damaged}
    try:
        for p in damaged:
            b = bytearray(originals[p])
            b[5000] ^= 0x10
            p.write_bytes(bytes(b))
        out = run("verify", ds, "--format", "json", ok=False)
        res = json.loads(out.stdout)
        assert res["ok"] is False
        assert len(res["problems"]) == 2
        for p in damaged:
            assert any(p.name in m for m in res["problems"])
    finally:
        for p, b in originals.items():
            p.write_bytes(b)
    res = run_json("verify", ds)
    assert res["ok"] is True and res["problems"] == []


def test_query_verify_flag_checks_whole_files(dataset, intact):
    """--verify reads the whole files of the query's variables: a damaged
    stripe is found even by a query that would read it anyway, and the
    flag costs nothing in correctness on an intact dataset."""
    ds, _, vars_ = dataset
    res = json.loads(run("freq", ds, "CODE", "--verify", "--format", "json").stdout)
    assert json.dumps(res, sort_keys=True, default=str) == intact["CODE"]
    path = ds / vars_["CODE"]["file"]
    original = path.read_bytes()
    b = bytearray(original)
    b[-20] ^= 0x04  # the stripe table
    path.write_bytes(bytes(b))
    try:
        p = run("freq", ds, "CODE", "--verify", ok=False)
        assert path.name in p.stderr
    finally:
        path.write_bytes(original)


def test_force_import_replaces_a_damaged_dataset(tmp_path):
    """A dataset whose manifest is damaged cannot be opened, but
    `import --force` replaces it whole (built beside it, swapped in
    atomically); a directory that is not a dataset is never replaced."""
    csv = write(tmp_path / "a.csv", "X\n1\n2\n2\n")
    ds = tmp_path / "a.mtab"
    run("import", csv, ds)
    m = ds / "manifest.json"
    b = bytearray(m.read_bytes())
    b[len(b) // 2] ^= 0x04
    m.write_bytes(bytes(b))
    run("freq", ds, "X", ok=False)
    run("import", csv, ds, "--force")
    assert {r["value"]: r["count"] for r in run_json("freq", ds, "X")["rows"]} == {1: 1, 2: 2}
    run("verify", ds)
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
    other = tmp_path / "notes"
    other.mkdir()
    (other / "keep.txt").write_text("mine")
    p = run("import", csv, other, "--force", ok=False)
    assert "not a microtab dataset" in p.stderr
    assert (other / "keep.txt").read_text() == "mine"
