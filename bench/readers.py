"""What the import benchmarks of file formats share (bench/xport.py,
bench/dta.py): each reader a fresh process timed with its peak memory,
the readers alternating, and a Markdown table of medians."""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path


def timed(cmd: list[str]) -> tuple[float, int]:
    """Wall seconds and peak RSS (KB) of `cmd`."""
    t = time.perf_counter()
    p = subprocess.run(["/usr/bin/time", "-f", "%M", *cmd], capture_output=True, text=True)
    wall = time.perf_counter() - t
    if p.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{p.stderr}")
    return wall, int(p.stderr.strip().splitlines()[-1])


def compare(tools: dict[str, list[str]], runs: int, files: dict[str, Path], base: str) -> None:
    """Runs every tool `runs` times, alternating, and prints a table: wall
    time median [range], MB/s of the file each reads (`files[name]`, else
    the `base` tool's), the ratio to `base`, peak RSS."""
    res: dict[str, list[tuple[float, int]]] = {k: [] for k in tools}
    for _ in range(runs):
        for k, cmd in tools.items():
            res[k].append(timed(cmd))
    mid = statistics.median(t for t, _ in res[base])
    print(f"| reader | wall s, median [range] | MB/s of its file | × {base} | peak RSS MB |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for k, v in res.items():
        ts = [t for t, _ in v]
        med = statistics.median(ts)
        mb = files.get(k, files[base]).stat().st_size / 1e6
        print(f"| {k} | {med:.2f} [{min(ts):.2f}–{max(ts):.2f}] | {mb / med:.0f} | "
              f"{med / mid:.1f} | {max(m for _, m in v) / 1024:.0f} |")
