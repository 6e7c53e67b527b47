"""Queries outside bench/run.py's five, warm, microtab vs DuckDB side by side.

    python3 bench/extra_queries.py [--bin target/release/microtab]

Needs bench/data/census.mtab and census.duckdb (made by bench/run.py). A check
that the five benchmark queries are not the only fast ones: u16 codes, a
means with a filter, unweighted means of a u32 variable, two filters, and
wide tables, several filters. microtab: `--repeat 10`, its own median; DuckDB: in-process on
its persistent database, median of 5 after one untimed run. Each pair's
record counts are compared.
"""

import argparse
import json
import statistics
import subprocess
import time
from pathlib import Path

import duckdb

HERE = Path(__file__).resolve().parent
D = HERE / "data" / "census.mtab"

QUERIES = [
    ("tab OCC × SEX, weighted (u16 codes)", ["tab", "OCC", "SEX", "--weight", "PERWT"],
     "SELECT OCC, SEX, count(*), sum(PERWT) FROM census GROUP BY ALL"),
    ("means INCWAGE by RACE, AGE 18–64", ["means", "INCWAGE", "--by", "RACE", "--filter", "AGE(18-64)"],
     "SELECT RACE, avg(INCWAGE), stddev_samp(INCWAGE), count(*) FROM census "
     "WHERE AGE BETWEEN 18 AND 64 GROUP BY ALL"),
    ("freq BPL, weighted (u16 codes)", ["freq", "BPL", "--weight", "PERWT"],
     "SELECT BPL, count(*), sum(PERWT) FROM census GROUP BY ALL"),
    ("tab PUMA × STATEFIP (wide table)", ["tab", "PUMA", "STATEFIP"],
     "SELECT PUMA, STATEFIP, count(*) FROM census GROUP BY ALL"),
    ("means UHRSWORK by SEX, EDUC, weighted", ["means", "UHRSWORK", "--by", "SEX,EDUC", "--weight", "PERWT"],
     "SELECT SEX, EDUC, sum(PERWT * UHRSWORK) / sum(PERWT), "
     "sum(PERWT * UHRSWORK * UHRSWORK::DOUBLE), count(*) FROM census GROUP BY ALL"),
    ("means POVERTY by STATEFIP, weighted", ["means", "POVERTY", "--by", "STATEFIP", "--weight", "PERWT"],
     "SELECT STATEFIP, sum(PERWT * POVERTY) / sum(PERWT), "
     "sum(PERWT * POVERTY * POVERTY::DOUBLE), count(*) FROM census GROUP BY ALL"),
    ("tab HISPAN × CITIZEN, weighted, two filters",
     ["tab", "HISPAN", "CITIZEN", "--weight", "PERWT", "--filter", "AGE(18-*) SEX(2)"],
     "SELECT HISPAN, CITIZEN, count(*), sum(PERWT) FROM census WHERE AGE >= 18 AND SEX = 2 GROUP BY ALL"),
    ("tab HISPAN × CITIZEN, weighted, three filters",
     ["tab", "HISPAN", "CITIZEN", "--weight", "PERWT", "--filter", "AGE(18-64) SEX(2) EMPSTAT(1)"],
     "SELECT HISPAN, CITIZEN, count(*), sum(PERWT) FROM census "
     "WHERE AGE BETWEEN 18 AND 64 AND SEX = 2 AND EMPSTAT = 1 GROUP BY ALL"),
]


def microtab(binary, args):
    out = subprocess.run([binary, args[0], str(D), *args[1:], "--repeat", "10", "--format", "json"],
                         capture_output=True, text=True, check=True)
    med = next(l for l in (out.stdout + out.stderr).splitlines() if "median=" in l)
    v = med.split("median=")[1].split()[0]
    num = float(v.rstrip("mµs"))
    ms = num / 1000 if v.endswith("µs") else num if v.endswith("ms") else num * 1000
    res = json.loads(out.stdout[out.stdout.index("{"):])
    if "tables" in res:
        n = res["tables"][0]["total"]["count"]
    elif "total" in res and isinstance(res["total"], dict) and "n" in res["total"]:
        n = res["total"]["n"]
    else:
        n = res["total"]["count"]
    return ms, n


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=str(HERE.parent / "target" / "release" / "microtab"))
    a = ap.parse_args()
    con = duckdb.connect(str(HERE / "data" / "census.duckdb"), read_only=True)
    print("| query | microtab warm | DuckDB warm | DuckDB/microtab | records agree |")
    print("| --- | ---: | ---: | ---: | --- |")
    for name, args, sql in QUERIES:
        ms, n = microtab(a.bin, args)
        rows = con.execute(sql).fetchall()
        ts = []
        for _ in range(5):
            t = time.perf_counter()
            con.execute(sql).fetchall()
            ts.append((time.perf_counter() - t) * 1e3)
        dd = statistics.median(ts)
        # count(*) follows the group keys in tab/freq and ends a means row
        ncol = {"tab": 2, "freq": 1}.get(name.split()[0], -1)
        dn = sum(r[ncol] for r in rows)
        print(f"| {name} | {ms:.2f} ms | {dd:.2f} ms | {dd / ms:.1f}× | {'yes' if dn == n else f'no ({n} vs {dn})'} |")


if __name__ == "__main__":
    main()
