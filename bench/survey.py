#!/usr/bin/env python3
"""Replicate-weight standard errors at census scale: microtab against
DuckDB computing the same sums (the full-sample and 80 replicate weighted
sums per cell) on the 14.1 M-row census with 80 SDR replicate weights,
side by side in one run, warm (both in-process medians) and cold.

    python3 bench/survey.py [--rows N] [--reps 80] [--runs 7] [--cold]

Generates bench/data/census_rep.csv (about 8 GB) and imports it into
bench/data/census_rep.mtab and bench/data/census_rep.duckdb on first use
(the import times are reported). Every microtab SE is recomputed here
from DuckDB's sums with the SDR formula and must agree to 1e-9.
Results: docs/BENCHMARKS.md."""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "bench" / "data"
NA = 9999999
sys.path.insert(0, str(Path(__file__).resolve().parent))
from run import drop_caches  # noqa: E402


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def sh(args, **kw):
    p = subprocess.run([str(a) for a in args], capture_output=True, text=True, **kw)
    if p.returncode != 0:
        raise SystemExit(f"failed: {' '.join(map(str, args))}\n{p.stderr}")
    return p


def prepare(binary, rows, reps):
    want = {"rows": rows, "reps": reps, "seed": 1}
    log_line = f"generating {rows} rows with {reps} replicate weights"
    csv, ds, db, info = generated(binary, "census_rep", want, log_line, ["--repweights", reps])
    sh([binary, "design", ds, "--weight", "PERWT", "--repweights", f"REPWTP1-REPWTP{reps}", "--type", "sdr"])
    return ds, db, info


def generated(binary, name, want, log_line, gen_args):
    """bench/data/`name`.{csv,mtab,duckdb}: `gen census` (seed 1, `want`'s
    rows, `gen_args`) imported by microtab and DuckDB, made again only when
    the stamp's `want` differs. Returns the three paths and the import
    times."""
    csv, ds, db = (DATA / f"{name}.{ext}" for ext in ("csv", "mtab", "duckdb"))
    stamp = DATA / f"{name}.stamp.json"
    info = {}
    if not stamp.exists() or json.loads(stamp.read_text()).get("want") != want:
        for p in (csv, db):
            if p.exists():
                p.unlink()
        if ds.exists():
            sh(["rm", "-rf", ds])
        DATA.mkdir(parents=True, exist_ok=True)
        log(log_line)
        sh([binary, "gen", "census", "--rows", want["rows"], "--seed", 1, *gen_args, "--out", csv])
        t = time.monotonic()
        sh([binary, "import", csv, ds, "--missing", f"INCTOT={NA}"])
        info["microtab_import_s"] = time.monotonic() - t
        import duckdb
        t = time.monotonic()
        con = duckdb.connect(str(db))
        con.execute("CREATE TABLE census AS SELECT * FROM read_csv(?, header=true, sample_size=-1)", [str(csv)])
        con.close()
        info["duckdb_import_s"] = time.monotonic() - t
        info["csv_bytes"] = csv.stat().st_size
        stamp.write_text(json.dumps({"want": want, "info": info}))
    else:
        info = json.loads(stamp.read_text()).get("info", {})
    return csv, ds, db, info


QUERIES = {
    "T1": ("SEX × EDUC with SDR SEs", ["tab", "{ds}", "SEX", "EDUC"], ["SEX", "EDUC"], None),
    "T2": ("STATEFIP (51) with SDR SEs", ["freq", "{ds}", "STATEFIP"], ["STATEFIP"], None),
    "M1": ("mean INCTOT by EDUC with SDR SEs", ["means", "{ds}", "INCTOT", "--by", "EDUC"], ["EDUC"], "INCTOT"),
}


def duck_sql(keys, x, reps):
    k = ", ".join(keys)
    if x is None:
        sums = ", ".join(["sum(PERWT)"] + [f"sum(REPWTP{r})" for r in range(1, reps + 1)])
        return f"SELECT {k}, count(*), {sums} FROM census GROUP BY ALL"
    sums = ", ".join(["sum(PERWT)", f"sum(PERWT * {x})"]
                     + [f"sum(REPWTP{r}), sum(REPWTP{r} * {x})" for r in range(1, reps + 1)])
    return f"SELECT {k}, count(*), {sums} FROM census WHERE {x} <> {NA} GROUP BY ALL"


def parse_ms(stderr):
    import re
    m = re.search(r"median=([\d.]+)(ms|s|µs)", stderr)
    v = float(m.group(1))
    return v * {"ms": 1, "s": 1000, "µs": 0.001}[m.group(2)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=14_081_466)
    ap.add_argument("--reps", type=int, default=80)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--cold", action="store_true")
    ap.add_argument("--bin", default=str(REPO / "target" / "release" / "microtab"))
    a = ap.parse_args()
    import duckdb
    ds, db, info = prepare(a.bin, a.rows, a.reps)
    con = duckdb.connect(str(db), read_only=True)
    out = {"info": info, "queries": {}}
    for name, (what, args, keys, x) in QUERIES.items():
        margs = [s.replace("{ds}", str(ds)) for s in args]
        res = json.loads(sh([a.bin, *margs, "--format", "json"]).stdout)
        warm, cold, rows = time_query(a, margs, con, db, duck_sql(keys, x, a.reps))
        # The SDR SE of each estimate from DuckDB's sums.
        ok = check(res, rows, keys, x, a.reps, name)
        out["queries"][name] = q = {"what": what, "args": " ".join(args), **warm, "same_se": ok, **cold}
        log(f"{name} {what}: microtab {q['microtab_ms']:.1f} ms, DuckDB {q['duckdb_ms']:.1f} ms "
            f"({q['duckdb_ms'] / q['microtab_ms']:.1f}x), same SEs: {ok}"
            + (f"; cold {q['cold_microtab_ms']:.0f} vs {q['cold_duckdb_ms']:.0f} ms" if a.cold else ""))
    print(json.dumps(out, indent=1))
    if not all(q["same_se"] for q in out["queries"].values()):
        sys.exit(1)


def time_query(a, margs, con, db, sql):
    """One query timed: warm, microtab's `--repeat` against DuckDB in
    process (`con`), interleaved, `a.runs` rounds; cold with `a.cold`, each
    three times after dropping the page cache (DuckDB from `db` in a fresh
    process). Returns (warm times, cold times, DuckDB's rows)."""
    mt, dk = [], []
    con.execute(sql).fetchall()
    for _ in range(a.runs):
        mt.append(parse_ms(sh([a.bin, *margs, "--format", "csv", "--repeat", 3]).stderr))
        t = time.perf_counter()
        rows = con.execute(sql).fetchall()
        dk.append((time.perf_counter() - t) * 1000)
    warm = {"microtab_ms": statistics.median(mt), "microtab_range": [min(mt), max(mt)],
            "duckdb_ms": statistics.median(dk), "duckdb_range": [min(dk), max(dk)]}
    if not a.cold:
        return warm, {}, rows
    mc, dc = [], []
    for _ in range(3):
        drop_caches()
        t = time.perf_counter()
        sh([a.bin, *margs, "--format", "csv"])
        mc.append((time.perf_counter() - t) * 1000)
        drop_caches()
        t = time.perf_counter()
        sh([sys.executable, "-c", f"import duckdb; duckdb.connect('{db}', read_only=True).execute('''{sql}''').fetchall()"])
        dc.append((time.perf_counter() - t) * 1000)
    return warm, {"cold_microtab_ms": statistics.median(mc), "cold_duckdb_ms": statistics.median(dc)}, rows


def check(res, rows, keys, x, reps, name):
    se = lambda est, rs: math.sqrt(4 / reps * sum((r - est) ** 2 for r in rs))  # noqa: E731
    ok = True
    if x is None:
        by = {tuple(r[:len(keys)]): r[len(keys):] for r in rows}
        got = []
        if res.get("rows"):
            got = [((r["value"],), r["weighted"], r["weighted_se"]["se"]) for r in res["rows"]]
        else:
            t = res["tables"][0]
            got = [((rv["value"], cv["value"]), t["weighted"][i][j], t["weighted_se"][i][j]["se"])
                   for i, rv in enumerate(t["rows"]) for j, cv in enumerate(t["cols"])]
        for key, w, s in got:
            n, full, *rs = by[key]
            want = se(float(full), [float(v) for v in rs])
            ok &= abs(w - float(full)) <= 1e-9 * abs(float(full)) and abs(s - want) <= 1e-9 * want
    else:
        by = {tuple(r[:len(keys)]): r[len(keys):] for r in rows}
        for g in res["groups"]:
            n, sw, swx, *rest = by[(g["by"][0]["value"],)]
            est = float(swx) / float(sw)
            rs = [float(rest[2 * i + 1]) / float(rest[2 * i]) for i in range(reps)]
            want = se(est, rs)
            ok &= abs(g["mean"] - est) <= 1e-9 * abs(est) and abs(g["mean_se"]["se"] - want) <= 1e-9 * want
    return reported(ok, name)


def reported(ok, name):
    """`ok`, logged when false."""
    if not ok:
        log(f"{name}: microtab's SEs differ from those of DuckDB's sums")
    return ok


if __name__ == "__main__":
    main()
