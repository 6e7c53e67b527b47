"""Fixed-width (IPUMS DDI) import throughput: microtab on .dat and .dat.gz,
microtab on the same data as CSV (.csv and .csv.gz), and ipumspy's
``read_microdata`` on the .dat.gz.

The extract is built from the real ``cps_00361`` extract in
``../shared/data/ipums``: its records resampled to ``--rows`` records, with
new household serials and 14-digit ids (so the text does not compress
better than real data), in the same 72-column layout and DDI codebook.

    cargo build --release
    python3 bench/fixed_width.py                 # 2,000,000 records
    python3 bench/fixed_width.py --rows 200000 --runs 3

Prints a Markdown table (best and median of ``--runs`` imports; MB/s are of
uncompressed text). Needs ``ipumspy`` and ``pandas``.
"""

from __future__ import annotations

import argparse
import gzip
import os
import statistics
import subprocess
import time
import warnings
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data" / "ipums"


def build(rows: int, d: Path) -> dict:
    src = DATA / "cps_00361"
    dat = d / "fw.dat"
    if not dat.exists() or dat.stat().st_size != rows * 73:
        lines = gzip.decompress((src.with_suffix(".dat.gz")).read_bytes()).decode("latin-1").splitlines()
        rng = np.random.default_rng(4)
        idx = rng.integers(0, len(lines), rows)
        ids = rng.integers(10**13, 2 * 10**13, rows)
        with open(dat, "w", encoding="latin-1") as f:
            for i in range(rows):
                line, c = lines[idx[i]], f"{ids[i]:014d}"
                f.write(line[:4] + f"{(i // 2 + 1) % 100000:05d}" + line[9:21] + c + line[35:56] + c + line[70:] + "\n")
        for p in (d / "fw.dat.gz", d / "fw.csv", d / "fw.csv.gz"):
            p.unlink(missing_ok=True)
    if not (d / "fw.dat.gz").exists():
        subprocess.run(["gzip", "-k", "-6", "-f", str(dat)], check=True)
    return {"dat": dat, "gz": d / "fw.dat.gz", "xml": src.with_suffix(".xml")}


def timed(cmd) -> float:
    t = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--ipumspy-runs", type=int, default=2)
    ap.add_argument("--dir", type=Path, default=REPO / "bench" / "data")
    ap.add_argument("--bin", default=os.environ.get("MICROTAB_BIN", REPO / "target" / "release" / "microtab"))
    a = ap.parse_args()
    a.dir.mkdir(parents=True, exist_ok=True)
    f = build(a.rows, a.dir)
    text_mb = f["dat"].stat().st_size / 1e6

    from ipumspy import readers

    warnings.simplefilter("ignore")
    ddi = readers.read_ipums_ddi(f["xml"])
    ip = []
    for _ in range(a.ipumspy_runs):
        t = time.perf_counter()
        df = readers.read_microdata(ddi, f["gz"])
        ip.append(time.perf_counter() - t)
    csv = a.dir / "fw.csv"
    if not csv.exists():
        df.to_csv(csv, index=False)
        subprocess.run(["gzip", "-k", "-6", "-f", str(csv)], check=True)
    del df

    out = a.dir / "fw.mtab"
    cases = [
        ("microtab, fixed-width .dat", [f["dat"], "--ddi", f["xml"]], text_mb),
        ("microtab, fixed-width .dat.gz", [f["gz"], "--ddi", f["xml"]], text_mb),
        ("microtab, same data as .csv", [csv], csv.stat().st_size / 1e6),
        ("microtab, same data as .csv.gz", [a.dir / "fw.csv.gz"], csv.stat().st_size / 1e6),
    ]
    print(f"{a.rows:,} records, {text_mb:.0f} MB fixed-width text "
          f"({f['gz'].stat().st_size / 1e6:.0f} MB gzipped), {os.cpu_count()} cores\n")
    print("| reader | best s | median s | MB/s of text (best) |")
    print("| --- | ---: | ---: | ---: |")
    for label, args, mb in cases:
        ts = [timed([str(a.bin), "import", *map(str, args), str(out), "--force"]) for _ in range(a.runs)]
        print(f"| {label} | {min(ts):.2f} | {statistics.median(ts):.2f} | {mb / min(ts):.0f} |")
    import ipumspy

    print(f"| ipumspy {ipumspy.__version__} `read_microdata`, .dat.gz | {min(ip):.2f} | "
          f"{statistics.median(ip):.2f} | {text_mb / min(ip):.0f} |")


if __name__ == "__main__":
    main()
