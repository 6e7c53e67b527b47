#!/usr/bin/env python3
"""Differential fuzzer for microtab's input paths (issue 10).

Three targets, each generating valid inputs and mutating them (byte flips,
insertions, deletions, truncation, duplicated and swapped lines):

* ``csv``    — CSV files with every kind of column (integers, decimals,
  floats with exponents, zero-padded codes, huge integers, quoted text with
  delimiters and newlines, missing tokens, empty fields), random
  delimiters, CRLF, BOM, and import options (small chunks, ``--na``).
* ``fixed``  — fixed-width data with a DDI codebook; the data and the XML
  are both mutated.
* ``filter`` — filter expressions from the SDA grammar and mutations of
  them, against a small dataset with missing values, decimals, floats and
  text.

Every run must end in exit 0, or exit 1 with exactly one stderr line
starting with ``error:`` (usage errors: exit 2) — never a crash, a panic or
a hang. Every successful run is checked against an independent oracle:

* ``csv``: Python's ``csv`` module reads the same file; every column's
  values (as the kind microtab chose — text, or numbers with the documented
  missing tokens) must equal microtab's, as a multiset;
* ``fixed``: the data sliced by the codebook's columns in Python (implied
  decimals applied) for unmutated data;
* ``filter``: a reference evaluator of the filter grammar in Python
  (docs/CLI.md) counts the rows that pass.

Usage::

    python3 tests/fuzz/fuzz.py [--seconds 60] [--seed N] [--target csv|fixed|filter|all]
                               [--bin target/release/microtab] [--keep DIR]

Exit status 1 with the reproducer saved under ``--keep`` (default
``fuzz-findings/``) when anything is found.
"""

from __future__ import annotations

import argparse
import collections
import csv
import io
import json
import math
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DEFAULT_NA = ["NA", "N/A", "n/a", "NaN", "nan", "-nan", "<NA>", "#N/A", "NULL", "null", "."] + [
    f".{c}" for c in "abcdefghijklmnopqrstuvwxyz"]


# Unicode White_Space, what Rust's str::trim removes (Python's strip also
# removes \x1c-\x1f).
WHITE_SPACE = "\t\n\x0b\x0c\r \x85\xa0\u1680" + "".join(chr(c) for c in range(0x2000, 0x200b)) + \
    "\u2028\u2029\u202f\u205f\u3000"


class Finding(Exception):
    pass


# --------------------------------------------------------------------------
# running microtab
# --------------------------------------------------------------------------

class Runner:
    def __init__(self, binary: Path, timeout: float = 20):
        self.bin = binary
        self.timeout = timeout
        self.runs = 0
        self.history = []

    def __call__(self, *args, env=None):
        self.runs += 1
        cmd = [str(self.bin), *map(str, args)]
        self.history.append(" ".join(f"{k}={v}" for k, v in (env or {}).items()) + " " + " ".join(cmd))
        try:
            p = subprocess.run(cmd, capture_output=True, timeout=self.timeout,
                               env={**os.environ, **(env or {})})
        except subprocess.TimeoutExpired:
            raise Finding(f"hang: `{' '.join(cmd)}` ran over {self.timeout} s")
        err = p.stderr.decode("utf-8", "replace")
        out = p.stdout.decode("utf-8", "replace")
        if p.returncode < 0 or "panicked" in err or p.returncode not in (0, 1, 2):
            raise Finding(f"crash: `{' '.join(cmd)}` exit {p.returncode}\n{err}")
        if p.returncode == 1:
            # One error line, after any warnings and notes.
            lines = err.strip().splitlines()
            errors = [l for l in lines if l.startswith("error:")]
            others = [l for l in lines if not l.startswith(("error:", "warning:", "note:"))]
            if len(errors) != 1 or others or not lines[-1].startswith("error:"):
                raise Finding(f"bad error report from `{' '.join(cmd)}`:\n{err}")
        return p.returncode, out, err


def freq_values(run, ds, var):
    """{value: count} of every category, missing ones included (None:
    system-missing), from microtab's JSON."""
    rc, out, err = run("freq", "--include-missing", "--format", "json", "--max-cells", "100000000", "--", ds, var)
    if rc != 0:
        raise Finding(f"freq {var} failed on an imported dataset: {err}")
    res = json.loads(out)
    got = collections.Counter()
    for r in res["rows"]:
        v = r["value"]
        if v is None or (r["missing"] and v == "" and r["label"] is None):
            v = None
        elif isinstance(r.get("label"), str) and isinstance(v, int) and r.get("kind") == "string":
            v = r["label"]
        got[v] += r["count"]
    return got


# --------------------------------------------------------------------------
# mutations
# --------------------------------------------------------------------------

def mutate(rng: random.Random, data: bytes, n: int | None = None) -> bytes:
    b = bytearray(data)
    for _ in range(n or rng.randint(1, 4)):
        op = rng.randrange(8)
        if not b:
            b += bytes([rng.randrange(256)])
            continue
        i = rng.randrange(len(b))
        if op == 0:
            b[i] ^= 1 << rng.randrange(8)
        elif op == 1:
            b.insert(i, rng.choice(b',;\t|"\n\r .-+0123456789eENA\xc3\xff'))
        elif op == 2:
            del b[i:i + rng.randint(1, 8)]
        elif op == 3:
            b = b[:i]
        elif op == 4:
            lines = bytes(b).split(b"\n")
            if len(lines) > 2:
                j = rng.randrange(1, len(lines))
                lines.insert(j, lines[rng.randrange(1, len(lines))])
            b = bytearray(b"\n".join(lines))
        elif op == 5:
            lines = bytes(b).split(b"\n")
            if len(lines) > 3:
                a, c = rng.randrange(1, len(lines)), rng.randrange(1, len(lines))
                lines[a], lines[c] = lines[c], lines[a]
            b = bytearray(b"\n".join(lines))
        elif op == 6:
            b[i:i] = rng.choice([b'"', b'""', b"\r\n", b"\n\n", b"\xef\xbb\xbf", b"9" * 20, b"-0", b"NA"])
        else:
            b[i] = rng.randrange(256)
    return bytes(b)


# --------------------------------------------------------------------------
# CSV
# --------------------------------------------------------------------------

def csv_cell(rng, kind):
    r = rng.random()
    if r < 0.06:
        return ""
    if r < 0.1 and kind != "text":
        return rng.choice(["NA", ".", "NaN", "N/A", "NULL"])
    if kind == "int":
        return str(rng.choice([0, 1, -1, 7, 255, 256, -128, 65535, 65536, 2**31 - 1, -2**31, 2**32, 10**12,
                               rng.randint(-1000, 1000)]))
    if kind == "dec":
        return f"{rng.randint(-99999, 99999) / 10 ** rng.randint(1, 4):.{rng.randint(1, 4)}f}"
    if kind == "float":
        return rng.choice([f"{rng.uniform(-1e6, 1e6):.6e}", repr(rng.random()), "1e300", "-2.5E-7"])
    if kind == "code":
        return f"{rng.randint(0, 99):02d}"
    if kind == "big":
        return str(rng.choice([2**63 - 1, -(2**63 - 1), 2**64 + rng.randint(0, 9)]))
    words = ["Ohio", "New York", 'say "hi"', "a,b", "line\nbreak", "NA", "ümlaut", " padded ", "x;y", "tab\tin"]
    return rng.choice(words)


def quote(field, delim):
    if any(c in field for c in (delim, '"', "\n", "\r")) or field != field.strip(" "):
        return '"' + field.replace('"', '""') + '"'
    return field


def gen_csv(rng):
    ncols = rng.randint(1, 6)
    kinds = [rng.choice(["int", "dec", "float", "code", "big", "text", "int", "text"]) for _ in range(ncols)]
    names = [f"C{i}" if rng.random() < 0.8 else f"c {i} ({kinds[i]})" for i in range(ncols)]
    delim = rng.choice([",", ",", ",", ";", "\t", "|"])
    eol = rng.choice(["\n", "\n", "\r\n"])
    rows = [[csv_cell(rng, k) for k in kinds] for _ in range(rng.randint(0, 400))]
    text = delim.join(quote(n, delim) for n in names) + eol
    text += "".join(delim.join(quote(c, delim) for c in r) + eol for r in rows)
    if rng.random() < 0.1:
        text = "\ufeff" + text
    return text.encode("utf-8")


def sniff_delimiter(text: str):
    """The delimiter microtab detects (docs/CLI.md), from its note."""
    return None


def csv_oracle(run, path: Path, ds: Path, err: str, na_opt):
    """Compares every column of an imported CSV with Python's csv module."""
    text = path.read_bytes().decode("utf-8-sig")
    delim = ","
    m = re.search(r"separated by (tab|'(.)')", err)
    if m:
        delim = "\t" if m.group(1) == "tab" else m.group(2)
    rows = [r for r in csv.reader(io.StringIO(text, newline=""), delimiter=delim, strict=True) if r]
    if not rows:
        return
    header, body = rows[0], rows[1:]
    if any(len(r) != len(header) for r in body):
        # Python's reader and microtab disagree on the records: only a
        # finding when microtab's record count is not Python's.
        raise Finding(f"{path}: microtab imported a file Python's csv reads as ragged")
    rc, out, e = run("info", ds, "--format", "json")
    info = json.loads(out)
    if info["rows"] != len(body):
        raise Finding(f"{path}: {info['rows']} rows imported, Python's csv reads {len(body)}")
    na = DEFAULT_NA if na_opt is None else [t for t in na_opt.split(",") if t]
    for j, v in enumerate(info["variables"]):
        name = header[j].strip(WHITE_SPACE) or f"V{j + 1}"
        if v["name"] != name:
            raise Finding(f"{path}: column {j + 1} named {v['name']!r}, header says {name!r}")
        if "\x00" in name:
            continue  # cannot be named on a command line
        want = collections.Counter()
        for r in body:
            f = r[j]
            if v["kind"] == "string":
                want[None if f == "" or (na_opt is not None and f in na) else f] += 1
            else:
                s = f.strip(" ")
                want[None if s == "" or s in na else float(s)] += 1
        got = freq_values(run, ds, v["name"])
        if v["kind"] != "string":
            got = collections.Counter({(None if k is None else float(k)): n for k, n in got.items()})
        if not counters_equal(got, want, v["kind"] == "int" and v["decimals"] > 0):
            raise Finding(f"{path}: column {name} ({v['kind']}) differs from Python's csv:\n"
                          f"microtab {sorted(got.items(), key=str)[:12]}\npython   {sorted(want.items(), key=str)[:12]}")


def counters_equal(a, b, approx):
    if not approx:
        return a == b
    # Implied decimals are exact in storage; their display as a double may
    # differ from Python's parse in the last bit beyond 2^53.
    key = lambda kv: (kv[0] is not None, kv[0] if kv[0] is not None else 0.0)  # noqa: E731
    ka, kb = sorted(a.items(), key=key), sorted(b.items(), key=key)
    if len(ka) != len(kb):
        return False
    for (x, n), (y, m) in zip(ka, kb):
        if n != m or (x is None) != (y is None):
            return False
        if x is not None and not math.isclose(x, y, rel_tol=1e-15, abs_tol=0):
            return False
    return True


def fuzz_csv(run, rng, work: Path):
    data = gen_csv(rng)
    mutated = rng.random() < 0.6
    if mutated:
        data = mutate(rng, data)
    path = work / "f.csv"
    path.write_bytes(data)
    ds = work / "f.mtab"
    shutil.rmtree(ds, ignore_errors=True)
    args = ["import", path, ds]
    na_opt = None
    if rng.random() < 0.2:
        na_opt = rng.choice(["", "NA", "NA,-1", "."])
        args += ["--na", na_opt]
    env = {"MICROTAB_CHUNK_BYTES": str(rng.choice([4096, 5000, 1 << 20]))}
    rc, out, err = run(*args, env=env)
    if rc == 1:
        msg = err.strip()
        if str(path) not in msg and path.name not in msg and "--" not in msg:
            raise Finding(f"import error does not name the file: {msg}")
        return "error"
    if rc != 0:
        raise Finding(f"import usage error: {err}")
    if not ds.is_dir():
        raise Finding("import succeeded without a dataset")
    csv_oracle(run, path, ds, err, na_opt)
    rc, out, err = run("verify", ds)
    if rc != 0:
        raise Finding(f"verify fails on a fresh import: {err}")
    return "ok"


# --------------------------------------------------------------------------
# fixed width + DDI
# --------------------------------------------------------------------------

def gen_fixed(rng):
    nvars = rng.randint(1, 5)
    vars_, pos = [], 1
    for i in range(nvars):
        text = rng.random() < 0.25
        width = rng.randint(1, 10)
        dcml = 0 if text or rng.random() < 0.6 else rng.randint(1, min(3, width))
        vars_.append(dict(name=f"V{i}", start=pos, width=width, dcml=dcml, text=text))
        pos += width
    lines = []
    for _ in range(rng.randint(0, 300)):
        line = ""
        for v in vars_:
            if rng.random() < 0.05:
                line += " " * v["width"]
            elif v["text"]:
                line += "".join(rng.choice("ABCxyz ") for _ in range(v["width"]))
            else:
                line += str(rng.randrange(10 ** v["width"])).rjust(v["width"], rng.choice("0 "))
        lines.append(line)
    xml = ['<?xml version="1.0" encoding="UTF-8"?>', '<codeBook xmlns="ddi:codebook:2_5"><fileDscr><fileTxt>',
           '<fileName>f.dat</fileName><fileStrc type="rectangular"/></fileTxt></fileDscr><dataDscr>']
    for v in vars_:
        end = v["start"] + v["width"] - 1
        fmt = '<varFormat type="character"/>' if v["text"] else ""
        xml.append(f'<var name="{v["name"]}" dcml="{v["dcml"]}"><location StartPos="{v["start"]}" '
                   f'EndPos="{end}" width="{v["width"]}"/><labl>{v["name"]} label</labl>{fmt}'
                   + ('<catgry missing="Y"><catValu>9</catValu><labl>NIU</labl></catgry>' if rng.random() < 0.3 else "")
                   + "</var>")
    xml.append("</dataDscr></codeBook>")
    return vars_, ("\n".join(lines) + ("\n" if lines else "")).encode(), "\n".join(xml).encode()


def fuzz_fixed(run, rng, work: Path):
    vars_, dat, xml = gen_fixed(rng)
    which = rng.random()
    data_mutated = which < 0.35
    xml_mutated = 0.35 <= which < 0.6
    if data_mutated:
        dat = mutate(rng, dat)
    if xml_mutated:
        xml = mutate(rng, xml)
    dp, xp = work / "f.dat", work / "f.xml"
    dp.write_bytes(dat)
    xp.write_bytes(xml)
    ds = work / "x.mtab"
    shutil.rmtree(ds, ignore_errors=True)
    rc, out, err = run("import", dp, "--ddi", xp, ds, env={"MICROTAB_CHUNK_BYTES": "4096"})
    if rc == 1:
        msg = err.strip()
        if dp.name not in msg and xp.name not in msg and "--" not in msg:
            raise Finding(f"fixed-width import error names neither file: {msg}")
        return "error"
    if rc != 0:
        raise Finding(f"fixed-width usage error: {err}")
    if xml_mutated:
        try:
            # Control characters XML 1.0 forbids are tolerated (they change
            # nothing the codebook says); anything else malformed is not.
            lenient = re.sub(rb"[\x00-\x08\x0b\x0c\x0e-\x1f]", b"", xml)
            # The XML declaration says nothing about the variables.
            lenient = re.sub(rb"(?s)^[^<]*<\?.*?\?>", b"", lenient)
            root = ET.fromstring(lenient)
        except ET.ParseError as e:
            if "unbound prefix" in str(e):
                return "ok"  # namespaces, not XML well-formedness
            raise Finding(f"a codebook Python's XML parser rejects ({e}) was imported")
        # Variables are the <var> children of <dataDscr> (elsewhere they
        # describe nothing).
        names = [v.get("name") for d in root.iter() if d.tag.split("}")[-1] == "dataDscr"
                 for v in d if v.tag.split("}")[-1] == "var"]
        info = json.loads(run("info", ds, "--format", "json")[1])
        got = [v["name"] for v in info["variables"]]
        # Names are trimmed; a var without a name takes its ID.
        if sorted(got) != sorted(n.strip() for n in names if n and n.strip()):
            raise Finding(f"codebook lists {names}, dataset has {got}")
        return "ok"
    if data_mutated:
        return "ok"
    lines = [l for l in dat.decode().split("\n") if l]
    for v in vars_:
        want = collections.Counter()
        for l in lines:
            f = l[v["start"] - 1:v["start"] - 1 + v["width"]]
            s = f.strip(" \t")
            if s == "":
                want[None] += 1
            elif v["text"]:
                want[s] += 1
            else:
                want[int(s) / 10 ** v["dcml"]] += 1
        got = freq_values(run, ds, v["name"])
        if not v["text"]:
            got = collections.Counter({(None if k is None else float(k)): n for k, n in got.items()})
        if not counters_equal(got, want, v["dcml"] > 0):
            raise Finding(f"fixed-width {v}: microtab {sorted(got.items(), key=str)[:10]} python {sorted(want.items(), key=str)[:10]}")
    return "ok"


# --------------------------------------------------------------------------
# filters
# --------------------------------------------------------------------------

FILTER_ROWS = 600


def filter_dataset(run, rng, work: Path):
    """A dataset with int A (missing code 99), decimal D, float F, text S;
    returns (ds, rows as dicts with None for missing)."""
    rows = []
    for i in range(FILTER_ROWS):
        a = rng.choice([None, 99] + list(range(-5, 40)))
        d = rng.choice([None] + [x / 10 for x in range(-20, 60)])
        f = rng.choice([None, 0.5, -1.25, 3.0, 1e-3, 250.75])
        s = rng.choice([None, "Ohio", "New York", "Utah", "3", "25"])
        rows.append(dict(K=1, A=a, D=d, F=f, S=s))
    text = "K,A,D,F,S\n" + "".join(
        ",".join("" if r[c] is None else (f"{r[c]:.1f}" if c == "D" else str(r[c])) for c in "KADFS") + "\n"
        for r in rows)
    path = work / "filter.csv"
    path.write_text(text)
    ds = work / "filter.mtab"
    shutil.rmtree(ds, ignore_errors=True)
    rc, out, err = run("import", path, ds, "--missing", "A=99", "--type", "F=float", "--type", "S=string")
    if rc != 0:
        raise Finding(f"filter dataset import failed: {err}")
    for r in rows:
        if r["A"] == 99:
            r["A"] = None
    return ds, rows


def gen_filter(rng):
    def num(var):
        if var == "A":
            return str(rng.choice([-5, 0, 1, 10, 25, 39, 40, 99, rng.randint(-10, 50)]))
        if var == "D":
            return rng.choice(["0.5", "-1.5", "2", "3.25", "0", "5.9"])
        return rng.choice(["0.5", "-1.25", "3", "250.75", "1e-3", "100"])

    terms = []
    for _ in range(rng.randint(1, 3)):
        var = rng.choice("ADFS")
        name = rng.choice([var, var.lower(), f'"{var}"', f"`{var}`"])
        if var == "S":
            vals = [rng.choice(["Ohio", '"New York"', "Utah", "3", "25", "Iowa"]) for _ in range(rng.randint(1, 3))]
            terms.append(rng.choice([f"{name}({','.join(vals)})", f"{name}={vals[0]}", f"{name}!={vals[0]}",
                                     f"{name}({vals[0]}-{vals[-1]})", f"{name}>{vals[0]}"]))
            continue
        if rng.random() < 0.5:
            items = []
            for _ in range(rng.randint(1, 3)):
                k = rng.random()
                if k < 0.4:
                    items.append(num(var))
                elif k < 0.8:
                    items.append(f"{num(var)}-{num(var)}")
                else:
                    items.append(rng.choice([f"*-{num(var)}", f"{num(var)}-*"]))
            terms.append(f"{name}({','.join(items)})")
        else:
            op = rng.choice(["<", "<=", ">", ">=", "=", "!=", "==", "<>"])
            terms.append(f"{name}{op}{num(var)}")
    return " ".join(terms)


def ref_value(var, s):
    s = s.strip()
    if len(s) >= 2 and s[0] == s[-1] == '"':
        s = s[1:-1]
    if var == "S":
        return s
    if not re.fullmatch(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?", s):
        raise ValueError(s)
    return float(s)


def ref_filter(text):
    """Parses a filter as docs/CLI.md describes it; returns a predicate over
    a row dict, or raises ValueError."""
    terms = []
    # Terms are separated by blanks, or (SDA) by a comma after a term's
    # closing parenthesis.
    tokens = []
    for t in re.findall(r'(?:"[^"]*"|`[^`]*`|\([^)]*\)|[^\s"`(])+', text):
        cur, q, depth = "", None, 0
        for ch in t:
            if q:
                q = None if ch == q else q
            elif ch in "\"`":
                q = ch
            elif ch == "(":
                depth += 1
            elif ch == ")":
                depth -= 1
            elif ch == "," and depth == 0 and (cur.endswith(")") or (not cur and tokens and tokens[-1].endswith(")"))):
                if cur:
                    tokens.append(cur)
                cur = ""
                continue
            cur += ch
        if cur:
            tokens.append(cur)
    for t in tokens:
        m = re.fullmatch(r'("([^"]+)"|`([^`]+)`|[A-Za-z]+)(.*)', t, re.S)
        if not m:
            raise ValueError(t)
        var = (m.group(2) or m.group(3) or m.group(1)).upper()
        if var not in "ADFS" or len(var) != 1:
            raise ValueError(var)
        rest = m.group(4)
        if rest.startswith("("):
            if not rest.endswith(")"):
                raise ValueError(t)
            spans = []
            for item in rest[1:-1].split(","):
                item = item.strip()
                if not item:
                    raise ValueError(t)
                # The range dash: not first, not after another dash or an
                # exponent's e, not inside quotes (docs/CLI.md).
                cut, inq = None, False
                for i, ch in enumerate(item):
                    if ch == '"':
                        inq = not inq
                    if not inq and ch == "-" and i > 0 and item[i - 1] not in "-eE":
                        cut = i
                        break
                if cut is not None:
                    if var == "S":
                        raise ValueError("range on text")
                    a, b = item[:cut].strip(), item[cut + 1:].strip()
                    if not a or not b:
                        raise ValueError("incomplete range")
                    lo = None if a == "*" else ref_value(var, a)
                    hi = None if b == "*" else ref_value(var, b)
                    if lo is not None and hi is not None and lo > hi:
                        raise ValueError("reversed range (holds no value)")
                    spans.append((lo, hi))
                else:
                    v = ref_value(var, item)
                    spans.append((v, v))
            terms.append((var, "in", spans))
        else:
            mm = re.fullmatch(r"(<=|>=|!=|<>|==|<|>|=)(.+)", rest, re.S)
            if not mm:
                raise ValueError(t)
            op = {"==": "=", "<>": "!="}.get(mm.group(1), mm.group(1))
            if var == "S" and op not in ("=", "!="):
                raise ValueError("order on text")
            terms.append((var, op, ref_value(var, mm.group(2))))

    def test(row):
        for var, op, arg in terms:
            x = row[var]
            if x is None:
                return False
            if op == "in":
                if not any((lo is None or x >= lo) and (hi is None or x <= hi) for lo, hi in arg):
                    return False
            elif not {"<": x < arg, "<=": x <= arg, ">": x > arg, ">=": x >= arg,
                      "=": x == arg, "!=": x != arg}[op]:
                return False
        return True
    return test


def fuzz_filter(run, rng, work: Path, state):
    if "filter_ds" not in state:
        state["filter_ds"] = filter_dataset(run, rng, work)
    ds, rows = state["filter_ds"]
    f = gen_filter(rng)
    mutated = rng.random() < 0.3
    if mutated:
        f = mutate(rng, f.encode(), rng.randint(1, 2)).decode("utf-8", "replace").replace("\x00", "")
    if f.startswith("-"):
        f = " " + f
    rc, out, err = run("freq", ds, "K", "--filter", f, "--format", "json")
    try:
        pred = ref_filter(f)
        want = sum(1 for r in rows if pred(r))
    except (ValueError, TypeError, KeyError):
        pred = None
    if rc == 1:
        if pred is not None and not mutated:
            raise Finding(f"filter {f!r} refused, the reference grammar accepts it: {err}")
        return "error"
    if rc == 2:
        return "usage"
    got = sum(r["count"] for r in json.loads(out)["rows"])
    if pred is None:
        if not mutated:
            raise Finding(f"filter {f!r} accepted ({got} rows), the reference grammar rejects it")
        return "ok"
    if got != want:
        raise Finding(f"filter {f!r}: microtab counts {got} rows, the reference {want}")
    return "ok"


# --------------------------------------------------------------------------

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--target", choices=["csv", "fixed", "filter", "all"], default="all")
    ap.add_argument("--bin", default=os.environ.get("MICROTAB_BIN", REPO / "target" / "release" / "microtab"))
    ap.add_argument("--keep", default=REPO / "fuzz-findings")
    a = ap.parse_args(argv)
    seed = a.seed if a.seed is not None else random.randrange(1 << 32)
    rng = random.Random(seed)
    run = Runner(Path(a.bin))
    targets = ["csv", "fixed", "filter"] if a.target == "all" else [a.target]
    stats = collections.Counter()
    state = {}
    end = time.monotonic() + a.seconds
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        n = 0
        while time.monotonic() < end:
            t = targets[n % len(targets)]
            n += 1
            run.history = run.history[-20:]
            try:
                if t == "csv":
                    outcome = fuzz_csv(run, rng, work)
                elif t == "fixed":
                    outcome = fuzz_fixed(run, rng, work)
                else:
                    outcome = fuzz_filter(run, rng, work, state)
                stats[f"{t}:{outcome}"] += 1
            except Finding as e:
                keep = Path(a.keep) / f"{t}-{seed}-{n}"
                keep.mkdir(parents=True, exist_ok=True)
                for f in work.iterdir():
                    if f.is_file():
                        shutil.copy(f, keep / f.name)
                (keep / "finding.txt").write_text(str(e) + "\n\nlast commands:\n" + "\n".join(run.history) + "\n")
                print(f"FINDING ({t}, seed {seed}, case {n}): {e}\ninputs kept in {keep}", file=sys.stderr)
                return 1
    print(f"fuzz: seed {seed}, {n} cases, {run.runs} runs of microtab, no findings: "
          + ", ".join(f"{k} {v}" for k, v in sorted(stats.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
