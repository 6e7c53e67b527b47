#!/usr/bin/env python3
"""microtab at 1 M, 14 M and 150 M rows, and under a memory limit (issue 5, scale).

    python3 bench/scale.py [--sizes 1000000,14081466,150000000] [--dir bench/data/scale]
                           [--mem-limit 1G[,256M…]] [--runs 5] [--repeat 5] [--keep-csv]
                           [--reuse-import] [--wait-idle 300] [--no-limit]

For each size N: generate the census CSV (`microtab gen census --rows N --seed 1`,
skipped when a matching stamp and file exist), import it (time, peak RSS,
bytes on disk), then run the five queries of bench/run.py cold (fresh process
after dropping the page cache; median, min, max of --runs) and warm
(`--repeat`, microtab's own timing line). At the largest size the import and
the five queries are run again inside a cgroup v1 memory controller, once per
--mem-limit (smaller than the dataset), and their JSON answers are compared
with the unlimited ones. Writes bench/results/scale.md and scale.json; progress on
stderr. See the "Scale" section of bench/README.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
from run import QUERIES, fmt_t, drop_caches as run_drop_caches  # noqa: E402  (the queries and formatting, one definition for both scripts)

NA = 9999999
SEED = 1
# columns each query reads (for bytes read and the dd reference)
COLUMNS = {
    "Q1": ["EDUC", "PERWT"],
    "Q2": ["SEX", "EDUC", "PERWT"],
    "Q3": ["RACE", "EMPSTAT", "PERWT", "AGE"],
    "Q4": ["INCTOT", "EDUC", "PERWT"],
    "Q5": ["STATEFIP", "SEX", "MARST"],
}
TARGET_COLD_S = 1.0          # each query at the largest size, cold
TARGET_RSS = 100 * 10**6     # query peak memory (100 MB)
CGROUP_ROOT = Path("/sys/fs/cgroup/memory")
TIME_BIN = "/usr/bin/time" if Path("/usr/bin/time").exists() else None


# --------------------------------------------------------------------------
# small helpers
# --------------------------------------------------------------------------


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def parse_size(s: str) -> int:
    m = re.fullmatch(r"\s*([\d.]+)\s*([kmgt]?)(i?b?)\s*", s.lower())
    if not m:
        raise argparse.ArgumentTypeError(f"not a size: {s!r} (e.g. 1G, 512M, 1073741824)")
    return int(float(m.group(1)) * 1024 ** " kmgt".index(m.group(2) or " "))


def fmt_mb(b):
    """Decimal megabytes (the issue's targets are in MB)."""
    if b is None:
        return "—"
    if b >= 10**9:
        return f"{b / 1e9:.2f} GB"
    return f"{b / 1e6:.1f} MB"


def fmt_rows(n):
    if n >= 10**6:
        v = n / 1e6
        return f"{v:.0f} M" if v >= 100 or v == int(v) else f"{v:.3g} M"
    return f"{n:,}"


def fmt_rate(rows, secs):
    if not secs:
        return "—"
    r = rows / secs
    if r >= 1e9:
        return f"{r / 1e9:.2f} G/s"
    return f"{r / 1e6:.0f} M/s" if r >= 1e7 else f"{r / 1e6:.2g} M/s"


def fmt_limit(b):
    """A cgroup limit, in the binary units it was given in."""
    for unit, k in (("GiB", 2**30), ("MiB", 2**20)):
        if b >= k and b % (k // 16) == 0:
            return f"{b / k:g} {unit}"
    return f"{b:,} B"


def fmt_span(t):
    if not t:
        return "—"
    return f"{fmt_t(t['median'])} ({fmt_t(t['min'])}–{fmt_t(t['max'])})"


def summarize(samples):
    return {"median": statistics.median(samples), "min": min(samples), "max": max(samples),
            "samples": samples}


def table(headers, rows, right=()):
    w = [max(len(str(h)), *(len(str(r[i])) for r in rows)) for i, h in enumerate(headers)]
    cell = lambda c, i: str(c).rjust(w[i]) if i in right else str(c).ljust(w[i])
    line = lambda cells: "| " + " | ".join(cell(c, i) for i, c in enumerate(cells)) + " |"
    sep = "|" + "|".join(("-" * (x + 1) + ":") if i in right else "-" * (x + 2)
                         for i, x in enumerate(w)) + "|"
    return "\n".join([line(headers), sep] + [line(r) for r in rows])


def du(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def loadavg() -> str:
    try:
        return Path("/proc/loadavg").read_text().split()[0]
    except OSError:
        return "?"


class OtherCpu:
    """CPU time used by everything but this script and its children while a phase runs:
    busy jiffies in /proc/stat minus our own and our waited-for children's CPU time
    (os.times). A share near 0 means the phase had the machine to itself."""

    HZ = os.sysconf("SC_CLK_TCK")

    @staticmethod
    def snap():
        try:
            v = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
        except (OSError, ValueError):
            return None
        user, nice, system, _idle, _iowait, irq, softirq, steal = v
        t = os.times()
        return {"busy": (user + nice + system + irq + softirq) / OtherCpu.HZ, "steal": steal / OtherCpu.HZ,
                "mine": t.user + t.system + t.children_user + t.children_system, "t": time.monotonic()}

    def __enter__(self):
        self.a = self.snap()
        self.result = None
        return self

    def __exit__(self, *exc):
        b = self.snap()
        if self.a and b:
            wall = b["t"] - self.a["t"]
            other = max(0.0, (b["busy"] - self.a["busy"]) - (b["mine"] - self.a["mine"]))
            self.result = {"wall_s": wall, "other_cpu_s": other, "steal_s": b["steal"] - self.a["steal"],
                           "other_share": other / (wall * (os.cpu_count() or 1)) if wall > 0 else None}
        return False


IDLE_WAIT = {"max_s": 0.0, "threshold": 0.10}


def wait_idle(what: str):
    """On a shared machine: before a measured phase, wait (up to --wait-idle seconds) until
    other processes use less than 10% of the CPUs over a 3-second window."""
    if IDLE_WAIT["max_s"] <= 0:
        return None
    t0 = time.monotonic()
    while True:
        with OtherCpu() as oc:
            time.sleep(3)
        share = (oc.result or {}).get("other_share") or 0.0
        waited = time.monotonic() - t0
        if share < IDLE_WAIT["threshold"]:
            if waited > 4:
                log(f"  ({what}: waited {waited:.0f} s for other processes to go quiet)")
            return waited
        if waited >= IDLE_WAIT["max_s"]:
            log(f"  ({what}: other processes still use {100 * share:.0f}% of the CPUs after "
                f"{waited:.0f} s; measuring anyway)")
            return waited


def fmt_share(x):
    return "?" if not x or x.get("other_share") is None else f"{100 * x['other_share']:.0f}%"


DROP_OK = None


def drop_caches() -> bool:
    """bench/run.py's drop_caches, warning once when it is not permitted."""
    global DROP_OK
    ok, how = run_drop_caches()
    if not ok and DROP_OK is not False:
        log(f"WARNING: cannot drop the page cache ({how}); 'cold' runs use a warm cache")
    DROP_OK = ok
    return DROP_OK


TIMING = re.compile(r"timing:.*?median=([\d.]+)\s*(ns|µs|us|ms|s)\b.*?min=([\d.]+)\s*(ns|µs|us|ms|s)\b"
                    r".*?max=([\d.]+)\s*(ns|µs|us|ms|s)\b")
UNITS = {"ns": 1e-9, "µs": 1e-6, "us": 1e-6, "ms": 1e-3, "s": 1.0}


def parse_timing(stderr: str):
    m = TIMING.search(stderr)
    if not m:
        return None
    g = m.groups()
    return {"median": float(g[0]) * UNITS[g[1]], "min": float(g[2]) * UNITS[g[3]],
            "max": float(g[4]) * UNITS[g[5]]}


# --------------------------------------------------------------------------
# running a child: wall time, peak RSS, optionally inside a memory cgroup
# --------------------------------------------------------------------------


class Cgroup:
    """A cgroup v1 memory controller child with a hard limit (no swap)."""

    def __init__(self, limit: int):
        self.path = CGROUP_ROOT / f"microtab-scale-{os.getpid()}"
        self.path.mkdir()
        self.limit = limit
        (self.path / "memory.limit_in_bytes").write_text(str(limit))
        self.memsw = False
        try:  # memsw must be >= the memory limit, so it is set second
            (self.path / "memory.memsw.limit_in_bytes").write_text(str(limit))
            self.memsw = True
        except OSError:
            pass
        self.effective = int((self.path / "memory.limit_in_bytes").read_text())

    def read(self, name) -> int:
        return int((self.path / name).read_text().split()[0])


    def oom_kills(self) -> int:
        for line in (self.path / "memory.oom_control").read_text().splitlines():
            if line.startswith("oom_kill "):
                return int(line.split()[1])
        return 0

    def reset(self):
        for name in ("memory.max_usage_in_bytes", "memory.memsw.max_usage_in_bytes"):
            try:
                (self.path / name).write_text("0")
            except OSError:
                pass
        return {"oom_kill": self.oom_kills()}

    def after(self, before):
        return {"max_usage": self.read("memory.max_usage_in_bytes"),
                "oom_kills": self.oom_kills() - before["oom_kill"]}

    def prefix(self):
        # the shell joins the cgroup, then becomes the measured command
        return ["sh", "-c", f'echo $$ > {self.path}/cgroup.procs && exec "$@"', "sh"]

    def remove(self):
        for _ in range(50):
            try:
                self.path.rmdir()
                return
            except OSError:
                time.sleep(0.1)
        log(f"WARNING: could not remove {self.path}")


def run_measured(cmd, cgroup: Cgroup | None = None):
    """Run cmd; return dict(secs, rss, rc, out, err[, cgroup stats]).

    Peak RSS is GNU time's %M of the command itself (ru_maxrss survives
    exec(), so a child forked from this Python process would report at least
    Python's RSS); without /usr/bin/time the wait4() rusage, an upper bound."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, \
            tempfile.NamedTemporaryFile("r", suffix=".rss") as rssf:
        full = [TIME_BIN, "-f", "%M %I", "-o", rssf.name, *cmd] if TIME_BIN else list(cmd)
        if cgroup:
            full = cgroup.prefix() + full
            before = cgroup.reset()
        t0 = time.perf_counter()
        p = subprocess.Popen(full, stdout=out, stderr=err)
        _, status, ru = os.wait4(p.pid, 0)
        secs = time.perf_counter() - t0
        rc = os.waitstatus_to_exitcode(status)
        rss = ru.ru_maxrss * 1024
        inblock = ru.ru_inblock
        if TIME_BIN:
            txt = rssf.read().strip().splitlines()
            last = txt[-1].split() if txt else []
            if len(last) == 2 and all(x.isdigit() for x in last):
                rss, inblock = int(last[0]) * 1024, int(last[1])
            if txt and "signal" in txt[0]:   # "Command terminated by signal 9"
                m = re.search(r"signal (\d+)", txt[0])
                rc = -int(m.group(1)) if m else rc
            elif txt and "non-zero status" in txt[0]:
                m = re.search(r"status (\d+)", txt[0])
                rc = int(m.group(1)) if m else rc
        # ru_inblock: 512-byte blocks the process read from the block device (all threads)
        res = {"secs": secs, "rss": rss, "rc": rc, "disk_read": inblock * 512}
        if cgroup:
            res["cgroup"] = cgroup.after(before)
        out.seek(0)
        err.seek(0)
        res["out"] = out.read().decode("utf-8", "replace")
        res["err"] = err.read().decode("utf-8", "replace")
    return res


def failure(res) -> str | None:
    if res["rc"] == 0:
        return None
    why = f"exit {res['rc']}"
    if res["rc"] in (-9, 137) or res.get("cgroup", {}).get("oom_kills"):
        why += " (killed: out of memory in the cgroup)" if res.get("cgroup") else " (killed)"
    tail = res["err"].strip().splitlines()[-1:] or [""]
    return f"{why} {tail[0][:200]}".strip()


def answer_of(res):
    """The JSON answer without the dataset path (which differs between copies)."""
    js = json.loads(res["out"])
    js.pop("dataset", None)
    return js


# --------------------------------------------------------------------------
# steps
# --------------------------------------------------------------------------


def snapshot_binary(src: str, data: Path):
    """Copy the binary once so that a rebuild during the run cannot mix versions."""
    h = hashlib.sha256(Path(src).read_bytes()).hexdigest()
    dst = data / "bin" / f"microtab-{h[:12]}"
    if not dst.exists():
        dst.parent.mkdir(parents=True, exist_ok=True)
        tmp = dst.with_suffix(".tmp")
        shutil.copy2(src, tmp)
        tmp.rename(dst)
    for old in dst.parent.glob("microtab-*"):   # copies from earlier runs
        if old != dst:
            old.unlink(missing_ok=True)
    p = subprocess.run([str(dst), "--version"], capture_output=True, text=True, timeout=30)
    if p.returncode != 0:
        raise SystemExit(f"{src} does not run (being rebuilt?): {p.stderr.strip()}")
    return str(dst), h, p.stdout.strip()


def git_state():
    def g(*a):
        p = subprocess.run(["git", "-C", str(REPO), *a], capture_output=True, text=True)
        return p.stdout.rstrip("\n") if p.returncode == 0 else "?"
    dirty = g("status", "--porcelain", "--", "crates", "Cargo.toml", "Cargo.lock")
    return {"commit": g("rev-parse", "--short", "HEAD"),
            "crates_dirty": [line[3:] for line in dirty.splitlines()] if dirty != "?" else "?"}


def check_disk(data: Path, need: int, what: str):
    free = shutil.disk_usage(data).free
    if free < need * 1.1:
        raise SystemExit(f"not enough disk for {what}: need ~{fmt_mb(need)}, {fmt_mb(free)} free in {data}")


def step_gen(binary, data: Path, n: int):
    csv = data / f"census_{n}.csv"
    stamp = data / f"census_{n}.stamp.json"
    want = {"rows": n, "seed": SEED}
    if csv.exists() and stamp.exists():
        st = json.loads(stamp.read_text())
        if {k: st.get(k) for k in want} == want and st.get("bytes") == csv.stat().st_size:
            log(f"  gen: {csv.name} present with a matching stamp, skipped")
            return csv, {"secs": None, "bytes": csv.stat().st_size, "reused": True}
    check_disk(data, 80 * n, f"the {fmt_rows(n)}-row CSV")
    log(f"  gen: {n:,} rows → {csv}")
    stamp.unlink(missing_ok=True)
    res = run_measured([binary, "gen", "census", "--rows", str(n), "--seed", str(SEED), "--out", str(csv)])
    if res["rc"]:
        raise SystemExit(f"gen failed: {failure(res)}\n{res['err'][-2000:]}")
    size = csv.stat().st_size
    stamp.write_text(json.dumps({**want, "bytes": size,
                                 "generated": dt.datetime.now().isoformat(timespec="seconds")}) + "\n")
    log(f"  gen: {fmt_mb(size)} in {fmt_t(res['secs'])}")
    return csv, {"secs": res["secs"], "bytes": size, "reused": False}


def dataset_info(binary, ds: Path):
    p = subprocess.run([binary, "info", str(ds), "--format", "json"], capture_output=True, text=True)
    if p.returncode:
        raise SystemExit(f"info {ds} failed: {p.stderr.strip()}")
    return json.loads(p.stdout)


def step_import(binary, csv: Path, ds: Path, n: int, cgroup=None):
    where = f" inside the cgroup (limit {fmt_limit(cgroup.effective)})" if cgroup else ""
    log(f"  import{where}: {csv.name} → {ds.name}")
    check_disk(ds.parent, 45 * n, f"the {fmt_rows(n)}-row dataset")
    drop_caches()   # the CSV is read from disk, as after generating it on another day
    res = run_measured([binary, "import", str(csv), str(ds), "--force", "--missing", f"INCTOT={NA}"],
                       cgroup)
    out = {"secs": res["secs"], "rss": res["rss"], "rc": res["rc"], "error": failure(res),
           "cgroup": res.get("cgroup"), "disk_read": res["disk_read"], "csv_bytes": csv.stat().st_size, "message": res["err"].strip()[-300:]}
    if res["rc"] == 0:
        info = dataset_info(binary, ds)
        out["bytes"] = du(ds)
        out["rows"] = info["rows"]
        out["io_settings"] = info.get("io_settings")
        out["checksums"] = {v["name"]: (v.get("bytes"), manifest_checksum(ds, v["name"]))
                            for v in info["variables"]}
        out["column_bytes"] = {v["name"]: v["bytes"] for v in info["variables"]}
        if info["rows"] != n:
            out["error"] = f"dataset has {info['rows']} rows, expected {n}"
        log(f"  import: {fmt_t(res['secs'])}, peak RSS {fmt_mb(res['rss'])}, {fmt_mb(out['bytes'])} on disk"
            + (f", cgroup max usage {fmt_mb(res['cgroup']['max_usage'])}" if cgroup else ""))
    else:
        log(f"  import FAILED: {out['error']}")
    return out


def manifest_checksum(ds: Path, name: str):
    try:
        for v in json.loads((ds / "manifest.json").read_text())["variables"]:
            if v["name"] == name:
                return v.get("checksum")
    except (OSError, ValueError, KeyError):
        pass
    return None


def query_cmd(binary, ds: Path, q: str, extra=()):
    return [binary] + [a.format(ds=ds) for a in QUERIES[q]["microtab"]] + ["--format", "json", *extra]


def cold_queries(binary, ds: Path, runs: int, cgroup=None, label=""):
    """Round-robin over the queries, `runs` rounds, cache dropped before each process."""
    res = {q: {"times": [], "rss": [], "disk": [], "cgroup": [], "answers": [], "errors": []} for q in QUERIES}
    for r in range(runs):
        for q in QUERIES:
            drop_caches()
            x = run_measured(query_cmd(binary, ds, q), cgroup)
            d = res[q]
            if x["rc"]:
                d["errors"].append(failure(x))
                log(f"  {label}cold {q} run {r + 1}: FAILED {failure(x)}")
                continue
            d["times"].append(x["secs"])
            d["rss"].append(x["rss"])
            d["disk"].append(x["disk_read"])
            if cgroup:
                d["cgroup"].append(x["cgroup"])
            a = answer_of(x)
            if a not in d["answers"]:
                d["answers"].append(a)
        log(f"  {label}cold round {r + 1}/{runs}: " + ", ".join(
            f"{q} {fmt_t(res[q]['times'][-1]) if res[q]['times'] else 'FAILED'}" for q in QUERIES))
    out = {}
    for q, d in res.items():
        o = {"timing": summarize(d["times"]) if d["times"] else None,
             "rss": max(d["rss"]) if d["rss"] else None, "errors": d["errors"],
             "disk_read": statistics.median(d["disk"]) if d["disk"] else None,
             "deterministic": len(d["answers"]) <= 1,
             "answer": d["answers"][0] if d["answers"] else None}
        if cgroup and d["cgroup"]:
            o["cgroup_max_usage"] = max(c["max_usage"] for c in d["cgroup"])
            o["oom_kills"] = sum(c["oom_kills"] for c in d["cgroup"])
        out[q] = o
    return out


def warm_queries(binary, ds: Path, repeat: int):
    out = {}
    for q in QUERIES:
        fill = run_measured(query_cmd(binary, ds, q))        # brings the columns into the page cache
        x = run_measured(query_cmd(binary, ds, q, ["--repeat", str(repeat)]))
        if fill["rc"] or x["rc"]:
            out[q] = {"timing": None, "rss": None, "error": failure(x if x["rc"] else fill)}
            log(f"  warm {q}: FAILED {out[q]['error']}")
            continue
        t = parse_timing(x["err"])
        out[q] = {"timing": t, "rss": x["rss"], "answer": answer_of(x),
                  "error": None if t else "no timing line on stderr"}
        log(f"  warm {q}: {fmt_span(t)}, peak RSS {fmt_mb(x['rss'])}")
    return out


def dd_floor(ds: Path, q: str, column_files):
    """Cold sequential read of the query's column files with dd bs=1M (a reference, not a bound:
    microtab reads the columns concurrently)."""
    files = [str(ds / column_files[c]) for c in COLUMNS[q]]
    drop_caches()
    t0 = time.perf_counter()
    for f in files:
        subprocess.run(["dd", f"if={f}", "of=/dev/null", "bs=1M"], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


# --------------------------------------------------------------------------
# report
# --------------------------------------------------------------------------


def growth(a, b):
    return f"{b / a:.1f}×" if a and b else "—"


def build_report(R):  # noqa: C901 (one table after another)
    sizes = R["sizes"]
    big = sizes[-1]
    S = R["per_size"]
    parts = []
    m = R["machine"]
    parts.append(
        f"# microtab at {', '.join(fmt_rows(n) for n in sizes)} rows (issue 5, scale)\n\n"
        f"{R['started']} · {m['cpu']} · {m['cores']} cores · {m['ram_gb']:.0f} GB RAM · Linux {m['kernel']} · "
        f"microtab {R['binary']['version']} (sha256 {R['binary']['sha256'][:12]}, git {R['git']['commit']}"
        + (", uncommitted changes in " + ", ".join(R['git']['crates_dirty'][:4])
           + (" …" if len(R['git']['crates_dirty']) > 4 else "") if R['git']['crates_dirty'] else "")
        + ")\n\n"
        f"Command: `{R['command']}`\n\n"
        f"Cold: a fresh `microtab … --format json` process per run after `sync; echo 3 > "
        f"/proc/sys/vm/drop_caches` ({'done' if R['drop_caches'] else 'NOT permitted: cache was warm'}), "
        f"{R['runs']} runs per query round-robin, median (min–max) of wall time; peak RSS is the "
        f"largest of the runs (GNU time %M). Warm: one run to fill the page cache, then `--repeat "
        f"{R['repeat']}` and microtab's own `timing:` line (median, min–max). Memory in decimal MB/GB. "
        f"I/O settings in force: {R['io_settings']}. The machine is shared with other sessions' builds "
        f"and tests; CPU used by other processes (incl. kernel writeback) as a share of the "
        f"{m['cores']} cores during import / cold / warm runs: "
        + ", ".join(f"{fmt_rows(n)} {fmt_share(S[str(n)]['import'].get('other_cpu'))} / "
                    f"{fmt_share(S[str(n)].get('other_cpu_cold'))} / {fmt_share(S[str(n)].get('other_cpu_warm'))}"
                    for n in sizes)
        + (", memory-limited runs " + ", ".join(f"{fmt_limit(L['limit'])} {fmt_share(L.get('other_cpu_cold'))}"
                                               for L in R.get("limited") or []) if R.get("limited") else "")
        + ".")

    # ---- import
    rows = []
    prev = None
    for n in sizes:
        imp = S[str(n)]["import"]
        g = S[str(n)]["gen"]
        rows.append([fmt_rows(n) + (" ¹" if imp.get("reused") else ""), fmt_mb(imp.get("csv_bytes")),
                     fmt_t(g["secs"]) if g.get("secs") else ("reused" if g.get("reused") else "—"),
                     fmt_t(imp.get("secs")) if not imp.get("error") else "FAILED",
                     fmt_rate(n, imp.get("secs")),
                     f"{imp['csv_bytes'] / imp['secs'] / 1e6:.0f} MB/s" if imp.get("secs") else "—",
                     growth(prev and prev.get("secs"), imp.get("secs")) if prev else "—",
                     fmt_mb(imp.get("rss")), fmt_mb(imp.get("bytes"))])
        prev = imp
    parts.append("## Generate and import\n\n" + table(
        ["rows", "CSV", "gen", "import", "rows/s", "CSV MB/s", "growth", "import peak RSS", "dataset on disk"],
        rows, right=set(range(1, 9))) +
        "\n\nImport: `microtab import census_N.csv census_N.mtab --force --missing INCTOT=9999999`, "
        "one run, page cache dropped first (the CSV is read from disk). `growth` is the import time "
        "over that of the previous size (rows grow "
        + ", then ".join(f"{b / a:.1f}×" for a, b in zip(sizes, sizes[1:])) + ")."
        + ("\n\n¹ dataset reused from an earlier run (`--reuse-import`); its generate and import "
           "numbers are the ones recorded then." if any(S[str(n)]["import"].get("reused") for n in sizes)
           else ""))

    # ---- query tables
    rr = [f"{b / a:.1f}×" for a, b in zip(sizes, sizes[1:])]
    tm = lambda kind, n, q: S[str(n)][kind][q].get("timing")
    for kind in ("cold", "warm"):
        rows = []
        for q in QUERIES:
            ts = [tm(kind, n, q) for n in sizes]
            r = [f"{q} {QUERIES[q]['title']}"] + [fmt_span(t) for t in ts]
            r += [growth(a and a["median"], b and b["median"]) for a, b in zip(ts, ts[1:])]
            if kind == "cold":
                r += [("yes" if ts[-1]["median"] < TARGET_COLD_S else "**no**") if ts[-1] else "**failed**"]
            rows.append(r)
        headers = (["query"] + [f"{fmt_rows(n)} rows" for n in sizes]
                   + [f"growth {fmt_rows(a)}→{fmt_rows(b)} (rows ×{x[:-1]})"
                      for a, b, x in zip(sizes, sizes[1:], rr)])
        if kind == "cold":
            headers += [f"< {TARGET_COLD_S:g} s at {fmt_rows(big)}"]
        parts.append(f"## Queries, {kind}: median (min–max)\n\n"
                     + table(headers, rows, right=set(range(1, len(sizes) * 2))))
    parts[-1] += ("\n\n`growth` is the median time at a size over the median at the previous size; "
                  "the row count grows by the factor in the heading, so equal numbers mean linear cost.")

    rows = [[q] + [fmt_rate(n, (tm(k, n, q) or {}).get("median")) for k in ("cold", "warm") for n in sizes]
            for q in QUERIES]
    parts.append("## Rows per second (median)\n\n" + table(
        ["query"] + [f"{k} {fmt_rows(n)}" for k in ("cold", "warm") for n in sizes], rows,
        right=set(range(1, 2 * len(sizes) + 1))))

    rows = []
    for q in QUERIES:
        t = tm("cold", big, q)
        cb = sum(S[str(big)]["import"]["column_bytes"][c] for c in COLUMNS[q])
        dd_t = S[str(big)].get("dd", {}).get(q)
        rows.append([q, " ".join(COLUMNS[q]), fmt_mb(cb), fmt_mb(S[str(big)]["cold"][q].get("disk_read")),
                     fmt_t(t and t["median"]),
                     f"{cb / t['median'] / 1e9:.2f} GB/s" if t else "—", fmt_t(dd_t),
                     f"{cb / dd_t / 1e9:.2f} GB/s" if dd_t else "—",
                     f"{t['median'] / dd_t:.2f}" if t and dd_t else "—"])
    parts.append(f"## Cold at {fmt_rows(big)} rows: bytes read\n\n" + table(
        ["query", "columns", "column bytes", "read from disk", "microtab cold", "read rate", "dd bs=1M (cold)", "dd rate",
         "microtab / dd"], rows, right={2, 3, 4, 5, 6, 7, 8}) +
        "\n\n`read from disk`: the process's `ru_inblock` × 512 (median over the runs; includes "
        f"the microtab executable, dropped from the cache too: {fmt_mb(R['binary']['size'])}, read "
        f"almost whole at exec because the disk's read-ahead is {R['machine'].get('read_ahead_kb', '?')} KiB); "
        "`read rate` is column bytes / cold time. `dd` reads the same column files one after another (one cold run, cache dropped "
        "first): a reference for what the disk gives a plain sequential reader, not a bound "
        "(microtab reads the columns concurrently: with `auto` and a device read-ahead of 1 MiB or "
        "more each worker reads its morsels of every column, otherwise one I/O thread per column).")

    # ---- peak RSS
    rows = []
    for q in QUERIES:
        r = [q]
        for n in sizes:
            r.append(fmt_mb(S[str(n)]["cold"][q].get("rss")))
        for n in sizes:
            r.append(fmt_mb(S[str(n)]["warm"][q].get("rss")))
        worst = max((S[str(n)]["cold"][q].get("rss") or 0) for n in sizes)
        r.append("yes" if worst and worst < TARGET_RSS else "**no**")
        rows.append(r)
    parts.append("## Query peak memory (process peak RSS)\n\n" + table(
        ["query"] + [f"cold {fmt_rows(n)}" for n in sizes] + [f"warm {fmt_rows(n)}" for n in sizes]
        + ["cold < 100 MB at every size"], rows, right=set(range(1, 2 * len(sizes) + 1))) +
        "\n\nWith `auto`, warm runs (columns found cached), and cold ones on a device with a "
        "kernel read-ahead of 1 MiB or more, read each 32 Ki-row morsel of each column with one "
        "`pread` into the worker's own buffer; other cold runs stream through a fixed set of segment "
        "buffers; so memory does not grow with the row count.")

    # ---- memory limited
    lims = R.get("limited") or []
    if lims:
        ref = S[str(lims[0]["rows"])]
        parts.append(
            f"## Under a memory limit: {fmt_rows(lims[0]['rows'])} rows\n\n"
            f"A cgroup v1 memory controller per limit (`memory.limit_in_bytes`"
            + (" and `memory.memsw.limit_in_bytes`, so nothing can swap" if lims[0]["memsw"] else
               "; memsw limit not available") + "). "
            f"The dataset is {fmt_mb(ref['import']['bytes'])} of column files and the CSV "
            f"{fmt_mb(ref['import']['csv_bytes'])}. Page cache is charged to the cgroup and reclaimed "
            f"at the limit. Where the CSV was still there, the import ran again inside the cgroup into "
            f"a second dataset (deleted afterwards) and the queries ran on that one, cold, "
            f"{R['runs']} rounds; answers are compared with the unlimited cold run as JSON (all fields "
            f"but `dataset`, floats exactly), the imported columns by the xxh3 checksums in the "
            f"manifest. `cgroup max` is `memory.max_usage_in_bytes` (reset to 0 before each process, "
            f"page cache included); `read from disk` is the process's `ru_inblock` × 512 (GNU time `%I`, "
            f"including the ~{fmt_mb(R['binary']['size'])} executable). A process that read more than "
            f"the limit while `cgroup max` stayed at or below it ran with its page cache reclaimed "
            f"under the limit; a query whose columns are smaller than the limit is not constrained by "
            f"it. (`memory.failcnt` is not used: this kernel leaves it at 0 here.) The limited import "
            f"runs right after the unlimited one, so the host may still cache parts of the CSV's "
            f"virtual disk: compare its time with care.")
    for L in lims:
        ref = S[str(L["rows"])]
        rows = []
        imp = L["import"]
        if imp:
            rows.append(["import", fmt_t(imp["secs"]) if not imp.get("error") else f"FAILED: {imp['error']}",
                         fmt_t(ref["import"]["secs"]), fmt_mb(imp.get("rss")),
                         fmt_mb((imp.get("cgroup") or {}).get("max_usage")),
                         fmt_mb(imp.get("disk_read")),
                         (imp.get("cgroup") or {}).get("oom_kills", "—"),
                         "yes" if L.get("columns_identical") else
                         ("**no**" if L.get("columns_identical") is False else "—")])
        for q in QUERIES:
            c = L["cold"][q]
            ok = L["same_answer"].get(q)
            rows.append([f"{q} cold", fmt_span(c["timing"]) if c["timing"] else f"FAILED: {c['errors'][:1]}",
                         fmt_t(ref["cold"][q]["timing"]["median"]) if ref["cold"][q]["timing"] else "—",
                         fmt_mb(c.get("rss")), fmt_mb(c.get("cgroup_max_usage")), fmt_mb(c.get("disk_read")),
                         c.get("oom_kills", "—"), "yes" if ok else "**no**"])
        parts.append(
            f"### Limit {fmt_limit(L['limit'])} ({L['limit']:,} bytes)\n\n"
            f"Dataset {ref['import']['bytes'] / L['limit']:.1f}× the limit"
            + (f", CSV {ref['import']['csv_bytes'] / L['limit']:.1f}×" if imp else
               "; import not repeated (no CSV), queries on the unlimited dataset") + ".\n\n"
            + table(["step", "time under the limit", "time unlimited", "peak RSS",
                     "cgroup max", "read from disk", "OOM kills", "same result as unlimited"], rows,
                    right={1, 2, 3, 4, 5, 6}))

    # ---- targets
    t = R["targets"]
    parts.append("## Targets (issue 5), at " + fmt_rows(big) + " rows\n\n" + "\n".join(
        f"* {k}: **{'met' if v['met'] else 'NOT met'}** — {v['detail']}" for k, v in t.items()))

    # ---- answers
    rows = []
    for q in QUERIES:
        r = [q]
        for n in sizes:
            d = S[str(n)]
            r.append("yes" if d["cold"][q].get("deterministic") and d["warm_matches_cold"].get(q) else "**no**")
        rows.append(r)
    parts.append("## Answers\n\n" + table(["query"] + [f"{fmt_rows(n)}: cold runs identical, = warm"
                                                      for n in sizes], rows) +
                 "\n\nQ1's total count equals the row count at every size: "
                 + ("yes" if all(S[str(n)]["q1_total_ok"] for n in sizes) else "**no**") + ".")
    if R["warnings"]:
        parts.append("## Warnings\n\n" + "\n".join(f"* {w}" for w in R["warnings"]))
    return "\n\n".join(parts) + "\n"


def evaluate_targets(R):
    big = str(R["sizes"][-1])
    S = R["per_size"]
    cold = S[big]["cold"]
    slow = [f"{q} {fmt_t(cold[q]['timing']['median'])}" for q in QUERIES
            if not cold[q]["timing"] or cold[q]["timing"]["median"] >= TARGET_COLD_S]
    worst = max(QUERIES, key=lambda q: cold[q]["timing"]["median"] if cold[q]["timing"] else 1e9)
    t = {f"each query under {TARGET_COLD_S:g} s cold at {fmt_rows(R['sizes'][-1])}": {
        "met": not slow,
        "detail": ("slowest " if not slow else "over: " + ", ".join(slow) + "; slowest ")
                  + f"{worst} {fmt_t(cold[worst]['timing']['median']) if cold[worst]['timing'] else 'failed'} (median)"}}
    rss = {(n, q): S[str(n)]["cold"][q].get("rss") or 0 for n in R["sizes"] for q in QUERIES}
    (wn, wq), wv = max(rss.items(), key=lambda kv: kv[1])
    t["query peak memory under 100 MB (cold, every size)"] = {
        "met": wv < TARGET_RSS, "detail": f"largest {fmt_mb(wv)} ({wq} at {fmt_rows(wn)})"}
    for L in R.get("limited") or []:
        imp_ok = L["import"] is None or not L["import"].get("error")
        q_ok = all(L["cold"][q]["timing"] and not L["cold"][q]["errors"] for q in QUERIES)
        same = all(L["same_answer"].values()) and L.get("columns_identical") in (True, None)
        med = {q: L["cold"][q]["timing"]["median"] for q in QUERIES if L["cold"][q]["timing"]}
        slowest = max(med, key=med.get) if med else None
        t[f"everything also works under a {fmt_limit(L['limit'])} memory limit"] = {
            "met": imp_ok and q_ok and same,
            "detail": ("import " + ("ok" if imp_ok else "FAILED") if L["import"] else "import not repeated")
                      + f", queries {'ok' if q_ok else 'FAILED'}, results {'identical' if same else 'DIFFER'}"
                      + (f"; slowest query under the limit {slowest} {fmt_t(med[slowest])} (median)"
                         if slowest else "")}
    return t


# --------------------------------------------------------------------------
# main
# --------------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1000000,14081466,150000000",
                    help="comma-separated row counts (default 1000000,14081466,150000000)")
    ap.add_argument("--dir", type=Path, default=HERE / "data" / "scale")
    ap.add_argument("--runs", type=int, default=5, help="cold runs per query (default 5)")
    ap.add_argument("--repeat", type=int, default=5, help="warm --repeat per query (default 5)")
    ap.add_argument("--mem-limit", type=lambda v: [parse_size(x) for x in v.split(",") if x.strip()],
                    default=[parse_size("1G")],
                    help="cgroup memory limit(s) for the limited runs at the largest size, "
                         "comma-separated (default 1G)")
    ap.add_argument("--no-limit", action="store_true", help="skip the memory-limited run")
    ap.add_argument("--keep-csv", action="store_true", help="keep the CSVs after import (150 M: ~11 GB)")
    ap.add_argument("--keep-limited", action="store_true",
                    help="keep the dataset imported under the memory limit (else deleted after its queries)")
    ap.add_argument("--reuse-import", action="store_true",
                    help="reuse datasets imported by an earlier run (their recorded import numbers are "
                         "reported); the limited run then only repeats the queries")
    ap.add_argument("--wait-idle", type=float, default=300, metavar="SECONDS",
                    help="before each measured phase wait up to SECONDS for other processes to use "
                         "< 10%% of the CPUs (default 300; 0 = never wait)")
    ap.add_argument("--bin", default=os.environ.get("MICROTAB_BIN", str(REPO / "target/release/microtab")))
    ap.add_argument("--results", type=Path, default=HERE / "results")
    args = ap.parse_args()

    IDLE_WAIT["max_s"] = args.wait_idle
    sizes = sorted({int(s.replace("_", "")) for s in args.sizes.split(",") if s.strip()})
    if not Path(args.bin).exists():
        raise SystemExit(f"microtab binary not found at {args.bin} (cargo build --release, or --bin)")
    data = args.dir.resolve()
    data.mkdir(parents=True, exist_ok=True)
    binary, sha, version = snapshot_binary(args.bin, data)
    t_start = time.time()
    log(f"scale: sizes {', '.join(f'{n:,}' for n in sizes)}; {version}, sha256 {sha[:12]} "
        f"(copied to {binary}); data in {data}")
    if TIME_BIN is None:
        log("WARNING: /usr/bin/time missing (apt-get install time); peak RSS is an upper bound")

    if not args.no_limit and not (CGROUP_ROOT / "memory.limit_in_bytes").exists():
        raise SystemExit(f"no cgroup v1 memory controller at {CGROUP_ROOT} (use --no-limit)")

    R = {"command": "python3 bench/scale.py " + " ".join(sys.argv[1:]),
         "started": dt.datetime.now().isoformat(timespec="seconds"), "sizes": sizes,
         "runs": args.runs, "repeat": args.repeat, "load_start": loadavg(),
         "binary": {"path": args.bin, "sha256": sha, "version": version.removeprefix("microtab ").strip(),
                    "size": Path(binary).stat().st_size},
         "git": git_state(), "machine": dict(machine(), read_ahead_kb=read_ahead_kb(data)),
         "per_size": {}, "limited": [], "warnings": []}
    R["command"] = R["command"].strip()
    for n in sizes:
        log(f"== {n:,} rows")
        S, csv, reference = run_size(args, binary, data, n, R)
        R["per_size"][str(n)] = S
        save(args, R, t_start, partial=True)
        if n == sizes[-1] and not args.no_limit:
            for limit in args.mem_limit:
                cgroup = Cgroup(limit)
                log(f"== {n:,} rows in cgroup {cgroup.path}: limit {fmt_limit(cgroup.effective)}"
                    + (" (+ memsw, no swap)" if cgroup.memsw else ""))
                try:
                    R["limited"].append(limited_run(args, binary, n, data, csv, cgroup, S, reference, R))
                finally:
                    cgroup.remove()
                save(args, R, t_start, partial=True)
        if not args.keep_csv and csv.exists():
            log(f"  removing {csv.name} ({fmt_mb(csv.stat().st_size)})")
            csv.unlink()
    R["io_settings"] = ", ".join(f"{k} {v}" for k, v in
                                 (R["per_size"][str(sizes[-1])]["import"].get("io_settings") or {}).items())
    R["drop_caches"] = bool(DROP_OK)
    R["load_end"] = loadavg()
    R["targets"] = evaluate_targets(R)
    md = build_report(R)
    print(md)
    save(args, R, t_start, md=md)
    return 1 if R["warnings"] else 0


def run_size(args, binary, data: Path, n: int, R):
    S = {"load": loadavg()}
    ds = data / f"census_{n}.mtab"
    stamp = data / f"census_{n}.import.json"
    csv = data / f"census_{n}.csv"
    reused = False
    if args.reuse_import and ds.exists() and stamp.exists():
        st = json.loads(stamp.read_text())
        if st.get("rows") == n and st.get("seed") == SEED:
            log(f"  import: reusing {ds.name} (imported {st.get('when')}), numbers from that run")
            S["gen"], S["import"] = st["gen"], st["import"]
            S["import"]["reused"] = True
            reused = True
    if not reused:
        csv, S["gen"] = step_gen(binary, data, n)
        wait_idle("import")
        with OtherCpu() as oc:
            S["import"] = step_import(binary, csv, ds, n)
        S["import"]["other_cpu"] = oc.result
        if S["import"]["error"]:
            raise SystemExit(f"import of {n:,} rows failed: {S['import']['error']}")
        stamp.write_text(json.dumps({"rows": n, "seed": SEED, "when": dt.datetime.now().isoformat(
            timespec="seconds"), "binary_sha256": R["binary"]["sha256"], "gen": S["gen"],
            "import": S["import"]}, indent=1) + "\n")
    if not args.keep_csv and csv.exists() and (n != max(R["sizes"]) or args.no_limit):
        log(f"  removing {csv.name} ({fmt_mb(csv.stat().st_size)})")
        csv.unlink()

    log(f"  cold: {args.runs} rounds of the five queries")
    wait_idle("cold")
    with OtherCpu() as oc:
        S["cold"] = cold_queries(binary, ds, args.runs)
    S["other_cpu_cold"] = oc.result
    log(f"  warm: --repeat {args.repeat}")
    wait_idle("warm")
    with OtherCpu() as oc:
        S["warm"] = warm_queries(binary, ds, args.repeat)
    S["other_cpu_warm"] = oc.result
    log(f"  other processes' share of the CPUs: cold {fmt_share(S['other_cpu_cold'])}, "
        f"warm {fmt_share(S['other_cpu_warm'])}")
    files = {v: f"vars/{Path(p).name}" for v, p in column_files(ds).items()}
    if n == max(R["sizes"]):
        wait_idle("dd")
        S["dd"] = {q: dd_floor(ds, q, files) for q in QUERIES}
        log("  dd bs=1M cold of each query's columns: "
            + ", ".join(f"{q} {fmt_t(t)}" for q, t in S["dd"].items()))

    S["warm_matches_cold"] = {q: S["warm"][q].get("answer") is not None
                              and S["warm"][q]["answer"] == S["cold"][q]["answer"] for q in QUERIES}
    q1 = S["cold"]["Q1"]["answer"]
    S["q1_total_ok"] = bool(q1) and q1["total"]["count"] == n
    for q in QUERIES:
        c = S["cold"][q]
        if c["errors"]:
            R["warnings"].append(f"{fmt_rows(n)} {q}: cold run failed: {c['errors'][0]}")
        if not c["deterministic"]:
            R["warnings"].append(f"{fmt_rows(n)} {q}: cold runs gave different answers")
        if S["warm"][q].get("error"):
            R["warnings"].append(f"{fmt_rows(n)} {q}: warm: {S['warm'][q]['error']}")
        elif not S["warm_matches_cold"][q]:
            R["warnings"].append(f"{fmt_rows(n)} {q}: warm answer differs from cold")
    if not S["q1_total_ok"]:
        R["warnings"].append(f"{fmt_rows(n)}: Q1 total count is not {n}")

    reference = {}
    for q in QUERIES:   # answers are not kept in the JSON (large); their hash is
        for k in ("cold", "warm"):
            a = S[k][q].pop("answer", None)
            S[k][q]["answer_sha256"] = hashlib.sha256(json.dumps(a, sort_keys=True).encode()).hexdigest() \
                if a is not None else None
            if k == "cold":
                reference[q] = a
    return S, csv, reference


def column_files(ds: Path):
    return {v["name"]: v["file"] for v in json.loads((ds / "manifest.json").read_text())["variables"]}


def limited_run(args, binary, n, data, csv, cgroup, S, reference, R):
    """Import (when the CSV is there) and the cold queries inside the cgroup."""
    ds = data / f"census_{n}.mtab"
    limited_ds = data / f"census_{n}_limited_{fmt_limit(cgroup.effective).replace(' ', '')}.mtab"
    lim_import = None
    if csv.exists():
        wait_idle("limited import")
        lim_import = step_import(binary, csv, limited_ds, n, cgroup)
    L = {"rows": n, "limit": cgroup.effective, "memsw": cgroup.memsw, "import": lim_import}
    target = ds
    if lim_import is not None:
        if lim_import["error"]:
            R["warnings"].append(f"import under the {fmt_limit(cgroup.effective)} limit failed: "
                                 f"{lim_import['error']}")
        else:
            target = limited_ds
            L["columns_identical"] = lim_import["checksums"] == S["import"]["checksums"]
            if not L["columns_identical"]:
                R["warnings"].append(f"the dataset imported under the {fmt_limit(cgroup.effective)} limit "
                                     "differs from the unlimited one")
    log(f"  limited: {args.runs} cold rounds in the cgroup on {target.name}")
    wait_idle("limited cold")
    with OtherCpu() as oc:
        cold = cold_queries(binary, target, args.runs, cgroup, label="limited ")
    L["other_cpu_cold"] = oc.result
    L["same_answer"] = {}
    for q in QUERIES:
        a = cold[q].pop("answer", None)
        L["same_answer"][q] = a is not None and cold[q]["deterministic"] and a == reference[q]
        if not L["same_answer"][q]:
            R["warnings"].append(f"under the {fmt_limit(cgroup.effective)} limit {q} " + (
                f"failed: {cold[q]['errors'][:1]}" if a is None else "gave a different answer"))
    L["cold"] = cold
    if lim_import is not None:
        lim_import.pop("checksums", None)
    if limited_ds.exists() and not args.keep_limited:
        log(f"  removing {limited_ds.name}")
        shutil.rmtree(limited_ds)
    return L


def machine():
    cpu = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return {"cpu": cpu, "cores": os.cpu_count(), "ram_gb": ram / 2**30, "kernel": platform.release(),
            "python": platform.python_version()}


def read_ahead_kb(path: Path):
    """read_ahead_kb of the block device holding path (whole disk or partition)."""
    try:
        st = os.stat(path)
        dev = Path(f"/sys/dev/block/{os.major(st.st_dev)}:{os.minor(st.st_dev)}").resolve()
        for d in (dev, dev.parent):
            f = d / "queue" / "read_ahead_kb"
            if f.exists():
                return int(f.read_text())
    except (OSError, ValueError):
        pass
    return None


def save(args, R, t_start, md=None, partial=False):
    args.results.mkdir(parents=True, exist_ok=True)
    R = dict(R, elapsed_seconds=time.time() - t_start,   # without the per-column checksums
             per_size={n: dict(S, **({"import": {k: v for k, v in S["import"].items() if k != "checksums"}}
                                     if "import" in S else {}))
                       for n, S in R["per_size"].items()})
    txt = json.dumps(R, indent=1, default=str) + "\n"
    (args.results / ("scale.partial.json" if partial else "scale.json")).write_text(txt)
    if md is not None:
        (args.results / "scale.md").write_text(md)
        (args.results / "scale.partial.json").unlink(missing_ok=True)
        log(f"wrote {args.results / 'scale.md'} and scale.json ({time.time() - t_start:.0f} s)")


if __name__ == "__main__":
    sys.exit(main())
