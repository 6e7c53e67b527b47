"""The generated census several end-to-end tests share, in both test
folders (tests/cli: the binary end to end; tests/python: the package): a CSV
from `microtab gen census`, imported with INCTOT=9999999 missing, an
optional replicate design, and DuckDB over the same CSV as the oracle.

It lives here, not in a conftest.py: the two folders are collected in one
pytest run, and a second conftest module would shadow the first
(`from conftest import …`). tests/cli/conftest.py and tests/python/test_api.py
put this folder on sys.path and re-export what they use.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import duckdb

REPO = Path(__file__).resolve().parents[1]
BIN = Path(os.environ.get("MICROTAB_BIN", REPO / "target" / "release" / "microtab"))


def microtab(*args):
    """Run the binary; assert it succeeded."""
    p = subprocess.run([str(BIN), *map(str, args)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return p


def census_dataset(d, rows, seed, reps=0, ds="c.mtab"):
    """`gen census` (`reps` replicate weights REPWTP1…) into `d`/c.csv,
    imported into `d`/`ds` (its folder made) with INCTOT=9999999 missing.
    Returns (the CSV, the dataset)."""
    csv, ds = d / "c.csv", d / ds
    ds.parent.mkdir(parents=True, exist_ok=True)
    more = ["--repweights", reps] if reps else []
    microtab("gen", "census", "--rows", rows, "--seed", seed, *more, "--out", csv)
    microtab("import", csv, ds, "--missing", "INCTOT=9999999")
    return csv, ds


def replicate_design(ds, reps):
    """The census's replicate design on `ds`: PERWT, REPWTP1…REPWTP`reps`."""
    microtab("design", ds, "--weight", "PERWT", "--repweights", f"REPWTP1-REPWTP{reps}")


def duck_census(csv):
    """DuckDB with the CSV as table `c` (PERWT exact, as microtab keeps it)."""
    con = duckdb.connect()
    con.execute(f"CREATE TABLE c AS SELECT * FROM read_csv('{csv}', header=true, "
                f"types={{'PERWT': 'DECIMAL(18,2)'}})")
    return con


def serve(root, *args, stderr=subprocess.DEVNULL):
    """`microtab serve root --port 0 …` started; (its process, its base URL)."""
    p = subprocess.Popen([str(BIN), "serve", root, "--port", "0", *map(str, args)],
                         stdout=subprocess.PIPE, stderr=stderr, text=True)
    line = p.stdout.readline()
    assert line.startswith("listening on http://127.0.0.1:"), line
    return p, line.split()[2]
