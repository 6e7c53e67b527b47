#!/usr/bin/env python3
"""`microtab serve` under measurement, on 127.0.0.1:

* API overhead: Q3 (RACE × EMPSTAT weighted, AGE 25–64, 14.1 M records)
  through `GET /api/v1/datasets/census/tab?…` over one keep-alive
  connection, against the same query timed inside the CLI's process
  (`--repeat`); target: within 2 ms, warm;
* load: --clients concurrent clients (asyncio, one connection each, each
  sending --requests requests of Q3 on a --load-rows-record dataset):
  errors, latency P50/P99/max, throughput, and the server's peak resident
  memory (VmHWM); with --idle N, N more sockets that connect and send
  half a request (slow clients) during the load;
* the page: Q3 opened as a shared URL of the analysis page in headless
  chromium (Selenium), from navigation to the drawn table, against the
  server's time for the same query (--page-runs; needs chromium and
  chromium-driver).

    python3 bench/serve.py [--runs 30] [--clients 1000] [--requests 3] [--load-rows 1000000]
                           [--idle 1000] [--page-runs 15]

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


async def slow_client(host, port, hold, cut):
    """Connects, sends half a request, waits; counts being cut off."""
    try:
        reader, writer = await asyncio.open_connection(host, port)
        writer.write(b"GET /api/v1/datasets HTTP/1.1\r\nHost: x\r\n")
        await writer.drain()
        if await asyncio.wait_for(reader.read(), hold) is not None:
            cut.append(1)
        writer.close()
    except (OSError, asyncio.TimeoutError):
        pass


def load(clients, requests, rows, idle=0):
    raise_fd_limit()
    root = Path(tempfile.mkdtemp(dir=DATA))
    try:
        csv = root / "l.csv"
        subprocess.run([str(BIN), "gen", "census", "--rows", str(rows), "--seed", "2", "--out", str(csv)],
                       check=True, capture_output=True)
        subprocess.run([str(BIN), "import", str(csv), str(root / "load.mtab")], check=True, capture_output=True)
        csv.unlink()
        p, host, port = start(root, "--timeout", "120", "--header-timeout", "5")
        try:
            path = Q3.format(name="load")
            lat, errors, cut = [], [], []

            async def main():
                slow = [slow_client(host, port, 60, cut) for _ in range(idle)]
                await asyncio.gather(*(client(host, port, path, requests, lat, errors) for _ in range(clients)), *slow)

            t = time.perf_counter()
            asyncio.run(main())
            wall = time.perf_counter() - t
            lat.sort()
            q = lambda f: lat[min(len(lat) - 1, int(f * len(lat)))] * 1e3  # noqa: E731
            print(f"load: {clients} concurrent clients × {requests} requests of Q3 on {rows:,} records: "
                  f"{len(lat)} answers, {len(errors)} errors{' (' + errors[0] + ')' if errors else ''}; "
                  f"latency P50 {q(0.5):.0f} ms, P99 {q(0.99):.0f} ms, max {lat[-1] * 1e3:.0f} ms; "
                  f"{len(lat) / wall:.0f} requests/s over {wall:.1f} s; server peak RSS {vmhwm(p.pid) / 1e6:.0f} MB"
                  + (f"; {idle} slow clients, {len(cut)} cut off by the header timeout" if idle else ""))
        finally:
            p.terminate()
            p.wait()
    finally:
        shutil.rmtree(root, ignore_errors=True)


def page(runs):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait
    root = Path(tempfile.mkdtemp())
    (root / "census.mtab").symlink_to(DATA / "census.mtab")
    p, host, port = start(root)
    o = webdriver.ChromeOptions()
    o.binary_location = shutil.which("chromium")
    for a in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"]:
        o.add_argument(a)
    d = webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=o)
    try:
        url = f"http://{host}:{port}/analysis/census?row=RACE&col=EMPSTAT&weight=PERWT&filter=AGE(25-64)&pct=none"
        c = http.client.HTTPConnection(host, port)
        total, answered, server = [], [], []
        for i in range(runs + 2):
            d.get("about:blank")
            t = time.perf_counter()
            d.get(url)
            WebDriverWait(d, 60).until(lambda d: d.find_element(By.ID, "status").text.startswith("Answered"))
            dt = time.perf_counter() - t
            ms = float(re.search(r"([\d.]+) ms", d.find_element(By.ID, "status").text).group(1))
            c.request("GET", Q3.format(name="census") + "&z=true")
            r = c.getresponse()
            r.read()
            if i >= 2:
                total.append(dt * 1e3)
                answered.append(ms)
                server.append(float(r.getheader("x-microtab-ms")))
        f = lambda xs: f"{statistics.median(xs):.0f} ms ({min(xs):.0f}–{max(xs):.0f})"  # noqa: E731
        print(f"the page, Q3 from a shared URL in headless chromium: navigation to drawn table {f(total)}; "
              f"query + drawing inside the page {f(answered)}; the server's scan {f(server)}")
    finally:
        d.quit()
        p.terminate()
        p.wait()
        shutil.rmtree(root, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--clients", type=int, default=1000)
    ap.add_argument("--requests", type=int, default=3)
    ap.add_argument("--load-rows", type=int, default=1_000_000)
    ap.add_argument("--idle", type=int, default=1000)
    ap.add_argument("--page-runs", type=int, default=15)
    a = ap.parse_args()
    overhead(a.runs)
    load(a.clients, a.requests, a.load_rows, a.idle)
    if a.page_runs:
        page(a.page_runs)


if __name__ == "__main__":
    main()
