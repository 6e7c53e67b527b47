#!/usr/bin/env python3
"""Two (or more) microtab binaries side by side on the same dataset: Q1–Q5
and two filtered queries, warm, and the CLI's start-up.

Each query runs `--repeat 20` (the binary's own median), the variants
interleaved, ROUNDS rounds (default 5); the table shows the median of the
rounds per variant and the ratio last/first. Start-up: `microtab --version`
50 times per round, median wall time.

    python3 bench/ab.py old=/path/to/old/microtab=bench/data/census.mtab \\
                        new=target/release/microtab=bench/data/census.mtab

A variant whose name ends in `off` runs with MICROTAB_CHECKSUMS=off.
"""

import os
import re
import statistics
import subprocess
import sys
import time

Q = {
    "Q1": ["freq", "{ds}", "EDUC", "--weight", "PERWT"],
    "Q2": ["tab", "{ds}", "SEX", "EDUC", "--weight", "PERWT"],
    "Q3": ["tab", "{ds}", "RACE", "EMPSTAT", "--weight", "PERWT", "--filter", "AGE(25-64)"],
    "Q4": ["means", "{ds}", "INCTOT", "--by", "EDUC", "--weight", "PERWT"],
    "Q5": ["tab", "{ds}", "STATEFIP", "SEX", "--control", "MARST"],
    "F1": ["means", "{ds}", "INCTOT", "--by", "EDUC", "--weight", "PERWT", "--filter", "INCTOT<9999999"],
    "F2": ["tab", "{ds}", "SEX", "EDUC", "--weight", "PERWT", "--filter", "INCTOT<9999999"],
}


def startup(binary):
    times = []
    for _ in range(50):
        t = time.perf_counter()
        subprocess.run([binary, "--version"], capture_output=True, check=True)
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e3


def main():
    variants = [v.split("=", 2) for v in sys.argv[1:]]
    if len(variants) < 2:
        sys.exit(__doc__)
    rounds = int(os.environ.get("ROUNDS", "5"))
    res = {}
    for _ in range(rounds):
        for q, args in Q.items():
            for name, b, ds in variants:
                env = dict(os.environ)
                if name.endswith("off"):
                    env["MICROTAB_CHECKSUMS"] = "off"
                a = [b] + [x.replace("{ds}", ds) for x in args] + ["--repeat", "20", "--format", "csv"]
                p = subprocess.run(a, capture_output=True, text=True, env=env)
                m = re.search(r"median=([\d.]+)ms", p.stderr)
                if not m:
                    sys.exit(f"{name} {q}: {p.stderr}")
                res.setdefault((q, name), []).append(float(m.group(1)))
        for name, b, _ in variants:
            res.setdefault(("start", name), []).append(startup(b))
    names = [v[0] for v in variants]
    print("query " + " ".join(f"{n:>10}" for n in names) + "   ratio(last/first)")
    for q in list(Q) + ["start"]:
        meds = [statistics.median(res[(q, n)]) for n in names]
        print(f"{q:5} " + " ".join(f"{m:10.2f}" for m in meds) + f"   {meds[-1] / meds[0]:.3f}")


if __name__ == "__main__":
    main()
