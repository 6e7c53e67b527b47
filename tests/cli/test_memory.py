"""Memory stays bounded whatever the number of categories (issue 10,
defect 8).

An 8-million-record census whose SERIAL has millions of distinct values:
`codebook` (text and HTML, weighted) counts it in passes of bounded size;
a table or frequency with millions of cells is refused before any memory
is taken, with the memory it would need and the option that allows it;
results with many tables are written as they are produced. Each command
runs inside a cgroup limited to 256 MiB (cgroup v1, when this machine has
one), and its answers are checked against numpy reading the column files.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from conftest import BIN, read_column_file, run

ROWS = 8_000_000
CGROUP_ROOT = Path("/sys/fs/cgroup/memory")
LIMIT = 256 << 20


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    d = tmp_path_factory.mktemp("memory")
    csv = d / "c.csv"
    run("gen", "census", "--rows", ROWS, "--seed", 9, "--out", csv, timeout=600)
    ds = d / "c.mtab"
    run("import", csv, ds, timeout=600)
    csv.unlink()
    man = json.loads((ds / "manifest.json").read_text())
    cols = {v["name"]: read_column_file(ds / v["file"], v, ROWS) for v in man["variables"]
            if v["name"] in ("SERIAL", "PERWT", "SEX", "PUMA")}
    return ds, cols, {v["name"]: v for v in man["variables"]}


class Cgroup:
    """A cgroup v1 memory child with a hard limit, or None if unavailable."""

    @staticmethod
    def make(limit):
        try:
            path = CGROUP_ROOT / f"microtab-test-{os.getpid()}-{time.monotonic_ns()}"
            path.mkdir()
            (path / "memory.limit_in_bytes").write_text(str(limit))
            try:
                (path / "memory.memsw.limit_in_bytes").write_text(str(limit))
            except OSError:
                pass
            return path
        except OSError:
            return None


def limited(*args, timeout=600):
    """Runs microtab inside a 256 MiB cgroup (plainly when there is none);
    returns (CompletedProcess, whether it ran limited)."""
    cg = Cgroup.make(LIMIT)
    cmd = [str(BIN), *map(str, args)]
    if cg:
        cmd = ["sh", "-c", f'echo $$ > {cg}/cgroup.procs && exec "$@"', "sh", *cmd]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        oom = False
        if cg:
            for line in (cg / "memory.oom_control").read_text().splitlines():
                if line.startswith("oom_kill ") and int(line.split()[1]) > 0:
                    oom = True
        assert not oom and p.returncode != -9, f"killed for memory: {' '.join(cmd)}"
        return p, cg is not None
    finally:
        if cg:
            for _ in range(50):
                try:
                    cg.rmdir()
                    break
                except OSError:
                    time.sleep(0.1)


def test_codebook_of_a_wide_variable(big):
    ds, cols, _ = big
    p, _ = limited("codebook", ds, "SERIAL", "--format", "json", "--top", "5")
    assert p.returncode == 0, p.stderr
    v = json.loads(p.stdout)["variables"][0]
    values, counts = np.unique(cols["SERIAL"], return_counts=True)
    assert v["distinct"] == len(values)
    order = np.lexsort((values, -counts))[:5]
    assert [(t["value"], t["count"]) for t in v["top"]] == [(int(values[i]), int(counts[i])) for i in order]


def test_html_codebook_weighted(big, tmp_path):
    ds, cols, vars_ = big
    out = tmp_path / "cb.html"
    p, _ = limited("codebook", ds, "SERIAL", "PERWT", "--html", out, "--weight", "PERWT", "--top", "3")
    assert p.returncode == 0, p.stderr
    html = out.read_text()
    values = np.unique(cols["SERIAL"])
    # "N other values" line: all distinct values but the 3 shown.
    assert f"{len(values) - 3:,} other values" in html


@pytest.mark.parametrize("args", [
    ["freq", "SERIAL"],
    ["tab", "SEX", "PUMA", "--control", "SERIAL"],
    ["means", "PERWT", "--by", "SERIAL"],
])
def test_huge_tables_are_refused_with_the_memory_they_need(big, args):
    ds, _, _ = big
    p, _ = limited(args[0], ds, *args[1:], "--format", "json")
    assert p.returncode == 1
    assert p.stdout == ""
    msg = p.stderr.strip()
    assert msg.startswith("error:") and "cells" in msg and "--max-cells" in msg


def test_many_tables_stream(big):
    """One table per PUMA (hundreds), every format, within the limit; the
    JSON parses and its counts equal numpy's."""
    ds, cols, vars_ = big
    p, _ = limited("tab", ds, "SEX", "SEX", "--control", "PUMA", "--format", "json")
    assert p.returncode == 0, p.stderr
    res = json.loads(p.stdout)
    pumas, counts = np.unique(cols["PUMA"], return_counts=True)
    assert len(res["tables"]) == len(pumas)
    assert {t["control"]["value"]: t["total"]["count"] for t in res["tables"]} == dict(
        zip(pumas.tolist(), counts.tolist()))
    for fmt in ("table", "csv"):
        p, _ = limited("tab", ds, "SEX", "SEX", "--control", "PUMA", "--format", fmt)
        assert p.returncode == 0, p.stderr


# --- Allocation failure is an error, not an abort (issue 27, item 8) ---

WIDE_ROWS = 200_000


@pytest.fixture(scope="module")
def wide(tmp_path_factory):
    """Two variables of 30,001 values each: their table has 9e8 cells."""
    d = tmp_path_factory.mktemp("wide")
    rng = np.random.default_rng(27)
    a, b = rng.integers(0, 30001, WIDE_ROWS), rng.integers(0, 30001, WIDE_ROWS)
    csv = d / "w.csv"
    with open(csv, "w") as f:
        f.write("A,B,C,D\n")
        f.writelines(f"{x},{y},{x % 1000},{y % 1000}\n" for x, y in zip(a, b))
    ds = d / "w.mtab"
    run("import", csv, ds)
    return ds, a, b


def rlimit_as(limit):
    import resource

    def pre():
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    return pre


@pytest.mark.parametrize("fmt", ["table", "json", "csv"])
def test_a_table_beyond_the_memory_limit_is_an_error_not_an_abort(wide, fmt):
    ds, a, b = wide
    p = subprocess.run([str(BIN), "tab", ds, "A", "B", "--max-cells", "2000000000", "--format", fmt],
                       capture_output=True, text=True, preexec_fn=rlimit_as(2 << 30))
    assert p.returncode == 1, (p.returncode, p.stderr[-500:])
    assert "could not be allocated" in p.stderr and "cells" in p.stderr, p.stderr
    assert "panicked" not in p.stderr and "backtrace" not in p.stderr
    # The same limit, a table that fits: the right counts (numpy).
    p = subprocess.run([str(BIN), "freq", ds, "A(r: 0-9999; 10000-19999; 20000-*)", "--format", "json"],
                       capture_output=True, text=True, preexec_fn=rlimit_as(2 << 30))
    assert p.returncode == 0, p.stderr
    got = [r["count"] for r in json.loads(p.stdout)["rows"] if r.get("count") is not None][:3]
    assert got == [int((a < 10000).sum()), int(((a >= 10000) & (a < 20000)).sum()), int((a >= 20000).sum())]


def test_python_raises_instead_of_dying(wide, tmp_path):
    """In a Python interpreter under RLIMIT_AS, a crosstab whose
    accumulators cannot be allocated raises; the interpreter lives on and
    answers the next query (checked against numpy)."""
    ds, a, _ = wide
    script = tmp_path / "child.py"
    script.write_text(f"""
import json, resource, sys
import microtab as mt
ds = mt.open({str(ds)!r})
ds.freq("A(r: 0-9999; 10000-*)")  # the worker threads exist before the limit
vm = int([l for l in open('/proc/self/status') if l.startswith('VmSize:')][0].split()[1]) * 1024
soft, hard = resource.getrlimit(resource.RLIMIT_AS)
resource.setrlimit(resource.RLIMIT_AS, (vm + (16 << 20), hard))
try:
    # 1,000 × 1,000 cells: 32 MB of counts per worker.
    ds.tab("C", "D")
    print("NO ERROR")
except Exception as e:
    print("RAISED", type(e).__name__, str(e)[:300])
resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
f = ds.freq("A(r: 0-9999; 10000-*)")
print(json.dumps([r["count"] for r in f.rows if r.get("count") is not None]))
""")
    # One malloc arena: worker threads do not reserve arenas of their own
    # (64 MB of address space each) near the limit.
    env = dict(os.environ, MALLOC_ARENA_MAX="1")
    p = subprocess.run([sys.executable, script], capture_output=True, text=True, env=env)
    assert p.returncode == 0, (p.returncode, p.stderr[-1000:])
    out = p.stdout.splitlines()
    assert out[0].startswith("RAISED") and "could not be allocated" in out[0], p.stdout
    assert json.loads(out[1])[:2] == [int((a < 10000).sum()), int((a >= 10000).sum())]
