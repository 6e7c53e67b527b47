#!/usr/bin/env python3
"""New variables at census scale: `microtab compute` / `microtab recode`
against DuckDB's `CREATE OR REPLACE TABLE … AS SELECT expr` on the same
14.1 M records, side by side in one run (alternating, medians with min–max),
warm and cold (page cache dropped before each cold run of either tool).

    python3 bench/derive.py [--runs 7] [--cold 3] [--shapes E1,R1]

Both write their result durably: microtab a new column in a new generation
of the dataset (syncfs before the manifest swap), DuckDB a table committed
to its database file. microtab's time is the whole process (start-up,
parse, read, compute, write, publish), DuckDB's the statement in an open
connection. The inputs' MB/s count the stored (packed) bytes of the columns
read. Every result is checked: microtab's count, mean, min and max of the
new variable (`microtab means`) against DuckDB's of its new column.

Uses bench/data/census.{csv,mtab,duckdb} (made by `python3 bench/run.py`;
made here if missing) on copies (derive.mtab, derive.duckdb) so that the
other benchmarks' data stays as generated. Results: docs/BENCHMARKS.md."""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "bench" / "data"
NA = 9999999
sys.path.insert(0, str(Path(__file__).resolve().parent))
from run import drop_caches, fmt_t, run_measured  # noqa: E402

INC = f"NULLIF(INCTOT, {NA})"
SHAPES = {
    "E1": ("INCTOT × PERWT (exact decimal product)", "compute", "INCTOT * PERWT",
           f"{INC} * PERWT", ["INCTOT", "PERWT"]),
    "E2": ("AGE + SEX", "compute", "AGE + SEX", "AGE + SEX", ["AGE", "SEX"]),
    "E3": ("if(AGE ≥ 65, INCTOT, 0)", "compute", "if(AGE >= 65, INCTOT, 0)",
           f"CASE WHEN AGE >= 65 THEN {INC} ELSE 0 END", ["AGE", "INCTOT"]),
    "E4": ("INCWAGE / UHRSWORK (float, /0 missing)", "compute", "INCWAGE / UHRSWORK",
           "CASE WHEN UHRSWORK = 0 THEN NULL ELSE INCWAGE / UHRSWORK END", ["INCWAGE", "UHRSWORK"]),
    "E5": ("round(ln(INCTOT), 2)", "compute", "round(ln(INCTOT), 2)",
           f"round(CASE WHEN {INC} > 0 THEN ln({INC}) END, 2)", ["INCTOT"]),
    "E6": ("AGE ≥ 18 and EMPSTAT(1) or SEX = 2", "compute", "AGE >= 18 and EMPSTAT(1) or SEX = 2",
           "((AGE >= 18 AND EMPSTAT = 1) OR SEX = 2)::INT", ["AGE", "EMPSTAT", "SEX"]),
    "R1": ("recode AGE into 3 bands (lookup table)", "recode", ["--from", "AGE", "0-17; 18-64; 65-*"],
           "CASE WHEN AGE <= 17 THEN 1 WHEN AGE <= 64 THEN 2 ELSE 3 END", ["AGE"]),
    "R2": ("recode AGE × SEX × EDUC, 5 rules", "recode",
           ["--from", "AGE,SEX,EDUC", "1 = AGE(18-34) SEX(1); 2 = AGE(18-34) SEX(2); "
            "3 = AGE(35-*) EDUC(10-11); 4 = AGE(35-*); 5 = *"],
           "CASE WHEN AGE BETWEEN 18 AND 34 AND SEX = 1 THEN 1 WHEN AGE BETWEEN 18 AND 34 AND SEX = 2 THEN 2 "
           "WHEN AGE >= 35 AND EDUC BETWEEN 10 AND 11 THEN 3 WHEN AGE >= 35 THEN 4 ELSE 5 END",
           ["AGE", "SEX", "EDUC"]),
}


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def prepare(binary):
    src_ds, src_db = DATA / "census.mtab", DATA / "census.duckdb"
    if not src_ds.exists() or not src_db.exists():
        log("bench/data/census.* missing: running bench/run.py --only-prepare")
        subprocess.run([sys.executable, str(REPO / "bench" / "run.py"), "--runs", "1"], check=True)
    ds, db = DATA / "derive.mtab", DATA / "derive.duckdb"
    if ds.exists():
        shutil.rmtree(ds)
    shutil.copytree(src_ds, ds)
    for p in (db, Path(str(db) + ".wal")):
        if p.exists():
            p.unlink()
    shutil.copy(src_db, db)
    return ds, db


def mt_cmd(binary, ds, shape):
    _, kind, spec, _, _ = SHAPES[shape]
    if kind == "compute":
        return [binary, "compute", ds, f"V_{shape} = {spec}", "--replace"]
    return [binary, "recode", ds, f"V_{shape}", *spec, "--replace"]


def duck_stmt(shape):
    return f"CREATE OR REPLACE TABLE v_{shape} AS SELECT {SHAPES[shape][3]} AS v FROM census"


def check(binary, ds, con, shape):
    p = subprocess.run([binary, "means", ds, f"V_{shape}", "--by", "YEAR", "--format", "json"], capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(p.stderr)
    m = json.loads(p.stdout)
    tot = m["total"]
    n, mean = tot["n"], tot["mean"]
    dn, dmean = con.execute(f"SELECT count(v), avg(v::DOUBLE) FROM v_{shape}").fetchone()
    ok = n == dn and abs(mean - dmean) <= 1e-9 * max(1.0, abs(dmean))
    if not ok:
        raise SystemExit(f"{shape}: microtab n={n} mean={mean}, DuckDB n={dn} mean={dmean}")
    return n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--cold", type=int, default=3)
    ap.add_argument("--shapes", default=",".join(SHAPES))
    ap.add_argument("--binary", default=str(REPO / "target" / "release" / "microtab"))
    a = ap.parse_args()
    import duckdb
    ds, db = prepare(a.binary)
    info = json.loads(subprocess.run([a.binary, "info", ds, "--format", "json"], capture_output=True,
                                     text=True, check=True).stdout)
    stored = {v["name"]: v["bytes"] for v in info["variables"]}
    rows = info["rows"]
    results = []
    for shape in a.shapes.split(","):
        title, _, _, _, inputs = SHAPES[shape]
        in_bytes = sum(stored[v] for v in inputs)
        mt, dk = [], []
        con = duckdb.connect(str(db))
        con.execute("SET threads = 2")
        for _ in range(a.runs):
            secs, _, rc, _, err = run_measured(mt_cmd(a.binary, ds, shape))
            if rc != 0:
                raise SystemExit(err)
            mt.append(secs)
            t = time.perf_counter()
            con.execute(duck_stmt(shape))
            dk.append(time.perf_counter() - t)
        n = check(a.binary, ds, con, shape)
        con.close()
        cmt, cdk = [], []
        for _ in range(a.cold):
            ok, how = drop_caches()
            secs, _, rc, _, err = run_measured(mt_cmd(a.binary, ds, shape))
            cmt.append(secs)
            drop_caches()
            con = duckdb.connect(str(db))
            con.execute("SET threads = 2")
            t = time.perf_counter()
            con.execute(duck_stmt(shape))
            cdk.append(time.perf_counter() - t)
            con.close()
        r = {
            "shape": shape, "title": title, "rows": rows, "valid": n, "input_bytes": in_bytes,
            "microtab": mt, "duckdb": dk, "microtab_cold": cmt, "duckdb_cold": cdk,
        }
        results.append(r)
        med = statistics.median
        log(f"{shape} {title}: microtab {fmt_t(med(mt))} ({fmt_t(min(mt))}–{fmt_t(max(mt))}), "
            f"DuckDB {fmt_t(med(dk))} ({fmt_t(min(dk))}–{fmt_t(max(dk))}), "
            f"{med(dk) / med(mt):.1f}×; {in_bytes / 1e6 / med(mt):.0f} MB/s of input; "
            f"cold {fmt_t(med(cmt)) if cmt else '—'} vs {fmt_t(med(cdk)) if cdk else '—'}")
    print("| shape | microtab warm | DuckDB CTAS warm | ratio | input MB/s | microtab cold | DuckDB cold | ratio |")
    print("|---|---|---|---|---|---|---|---|")
    for r in results:
        med = statistics.median
        m, d = med(r["microtab"]), med(r["duckdb"])
        cm = med(r["microtab_cold"]) if r["microtab_cold"] else None
        cd = med(r["duckdb_cold"]) if r["duckdb_cold"] else None
        print(f"| {r['shape']} {r['title']} | {fmt_t(m)} ({fmt_t(min(r['microtab']))}–{fmt_t(max(r['microtab']))}) "
              f"| {fmt_t(d)} ({fmt_t(min(r['duckdb']))}–{fmt_t(max(r['duckdb']))}) | {d / m:.1f}× "
              f"| {r['input_bytes'] / 1e6 / m:.0f} | {fmt_t(cm)} | {fmt_t(cd)} | "
              f"{(cd / cm) if cm and cd else float('nan'):.1f}× |")
    out = REPO / "bench" / "results" / "derive.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
