"""The differential fuzzer (tests/fuzz/fuzz.py) for a bounded time: CSV,
fixed-width + DDI and filter inputs, generated and mutated, and random
compute expressions, recode rules and temporary recodes, each run
checked for crashes, hangs, malformed errors and — when it succeeds —
against Python's csv module, Python slicing of the fixed-width records,
a reference evaluator of the filter grammar, and DuckDB record by record
(compute, recode). Longer on demand:
``python3 tests/fuzz/fuzz.py --seconds 3600``; this test's budget is
``MICROTAB_FUZZ_SECONDS`` (default 45).
"""

import os
import subprocess
import sys

from conftest import BIN, REPO


def test_fuzz_for_a_bounded_time(tmp_path):
    seconds = os.environ.get("MICROTAB_FUZZ_SECONDS", "45")
    p = subprocess.run(
        [sys.executable, str(REPO / "tests" / "fuzz" / "fuzz.py"), "--seconds", seconds,
         "--bin", str(BIN), "--keep", str(tmp_path / "findings")],
        capture_output=True, text=True, timeout=float(seconds) + 600,
    )
    assert p.returncode == 0, p.stderr + p.stdout
    assert "no findings" in p.stdout
