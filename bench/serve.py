#!/usr/bin/env python3
"""`microtab serve` under measurement, on 127.0.0.1:

* API overhead: Q3 (RACE × EMPSTAT weighted, AGE 25–64, 14.1 M records)
  through `GET /api/v1/datasets/census/tab?…` over one keep-alive
  connection, against the same query timed inside the CLI's process
  (`--repeat`); target: within 2 ms, warm;
* load: --clients concurrent clients (asyncio, one connection each, each
  sending --requests requests of Q3 on a --load-rows-record dataset):
  errors, latency P50/P99/max, throughput, and the server's peak resident
  memory (VmHWM).

    python3 bench/serve.py [--runs 30] [--clients 1000] [--requests 3] [--load-rows 1000000]

Needs bench/data/census.mtab (`python3 bench/run.py`). Results:
docs/BENCHMARKS.md."""

import argparse
import asyncio
import http.client
import re
import resource
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "bench" / "data"
BIN = REPO / "target" / "release" / "microtab"
Q3 = "/api/v1/datasets/{name}/tab?row=RACE&col=EMPSTAT&weight=PERWT&filter=AGE(25-64)"


def raise_fd_limit():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(hard, 65536) if hard != resource.RLIM_INFINITY else 65536
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, want), hard))


def start(root, *extra):
    p = subprocess.Popen([str(BIN), "serve", str(root), "--port", "0", *extra], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True, preexec_fn=raise_fd_limit)
    line = p.stdout.readline()
    m = re.search(r"http://([\d.]+):(\d+)", line)
    return p, m.group(1), int(m.group(2))


def vmhwm(pid):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM"):
            return int(line.split()[1]) * 1024
    return 0


def overhead(runs):
    root = Path(tempfile.mkdtemp())
    (root / "census.mtab").symlink_to(DATA / "census.mtab")
    p, host, port = start(root)
    try:
        c = http.client.HTTPConnection(host, port)
        path = Q3.format(name="census")
        lat, server = [], []
        for i in range(runs + 3):
            t = time.perf_counter()
            c.request("GET", path)
            r = c.getresponse()
            r.read()
            dt = time.perf_counter() - t
            assert r.status == 200
            if i >= 3:  # warm-up
                lat.append(dt)
                server.append(float(r.getheader("x-microtab-ms")) / 1e3)
        cli = subprocess.run([str(BIN), "tab", str(DATA / "census.mtab"), "RACE", "EMPSTAT", "--weight", "PERWT",
                              "--filter", "AGE(25-64)", "--repeat", str(runs), "--format", "json"],
                             capture_output=True, text=True, check=True)
        m = re.search(r"median=([\d.]+)ms min=([\d.]+)ms max=([\d.]+)ms", cli.stderr)
        inproc = float(m.group(1)) / 1e3
        med = statistics.median(lat)
        print(f"Q3 through the API: {med * 1e3:.2f} ms median ({min(lat) * 1e3:.2f}–{max(lat) * 1e3:.2f}), "
              f"server-side {statistics.median(server) * 1e3:.2f} ms; in the CLI's process "
              f"{inproc * 1e3:.2f} ms ({m.group(2)}–{m.group(3)}); overhead {(med - inproc) * 1e3:+.2f} ms")
    finally:
        p.terminate()
        p.wait()
        shutil.rmtree(root, ignore_errors=True)


async def client(host, port, path, n, lat, errors):
    try:
        reader, writer = await asyncio.open_connection(host, port)
    except OSError as e:
        errors.append(f"connect: {e}")
        return
    req = f"GET {path} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode()
    try:
        for _ in range(n):
            t = time.perf_counter()
            writer.write(req)
            await writer.drain()
            head = await reader.readuntil(b"\r\n\r\n")
            status = int(head.split(b" ", 2)[1])
            length = int(re.search(rb"(?i)content-length: *(\d+)", head).group(1))
            await reader.readexactly(length)
            lat.append(time.perf_counter() - t)
            if status != 200:
                errors.append(f"status {status}")
    except (OSError, asyncio.IncompleteReadError, ValueError, AttributeError) as e:
        errors.append(f"{type(e).__name__}: {e}")
    finally:
        writer.close()


def load(clients, requests, rows):
    raise_fd_limit()
    root = Path(tempfile.mkdtemp(dir=DATA))
    try:
        csv = root / "l.csv"
        subprocess.run([str(BIN), "gen", "census", "--rows", str(rows), "--seed", "2", "--out", str(csv)],
                       check=True, capture_output=True)
        subprocess.run([str(BIN), "import", str(csv), str(root / "load.mtab")], check=True, capture_output=True)
        csv.unlink()
        p, host, port = start(root, "--timeout", "120")
        try:
            path = Q3.format(name="load")
            lat, errors = [], []

            async def main():
                await asyncio.gather(*(client(host, port, path, requests, lat, errors) for _ in range(clients)))

            t = time.perf_counter()
            asyncio.run(main())
            wall = time.perf_counter() - t
            lat.sort()
            q = lambda f: lat[min(len(lat) - 1, int(f * len(lat)))] * 1e3  # noqa: E731
            print(f"load: {clients} concurrent clients × {requests} requests of Q3 on {rows:,} records: "
                  f"{len(lat)} answers, {len(errors)} errors{' (' + errors[0] + ')' if errors else ''}; "
                  f"latency P50 {q(0.5):.0f} ms, P99 {q(0.99):.0f} ms, max {lat[-1] * 1e3:.0f} ms; "
                  f"{len(lat) / wall:.0f} requests/s over {wall:.1f} s; server peak RSS {vmhwm(p.pid) / 1e6:.0f} MB")
        finally:
            p.terminate()
            p.wait()
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--clients", type=int, default=1000)
    ap.add_argument("--requests", type=int, default=3)
    ap.add_argument("--load-rows", type=int, default=1_000_000)
    a = ap.parse_args()
    overhead(a.runs)
    load(a.clients, a.requests, a.load_rows)


if __name__ == "__main__":
    main()
