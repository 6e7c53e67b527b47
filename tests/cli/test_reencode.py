"""Re-encoding a column while importing (issue 10, defects 1 and 2).

When a later chunk needs a wider type, more decimals or room for a null
code, the importer rewrites what it has written so far. Every value must
survive: in particular a value equal to the old type's null code (255 in a
u8 column) is an ordinary value when the column had no nulls. The oracle
is a Counter over the values written into the file (hand-computed), and
the column files are read back with numpy from docs/FORMAT.md.

``MICROTAB_CHUNK_BYTES=4096`` makes every file here span many chunks, so
that each kind of late value arrives in a later chunk than the first.
"""

from __future__ import annotations

import collections
import os
import random

import pytest

from conftest import disp, read_column_file, run, run_json, write

SMALL_CHUNKS = {**os.environ, "MICROTAB_CHUNK_BYTES": "4096"}


def counts(ds, var):
    """{displayed value: count} of every category, missing ones included
    (None for system-missing)."""
    res = run_json("freq", ds, var, "--include-missing")
    return {(None if r["value"] is None or r["value"] == "" and r["missing"] else disp(r)): r["count"] for r in res["rows"]}


def expected(values):
    return dict(collections.Counter(values))


def import_values(tmp_path, name, values, *args, env=SMALL_CHUNKS):
    """Writes a CSV with column x holding ``values`` (None → empty field;
    a second column keeps such a line from being a blank line) and imports
    it."""
    text = "x,y\n" + "".join(("" if v is None else str(v)) + ",1\n" for v in values)
    csv = write(tmp_path / f"{name}.csv", text)
    ds = tmp_path / f"{name}.mtab"
    run("import", csv, ds, *args, env=env)
    return ds


# Each case: values early in the file (one of them the old type's null
# code), then many filler rows, then a value that forces a re-encoding.
CASES = {
    "u8-max-then-wider": [255] + [7] * 5000 + [256],
    "u8-max-then-null": list(range(256)) * 20 + [None],
    "u8-max-then-decimal": [255, 0] + [7] * 5000 + ["0.5"],
    "u16-max-then-wider": [65535, 0] + [7] * 5000 + [65536],
    "u16-max-then-null": [65535, 0] + [7] * 5000 + [None],
    "i8-min-then-wider": [-128, 127] + [7] * 5000 + [-129],
    "i8-min-then-null": [-128, 127] + [7] * 5000 + [None],
    "i16-min-then-wider": [-32768, 32767] + [7] * 5000 + [40000],
    "u32-max-then-wider": [4294967295, 0] + [7] * 5000 + [4294967296],
    "u32-max-then-null": [4294967295, 0] + [7] * 5000 + [None],
    "i32-min-then-null": [-2147483648, 2147483647] + [7] * 5000 + [None],
    "u8-max-then-float": [255, 0] + [7] * 5000 + ["1e3"],
}


def normalise(v):
    """The displayed value microtab gives a CSV field."""
    if v is None:
        return None
    if isinstance(v, str):
        f = float(v)
        return int(f) if f.is_integer() else f
    return v


@pytest.mark.parametrize("case", sorted(CASES))
def test_late_widening_keeps_every_value(tmp_path, case):
    values = CASES[case]
    ds = import_values(tmp_path, case, values)
    got = counts(ds, "x")
    want = expected(normalise(v) for v in values)
    # Compare numerically: "0.5" may widen the column to decimals (255 → 255.0).
    norm = lambda d: {(None if k is None else float(k)): n for k, n in d.items()}  # noqa: E731
    assert norm(got) == norm(want)


def test_issue_reproducer_2_5_million_rows(tmp_path):
    """The reproducer from the issue, at its own size and default chunks."""
    values = [255] + [7] * 2_500_000 + [256]
    ds = import_values(tmp_path, "repro", values, env=None)
    assert counts(ds, "x") == {255: 1, 7: 2_500_000, 256: 1}


@pytest.mark.parametrize("distinct", [256, 65536])
def test_text_with_exactly_a_full_code_range(tmp_path, distinct):
    """256 (65,536) distinct strings in shuffled order fill the u8 (u16)
    code range with no room for a null code: sorting the codes at the end
    must not mistake the last code for a null."""
    rng = random.Random(distinct)
    names = [f"v{i:06d}" for i in range(distinct)]
    values = names * 2
    rng.shuffle(values)
    ds = import_values(tmp_path, f"text{distinct}", values)
    got = counts(ds, "x")
    assert got == expected(values)


def test_text_full_range_then_null(tmp_path):
    names = [f"s{i:03d}" for i in range(256)]
    rng = random.Random(3)
    rng.shuffle(names)
    values = names * 10 + [None]
    ds = import_values(tmp_path, "textnull", values)
    assert counts(ds, "x") == expected(values)


def ddi_one_var(name, width, dcml=0):
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<codeBook xmlns="ddi:codebook:2_5"><fileDscr><fileTxt><fileName>d.dat</fileName>
<fileStrc type="rectangular"/></fileTxt></fileDscr><dataDscr>
<var name="{name}" dcml="{dcml}"><location StartPos="1" EndPos="{width}" width="{width}"/></var>
</dataDscr></codeBook>
"""


@pytest.mark.parametrize("late", ["256", "   ", "65536"])
def test_fixed_width_late_widening(tmp_path, late):
    """The same through --ddi: 255 first, then filler, then a wider value or
    a blank (system-missing) field."""
    lines = ["  255"] + ["    7"] * 5000 + [late.rjust(5)]
    dat = write(tmp_path / "d.dat", "\n".join(lines) + "\n")
    xml = write(tmp_path / "d.xml", ddi_one_var("X", 5))
    ds = tmp_path / "d.mtab"
    run("import", dat, "--ddi", xml, ds, env=SMALL_CHUNKS)
    got = counts(ds, "X")
    want = {255: 1, 7: 5000}
    if late.strip():
        want[int(late)] = 1
    else:
        want[None] = 1
    assert got == want


@pytest.mark.parametrize("name", ["rep.mtab", "results.mtab", "x.r.mtab", "data.r2/out.mtab"])
def test_dataset_names_containing_dot_r(tmp_path, name):
    """Re-packing names its temporary files after the column file, not after
    the last '.r' of the whole path (defect 2): any dataset name works and
    nothing is left beside it."""
    # A range that grows chunk after chunk: several re-packs.
    values = list(range(0, 40000, 3))
    text = "x\n" + "".join(f"{v}\n" for v in values)
    csv = write(tmp_path / "in.csv", text)
    ds = tmp_path / name
    ds.parent.mkdir(parents=True, exist_ok=True)
    before = set(os.listdir(ds.parent))
    run("import", csv, ds, env=SMALL_CHUNKS)
    assert set(os.listdir(ds.parent)) - before == {ds.name}
    files = sorted(os.listdir(ds / "vars"))
    assert all(f.endswith(".col") or f.endswith(".dict.json") for f in files), files
    import json

    var = json.loads((ds / "manifest.json").read_text())["variables"][0]
    col = read_column_file(ds / var["file"], var, len(values))
    assert col.tolist() == values
