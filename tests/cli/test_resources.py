"""Resources (issue 10, defect 9): an import never holds a file per column,
so a file with thousands of variables imports under a small open-files
limit; its columns are made durable with one file-system sync rather than
an fsync each. Oracle: the values written into the CSV.
"""

from __future__ import annotations

import random
import resource
import subprocess

from conftest import BIN, run, run_json, write


def test_thousands_of_columns_under_a_small_open_files_limit(tmp_path):
    n, rows = 3000, 300
    rng = random.Random(4)
    data = [[rng.randint(0, 9) for _ in range(n)] for _ in range(rows)]
    text = ",".join(f"V{i}" for i in range(n)) + "\n" + "".join(",".join(map(str, r)) + "\n" for r in data)
    csv = write(tmp_path / "wide.csv", text)
    ds = tmp_path / "wide.mtab"

    def limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))

    p = subprocess.run([str(BIN), "import", str(csv), str(ds)], capture_output=True, text=True,
                       preexec_fn=limit, timeout=300)
    assert p.returncode == 0, p.stderr
    assert run_json("info", ds)["rows"] == rows
    for col in (0, 1234, n - 1):
        res = run_json("freq", ds, f"V{col}")
        want = {}
        for r in data:
            want[r[col]] = want.get(r[col], 0) + 1
        assert {r["value"]: r["count"] for r in res["rows"]} == want
    run("verify", ds)
