#!/usr/bin/env python3
"""What answering several datasets as one costs (exact partial results,
merged): each query on one dataset against the same query on a pattern
naming two parts (the dataset twice, as hard-linked copies, so the rows double
and the answer can be checked: every count and sum doubles).

* integer sums: the census (bench/data/census.mtab, from bench/run.py);
* float sums (exact superaccumulator path): a generated dataset of 4 M
  rows with a float weight and a float analysis variable
  (bench/data/floats.mtab, made here on first use).

    python3 bench/partials.py [--repeat 9]

Medians of the binary's own `--repeat` timing (the whole analysis).
"""

import argparse
import json
import os
import shutil
import random
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BIN = REPO / "target" / "release" / "microtab"
DATA = REPO / "bench" / "data"


def floats_dataset():
    ds = DATA / "floats.mtab"
    if ds.exists():
        return ds
    csv = DATA / "floats.csv"
    r = random.Random(1)
    with open(csv, "w") as f:
        f.write("G,FW,FX\n")
        for _ in range(4_000_000):
            f.write(f"{r.randint(1, 12)},{r.random() * 300 + 1 / 3!r},{(r.random() - 0.2) * 1e5!r}\n")
    subprocess.run([BIN, "import", csv, ds], check=True, capture_output=True)
    csv.unlink()
    return ds


def parts_of(ds):
    """Two copies of `ds` made of hard links (a symbolic link to the same
    dataset twice is refused: its rows would be counted twice)."""
    d = DATA / f"{ds.stem}.parts"
    d.mkdir(exist_ok=True)
    for n in "ab":
        part = d / f"{n}.mtab"
        if part.is_symlink():
            part.unlink()
        if not part.exists():
            shutil.copytree(ds, part, copy_function=os.link)
    return f"{d}/*.mtab"


def timed(args, repeat):
    p = subprocess.run([str(BIN), *args, "--repeat", str(repeat), "--format", "json"],
                       capture_output=True, text=True)
    if p.returncode:
        sys.exit(p.stderr)
    return float(re.search(r"median=([\d.]+)ms", p.stderr).group(1)), json.loads(p.stdout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=9)
    a = ap.parse_args()
    census = DATA / "census.mtab"
    floats = floats_dataset()
    queries = []
    if census.exists():
        queries += [(census, q.split()) for q in [
            "tab {} SEX EDUC --weight PERWT",
            "means {} INCTOT --by EDUC --weight PERWT",
            "tab {} STATEFIP SEX --control MARST",
            "freq {} OCC --weight PERWT",
        ]]
    queries += [(floats, q.split()) for q in [
        "freq {} G --weight FW",
        "means {} FX --by G --weight FW",
        "means {} FX --by G",
    ]]
    print("| query | one dataset | two parts (2× rows) | ratio | counts double |")
    print("|---|---|---|---|---|")
    for ds, q in queries:
        one, r1 = timed([x.replace("{}", str(ds)) for x in q], a.repeat)
        two, r2 = timed([x.replace("{}", parts_of(ds)) for x in q], a.repeat)
        total = lambda r: r["total"]["count"] if "total" in r and "count" in r["total"] else r.get("total", {}).get("n")
        ok = total(r2) == 2 * total(r1) if total(r1) is not None else "-"
        shown = " ".join(x.replace("{}", ds.name) for x in q)
        print(f"| `{shown}` | {one:.1f} ms | {two:.1f} ms | {two / one:.2f} | {ok} |")


if __name__ == "__main__":
    main()
