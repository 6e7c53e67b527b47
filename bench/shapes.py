#!/usr/bin/env python3
"""Query shapes beyond the five benchmark queries, microtab vs DuckDB.

A matrix of what a new user tries on the census extract: filters on every
kind of column (u8/u16/u32/i32 packed, implied decimals, ranges,
comparisons, value lists, missing codes; one to three filters), groupings
by u8, u16 (~1,000 codes: OCC, IND), wide (hashed) and several variables
with a control, counts, weighted counts and means. Both tools answer every
query; the answers are compared (counts exactly, sums to 1e-9) and timed
side by side in one run:

* warm: microtab in-process (`--repeat R`, its own timing line: the whole
  analysis — planning, scan, weight checks, result), DuckDB in-process on
  its persistent database (R+1 runs, first discarded), medians;
* cold (`--cold`): one fresh process per run after dropping the page cache
  (root), microtab's CLI against `python -c` running DuckDB, medians.

Run after `python3 bench/run.py` (it makes bench/data/census.mtab and
census.duckdb):

    python3 bench/shapes.py [--runs 10] [--cold] [--cold-runs 3] [--only F1,G3]
    python3 bench/shapes.py --random 20 [--seed S]   # shapes drawn from the grammar

`--random N` draws N shapes instead of the fixed ones: a frequency,
crosstab (with a control or not) or means by one or two variables,
weighted or not, with zero to three conditions (ranges between two of a
variable's quantiles, lists of its values, comparisons) on any variable
of any column kind; the seed is printed and kept in the results, and the
worst ratio is reported beside the table.

Writes bench/results/shapes.md (or --out) and prints it.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

import duckdb

REPO = Path(__file__).resolve().parent.parent
NA = 9999999

# name: (description, microtab args, SQL, kind)
# kind: freq (key -> n, w), tab (key pair -> n, w), tab3, means (key -> n, w, mean)
W = "--weight PERWT"
SHAPES = {
    # filters on each kind of column, under a weighted SEX x EDUC table
    "F1": ("filter u8 range", f"tab SEX EDUC {W} --filter AGE(25-64)", "AGE BETWEEN 25 AND 64", "tab"),
    "F2": ("filter u16 range", f"tab SEX EDUC {W} --filter OCC(100-500)", "OCC BETWEEN 100 AND 500", "tab"),
    "F3": ("filter u16 list", f"tab SEX EDUC {W} --filter IND(170,180,190,770)", "IND IN (170,180,190,770)", "tab"),
    "F4": ("filter i32 comparison, missing code", f"tab SEX EDUC {W} --filter INCTOT<{NA}", f"INCTOT < {NA}", "tab"),
    "F5": ("filter i32 range", f"tab SEX EDUC {W} --filter INCTOT(10000-50000)", "INCTOT BETWEEN 10000 AND 50000", "tab"),
    "F6": ("filter u32 comparison", f"tab SEX EDUC {W} --filter INCWAGE>50000", "INCWAGE > 50000", "tab"),
    "F7": ("filter u32 range (24-bit ids)", f"tab SEX EDUC {W} --filter SERIAL(1000000-5000000)", "SERIAL BETWEEN 1000000 AND 5000000", "tab"),
    "F8": ("filter decimal (weight) comparison", f"tab SEX EDUC {W} --filter PERWT>20", "PERWT > 20", "tab"),
    "F9": ("filter u16 not-equal", f"tab SEX EDUC {W} --filter BPL!=36", "BPL <> 36", "tab"),
    "F10": ("two filters u8", f"tab SEX EDUC {W} --filter AGE(25-64) MARST(1,2)", "AGE BETWEEN 25 AND 64 AND MARST IN (1,2)", "tab"),
    "F11": ("three filters u8/u16/i32", f"tab SEX EDUC {W} --filter AGE(18-*) OCC(1-500) INCTOT<{NA}",
            f"AGE >= 18 AND OCC BETWEEN 1 AND 500 AND INCTOT < {NA}", "tab"),
    "F12": ("filter on the weight's own missing-free range, unweighted", "tab SEX EDUC --filter UHRSWORK(35-*)", "UHRSWORK >= 35", "tab"),
    "F13": ("filter one household id (sorted column)", f"tab SEX EDUC {W} --filter SERIAL=7000000", "SERIAL = 7000000", "tab"),
    "F14": ("filter passing every row (a one-year file's YEAR)", f"tab SEX EDUC {W} --filter YEAR(2000)", "YEAR = 2000", "tab"),
    # groupings
    "G1": ("group u16 ~1000 codes, weighted", f"freq OCC {W}", None, "freq"),
    "G2": ("group u16 x u8, weighted", f"tab OCC SEX {W}", None, "tab"),
    "G3": ("group u16 x u8 + control", f"tab IND EDUC --control SEX", None, "tab3"),
    "G4": ("group u16 (PUMA, 3,600 codes) x u8", f"tab PUMA SEX {W}", None, "tab"),
    "G5": ("group wide i32 (hashed), counts", "freq INCTOT --max-cells 5000000", None, "freq"),
    "G6": ("group u8 x u8 x u8 control, filtered", f"tab RACE SEX --control EDUC {W} --filter AGE(25-64)", "AGE BETWEEN 25 AND 64", "tab3"),
    # means
    "M1": ("mean by u8, filter on the analysis variable", f"means INCTOT --by EDUC {W} --filter INCTOT<{NA}", f"INCTOT < {NA}", "means"),
    "M2": ("mean by u16", f"means INCTOT --by OCC {W}", None, "means"),
    "M3": ("mean u32 by u8 x u8, filtered", f"means INCWAGE --by STATEFIP,SEX {W} --filter AGE(25-64)", "AGE BETWEEN 25 AND 64", "means"),
    "M4": ("mean of a decimal (the weight) by u8, unweighted", "means PERWT --by RACE", None, "means"),
}


# The grammar of random shapes (`--random N`): the census's variables by
# the kind of column they are stored as.
CODES_U8 = ["SEX", "RACE", "HISPAN", "MARST", "EDUC", "EMPSTAT", "CITIZEN", "GQ", "STATEFIP", "AGE"]
CODES_U16 = ["OCC", "IND", "PUMA", "BPL"]
NUMERIC = ["AGE", "UHRSWORK", "POVERTY", "INCTOT", "INCWAGE", "SERIAL", "PERWT", "OCC", "PUMA"]
MEASURES = ["INCTOT", "INCWAGE", "UHRSWORK", "AGE", "POVERTY", "PERWT"]


def value_pool(con, v, seed):
    """Values of `v` to build conditions from: quantiles of its values
    (the missing code left out) and 40 of the distinct values of every
    701st record, drawn by `seed` (the same pools, so the same shapes, for
    the same seed and census)."""
    na = f" AND {v} <> {NA}" if v == "INCTOT" else ""
    qs = con.execute(f"SELECT quantile_disc({v}, [0.02, 0.1, 0.25, 0.5, 0.75, 0.9, 0.98]) "
                     f"FROM census WHERE true{na}").fetchone()[0]
    seen = [r[0] for r in con.execute(f"SELECT DISTINCT {v} FROM census WHERE rowid % 701 = 0 "
                                      f"AND {v} IS NOT NULL{na} ORDER BY {v}").fetchall()]
    distinct = random.Random(f"{seed}:{v}").sample(seen, min(40, len(seen)))
    return sorted(set(qs)), sorted(set(distinct))


def fmt_value(x):
    return str(int(x)) if float(x).is_integer() else f"{x:.2f}"


def random_condition(rng, v, pools):
    """A condition on `v` in microtab's filter syntax and in SQL."""
    qs, distinct = pools[v]
    form = rng.choice(["range", "range", "list", "cmp"] if v in CODES_U8 + CODES_U16 else ["range", "range", "cmp"])
    if form == "range":
        lo, hi = sorted(rng.sample(qs, 2)) if len(qs) > 1 else (qs[0], qs[0])
        mt, sql = f"{v}({fmt_value(lo)}-{fmt_value(hi)})", f"{v} BETWEEN {fmt_value(lo)} AND {fmt_value(hi)}"
    elif form == "list":
        vals = sorted(rng.sample(distinct, min(len(distinct), rng.randint(2, 4))))
        txt = ",".join(fmt_value(x) for x in vals)
        mt, sql = f"{v}({txt})", f"{v} IN ({txt})"
    else:
        op = rng.choice([">", "<", "!="])
        x = fmt_value(rng.choice(qs))
        mt, sql = f"{v}{op}{x}", f"{v} {'<>' if op == '!=' else op} {x}"
    if v == "INCTOT":
        # A filter keeps no record whose value is missing.
        sql = f"({sql} AND INCTOT <> {NA})"
    return mt, sql


def random_shapes(con, n, seed):
    """`n` shapes drawn from the grammar: a frequency, crosstab (with a
    control or not) or means by one or two variables, weighted or not,
    with one to three conditions of any form on any variable."""
    rng = random.Random(seed)
    pools = {v: value_pool(con, v, seed) for v in sorted(set(CODES_U8 + CODES_U16 + NUMERIC))}
    shapes = {}
    for i in range(n):
        kind = rng.choice(["freq", "tab", "tab", "tab3", "means", "means"])
        groups = CODES_U8 + CODES_U16
        weighted = rng.random() < 0.6
        w = f" {W}" if weighted else ""
        if kind == "freq":
            args = f"freq {rng.choice(groups)}{w}"
        elif kind == "tab":
            a, b = rng.sample(groups, 2)
            # Two u16 codes plan more cells than the default limit: what the
            # refusal's hint says to add.
            big = " --max-cells 20000000" if a in CODES_U16 and b in CODES_U16 else ""
            args = f"tab {a} {b}{w}{big}"
        elif kind == "tab3":
            a, b, c = rng.sample(CODES_U8, 3)
            args = f"tab {a} {b} --control {c}{w}"
        else:
            x = rng.choice(MEASURES)
            by = rng.sample([g for g in groups if g != x], rng.choice([1, 1, 2]))
            big = " --max-cells 20000000" if all(g in CODES_U16 for g in by) and len(by) > 1 else ""
            args = f"means {x} --by {','.join(by)}{'' if x == 'PERWT' else w}{big}"
        conds = [random_condition(rng, v, pools)
                 for v in rng.sample(sorted(pools), rng.choice([0, 1, 1, 2, 3]))]
        where = " AND ".join(c[1] for c in conds) or None
        if conds:
            args += " --filter " + " ".join(c[0] for c in conds)
        desc = f"random {kind}, {len(conds)} filter(s), {'weighted' if weighted else 'unweighted'}"
        shapes[f"R{i + 1}"] = (desc, args, where, kind)
    return shapes


def sql_for(kind, args, where):
    toks = args.split()
    conds = [where] if where else []
    w = "PERWT" if "--weight" in toks else None
    wsum = ", sum(PERWT) AS w" if w else ", NULL AS w"
    if kind == "freq":
        v = toks[1]
        conds.append(f"{v} IS NOT NULL")
        if v == "INCTOT":
            conds.append(f"INCTOT <> {NA}")
        keys = [v]
        sel = f"SELECT {v}, count(*) AS n{wsum}"
    elif kind in ("tab", "tab3"):
        r, c = toks[1], toks[2]
        keys = [r, c]
        if "--control" in toks:
            keys = [toks[toks.index("--control") + 1]] + keys
        sel = f"SELECT {', '.join(keys)}, count(*) AS n{wsum}"
    else:
        x = toks[1]
        by = toks[toks.index("--by") + 1].split(",")
        keys = by
        conds.append(f"{x} IS NOT NULL")
        if x == "INCTOT":
            conds.append(f"INCTOT <> {NA}")
        wx = "PERWT" if w else "1"
        sel = (f"SELECT {', '.join(by)}, count(*) AS n, sum({wx}) AS w, "
               f"sum({wx} * {x}) / sum({wx}) AS mean")
    for k in keys:
        if k == "INCTOT" and kind != "means":
            continue
        conds.append(f"{k} IS NOT NULL")
    if w:
        conds.append("PERWT IS NOT NULL")
    where_sql = " WHERE " + " AND ".join(conds) if conds else ""
    return f"{sel} FROM census{where_sql} GROUP BY {', '.join(keys)} ORDER BY {', '.join(keys)}"


def mt_answer(kind, res):
    out = {}
    if kind == "freq":
        for r in res["rows"]:
            out[(r["value"],)] = (r["count"], r["weighted"])
    elif kind in ("tab", "tab3"):
        for t in res["tables"]:
            ctl = (t["control"]["value"],) if t["control"] else ()
            for i, r in enumerate(t["rows"]):
                for j, c in enumerate(t["cols"]):
                    n = t["counts"][i][j]
                    if n:
                        w = t["weighted"][i][j] if t["weighted"] else None
                        out[ctl + (r["value"], c["value"])] = (n, w)
    else:
        for g in res["groups"]:
            out[tuple(b["value"] for b in g["by"])] = (g["n"], g["sum_weights"], g["mean"])
    return out


def db_answer(kind, rows, nkeys):
    out = {}
    for r in rows:
        key = tuple(int(k) if isinstance(k, float) and k.is_integer() else k for k in r[:nkeys])
        out[key] = tuple(r[nkeys:])
    return out


def same(kind, a, b):
    if a.keys() != b.keys():
        return f"keys differ ({len(a)} vs {len(b)})"
    for k in a:
        x, y = a[k], b[k]
        if x[0] != y[0]:
            return f"count of {k}: {x[0]} vs {y[0]}"
        for u, v in zip(x[1:], y[1:]):
            if u is None and v is None:
                continue
            if u is None or v is None or abs(u - v) > 1e-9 * max(abs(u), abs(v), 1):
                return f"sum of {k}: {u} vs {v}"
    return None


def mt_cmd(binary, ds, args):
    toks = args.split()
    # the filter is one argument (may hold spaces)
    if "--filter" in toks:
        i = toks.index("--filter")
        rest = toks[i + 1:]
        flt = []
        while rest and not rest[0].startswith("--"):
            flt.append(rest.pop(0))
        toks = toks[:i] + ["--filter", " ".join(flt)] + rest
    return [binary, toks[0], str(ds)] + toks[1:]


def drop_caches():
    subprocess.run(["sync"], check=True)
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default=REPO / "bench" / "data")
    ap.add_argument("--bin", default=os.environ.get("MICROTAB_BIN", REPO / "target" / "release" / "microtab"))
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--cold", action="store_true")
    ap.add_argument("--cold-runs", type=int, default=3)
    ap.add_argument("--only", default=None)
    ap.add_argument("--random", type=int, default=0,
                    help="instead of the fixed shapes, this many drawn from the grammar")
    ap.add_argument("--seed", type=int, default=None, help="the random shapes' seed (default: a new one)")
    ap.add_argument("--out", default=REPO / "bench" / "results" / "shapes.md")
    a = ap.parse_args()
    d = Path(a.dir)
    ds, db = d / "census.mtab", d / "census.duckdb"
    con = duckdb.connect(str(db), read_only=True)
    shapes = SHAPES
    seed = None
    if a.random:
        seed = a.seed if a.seed is not None else random.randrange(1 << 31)
        shapes = random_shapes(con, a.random, seed)
        print(f"random shapes: seed {seed}", flush=True)
    names = a.only.split(",") if a.only else list(shapes)
    results = []
    bad = False
    for name in names:
        desc, args, where, kind = shapes[name]
        cmd = mt_cmd(str(a.bin), ds, args)
        p = subprocess.run(cmd + ["--format", "json", "--repeat", str(a.runs)],
                           capture_output=True, text=True)
        if p.returncode != 0:
            print(f"{name}: microtab failed: {p.stderr}", file=sys.stderr)
            bad = True
            continue
        m = re.search(r"median=([\d.]+)ms min=([\d.]+)ms max=([\d.]+)ms", p.stderr)
        mt_med, mt_min, mt_max = (float(x) for x in m.groups())
        sql = sql_for(kind, args, where)
        nkeys = {"freq": 1, "tab": 2, "tab3": 3, "means": len(args.split()[args.split().index("--by") + 1].split(",")) if kind == "means" else 0}[kind]
        times = []
        rows = None
        for _ in range(a.runs + 1):
            t = time.perf_counter()
            rows = con.execute(sql).fetchall()
            times.append((time.perf_counter() - t) * 1e3)
        times = times[1:]
        db_med = statistics.median(times)
        diff = same(kind, mt_answer(kind, json.loads(p.stdout)), db_answer(kind, rows, nkeys))
        if diff:
            bad = True
            print(f"WARNING {name}: answers differ: {diff}", file=sys.stderr)
        row = {"name": name, "desc": desc, "args": args, "mt": (mt_med, mt_min, mt_max),
               "db": (db_med, min(times), max(times)), "same": diff is None}
        if a.cold:
            ct, cd = [], []
            script = f"import duckdb; c=duckdb.connect('{db}', read_only=True); c.execute({sql!r}).fetchall()"
            for _ in range(a.cold_runs):
                drop_caches()
                t = time.perf_counter()
                subprocess.run(cmd + ["--format", "csv"], capture_output=True, check=True)
                ct.append((time.perf_counter() - t) * 1e3)
                drop_caches()
                t = time.perf_counter()
                subprocess.run([sys.executable, "-c", script], check=True)
                cd.append((time.perf_counter() - t) * 1e3)
            row["cold"] = (statistics.median(ct), statistics.median(cd))
        results.append(row)
        r = row["db"][0] / row["mt"][0]
        print(f"{name:4} {desc:48} microtab {mt_med:8.2f} ms  DuckDB {db_med:8.2f} ms  {r:5.1f}x"
              + (f"  cold {row['cold'][0]:.0f} vs {row['cold'][1]:.0f} ms ({row['cold'][1]/row['cold'][0]:.1f}x)" if a.cold else "")
              + ("" if diff is None else "  DIFFERENT"), flush=True)
    lines = ["# Query shapes: microtab vs DuckDB", "",
             f"{time.strftime('%Y-%m-%dT%H:%M:%S')} · `python3 bench/shapes.py --runs {a.runs}"
             + (f" --random {a.random} --seed {seed}" if a.random else "")
             + (f" --cold --cold-runs {a.cold_runs}" if a.cold else "") + "` · "
             + f"{os.cpu_count()} cores · DuckDB {duckdb.__version__}", "",
             "| shape | what | microtab args | microtab warm median (min–max) | DuckDB warm median (min–max) | DuckDB/microtab |"
             + (" cold microtab | cold DuckDB | cold ratio |" if a.cold else "") + " same answer |",
             "|---|---|---|---|---|---|" + ("---|---|---|" if a.cold else "") + "---|"]
    for r in results:
        mt, db_ = r["mt"], r["db"]
        line = (f"| {r['name']} | {r['desc']} | `{r['args']}` | {mt[0]:.2f} ms ({mt[1]:.2f}–{mt[2]:.2f}) | "
                f"{db_[0]:.2f} ms ({db_[1]:.2f}–{db_[2]:.2f}) | {db_[0]/mt[0]:.1f}× |")
        if a.cold:
            line += f" {r['cold'][0]:.0f} ms | {r['cold'][1]:.0f} ms | {r['cold'][1]/r['cold'][0]:.1f}× |"
        line += " yes |" if r["same"] else " **no** |"
        lines.append(line)
    if results:
        worst = min(results, key=lambda r: r["db"][0] / r["mt"][0])
        line = (f"worst shape: {worst['name']} `{worst['args']}` at {worst['db'][0] / worst['mt'][0]:.2f}× "
                f"(microtab {worst['mt'][0]:.2f} ms, DuckDB {worst['db'][0]:.2f} ms)")
        lines += ["", line]
        print(line)
    Path(a.out).write_text("\n".join(lines) + "\n")
    print(f"wrote {a.out}")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
