#!/usr/bin/env python3
"""microtab vs DuckDB vs Polars, side by side, in one run.

    python3 bench/run.py [--rows 14081466] [--dir bench/data] [--runs 5]
                         [--cold-runs 3] [--skip-cold] [--bin PATH]

Steps: generate the census CSV (skipped when bench/data/census.csv matches the
stamp), import it with each tool (time, peak RSS, bytes on disk), run the five
queries warm (in-process for DuckDB/Polars, `--repeat` for microtab) and cold
(fresh process after dropping the page cache), check that the three tools
agree, and print one table; the same goes to bench/results/latest.{md,json}.
See bench/README.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
NA = 9999999

# --------------------------------------------------------------------------
# the five queries, written once per tool
# --------------------------------------------------------------------------

def counts(keys, weight=None, need=None, where=None):
    """The SQL and Polars of a count (and sum of `weight`) by `keys` over the
    records where `need` (default: the keys) and the weight are not null and
    `where` (SQL, Polars) holds; ordered by the keys."""
    nn = (need or keys) + ([weight] if weight else [])
    conds = [f"{c} IS NOT NULL" for c in nn]
    pconds = [f'pl.col("{c}").is_not_null()' for c in nn]
    if where:
        conds, pconds = [where[0], *conds], [where[1], *pconds]
    by, pby = ", ".join(keys), ", ".join(f'"{k}"' for k in keys)
    w, pw = (f", sum({weight}) AS w", f', pl.col("{weight}").sum().alias("w")') if weight else ("", "")
    return {
        "sql": f"SELECT {by}, count(*) AS n{w} FROM census WHERE {' AND '.join(conds)} GROUP BY {by} ORDER BY {by}",
        "polars": f"src.filter({' & '.join(pconds)}).group_by({pby}).agg(pl.len().alias(\"n\"){pw}).sort({pby})",
    }


def query(title, cols, microtab, keys, **how):
    """One query: its title, the columns it reads, microtab's arguments
    (`{ds}`: the dataset), the number of key columns of its answer, and how
    DuckDB and Polars ask it (`sql`, `polars`)."""
    return {"cols": cols, "title": title, "microtab": microtab, **how, "keys": keys}


QUERIES = {
    "Q1": query("weighted freq EDUC", ["EDUC", "PERWT"],
                ["freq", "{ds}", "EDUC", "--weight", "PERWT"], 1,
                **counts(["EDUC"], "PERWT")),
    "Q2": query("SEX × EDUC weighted", ["SEX", "EDUC", "PERWT"],
                ["tab", "{ds}", "SEX", "EDUC", "--weight", "PERWT"], 2,
                **counts(["SEX", "EDUC"], "PERWT")),
    "Q3": query("RACE × EMPSTAT weighted, AGE 25–64", ["RACE", "EMPSTAT", "AGE", "PERWT"],
                ["tab", "{ds}", "RACE", "EMPSTAT", "--weight", "PERWT", "--filter", "AGE(25-64)"], 2,
                **counts(["RACE", "EMPSTAT"], "PERWT",
                         where=("AGE BETWEEN 25 AND 64", 'pl.col("AGE").is_between(25, 64)'))),
    "Q4": query(
        "weighted mean INCTOT by EDUC", ["INCTOT", "EDUC", "PERWT"],
        ["means", "{ds}", "INCTOT", "--by", "EDUC", "--weight", "PERWT"], 1,
        # mean and the pieces of the frequency-weight SD (microtab prints both)
        sql=f"SELECT EDUC, count(*) AS n, sum(PERWT) AS w, sum(PERWT * INCTOT) / sum(PERWT) AS mean, "
            f"sum(PERWT * INCTOT::DOUBLE * INCTOT) AS swxx FROM census "
            f"WHERE INCTOT IS NOT NULL AND INCTOT <> {NA} AND EDUC IS NOT NULL AND PERWT IS NOT NULL "
            f"GROUP BY EDUC ORDER BY EDUC",
        polars=f'src.filter(pl.col("INCTOT").is_not_null() & (pl.col("INCTOT") != {NA}) '
               f'& pl.col("EDUC").is_not_null() & pl.col("PERWT").is_not_null())'
               f'.group_by("EDUC").agg(pl.len().alias("n"), pl.col("PERWT").sum().alias("w"), '
               f'((pl.col("PERWT") * pl.col("INCTOT")).sum() / pl.col("PERWT").sum()).alias("mean"), '
               f'(pl.col("PERWT") * pl.col("INCTOT").cast(pl.Float64) ** 2).sum().alias("swxx"))'
               f'.sort("EDUC")',
    ),
    "Q5": query("STATEFIP × SEX × MARST counts", ["STATEFIP", "SEX", "MARST"],
                ["tab", "{ds}", "STATEFIP", "SEX", "--control", "MARST"], 3,
                **counts(["MARST", "STATEFIP", "SEX"], need=["STATEFIP", "SEX", "MARST"])),
}

# --------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------


def log(*a):
    print(*a, file=sys.stderr, flush=True)


TIME_BIN = "/usr/bin/time" if Path("/usr/bin/time").exists() else None


def run_measured(cmd, env=None):
    """Run ``cmd`` as a child; return (seconds, peak RSS bytes, exit code,
    stdout text, stderr text).

    Peak RSS is the child's ru_maxrss. On Linux ru_maxrss survives exec(), so
    a child forked straight from this (big) Python process would report at
    least our own RSS; the child is therefore started through GNU
    /usr/bin/time (a small process) and its ``%M`` is used. Without it, the
    wait4() rusage of the direct child is used (an upper bound)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, \
            tempfile.NamedTemporaryFile("r", suffix=".rss") as rssf:
        full = [TIME_BIN, "-f", "%M", "-o", rssf.name, *cmd] if TIME_BIN else list(cmd)
        t0 = time.perf_counter()
        p = subprocess.Popen(full, stdout=out, stderr=err, env=env)
        _, status, ru = os.wait4(p.pid, 0)
        secs = time.perf_counter() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
        rss = ru.ru_maxrss * 1024
        if TIME_BIN:
            txt = rssf.read().strip().splitlines()
            # GNU time prefixes "Command exited with non-zero status N" on failure
            if txt and txt[-1].strip().isdigit():
                rss = int(txt[-1]) * 1024
        out.seek(0)
        err.seek(0)
        o = out.read().decode("utf-8", "replace")
        e = err.read().decode("utf-8", "replace")
    return secs, rss, p.returncode, o, e


def check(res, what):
    secs, rss, rc, out, err = res
    if rc != 0:
        raise SystemExit(f"{what} failed (exit {rc}):\n{err[-3000:]}")
    return res


def du(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def timed(f, runs, cold=False, before=None):
    """Seconds of each of `runs` calls of `f` (after `before()`, and with
    the page cache dropped first when `cold`)."""
    out = []
    for _ in range(runs):
        if before:
            before()
        if cold:
            drop_caches()
        t = time.perf_counter()
        f()
        out.append(time.perf_counter() - t)
    return out


def drop_caches() -> tuple[bool, str]:
    try:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        # The stopwatch is not the tool: read /usr/bin/time back in, so that
        # loading the wrapper from disk (1.5-3 ms) is not timed as part of
        # the tool's cold start.
        if TIME_BIN:
            Path(TIME_BIN).read_bytes()
        return True, "dropped (sync; echo 3 > /proc/sys/vm/drop_caches; /usr/bin/time read back in)"
    except OSError as e:
        return False, f"NOT permitted ({e.strerror}); cold runs use a warm page cache"


UNITS = {"ns": 1e-9, "µs": 1e-6, "us": 1e-6, "ms": 1e-3, "s": 1.0}
TIMING = re.compile(r"median=([\d.]+)\s*(ns|µs|us|ms|s)\b.*?min=([\d.]+)\s*(ns|µs|us|ms|s)\b"
                    r".*?max=([\d.]+)\s*(ns|µs|us|ms|s)\b")


def parse_timing(stderr: str):
    m = TIMING.search(stderr)
    if not m:
        raise SystemExit(f"no timing line in microtab stderr:\n{stderr}")
    g = m.groups()
    return {"median": float(g[0]) * UNITS[g[1]], "min": float(g[2]) * UNITS[g[3]],
            "max": float(g[4]) * UNITS[g[5]]}


def summarize(samples):
    return {"median": statistics.median(samples), "min": min(samples), "max": max(samples),
            "samples": samples}


def fmt_t(s):
    if s is None:
        return "—"
    if s < 1e-3:
        return f"{s * 1e6:.0f} µs"
    if s < 1:
        v = s * 1e3
        return f"{v:.3g} ms" if v < 100 else f"{v:.0f} ms"
    return f"{s:.3g} s" if s < 100 else f"{s:.0f} s"


def fmt_b(b):
    if b is None:
        return "—"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if b < 1024 or unit == "GiB":
            return f"{b:.0f} {unit}" if unit == "B" else f"{b:.1f} {unit}"
        b /= 1024


def fmt_warm(w):
    if not w:
        return "—"
    return f"{fmt_t(w['median'])} ({fmt_t(w['min'])}–{fmt_t(w['max'])})"


def ratio(a, b):
    if not a or not b:
        return "—"
    r = a / b
    return f"{r:.2f}×" if r < 1 else f"{r:.1f}×" if r < 100 else f"{r:.0f}×"


def csv_rows(path: Path) -> int:
    n = 0
    with open(path, "rb") as f:
        while chunk := f.read(1 << 24):
            n += chunk.count(b"\n")
    return n - 1


# --------------------------------------------------------------------------
# normalized answers for the agreement check
# --------------------------------------------------------------------------


def norm_microtab(q, js):
    """→ {key tuple: (count, weighted or None[, mean])}"""
    out = {}
    if q in ("Q1",):
        for r in js["rows"]:
            if not r["missing"]:
                out[(r["value"],)] = (r["count"], r["weighted"])
    elif q in ("Q2", "Q3", "Q5"):
        for t in js["tables"]:
            c = t["control"]
            c = c.get("value") if isinstance(c, dict) else c
            for i, r in enumerate(t["rows"]):
                for j, col in enumerate(t["cols"]):
                    n = t["counts"][i][j]
                    if n:
                        w = t["weighted"][i][j] if t["weighted"] else None
                        key = (r["value"], col["value"]) if q != "Q5" else (c, r["value"], col["value"])
                        out[key] = (n, w)
    elif q == "Q4":
        for g in js["groups"]:
            out[tuple(b["value"] for b in g["by"])] = (g["n"], g["sum_weights"], g["mean"])
    return out


def norm_rows(q, rows):
    k = QUERIES[q]["keys"]
    out = {}
    for r in rows:
        key = tuple(r[:k])
        rest = list(r[k:])
        if q == "Q5":
            out[key] = (rest[0], None)
        elif q == "Q4":
            out[key] = (rest[0], rest[1], rest[2])
        else:
            out[key] = (rest[0], rest[1])
    return out


def agree(a, b, rel=1e-6):
    if a.keys() != b.keys():
        return f"different groups: only in first {sorted(set(a) - set(b))[:5]}, " \
               f"only in second {sorted(set(b) - set(a))[:5]}"
    for k in a:
        for x, y in zip(a[k], b[k]):
            if x is None or y is None:
                continue
            if isinstance(x, int) and isinstance(y, int):
                if x != y:
                    return f"group {k}: {a[k]} vs {b[k]}"
            elif abs(x - y) > rel * max(abs(x), abs(y), 1e-12):
                return f"group {k}: {a[k]} vs {b[k]}"
    return None


# --------------------------------------------------------------------------
# steps
# --------------------------------------------------------------------------


def step_gen(args, data: Path, binary: str):
    csv = data / "census.csv"
    stamp = data / "census.stamp.json"
    want = {"rows": args.rows, "seed": 1}
    if csv.exists() and stamp.exists():
        st = json.loads(stamp.read_text())
        if {k: st.get(k) for k in want} == want and st.get("bytes") == csv.stat().st_size:
            log(f"gen: {csv} present ({args.rows} rows), skipped")
            return csv, None
    log(f"gen: {args.rows} rows → {csv}")
    secs, *_ = check(run_measured([binary, "gen", "census", "--rows", str(args.rows), "--seed", "1",
                                   "--out", str(csv)]), "gen")
    n = csv_rows(csv)
    if n != args.rows:
        log(f"WARNING: generated CSV has {n} data lines, expected {args.rows}")
    stamp.write_text(json.dumps({**want, "bytes": csv.stat().st_size, "lines": n,
                                 "generated": dt.datetime.now().isoformat(timespec="seconds")}))
    return csv, secs


def warm_file(path: Path):
    """Reads a file once so every tool's import starts with it in the page
    cache (otherwise whichever tool goes first pays for the disk)."""
    with open(path, "rb") as f:
        while f.read(8 << 20):
            pass


def best_import(runs, prep, cmd, what):
    """Runs an import ``runs`` times (``prep()`` before each: remove the old
    output, warm the CSV) and keeps the fastest; import times on a VM vary
    by ±30% between otherwise identical runs, for every tool alike."""
    best = None
    times = []
    for _ in range(max(1, runs)):
        prep()
        res = check(run_measured(cmd), what)
        times.append(res[0])
        if best is None or res[0] < best[0]:
            best = res
    return best, times


def step_import(args, data: Path, csv: Path, binary: str):
    ds = data / "census.mtab"
    db = data / "census.duckdb"
    pq = data / "census.parquet"
    res = {}
    n = args.import_runs

    def note(times):
        return f"best of {len(times)}: " + ", ".join(f"{t:.2f}" for t in times) + " s"

    log("import: microtab")

    def prep_m():
        # Like the DuckDB file below, the old dataset is removed outside the timing.
        if ds.exists():
            shutil.rmtree(ds)
        warm_file(csv)
    (secs, rss, *_), times = best_import(
        n, prep_m, [binary, "import", str(csv), str(ds), "--missing", f"INCTOT={NA}"], "microtab import")
    res["microtab"] = {"tool": "microtab import", "seconds": secs, "rss": rss, "bytes": du(ds),
                       "note": "column files; " + note(times), "runs": times}

    log("import: DuckDB")

    def prep_d():
        for p in (db, Path(str(db) + ".wal")):
            if p.exists():
                p.unlink()
        warm_file(csv)
    code = textwrap.dedent(f"""
        import duckdb
        con = duckdb.connect({str(db)!r})
        con.execute("CREATE TABLE census AS SELECT * FROM read_csv(?, header=true)", [{str(csv)!r}])
        con.execute("CHECKPOINT")
        con.close()
    """)
    (secs, rss, *_), times = best_import(n, prep_d, [sys.executable, "-c", code], "duckdb import")
    res["duckdb"] = {"tool": "DuckDB CREATE TABLE … read_csv", "seconds": secs, "rss": rss,
                     "bytes": du(db), "note": "persistent .duckdb file; " + note(times), "runs": times}

    log("import: Polars read_csv")
    code = f"import polars as pl; df = pl.read_csv({str(csv)!r}); print(df.estimated_size())"
    (secs, rss, rc, out, err), times = best_import(
        n, lambda: warm_file(csv), [sys.executable, "-c", code], "polars read_csv")
    res["polars"] = {"tool": "Polars read_csv (in memory)", "seconds": secs, "rss": rss,
                     "bytes": int(out.strip() or 0),
                     "note": "bytes = DataFrame.estimated_size(); " + note(times), "runs": times}

    log("import: Polars read_csv → Parquet")

    def prep_p():
        if pq.exists():
            pq.unlink()
        warm_file(csv)
    code = f"import polars as pl; pl.read_csv({str(csv)!r}).write_parquet({str(pq)!r})"
    (secs, rss, *_), times = best_import(n, prep_p, [sys.executable, "-c", code], "polars parquet")
    res["polars_parquet"] = {"tool": "Polars read_csv → write_parquet", "seconds": secs, "rss": rss,
                             "bytes": du(pq), "note": "Parquet file used by the cold Polars runs; "
                             + note(times), "runs": times}
    res["csv"] = {"tool": "(source CSV)", "seconds": None, "rss": None, "bytes": du(csv), "note": ""}
    return ds, db, pq, res


def warm_microtab(binary, ds, runs):
    out = {}
    for q, spec in QUERIES.items():
        cmd = [binary] + [a.format(ds=ds) for a in spec["microtab"]] + ["--format", "json"]
        check(run_measured(cmd), f"microtab {q}")  # warm the page cache
        _, _, _, stdout, stderr = check(run_measured(cmd + ["--repeat", str(runs)]), f"microtab {q}")
        out[q] = {"timing": parse_timing(stderr), "answer": norm_microtab(q, json.loads(stdout))}
        log(f"  microtab {q}: {fmt_warm(out[q]['timing'])}")
    return out


def warm_duckdb(db, runs):
    import duckdb
    con = duckdb.connect(str(db), read_only=True)
    out = {}
    for q, spec in QUERIES.items():
        def query():
            return con.execute(spec["sql"]).fetchall()
        rows = query()  # untimed: warms the caches
        out[q] = {"timing": summarize(timed(query, runs)), "answer": norm_rows(q, rows)}
        log(f"  DuckDB {q}: {fmt_warm(out[q]['timing'])}")
    con.close()
    return out


def warm_polars(pq, runs):
    import polars as pl
    df = pl.read_parquet(str(pq))
    out = {}
    for q, spec in QUERIES.items():
        def query():
            return eval(spec["polars"], {"pl": pl, "src": df.lazy()}).collect()
        res = query()  # untimed: warms the caches
        out[q] = {"timing": summarize(timed(query, runs)), "answer": norm_rows(q, res.rows())}
        log(f"  Polars {q}: {fmt_warm(out[q]['timing'])}")
    del df
    return out


def cold_runs(args, binary, ds, db, pq):
    ok, how = drop_caches()
    log(f"cold: page cache {how}")
    py = sys.executable
    cmds = {}
    for q, spec in QUERIES.items():
        cmds[(q, "microtab")] = [binary] + [a.format(ds=ds) for a in spec["microtab"]] + ["--format", "json"]
        cmds[(q, "duckdb")] = [py, "-c", "import duckdb; con = duckdb.connect(%r, read_only=True); "
                               "con.execute(%r).fetchall()" % (str(db), spec["sql"])]
        cmds[(q, "polars")] = [py, "-c", "import polars as pl; src = pl.scan_parquet(%r); "
                               "(%s).collect()" % (str(pq), spec["polars"])]
    # interpreter + library import alone, for reference
    base = {"duckdb": [py, "-c", "import duckdb"], "polars": [py, "-c", "import polars"]}
    out = {}
    for key, cmd in list(cmds.items()) + [(("startup", k), v) for k, v in base.items()]:
        times, rsss = [], []
        for _ in range(args.cold_runs):
            if ok:
                drop_caches()
            secs, rss, *_ = check(run_measured(cmd), f"cold {key}")
            times.append(secs)
            rsss.append(rss)
        out[key] = {"timing": summarize(times), "rss": max(rsss)}
        log(f"  cold {key[0]} {key[1]}: {fmt_t(out[key]['timing']['median'])}, "
            f"peak RSS {fmt_b(out[key]['rss'])}")
    return ok, how, out


# --------------------------------------------------------------------------
# report
# --------------------------------------------------------------------------


def table(headers, rows):
    """Markdown table; also readable as plain text."""
    w = [max(len(str(h)), *(len(str(r[i])) for r in rows)) for i, h in enumerate(headers)]
    line = lambda cells: "| " + " | ".join(str(c).ljust(w[i]) for i, c in enumerate(cells)) + " |"
    return "\n".join([line(headers), "|" + "|".join("-" * (x + 2) for x in w) + "|"]
                     + [line(r) for r in rows])


def versions(binary):
    v = {"python": platform.python_version()}
    for mod in ("duckdb", "polars"):
        try:
            v[mod] = __import__(mod).__version__
        except Exception:  # pragma: no cover
            v[mod] = "?"
    try:
        p = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=10)
        line = (p.stdout.strip() or p.stderr.strip()).splitlines()[0] if p.returncode == 0 else "?"
        v["microtab"] = line.removeprefix("microtab").strip() or "?"
    except Exception:
        v["microtab"] = "?"
    return v


def cpu_model():
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "?"


def physical_floor(ds: Path, rows: int, cold_ok: bool):
    """Per query: bytes it must read, the time `dd bs=1M` needs for exactly
    those column files cold (one process per file, page cache dropped
    first), and the time of a single-pass counting loop over that many rows
    (numpy.bincount over a mapped u8 column, one core)."""
    import numpy as np
    man = json.loads((ds / "manifest.json").read_text())
    files = {v["name"]: (ds / v["file"], v["bytes"]) for v in man["variables"]}
    # Counting loop speed: bincount of `rows` u8 codes 0..11 (like EDUC; the
    # column file itself is bit-packed), warm, best of 5.
    educ = np.random.default_rng(1).integers(0, 12, rows, dtype=np.uint8)
    np.bincount(educ, minlength=256)
    best = min(_timed(lambda: np.bincount(educ, minlength=256)) for _ in range(5))
    count_rate = len(educ) / best
    out = {}
    for q, spec in QUERIES.items():
        nbytes = sum(files[c][1] for c in spec["cols"])
        dd = None
        if cold_ok:
            samples = []
            for _ in range(3):
                drop_caches()
                t = time.perf_counter()
                for c in spec["cols"]:
                    subprocess.run(["dd", f"if={files[c][0]}", "of=/dev/null", "bs=1M"],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
                samples.append(time.perf_counter() - t)
            dd = statistics.median(samples)
        out[q] = {"bytes": nbytes, "dd_seconds": dd,
                  "dd_mb_s": (nbytes / dd / 1e6) if dd else None,
                  "count_seconds_1core": rows / count_rate,
                  "count_seconds_all_cores": rows / count_rate / (os.cpu_count() or 1)}
    return out, count_rate


def _timed(f):
    t = time.perf_counter()
    f()
    return time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=14_081_466)
    ap.add_argument("--dir", type=Path, default=HERE / "data")
    ap.add_argument("--runs", type=int, default=5, help="warm runs per query (default 5)")
    ap.add_argument("--cold-runs", type=int, default=3, help="cold runs per query and tool (default 3)")
    ap.add_argument("--skip-cold", action="store_true")
    ap.add_argument("--import-runs", type=int, default=2,
                    help="imports per tool, fastest kept (default 2)")
    ap.add_argument("--bin", default=os.environ.get("MICROTAB_BIN", str(REPO / "target/release/microtab")))
    ap.add_argument("--results", type=Path, default=HERE / "results")
    args = ap.parse_args()

    binary = args.bin
    if not Path(binary).exists():
        raise SystemExit(f"microtab binary not found at {binary} (cargo build --release, or --bin)")
    data = args.dir
    data.mkdir(parents=True, exist_ok=True)
    t_start = time.time()

    csv, gen_secs = step_gen(args, data, binary)
    ds, db, pq, imports = step_import(args, data, csv, binary)

    log(f"warm: {args.runs} runs per query")
    warm = {"microtab": warm_microtab(binary, ds, args.runs),
            "duckdb": warm_duckdb(db, args.runs),
            "polars": warm_polars(pq, args.runs)}

    warnings = []
    for q in QUERIES:
        m = warm["microtab"][q]["answer"]
        for tool in ("duckdb", "polars"):
            diff = agree(m, warm[tool][q]["answer"])
            if diff:
                warnings.append(f"{q}: microtab and {tool} disagree: {diff}")
        n_tot = sum(v[0] for v in m.values())
        w_tot = sum(v[1] for v in m.values() if v[1] is not None) if q != "Q5" else None
        warm["microtab"][q]["totals"] = {"count": n_tot, "weighted": w_tot}
    for w in warnings:
        log("WARNING: " + w)

    cold = None
    cache_note = "cold runs skipped (--skip-cold)"
    if not args.skip_cold:
        _, cache_note, cold = cold_runs(args, binary, ds, db, pq)

    floor, count_rate = physical_floor(ds, args.rows, cold is not None)
    frows = []
    for q, spec in QUERIES.items():
        f = floor[q]
        wm = warm["microtab"][q]["timing"]["median"]
        r = [q, ", ".join(spec["cols"]), fmt_b(f["bytes"]),
             fmt_t(f["dd_seconds"]) if f["dd_seconds"] else "—",
             fmt_t(f["count_seconds_all_cores"]),
             f"{wm / f['count_seconds_all_cores']:.2f}×"]
        if cold and f["dd_seconds"]:
            cm = cold[(q, "microtab")]["timing"]["median"]
            r += [fmt_t(cm), f"{cm / f['dd_seconds']:.2f}×"]
        frows.append(r)
    fheaders = ["query", "columns read", "bytes", "I/O floor: dd bs=1M cold", "CPU floor: counting loop",
                "warm / CPU floor"]
    if cold:
        fheaders += ["microtab cold", "cold / I/O floor"]
    ftable = table(fheaders, frows) + (
        f"\n\nCounting loop: numpy.bincount over one u8 code per row (like EDUC), "
        f"{count_rate / 1e6:.0f} M rows/s on one core, divided by {os.cpu_count()} cores. "
        f"I/O floor: the query's column files read with `dd bs=1M` after dropping the page cache "
        f"(median of 3).")

    # ---- tables
    rows = []
    for q, spec in QUERIES.items():
        wm, wd, wp = (warm[t][q]["timing"] for t in ("microtab", "duckdb", "polars"))
        r = [f"{q} {spec['title']}", fmt_warm(wm), fmt_warm(wd), fmt_warm(wp),
             ratio(wd["median"], wm["median"]), ratio(wp["median"], wm["median"])]
        if cold:
            cm, cd, cp = (cold[(q, t)] for t in ("microtab", "duckdb", "polars"))
            r += [f"{fmt_t(cm['timing']['median'])} ({fmt_b(cm['rss'])})",
                  fmt_t(cd["timing"]["median"]), fmt_t(cp["timing"]["median"]),
                  f"{ratio(cd['timing']['median'], cm['timing']['median'])} / "
                  f"{ratio(cp['timing']['median'], cm['timing']['median'])}"]
        rows.append(r)
    headers = ["query", "microtab warm median (min–max)", "DuckDB warm", "Polars warm",
               "DuckDB/microtab", "Polars/microtab"]
    if cold:
        headers += ["cold microtab (peak RSS)", "cold DuckDB", "cold Polars",
                    "cold ratio DuckDB/m · Polars/m"]
    qtable = table(headers, rows)

    itable = table(["import", "time", "peak RSS", "bytes on disk", "note"],
                   [[v["tool"], fmt_t(v["seconds"]), fmt_b(v["rss"]), fmt_b(v["bytes"]), v["note"]]
                    for v in imports.values()])
    extra = ""
    if cold:
        extra = table(["process start-up only (cold)", "time", "peak RSS"],
                      [[f"python -c 'import {k}'", fmt_t(cold[('startup', k)]['timing']['median']),
                        fmt_b(cold[('startup', k)]['rss'])] for k in ("duckdb", "polars")])
    atable = table(["query", "groups", "total count", "total weighted", "tools agree"],
                   [[q, len(warm["microtab"][q]["answer"]), warm["microtab"][q]["totals"]["count"],
                     "—" if warm["microtab"][q]["totals"]["weighted"] is None
                     else f"{warm['microtab'][q]['totals']['weighted']:.2f}",
                     "no — see warnings" if any(w.startswith(q + ":") for w in warnings) else "yes"]
                    for q in QUERIES])

    ver = versions(binary)
    head = (f"# microtab vs DuckDB vs Polars — {args.rows:,} rows\n\n"
            f"{dt.datetime.now().isoformat(timespec='seconds')} · {cpu_model()} · {os.cpu_count()} cores · "
            f"microtab {ver['microtab']} · DuckDB {ver['duckdb']} · Polars {ver['polars']} · "
            f"Python {ver['python']}\n\n"
            f"Warm: microtab `--repeat {args.runs}` (its own timing line); DuckDB in-process on the "
            f"persistent `census.duckdb`, Polars in-process on a DataFrame read from `census.parquet` "
            f"(written once from the CSV), each query run {args.runs}+1 times, first discarded. "
            f"Cold: one fresh process per run ({args.cold_runs} runs, median), page cache {cache_note}; "
            f"Imports start with the CSV in the page cache (read once before each tool). "
            f"DuckDB/Polars cold times include starting Python and importing the library "
            f"(see start-up table); Polars cold uses `scan_parquet`.\n")
    md = "\n\n".join(x for x in [
        head, "## Queries\n\n" + qtable, "## Physical floor\n\n" + ftable, "## Import\n\n" + itable,
        extra and "## Start-up baseline\n\n" + extra,
        "## Answers\n\n" + atable + ("\n\n" + "\n".join("**WARNING** " + w for w in warnings)
                                     if warnings else ""),
    ] if x) + "\n"
    print(md)

    args.results.mkdir(parents=True, exist_ok=True)
    (args.results / "latest.md").write_text(md)
    dump = {
        "rows": args.rows, "runs": args.runs, "cold_runs": args.cold_runs, "versions": ver,
        "cpu": cpu_model(), "cores": os.cpu_count(), "page_cache": cache_note,
        "gen_seconds": gen_secs, "imports": imports,
        "warm": {t: {q: v["timing"] for q, v in d.items()} for t, d in warm.items()},
        "totals": {q: warm["microtab"][q]["totals"] for q in QUERIES},
        "cold": None if not cold else {f"{k[0]}/{k[1]}": v for k, v in cold.items()},
        "warnings": warnings, "elapsed_seconds": time.time() - t_start,
        "floor": floor, "count_rate_rows_per_s": count_rate,
        "queries": {q: {k: (" ".join(v) if isinstance(v, list) else v) for k, v in s.items()}
                    for q, s in QUERIES.items()},
    }
    (args.results / "latest.json").write_text(json.dumps(dump, indent=2, default=str) + "\n")
    log(f"wrote {args.results / 'latest.md'} and latest.json ({time.time() - t_start:.0f} s)")
    return 1 if warnings else 0


if __name__ == "__main__":
    sys.exit(main())
