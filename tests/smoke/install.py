"""A newcomer's install, checked: after `pip install microtab-….whl` into a
fresh virtual environment, the wheel's three executables are on the PATH
(`microtab`, `microtab serve` through `microtab-serve`, `microtab export`
through `microtab-arrow`) and agree with `import microtab`; counts are
checked against numpy on the generated CSV. Run by scripts/test.sh with the
venv's bin first on the PATH:

    python tests/smoke/install.py WORKDIR
"""

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np
import pandas as pd

import microtab as mt

work = Path(sys.argv[1])
work.mkdir(parents=True, exist_ok=True)
bindir = Path(sys.executable).parent

# The executables come from the wheel, not from a build tree.
for name in ("microtab", "microtab-serve", "microtab-arrow"):
    found = shutil.which(name)
    assert found and Path(found).parent == bindir, (name, found, bindir)
version = subprocess.run(["microtab", "--version"], capture_output=True, text=True, check=True).stdout
assert version.split() == ["microtab", mt.__version__], (version, mt.__version__)

# The CLI: generate, import, a frequency table.
csv = work / "gen.csv"
subprocess.run(["microtab", "gen", "census", "--rows", "5000", "--seed", "3", "--out", str(csv)], check=True)
subprocess.run(["microtab", "import", str(csv), str(work / "gen.mtab"), "--force"], check=True, capture_output=True)
out = subprocess.run(["microtab", "freq", str(work / "gen.mtab"), "SEX", "--format", "json"],
                     capture_output=True, text=True, check=True).stdout
cli = {r["value"]: r["count"] for r in json.loads(out)["rows"]}
df = pd.read_csv(csv)
want = {int(k): int(v) for k, v in zip(*np.unique(df["SEX"], return_counts=True))}
assert cli == want, (cli, want)

# Python agrees.
py = mt.open(work / "gen.mtab").freq("SEX").to_pandas()
assert dict(zip(py["value"].astype(int), py["count"].astype(int))) == want

# microtab export runs microtab-arrow; the Parquet file reads back in pandas.
subprocess.run(["microtab", "export", str(work / "gen.mtab"), str(work / "gen.parquet"), "--vars", "SEX,AGE"],
               check=True, capture_output=True)
back = pd.read_parquet(work / "gen.parquet")
assert len(back) == len(df) and (back["AGE"].to_numpy() == df["AGE"].to_numpy()).all()

# microtab serve runs microtab-serve; its API answers the same table.
with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
server = subprocess.Popen(["microtab", "serve", str(work), "--port", str(port)],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
try:
    url = f"http://127.0.0.1:{port}/api/v1/datasets/gen/freq?var=SEX"
    for _ in range(200):
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                api = json.load(r)
            break
        except OSError:
            if server.poll() is not None:
                raise SystemExit(f"microtab serve exited with {server.returncode}")
            time.sleep(0.05)
    else:
        raise SystemExit("microtab serve did not answer in 10 s")
    assert {r["value"]: r["count"] for r in api["rows"]} == want
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as r:
        assert b"<html" in r.read(2000).lower()
finally:
    server.terminate()
    server.wait(10)
print(f"install smoke test: microtab {mt.__version__} from {bindir}: CLI, serve, export and Python agree")
