"""Writers exclude each other; readers keep a consistent snapshot; a killed
writer leaves the dataset as it was (issue 10, defects 3 and 9).

Oracle: two CSV files A and B with different values, whose frequencies are
computed here by hand (collections.Counter); every answer microtab gives
while writers race, or after one is killed, must be A's or B's exactly.
"""

from __future__ import annotations

import collections
import fcntl
import json
import os
import random
import signal
import subprocess
import threading
import time
from contextlib import contextmanager

import pytest

from conftest import BIN, run, run_json, write

ROWS = 300_000


def make_csv(path, seed):
    rng = random.Random(seed)
    vals = [rng.randint(1, 5 + seed) for _ in range(ROWS)]
    write(path, "X,Y\n" + "".join(f"{v},{i % 7}\n" for i, v in enumerate(vals)))
    return dict(collections.Counter(vals))


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    d = tmp_path_factory.mktemp("writers")
    a, b = d / "a.csv", d / "b.csv"
    return {"a.csv": (a, make_csv(a, 1)), "b.csv": (b, make_csv(b, 2))}


def freq(ds):
    res = run_json("freq", ds, "X")
    return {r["value"]: r["count"] for r in res["rows"]}


def source_of(ds):
    return json.loads((ds / "manifest.json").read_text())["source"]


def fresh(tmp_path, sources, name="d.mtab"):
    ds = tmp_path / name
    run("import", sources["a.csv"][0], ds)
    return ds


@contextmanager
def held_lock(ds, who="pid 4242 (microtab import big.csv d.mtab)"):
    """Holds the dataset's writer lock as another microtab would."""
    fd = os.open(ds / ".lock", os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.ftruncate(fd, 0)
        os.write(fd, who.encode())
        yield who
    finally:
        os.close(fd)


def test_a_held_lock_stops_every_writer_with_a_clear_error(tmp_path, sources):
    ds = fresh(tmp_path, sources)
    before = (ds / "manifest.json").read_bytes()
    with held_lock(ds) as who:
        for cmd in (["label", ds, "X", "1=one"], ["missing", ds, "X", "2"],
                    ["import", sources["b.csv"][0], ds, "--force"]):
            p = run(*cmd, ok=False)
            lines = p.stderr.strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith("error:"), p.stderr
            assert "is being changed by " + who in lines[0], lines[0]
            assert str(ds) in lines[0]
        # Readers are not blocked.
        assert freq(ds) == sources["a.csv"][1]
    assert (ds / "manifest.json").read_bytes() == before
    run("label", ds, "X", "1=one")
    run("import", sources["b.csv"][0], ds, "--force")
    assert freq(ds) == sources["b.csv"][1]


def test_racing_writers_and_readers(tmp_path, sources):
    """`import --force` (alternating A and B), `label` and `missing` run at
    the same time, with queries alongside. Every writer either succeeds or
    says the dataset is busy or changed; every query answers A or B
    exactly, or says the dataset changed under it; the dataset ends valid."""
    ds = fresh(tmp_path, sources)
    stop = threading.Event()
    outcomes = collections.Counter()
    problems = []
    answers = {k: v[1] for k, v in sources.items()}

    def writer(cmds):
        i = 0
        while not stop.is_set():
            cmd = cmds[i % len(cmds)]
            i += 1
            p = run(*cmd, ok=None)
            if p.returncode == 0:
                outcomes["ok"] += 1
            elif "is being changed by" in p.stderr or "was changed by another process" in p.stderr:
                outcomes["busy"] += 1
            else:
                problems.append((cmd, p.returncode, p.stderr))

    def reader():
        while not stop.is_set():
            p = run("freq", ds, "X", "--format", "json", ok=None)
            if p.returncode == 0:
                got = {r["value"]: r["count"] for r in json.loads(p.stdout)["rows"]}
                if got not in answers.values():
                    problems.append(("freq", "wrong answer", got))
                outcomes["read"] += 1
            elif "was changed by another process" in p.stderr:
                outcomes["read-changed"] += 1
            else:
                problems.append(("freq", p.returncode, p.stderr))

    threads = [
        threading.Thread(target=writer, args=([["import", sources["b.csv"][0], ds, "--force"],
                                                ["import", sources["a.csv"][0], ds, "--force"]],)),
        threading.Thread(target=writer, args=([["import", sources["a.csv"][0], ds, "--force"]],)),
        threading.Thread(target=writer, args=([["label", ds, "X", "1=one", "2=two"],
                                                ["missing", ds, "Y", "3"],
                                                ["missing", ds, "Y", "--clear"]],)),
        threading.Thread(target=reader),
    ]
    for t in threads:
        t.start()
    time.sleep(12)
    stop.set()
    for t in threads:
        t.join()
    assert not problems, problems[:5]
    assert outcomes["ok"] >= 10 and outcomes["read"] >= 10, outcomes
    run("verify", ds)
    assert freq(ds) == answers[source_of(ds)]
    # Nothing left over by the writers.
    left = [f for f in os.listdir(ds) if f not in ("manifest.json", "vars", ".lock")]
    assert left == [], left
    assert not [f for f in os.listdir(tmp_path) if f.startswith(".d.mtab")]


def kill_after(cmd, delay):
    p = subprocess.Popen([str(BIN), *map(str, cmd)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(delay)
    p.send_signal(signal.SIGKILL)
    return p.wait()


@pytest.mark.parametrize("kind", ["import", "label", "missing"])
def test_kill_9_in_a_loop_leaves_a_valid_dataset(tmp_path, sources, kind):
    """SIGKILL a writing command at random moments, 25 times: after each
    kill the dataset verifies and answers as before the command or as after
    it; the next write removes whatever the killed one left."""
    ds = fresh(tmp_path, sources)
    rng = random.Random(kind)
    a_counts, b_counts = sources["a.csv"][1], sources["b.csv"][1]
    for i in range(25):
        if kind == "import":
            src = ["a.csv", "b.csv"][i % 2]
            cmd = ["import", sources[src][0], ds, "--force"]
            delay = rng.uniform(0, 0.15)
        elif kind == "label":
            cmd = ["label", ds, "X", f"1=one{i}", "--var-label", f"x {i}"]
            delay = rng.uniform(0, 0.006)
        else:
            cmd = ["missing", ds, "X", str(1 + i % 3)]
            delay = rng.uniform(0, 0.006)
        kill_after(cmd, delay)
        run("verify", ds)
        got = freq(ds)
        man = json.loads((ds / "manifest.json").read_text())
        x = man["variables"][0]
        if kind == "missing" and x["missing_codes"]:
            # With a missing code the table leaves that value out.
            code = int(x["missing_codes"][0])
            assert got == {k: v for k, v in a_counts.items() if k != code}
        else:
            assert got in (a_counts, b_counts)
        if kind == "label":
            assert x.get("label") in (None, *[f"x {j}" for j in range(i + 1)])
    # The next successful write cleans up after the killed ones.
    run("label", ds, "Y", "0=zero")
    left = [f for f in os.listdir(ds) if f not in ("manifest.json", "vars", ".lock")]
    assert left == [], left
    man = json.loads((ds / "manifest.json").read_text())
    used = {v["file"].split("/")[1] for v in man["variables"]}
    if kind == "import":
        run("import", sources["a.csv"][0], ds, "--force")
        man = json.loads((ds / "manifest.json").read_text())
        used = {v["file"].split("/")[1] for v in man["variables"]}
    assert set(os.listdir(ds / "vars")) == used
    assert not [f for f in os.listdir(tmp_path) if f.startswith(".d.mtab")]
