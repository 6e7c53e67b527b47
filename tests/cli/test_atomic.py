"""Imports are atomic: a SIGKILLed `import --force` leaves the old dataset
answering exactly as before; a SIGKILLed fresh import leaves nothing at the
target path."""

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import duckdb
import pytest

from conftest import BIG_ROWS, BIN, INCTOT_NA, approx, check_freq, run, run_json



@pytest.fixture(scope="module")
def big_csv(big_census):
    return big_census.csv, big_census.import_seconds


def _freq_oracle(con, csv_path):
    return con.execute(
        "SELECT EDUC, count(*), sum(PERWT)::DOUBLE FROM read_csv(?, header=true, "
        "types={'PERWT': 'DECIMAL(18,2)'}) WHERE EDUC IS NOT NULL AND PERWT IS NOT NULL "
        "GROUP BY 1 ORDER BY 1", [str(csv_path)]).fetchall()


# when to SIGKILL: as soon as the import is visibly writing, or at a fraction
# of the measured duration of a full import
KILL_POINTS = ["first-write", 0.25, 0.5, 0.75]


def _wait_kill_point(proc, point, started, is_writing, full_seconds):
    if point == "first-write":
        # a file newer than the manifest under the dataset / a new sibling,
        # or 0.5 s at most
        while time.monotonic() - started < 0.5 and proc.poll() is None:
            if is_writing():
                time.sleep(0.02)
                return
            time.sleep(0.002)
    else:
        left = started + point * full_seconds - time.monotonic()
        if left > 0:
            time.sleep(left)


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
    """SIGKILL ``proc``; False if it had already finished (then it must have
    succeeded)."""
    if proc.poll() is not None:
        _, err = proc.communicate()
        assert proc.returncode == 0, err
        return False
    os.kill(proc.pid, signal.SIGKILL)
    _, err = proc.communicate()
    if proc.returncode == 0:
        # It finished between the poll and the signal.
        return False
    assert proc.returncode == -signal.SIGKILL, err
    return True


def _kill_during(start, point, is_writing, full_seconds, reset):
    """Start an import and SIGKILL it at ``point``; when the import was too
    quick, ``reset()`` and retry with half the delay (4 tries)."""
    frac = point
    for _ in range(4):
        reset()
        proc = start()
        _wait_kill_point(proc, frac, time.monotonic(), is_writing, full_seconds)
        if _kill(proc):
            return
        if frac != "first-write":
            frac /= 2
    pytest.skip("import always finished before it could be killed; use a bigger BIG_ROWS")


@pytest.mark.parametrize("point", KILL_POINTS)
def test_killed_force_import_keeps_old_dataset(tmp_path, big_csv, point):
    big_csv, full_seconds = big_csv
    old_csv = tmp_path / "old.csv"
    ds = tmp_path / "data.mtab"
    run("gen", "census", "--rows", 5000, "--seed", 9, "--out", old_csv)
    run("import", old_csv, ds, "--missing", f"INCTOT={INCTOT_NA}")
    con = duckdb.connect()
    exp = _freq_oracle(con, old_csv)
    before = run_json("freq", ds, "EDUC", "--weight", "PERWT")
    check_freq(before, exp, weighted=True)
    info_before = run_json("info", ds)

    manifest = ds / "manifest.json"
    parent_before = set(os.listdir(tmp_path))
    m0 = [manifest.stat().st_mtime_ns]

    def reset():
        if run_json("info", ds)["rows"] != 5000:  # a previous try completed
            run("import", old_csv, ds, "--force", "--missing", f"INCTOT={INCTOT_NA}")
        m0[0] = manifest.stat().st_mtime_ns

    _kill_during(lambda: _start_import(big_csv, ds, "--force"), point,
                 lambda: _newest_under(ds) > m0[0] or set(os.listdir(tmp_path)) - parent_before,
                 full_seconds, reset)

    info_after = run_json("info", ds)
    after = run_json("freq", ds, "EDUC", "--weight", "PERWT")
    if info_after["rows"] == BIG_ROWS:
        # killed after the manifest swap (while cleaning up): the dataset must
        # then be the complete new one
        check_freq(after, _freq_oracle(con, big_csv), weighted=True)
        return
    assert after == before
    check_freq(after, exp, weighted=True)
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
    # docs/FORMAT.md: unreferenced files of the killed import are removed by the next writer
    man = json.loads((ds / "manifest.json").read_text())
    referenced = {Path(v["file"]).name for v in man["variables"]} | {
        Path(v["dictionary"]).name for v in man["variables"] if isinstance(v.get("dictionary"), str)}
    assert set(os.listdir(ds / "vars")) == referenced
    check_freq(run_json("freq", ds, "EDUC", "--weight", "PERWT"), _freq_oracle(con, new_csv),
               weighted=True)


@pytest.mark.parametrize("point", KILL_POINTS)
def test_killed_fresh_import_leaves_nothing(tmp_path, big_csv, point):
    big_csv, full_seconds = big_csv
    target = tmp_path / "fresh.mtab"
    before = set(os.listdir(tmp_path))

    def reset():
        if target.exists():  # a previous try completed
            shutil.rmtree(target)

    _kill_during(lambda: _start_import(big_csv, target), point,
                 lambda: bool(set(os.listdir(tmp_path)) - before), full_seconds, reset)
    small = tmp_path / "small.csv"
    small.write_text("A\n1\n2\n2\n")
    if target.exists():
        # only acceptable if killed after the final rename: then it is complete
        assert run_json("info", target)["rows"] == BIG_ROWS
        check_freq(run_json("freq", target, "EDUC", "--weight", "PERWT"),
                   _freq_oracle(duckdb.connect(), big_csv), weighted=True)
        run("import", small, target, "--force")
    else:
        # the name is usable afterwards without --force
        run("import", small, target)
    # docs/FORMAT.md: the next import removes stale staging directories
    assert sorted(os.listdir(tmp_path)) == sorted(before | {"fresh.mtab", "small.csv"})
    assert [(r["value"], r["count"]) for r in run_json("freq", target, "A")["rows"]] == [(1, 1), (2, 2)]
