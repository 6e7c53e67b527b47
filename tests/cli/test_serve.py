"""`microtab serve`: the HTTP/JSON API, started on 127.0.0.1 by the test
(a real socket, a real client), answers checked against the CLI's JSON and
DuckDB; hostile requests get JSON errors, never a path outside the served
list; concurrent clients all get answers."""

import json
import subprocess
import threading
import urllib.error
import urllib.parse
import urllib.request

import duckdb
import pytest

from conftest import BIN, census_dataset, duck_census, replicate_design, run, serve


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    d = tmp_path_factory.mktemp("serve")
    csv, ds = census_dataset(d, 40000, 8, reps=4, ds="data/census.mtab")
    run("label", ds, "SEX", "1=Male", "2=Female")
    replicate_design(ds, 4)
    (d / "secret.mtab").mkdir()  # outside the served directory
    p, base = serve(ds.parent, "--max-cells", "5000", stderr=subprocess.PIPE)
    yield base, ds, duck_census(csv), p
    p.terminate()
    p.wait(timeout=10)


def get(base, path):
    """(status, JSON body) of GET base + path."""
    try:
        with urllib.request.urlopen(base + path, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def q(**params):
    return "?" + urllib.parse.urlencode(params)


def same(a, b, path="$"):
    """Equal JSON, floats to 1e-12 relative (the CLI carries its own libm
    for exp/log; the server uses the system's)."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), (path, a.keys(), b.keys())
        for k in a:
            same(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            same(x, y, f"{path}[{i}]")
    elif isinstance(a, float) and isinstance(b, (int, float)):
        assert b == pytest.approx(a, rel=1e-12, abs=1e-300), (path, a, b)
    else:
        assert a == b, (path, a, b)


def cli_json(*args):
    d = json.loads(run(*args, "--format", "json").stdout)
    d.pop("dataset", None)
    return d


def test_datasets_and_codebook(server):
    base, ds, _, _ = server
    st, body = get(base, "/api/v1/datasets")
    assert st == 200 and [x["name"] for x in body["datasets"]] == ["census"]
    assert body["datasets"][0]["rows"] == 40000 and body["datasets"][0]["design"] is True
    st, body = get(base, "/api/v1/datasets/census")
    assert st == 200
    v = {x["name"]: x for x in body["variables"]}
    assert v["SEX"]["value_labels"] == {"1": "Male", "2": "Female"}
    assert v["INCTOT"]["missing_codes"] == [9999999] and v["PERWT"]["decimals"] == 2
    assert str(ds) not in json.dumps(body)


def same_as_cli(base, ds, analysis, params, *args):
    """The API's answer to `analysis` with `params`, checked equal to the
    CLI's with `args` (but for the dataset, which the API names as served)."""
    st, body = get(base, f"/api/v1/datasets/census/{analysis}" + q(**params))
    assert st == 200 and body.pop("dataset") == "census", body
    same(body, cli_json(analysis, ds, *args))
    return body


def test_answers_equal_the_cli_and_duckdb(server):
    base, ds, con, _ = server
    body = same_as_cli(base, ds, "tab", dict(row="SEX", col="EDUC", filter="AGE(25-64)", pct="row", stats="true"),
                       "SEX", "EDUC", "--filter", "AGE(25-64)", "--pct", "row", "--stats")
    t = body["tables"][0]
    want = dict(((s, e), (n, float(w))) for s, e, n, w in con.execute(
        "SELECT SEX, EDUC, count(*), sum(PERWT) FROM c WHERE AGE BETWEEN 25 AND 64 GROUP BY ALL").fetchall())
    for i, r in enumerate(t["rows"]):
        for j, c in enumerate(t["cols"]):
            n, w = want.get((r["value"], c["value"]), (0, 0.0))
            assert t["counts"][i][j] == n
            assert t["weighted"][i][j] == pytest.approx(w, rel=1e-12)
    body = same_as_cli(base, ds, "freq", dict(var="AGE(r: 0-17; 18-64; 65-*)"), "AGE(r: 0-17; 18-64; 65-*)")
    assert body["rows"][0]["weighted_se"]["se"] > 0
    same_as_cli(base, ds, "means", dict(var="INCTOT", by="SEX,EDUC", quantiles="0.5"),
                "INCTOT", "--by", "SEX,EDUC", "--median")


@pytest.mark.parametrize("path,status,needle", [
    ("/api/v1/datasets/secret/tab?row=SEX&col=EDUC", 404, "no dataset"),
    ("/api/v1/datasets/..%2Fsecret/tab?row=SEX&col=EDUC", 404, "no dataset"),
    ("/api/v1/datasets/%2Fetc%2Fpasswd", 404, "no dataset"),
    ("/api/v1/datasets/..", 404, ""),
    ("/api/v1/datasets/census/tab?row=SEX&col=NOPE", 400, "NOPE"),
    ("/api/v1/datasets/census/tab?row=SEX&col=EDUC&fliter=AGE(1)", 400, "fliter"),
    ("/api/v1/datasets/census/tab?row=SEX&col=EDUC&row=AGE", 400, "twice"),
    ("/api/v1/datasets/census/tab?row=SEX", 400, "col"),
    ("/api/v1/datasets/census/tab?row=SEX&col=EDUC&filter=AGE(", 400, "AGE"),
    ("/api/v1/datasets/census/tab?row=SERIAL&col=PUMA", 400, "cells"),
    ("/api/v1/datasets/census/plot?x=1", 404, "freq"),
    ("/etc/passwd", 404, "api"),
    ("/api/v1/datasets/census/freq?var=" + "A" * 5000, 400, "at most"),
    # Not UTF-8: a JSON error like the others, not axum's plain text.
    ("/api/v1/datasets/%FF%FE/tab?row=SEX&col=EDUC", 400, "UTF-8"),
    ("/api/v1/datasets/census%C3/freq?var=SEX", 400, "UTF-8"),
])
def test_hostile_requests_get_json_errors(server, path, status, needle):
    base, ds, _, _ = server
    st, body = get(base, path)
    assert st == status and body["status"] == status, body
    assert needle in body["error"], body
    assert str(ds.parent) not in body["error"]


def test_concurrent_clients(server):
    base, _, _, p = server
    st, want = get(base, "/api/v1/datasets/census/tab" + q(row="RACE", col="SEX"))
    results = []

    def client():
        results.append(get(base, "/api/v1/datasets/census/tab" + q(row="RACE", col="SEX")))

    threads = [threading.Thread(target=client) for _ in range(64)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 64 and all(r == (200, want) for r in results)


def test_sda_urls_are_translated(server):
    """SDA's own query URLs (as published in papers and READMEs) redirect
    to the same question here; SDA's comma-separated filters work."""
    base, ds, con, _ = server
    url = ("/sdaweb/analysis/exec?formid=tbf&sdaprog=tables&dataset=census&sec508=false&row=sex&column=educ"
           "&filters=" + urllib.parse.quote("age(25-64, 70), race(1)") +
           "&weightlist=perwt&rowpct=on&design=complex&cflevel=90&weightedn=on&color=on"
           "&ch_type=stackedbar&ch_width=600&decpcts=1&decse=1&csvformat=no&csvfilename=tables.csv")
    st, body = get(base, url)  # urllib follows the 303
    assert st == 200 and body["row_var"] == "SEX" and body["col_var"] == "EDUC"
    st2, direct = get(base, "/api/v1/datasets/census/tab" + q(row="sex", col="educ", filter="age(25-64, 70), race(1)",
                                                                weight="perwt", pct="row", level="0.9"))
    assert body == direct
    want = dict(((s, e), n) for s, e, n in con.execute(
        "SELECT SEX, EDUC, count(*) FROM c WHERE (AGE BETWEEN 25 AND 64 OR AGE = 70) AND RACE = 1 "
        "GROUP BY ALL").fetchall())
    t = body["tables"][0]
    got = {(r["value"], c["value"]): t["counts"][i][j] for i, r in enumerate(t["rows"])
           for j, c in enumerate(t["cols"]) if t["counts"][i][j]}
    assert got == want
    assert t["pct_se"] is not None  # the design's SEs at the 90% level
    st, body = get(base, "/sdaweb/analysis/exec?formid=mnf&sdaprog=means&dataset=census&dep=INCTOT&row=SEX"
                         "&filters=age(18-*)&weightlist=perwt&main=means&decmeans=2")
    assert st == 200 and body["variable"] == "INCTOT" and body["by"] == ["SEX"]
    # A browser (Accept: text/html) goes to the analysis page instead.
    req = urllib.request.Request(base + url, headers={"Accept": "text/html,application/xhtml+xml"})
    with urllib.request.urlopen(req, timeout=30) as r:
        assert r.headers["content-type"].startswith("text/html")
        page_url = urllib.parse.urlparse(r.url)
    assert page_url.path == "/analysis/census"
    params = urllib.parse.parse_qs(page_url.query)
    assert params["row"] == ["sex"] and params["col"] == ["educ"] and params["pct"] == ["row"]
    assert params["filter"] == ["age(25-64, 70), race(1)"] and params["level"] == ["0.9"]
    assert set(params["show"]) == {"w", "colour"}
    req = urllib.request.Request(base + "/sda?formid=mnf&sdaprog=means&dataset=census&dep=INCTOT&row=SEX&column=RACE",
                                 headers={"Accept": "text/html"})
    with urllib.request.urlopen(req, timeout=30) as r:
        params = urllib.parse.parse_qs(urllib.parse.urlparse(r.url).query)
    assert params["kind"] == ["means"] and params["dep"] == ["INCTOT"]
    assert params["row"] == ["SEX"] and params["col"] == ["RACE"]
    # SDA's "SRS" keeps the weight and drops the design's SEs.
    st, body = get(base, "/sda?sdaprog=tables&dataset=census&row=SEX&column=EDUC&colpct=on&design=srs")
    assert st == 200 and body["weight"] == "PERWT" and "design" not in body
    # A means URL grouped by a value list keeps it whole.
    req = urllib.request.Request(base + "/sda?sdaprog=means&dataset=census&dep=INCTOT&row=RACE(1,3)&column=SEX",
                                 headers={"Accept": "text/html"})
    with urllib.request.urlopen(req, timeout=30) as r:
        params = urllib.parse.parse_qs(urllib.parse.urlparse(r.url).query)
    assert params["row"] == ["RACE(1,3)"] and params["col"] == ["SEX"] and "control" not in params
    st, body = get(base, "/api/v1/datasets/census/means" + q(var="INCTOT", by="RACE(1,3), SEX"))
    assert st == 200 and body["by"] == ["RACE", "SEX"]
    # Row and column percentages together: one table with both, each
    # the one-percentage answer's.
    st, body = get(base, "/sda?dataset=census&row=SEX&column=EDUC&rowpct=on&colpct=on")
    assert st == 200 and body["pcts"] == ["col", "row"], body
    for p in ("col", "row"):
        _, one = get(base, "/api/v1/datasets/census/tab" + q(row="SEX", col="EDUC", pct=p))
        got = body["tables"][0]["percentages"][p]
        assert got["pct"] == one["tables"][0]["pct"] and got["pct_se"] == one["tables"][0]["pct_se"]
    assert body["tables"][0]["pct"] == body["tables"][0]["percentages"]["col"]["pct"]
    # One named twice is one; several are for crosstabs only.
    st, body = get(base, "/api/v1/datasets/census/tab" + q(row="SEX", col="EDUC", pct="row,row"))
    assert st == 200 and body["pct"] == "row" and "pcts" not in body
    st, body = get(base, "/api/v1/datasets/census/freq" + q(var="SEX", pct="row,col"))
    assert st == 400 and "crosstabs" in body["error"]
    for bad_url, needle in [("/sda?dataset=nope&row=SEX", "no dataset"),
                            ("/sda?dataset=census&row=SEX&frobnicate=1", "frobnicate"),
                            # SDA's totals or differences are not means: refused, not
                            # answered as means.
                            ("/sda?sdaprog=means&dataset=census&dep=INCTOT&row=SEX&main=totals",
                             "diff=BASE")]:
        st, body = get(base, bad_url)
        assert st in (400, 404) and needle in body["error"], body


def test_variable_pages(server):
    """A codebook entry: metadata and frequencies weighted by the design's
    weight (missing values shown), checked against DuckDB; a variable with
    too many values gets metadata and a note; an unknown one a 404."""
    base, ds, con, _ = server
    st, body = get(base, "/api/v1/datasets/census/variables/SEX")
    assert st == 200 and body["variable"]["value_labels"] == {"1": "Male", "2": "Female"}
    rows = {r["value"]: (r["count"], r["weighted"]) for r in body["frequencies"]["rows"]}
    want = {s: (n, float(w)) for s, n, w in con.execute(
        "SELECT SEX, count(*), sum(PERWT) FROM c GROUP BY SEX").fetchall()}
    assert rows.keys() == want.keys()
    for k in want:
        assert rows[k][0] == want[k][0] and rows[k][1] == pytest.approx(want[k][1], rel=1e-12)
    st, body = get(base, "/api/v1/datasets/census/variables/INCTOT")
    assert st == 200 and body["frequencies"] is None and "cells" in body["note"]
    assert body["variable"]["missing_codes"] == [9999999]
    st, body = get(base, "/api/v1/datasets/census/variables/NOPE")
    assert st == 404 and "NOPE" in body["error"] and str(ds) not in body["error"]


def test_text_missing_codes_are_shown_as_text(tmp_path):
    root = tmp_path / "d"
    root.mkdir()
    src = tmp_path / "t.csv"
    src.write_text("S\nOhio\nRefused\nUtah\n")
    run("import", src, root / "t.mtab", "--missing", "S=Refused")
    p = subprocess.Popen([str(BIN), "serve", root, "--port", "0"], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True)
    try:
        base = p.stdout.readline().split()[2]
        st, body = get(base, "/api/v1/datasets/t")
        assert st == 200 and body["variables"][0]["missing_codes"] == ["Refused"]
        st, body = get(base, "/api/v1/datasets/t/variables/S")
        assert body["variable"]["missing_codes"] == ["Refused"]
    finally:
        p.terminate()
        p.wait(timeout=10)


def test_slow_and_idle_clients_are_cut_off(server):
    """Slowloris: clients that open connections and send headers slowly or
    never are closed after --header-timeout, and --max-connections bounds
    how many are open; a real request still gets its answer."""
    import socket
    import time
    _, ds, _, _ = server
    root = ds.parent
    p = subprocess.Popen([str(BIN), "serve", root, "--port", "0", "--header-timeout", "1",
                          "--max-connections", "50"],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        base = p.stdout.readline().split()[2]
        host, port = base.removeprefix("http://").split(":")
        # A client that sends part of its headers and stops.
        slow = socket.create_connection((host, int(port)))
        slow.sendall(b"GET /api/v1/datasets HTTP/1.1\r\nHost: x\r\n")
        t = time.monotonic()
        slow.settimeout(10)
        while slow.recv(1024):  # closed by the server (after any error reply)
            pass
        waited = time.monotonic() - t
        assert 0.5 < waited < 5, waited
        # 50 idle connections fill every slot; a request waits for them to
        # time out (about 1 s), then is answered.
        idle = [socket.create_connection((host, int(port))) for _ in range(50)]
        time.sleep(0.2)
        t = time.monotonic()
        st, body = get(base, "/api/v1/datasets")
        assert st == 200 and body["datasets"][0]["name"] == "census"
        assert 0.5 < time.monotonic() - t < 8
        for s in idle + [slow]:
            s.close()
        # Kept-alive connections that stay idle are closed too.
        s = socket.create_connection((host, int(port)))
        s.sendall(b"GET /api/v1/datasets HTTP/1.1\r\nHost: x\r\n\r\n")
        s.settimeout(10)
        data = b""
        t = time.monotonic()
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
        assert data.startswith(b"HTTP/1.1 200") and time.monotonic() - t < 5
        s.close()
    finally:
        p.terminate()
        p.wait(timeout=10)


def vm_hwm(pid: int) -> int:
    """The process's peak resident memory (bytes), from /proc."""
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


def test_memory_budget_bounds_concurrent_large_requests(tmp_path):
    """Eight concurrent requests for 90,000-cell tables against a server
    whose memory budget holds one of them: each gets either the right
    table (DuckDB's counts) or 503 with Retry-After and a clear JSON
    error; the server stays up and its peak memory stays within its
    baseline plus the budget. No timing is assumed: how many are refused
    depends on how the requests interleave."""
    import random
    rng = random.Random(8)
    csv = tmp_path / "w.csv"
    with open(csv, "w") as f:
        f.write("A,B\n")
        for _ in range(100_000):
            f.write(f"{rng.randint(0, 299)},{rng.randint(0, 299)}\n")
    root = tmp_path / "data"
    root.mkdir()
    run("import", csv, root / "w.mtab")
    budget = 60 << 20
    p = subprocess.Popen([str(BIN), "serve", root, "--port", "0", "--max-cells", "200000",
                          "--max-memory", "60M"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        base = p.stdout.readline().split()[2]
        # Warm: the datasets list, a small answer.
        assert get(base, "/api/v1/datasets")[0] == 200
        assert get(base, "/api/v1/datasets/w/freq" + q(var="A"))[0] == 200
        baseline = vm_hwm(p.pid)
        con = duckdb.connect()
        want = {(a, b): n for a, b, n in con.execute(
            f"SELECT A, B, count(*) FROM read_csv('{csv}') GROUP BY ALL").fetchall()}
        results = []

        def client():
            url = base + "/api/v1/datasets/w/tab" + q(row="A", col="B")
            try:
                with urllib.request.urlopen(url, timeout=120) as r:
                    results.append((r.status, None, json.loads(r.read())))
            except urllib.error.HTTPError as e:
                results.append((e.code, e.headers.get("Retry-After"), json.loads(e.read())))

        threads = [threading.Thread(target=client) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(results) == 8
        ok = 0
        for status, retry, body in results:
            if status == 200:
                t = body["tables"][0]
                rows = [r["value"] for r in t["rows"]]
                cols = [c["value"] for c in t["cols"]]
                got = {(int(rows[i]), int(cols[j])): n for i, line in enumerate(t["counts"])
                       for j, n in enumerate(line) if n}
                assert got == want
                ok += 1
            else:
                assert status == 503 and retry == "1", (status, body)
                assert body["status"] == 503 and "memory" in body["error"] and "try again" in body["error"]
        assert ok >= 1
        # Still up, and answering.
        assert get(base, "/api/v1/datasets/w/freq" + q(var="B"))[0] == 200
        peak = vm_hwm(p.pid)
        print(f"baseline {baseline >> 20} MiB, peak {peak >> 20} MiB, {ok} of 8 answered")
        assert peak <= baseline + budget, (baseline, peak)
        # One request larger than the whole budget: refused, whatever runs.
        st, body = get(base, "/api/v1/datasets/w/tab" + q(row="A", col="B", control="A"))
        assert st == 400 and "budget" in body["error"], body
        assert p.poll() is None
    finally:
        p.terminate()
        p.wait(timeout=10)
