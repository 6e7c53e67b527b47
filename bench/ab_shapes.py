#!/usr/bin/env python3
"""Two microtab binaries side by side on every query shape of
`bench/shapes.py` (and, given a replicate-weight dataset, the survey
queries of `bench/survey.py`): a refactoring must leave no shape slower.

Per round each binary runs each shape with `--repeat R` (its own median of
R warm runs); rounds alternate which binary goes first, so drift in the
machine's load falls on both. The table gives, per shape, the median over
rounds, the spread (min–max of the rounds' medians) and new/old, and each
pair's outputs are compared byte for byte (CSV).

    python3 bench/ab_shapes.py OLD_BINARY NEW_BINARY bench/data/census.mtab \\
        [--rep-dataset bench/data/census_rep.mtab] [--rounds 5] [--repeat 5] \\
        [--only F1,F4] [--no-design]

The datasets are made by `bench/shapes.py` / `bench/survey.py`.
"""

import argparse
import os
import re
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import shapes  # noqa: E402

# The survey queries (the dataset's replicate design answers them).
SURVEY = {
    "T1": ["tab", "{ds}", "SEX", "EDUC"],
    "T2": ["freq", "{ds}", "STATEFIP"],
    "M1": ["means", "{ds}", "INCTOT", "--by", "EDUC"],
}


def timed(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed: {p.stderr.strip()}")
    m = re.search(r"median=([\d.]+)(ms|s)", p.stderr)
    if not m:
        sys.exit(f"{' '.join(cmd)}: no timing in {p.stderr!r}")
    return float(m.group(1)) * (1000 if m.group(2) == "s" else 1), p.stdout


def compare(name, cmds, rounds, repeat):
    times = {b: [] for b in cmds}
    outs = {}
    order = list(cmds)
    for k in range(rounds):
        for b in order if k % 2 == 0 else order[::-1]:
            t, out = timed(cmds[b] + ["--format", "csv", "--repeat", str(repeat)])
            times[b].append(t)
            outs[b] = out
    old, new = (times[b] for b in order)
    same = outs[order[0]] == outs[order[1]]
    mo, mn = statistics.median(old), statistics.median(new)
    print(
        f"| {name} | {mo:.2f} ({min(old):.2f}–{max(old):.2f}) | {mn:.2f} ({min(new):.2f}–{max(new):.2f}) "
        f"| {mn / mo:.2f} | {'yes' if same else 'NO'} |",
        flush=True,
    )
    return same


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("dataset")
    ap.add_argument("--rep-dataset")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--only", help="comma-separated shape names (survey ones as T1, T2, M1)")
    ap.add_argument("--no-design", action="store_true",
                    help="ignore the dataset's survey design (shapes on a replicate-design dataset)")
    a = ap.parse_args()
    only = set(a.only.split(",")) if a.only else None
    print("| shape | old ms (spread) | new ms (spread) | new/old | same output |")
    print("| --- | --- | --- | --- | --- |")
    ok = True
    for name, (_desc, args, _where, _kind) in shapes.SHAPES.items():
        if only and name not in only:
            continue
        if a.no_design:
            args += " --no-design"
        cmds = {b: shapes.mt_cmd(b, a.dataset, args) for b in (a.old, a.new)}
        ok &= compare(name, cmds, a.rounds, a.repeat)
    if a.rep_dataset:
        for name, args in SURVEY.items():
            if only and name not in only:
                continue
            args = [x.replace("{ds}", a.rep_dataset) for x in args]
            ok &= compare(f"survey {name}", {b: [b] + args for b in (a.old, a.new)}, a.rounds, a.repeat)
    if not ok:
        sys.exit("outputs differ")


if __name__ == "__main__":
    main()
