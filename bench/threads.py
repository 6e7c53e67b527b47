#!/usr/bin/env python3
"""Thread scaling of Q1-Q5 (bench/run.py's queries), microtab against
DuckDB side by side: microtab with RAYON_NUM_THREADS=1..N (five rounds of
`--repeat 5`, median of the rounds' medians), DuckDB with `SET threads`
(median of 9 warm runs). Run after bench/run.py made the data:

    python3 bench/threads.py [--threads 1,2,4,8,16]

Prints a Markdown table (docs/BENCHMARKS.md, issue 33 step 2).
"""
import argparse, subprocess, statistics, re, duckdb, time, os, sys
from pathlib import Path
REPO = Path(__file__).resolve().parent.parent
ap = argparse.ArgumentParser()
ap.add_argument("--bin", default=os.environ.get("MICROTAB_BIN", str(REPO / "target/release/microtab")))
ap.add_argument("--dir", default=str(REPO / "bench/data"))
ap.add_argument("--threads", default=",".join(str(t) for t in (1, 2, 4, 8, 16) if t <= os.cpu_count()))
args = ap.parse_args()
B = args.bin
D = str(Path(args.dir) / "census.mtab")
THREADS = [int(t) for t in args.threads.split(",")]
Q={"Q1":["freq",D,"EDUC","--weight","PERWT"],"Q2":["tab",D,"SEX","EDUC","--weight","PERWT"],
   "Q3":["tab",D,"RACE","EMPSTAT","--weight","PERWT","--filter","AGE(25-64)"],
   "Q4":["means",D,"INCTOT","--by","EDUC","--weight","PERWT"],"Q5":["tab",D,"STATEFIP","SEX","--control","MARST"]}
S={"Q1":"SELECT EDUC,count(*),sum(PERWT) FROM census GROUP BY ALL","Q2":"SELECT SEX,EDUC,count(*),sum(PERWT) FROM census GROUP BY ALL",
   "Q3":"SELECT RACE,EMPSTAT,count(*),sum(PERWT) FROM census WHERE AGE BETWEEN 25 AND 64 GROUP BY ALL",
   "Q4":"SELECT EDUC,count(*),sum(PERWT),sum(PERWT*INCTOT)/sum(PERWT),sum(PERWT*INCTOT::DOUBLE*INCTOT) FROM census WHERE INCTOT<>9999999 GROUP BY ALL",
   "Q5":"SELECT MARST,STATEFIP,SEX,count(*) FROM census GROUP BY ALL"}
con=duckdb.connect(str(Path(args.dir) / "census.duckdb"),read_only=True)
def mt(q,t):
    vals=[]
    for _ in range(5):
        e=dict(os.environ,RAYON_NUM_THREADS=str(t))
        err=subprocess.run([B]+Q[q]+["--repeat","5"],env=e,capture_output=True,text=True).stderr
        vals.append(float(re.search(r"median=([0-9.]+)",err).group(1)))
    return statistics.median(vals)
def dk(q,t):
    con.execute(f"SET threads={t}"); con.execute(S[q]).fetchall(); ts=[]
    for _ in range(9):
        a=time.perf_counter(); con.execute(S[q]).fetchall(); ts.append((time.perf_counter()-a)*1000)
    return statistics.median(ts)
head = " | ".join(f"microtab {t}" for t in THREADS) + " | " + " | ".join(f"DuckDB {t}" for t in THREADS)
print(f"| query | {head} | microtab {THREADS[0]}→{THREADS[-1]} | DuckDB {THREADS[0]}→{THREADS[-1]} | ratio at {THREADS[-1]} |")
print("|" + " --- |" * (2 * len(THREADS) + 4))
for q in Q:
    m = [mt(q, t) for t in THREADS]
    d = [dk(q, t) for t in THREADS]
    cells = " | ".join(f"{x:.1f} ms" for x in m + d)
    print(f"| {q} | {cells} | {m[0] / m[-1]:.2f}× | {d[0] / d[-1]:.2f}× | {d[-1] / m[-1]:.1f}× |")
