"""Writers racing readers and each other on datasets of 2,000,000 records.

* `export DS OUT.dta|OUT.sav` while `import --force` replaces DS: the file
  written holds one generation whole — every column equal to what
  pandas reads from one of the two known sources, read back by
  pyreadstat — or the export fails with a clear error and writes nothing.
* `import SRC OUT --vars … --filter …` while another `import --force`
  writes the same OUT (an existing one, or a new one both create):
  afterwards OUT is wholly one writer's result (the selection of one
  source, as pandas makes it, or the other source whole), every failure
  is a clear error, and no staging dataset stays.

Exports map their columns within milliseconds of reading the manifest,
so in practice they give the old generation or the new one; a commit
inside that window gives the store's "was changed by another process"
error, which the test accepts.

The two sources differ in every column (row count, value ranges, text
dictionaries with the same number of entries), so a mix shows.
"""

from __future__ import annotations

import shutil
import subprocess
import threading
import time

import numpy as np
import pandas as pd
import pyreadstat
import pytest

from conftest import BIN, BIG_ROWS, run, run_json

CLEAR = ("was changed by another process", "is being changed by", "was created by another process")


def write_source(path, which: int) -> pd.DataFrame:
    n = BIG_ROWS if which == 1 else BIG_ROWS - 123_457
    i = np.arange(n)
    words = ["alpha", "bravo", "charlie", "delta", "echo"] if which == 1 else \
        ["xray", "yankee", "zulu", "whiskey", "victor"]
    df = pd.DataFrame({
        "SRC": np.full(n, which),
        "ID": i + (0 if which == 1 else 10_000_000),
        "X": (i * 7) % 1000 if which == 1 else 5000 + (i * 13) % 700,
        "T": np.array(words)[(i * (1 if which == 1 else 3)) % 5],
    })
    df.to_csv(path, index=False)
    return df


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    d = tmp_path_factory.mktemp("race")
    frames = {w: write_source(d / f"s{w}.csv", w) for w in (1, 2)}
    return d, frames


def start(*args):
    return subprocess.Popen([str(BIN), *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def finish(p, timeout=600):
    out, err = p.communicate(timeout=timeout)
    return p.returncode, err


def same_as_one(got: pd.DataFrame, frames: dict) -> int:
    """Which source `got` equals wholly (asserting that one does)."""
    which = int(got["SRC"].iloc[0])
    want = frames[which]
    assert len(got) == len(want), (which, len(got), len(want))
    assert (got["SRC"].to_numpy() == which).all()
    for c in ("ID", "X"):
        assert np.array_equal(got[c].to_numpy().astype(np.int64), want[c].to_numpy()), (which, c)
    assert (got["T"].to_numpy() == want["T"].to_numpy()).all(), which
    return which


@pytest.mark.parametrize("ext", ["dta", "sav"])
def test_export_reads_one_generation_while_import_force_replaces_it(tmp_path, sources, ext):
    d, frames = sources
    ds = tmp_path / "ds.mtab"
    run("import", d / "s1.csv", ds)
    read = pyreadstat.read_dta if ext == "dta" else pyreadstat.read_sav
    stop = threading.Event()
    imports, failed = [0], []

    def writer():
        # Replaces DS again and again (an import takes about as long as an
        # export: their commits and reads overlap in many ways).
        w = 2
        while not stop.is_set():
            rc, err = finish(start("import", "--force", d / f"s{w}.csv", ds))
            if rc != 0:
                failed.append(err)
                return
            imports[0] += 1
            w = 3 - w

    t = threading.Thread(target=writer)
    t.start()
    outcomes = []
    try:
        for k in range(14):
            out = tmp_path / f"o{k}.{ext}"
            rc, err = finish(start("export", ds, out))
            if rc != 0:
                assert any(c in err for c in CLEAR), err
                assert not out.exists()
                outcomes.append("error: " + err.strip().splitlines()[-1])
            else:
                got, _ = read(str(out))
                outcomes.append(same_as_one(got, frames))
                out.unlink()
            assert not [x for x in tmp_path.iterdir() if ".tmp-" in x.name]
    finally:
        stop.set()
        t.join()
    assert not failed, failed
    print(f"export .{ext}: {imports[0]} imports meanwhile; outcomes: {outcomes}")
    assert imports[0] >= 4
    # The dataset itself is the last import's, whole, and sound.
    run("verify", ds)


@pytest.mark.parametrize("fresh", [False, True], ids=["existing", "new"])
def test_import_vars_while_another_import_force_writes_the_same_output(tmp_path, sources, fresh):
    """`fresh`: OUT does not exist when the two start (the loser of the
    race to create it once said `OUT already exists; give --force to
    replace it` to a command given --force)."""
    d, frames = sources
    out = tmp_path / "o.mtab"
    if not fresh:
        run("import", d / "s2.csv", out)
    sel = frames[1][(frames[1].X >= 100) & (frames[1].X <= 499)][["SRC", "ID", "T"]]
    outcomes = []
    errors = []
    # The selecting import first, the other after `delay` seconds (a
    # negative delay: the other first).
    for k, delay in enumerate([0.0, 0.1, 0.2, 0.3, 0.4, 0.6, -0.1, -0.2, -0.3, -0.4, -0.6]):
        if fresh:
            shutil.rmtree(out, ignore_errors=True)
        sel_args = ("import", d / "s1.csv", out, "--vars", "SRC,ID,T", "--filter", "X(100-499)", "--force")
        whole_args = ("import", "--force", d / "s2.csv", out)
        if delay >= 0:
            a = start(*sel_args)
            time.sleep(delay)
            b = start(*whole_args)
        else:
            b = start(*whole_args)
            time.sleep(-delay)
            a = start(*sel_args)
        a_rc, a_err = finish(a)
        b_rc, b_err = finish(b)
        for rc, err in ((a_rc, a_err), (b_rc, b_err)):
            if rc != 0:
                assert any(c in err for c in CLEAR), err
                assert ".import-" not in err and "give --force" not in err, err
                errors.append(err.strip().splitlines()[-1])
        assert a_rc == 0 or b_rc == 0, (a_err, b_err)
        info = run_json("info", out)
        names = [v["name"] for v in info["variables"]]
        run("verify", out)
        csv = tmp_path / f"o{k}.csv"
        run("subset", out, csv)
        got = pd.read_csv(csv, keep_default_na=False)
        if names == ["SRC", "ID", "T"]:
            # The selection of source 1, as pandas makes it.
            assert len(got) == len(sel)
            assert (got["SRC"].astype(int) == 1).all()
            assert np.array_equal(got["ID"].astype(np.int64).to_numpy(), sel["ID"].to_numpy())
            assert (got["T"].to_numpy() == sel["T"].to_numpy()).all()
            outcomes.append("selection")
        else:
            assert names == ["SRC", "ID", "X", "T"], names
            got["X"] = got["X"].astype(np.int64)
            assert same_as_one(got, frames) == 2
            outcomes.append("whole")
        assert not [x for x in tmp_path.iterdir() if ".import" in x.name], list(tmp_path.iterdir())
    print(f"import --vars race outcomes: {outcomes}; errors: {errors}")
