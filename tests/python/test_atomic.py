"""Imports are atomic: a SIGKILLed `import --force` leaves the old dataset
answering exactly as before; a SIGKILLed fresh import leaves nothing at the
target path."""

import os
import signal
import subprocess
import time

import duckdb
import pytest

from conftest import BIN, INCTOT_NA, approx, check_freq, run, run_json

BIG_ROWS = 2_000_000


@pytest.fixture(scope="module")
def big_csv(tmp_path_factory):
    p = tmp_path_factory.mktemp("big") / "big.csv"
    run("gen", "census", "--rows", BIG_ROWS, "--seed", 5, "--out", p, timeout=600)
    return p


def _newest_under(path):
    newest = 0
    for root, _, files in os.walk(path):
        for f in files:
            try:
                newest = max(newest, os.stat(os.path.join(root, f)).st_mtime_ns)
            except FileNotFoundError:
                pass
    return newest


def _start_import(src, target, *extra):
    return subprocess.Popen(
        [str(BIN), "import", str(src), str(target), "--missing", f"INCTOT={INCTOT_NA}", *extra],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _kill(proc):
    if proc.poll() is not None:
        proc.communicate()
        pytest.skip(f"import finished (exit {proc.returncode}) before it could be killed; "
                    "use a bigger BIG_ROWS")
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate()
    assert proc.returncode == -signal.SIGKILL


def test_killed_force_import_keeps_old_dataset(tmp_path, big_csv):
    old_csv = tmp_path / "old.csv"
    ds = tmp_path / "data.mtab"
    run("gen", "census", "--rows", 5000, "--seed", 9, "--out", old_csv)
    run("import", old_csv, ds, "--missing", f"INCTOT={INCTOT_NA}")
    con = duckdb.connect()
    exp = con.execute(
        "SELECT EDUC, count(*), sum(PERWT)::DOUBLE FROM read_csv(?, header=true, "
        "types={'PERWT': 'DECIMAL(18,2)'}) WHERE EDUC IS NOT NULL AND PERWT IS NOT NULL "
        "GROUP BY 1 ORDER BY 1", [str(old_csv)]).fetchall()
    before = run_json("freq", ds, "EDUC", "--weight", "PERWT")
    check_freq(before, exp, weighted=True)
    info_before = run_json("info", ds)

    manifest = ds / "manifest.json"
    m0 = manifest.stat().st_mtime_ns
    parent_before = set(os.listdir(tmp_path))
    proc = _start_import(big_csv, ds, "--force")
    t0 = time.monotonic()
    # wait until the new import is visibly writing (a file newer than the
    # manifest under the dataset, or a new sibling), or 0.5 s at most
    while time.monotonic() - t0 < 0.5 and proc.poll() is None:
        if _newest_under(ds) > m0 or set(os.listdir(tmp_path)) - parent_before:
            time.sleep(0.05)
            break
        time.sleep(0.005)
    _kill(proc)

    after = run_json("freq", ds, "EDUC", "--weight", "PERWT")
    assert after == before
    check_freq(after, exp, weighted=True)
    info_after = run_json("info", ds)
    assert info_after["rows"] == info_before["rows"] == 5000
    assert [v["name"] for v in info_after["variables"]] == [v["name"] for v in info_before["variables"]]
    m = run_json("means", ds, "AGE", "--by", "SEX")
    (avg_age, n) = con.execute("SELECT avg(AGE), count(*) FROM read_csv(?, header=true) "
                               "WHERE AGE IS NOT NULL AND SEX IS NOT NULL", [str(old_csv)]).fetchone()
    assert m["total"]["n"] == n and m["total"]["mean"] == approx(avg_age)

    # a later --force import works (no stale lock/temp blocking it)
    new_csv = tmp_path / "new.csv"
    run("gen", "census", "--rows", 1234, "--seed", 10, "--out", new_csv)
    run("import", new_csv, ds, "--force")
    assert run_json("info", ds)["rows"] == 1234


def test_killed_fresh_import_leaves_nothing(tmp_path, big_csv):
    target = tmp_path / "fresh.mtab"
    before = set(os.listdir(tmp_path))
    proc = _start_import(big_csv, target)
    t0 = time.monotonic()
    while time.monotonic() - t0 < 0.5 and proc.poll() is None:
        if set(os.listdir(tmp_path)) - before:
            time.sleep(0.1)
            break
        time.sleep(0.005)
    _kill(proc)
    assert not target.exists(), f"killed import left {sorted(os.listdir(target))} at {target}"
    # and the name is usable afterwards without --force
    small = tmp_path / "small.csv"
    small.write_text("A\n1\n2\n2\n")
    run("import", small, target)
    assert [(r["value"], r["count"]) for r in run_json("freq", target, "A")["rows"]] == [(1, 1), (2, 2)]
