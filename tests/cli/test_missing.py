"""System missing (empty fields) and user-missing codes (--missing)."""

import pytest

from conftest import approx, disp, make_dataset, run_json

# ID, X (int, codes 8 and 9 user-missing), W (weight, -1.00 user-missing),
# S (string), Z (zeros and empties)
ROWS = [
    (1, "1", "1.50", "a", "0"),
    (2, "", "2.25", "b", ""),
    (3, "2", "", "a", "0"),
    (4, "9", "3.00", "", "5"),
    (5, "2", "1.25", "b", ""),
    (6, "1", "-1.00", "a", "0"),
    (7, "8", "2.00", "c", "5"),
    (8, "1", "0.50", "c", ""),
    (9, "", "4.00", "a", "0"),
    (10, "2", "1.00", "", "7"),
    (11, "9", "1.00", "b", "0"),
]


@pytest.fixture(scope="module")
def mds(tmp_path_factory):
    d = tmp_path_factory.mktemp("missing")
    text = "ID,X,W,S,Z\n" + "".join(",".join(map(str, r)) + "\n" for r in ROWS)
    return make_dataset(d, "m", text, "--missing", "X=8,9", "--missing", "W=-1.00")[1]


def _rows(**kw):
    """Rows as dicts with X/W/Z parsed (None = system missing)."""
    out = []
    for i, x, w, s, z in ROWS:
        out.append(dict(ID=i, X=int(x) if x else None, W=float(w) if w else None,
                        S=s or None, Z=int(z) if z else None))
    return out


def hand_freq(var, weight=False, include_missing=False, codes=()):
    """Hand oracle: {value: (count, weighted)} for valid values,
    and {value: count} for missing categories."""
    valid, miss = {}, {}
    for r in _rows():
        if weight and (r["W"] is None or r["W"] == -1.0):
            continue
        v = r[var]
        w = r["W"] if weight else 0.0
        if v is None or v in codes:
            c = miss.setdefault(v, [0, 0.0])
        else:
            c = valid.setdefault(v, [0, 0.0])
        c[0] += 1
        c[1] += w
    return valid, miss


def test_empty_is_not_zero(mds):
    res = run_json("freq", mds, "Z")
    got = {r["value"]: r["count"] for r in res["rows"]}
    assert got == {0: 5, 5: 2, 7: 1}
    assert res["total"]["count"] == 8
    assert [r["percent"] for r in res["rows"]] == approx([62.5, 25.0, 12.5])
    m = run_json("means", mds, "Z", "--by", "X")
    valid = [r for r in _rows() if r["Z"] is not None and r["X"] not in (None, 8, 9)]
    assert m["total"]["n"] == len(valid)
    assert m["total"]["mean"] == approx(sum(r["Z"] for r in valid) / len(valid))


def test_declared_codes_excluded(mds):
    valid, _ = hand_freq("X", codes=(8, 9))
    res = run_json("freq", mds, "X")
    assert [(r["value"], r["count"]) for r in res["rows"]] == sorted(
        (v, c[0]) for v, c in valid.items())
    assert all(r["missing"] is False for r in res["rows"])
    assert res["total"]["count"] == sum(c[0] for c in valid.values())


def test_weighted_excludes_missing_weight(mds):
    valid, _ = hand_freq("X", weight=True, codes=(8, 9))
    res = run_json("freq", mds, "X", "--weight", "W")
    assert [(r["value"], r["count"]) for r in res["rows"]] == sorted(
        (v, c[0]) for v, c in valid.items())
    tot = sum(c[1] for c in valid.values())
    for r in res["rows"]:
        assert r["weighted"] == approx(valid[r["value"]][1])
        assert r["percent"] == approx(100 * valid[r["value"]][1] / tot)
    assert res["total"]["count"] == sum(c[0] for c in valid.values())
    assert res["total"]["weighted"] == approx(tot)


def test_include_missing(mds):
    valid, miss = hand_freq("X", codes=(8, 9))
    res = run_json("freq", mds, "X", "--include-missing")
    rows = res["rows"]
    # system missing comes last
    assert rows[-1]["value"] is None and rows[-1]["missing"] is True
    assert rows[-1]["count"] == miss[None][0]
    flagged = {r["value"]: r["count"] for r in rows if r["missing"]}
    assert flagged == {8: miss[8][0], 9: miss[9][0], None: miss[None][0]}
    assert all(r["percent"] is None for r in rows if r["missing"])
    ok = [r for r in rows if not r["missing"]]
    n_valid = sum(c[0] for c in valid.values())
    assert [(r["value"], r["count"]) for r in ok] == sorted((v, c[0]) for v, c in valid.items())
    assert [r["percent"] for r in ok] == approx([100 * valid[r["value"]][0] / n_valid for r in ok])
    # codes are ordered by value among the others, before system missing
    vals = [r["value"] for r in rows[:-1]]
    assert vals == sorted(vals)
    # total: either valid-only or everything (contract is not explicit)
    assert res["total"]["count"] in (n_valid, len(ROWS))


def test_include_missing_weighted(mds):
    """Rows with a missing weight are excluded even from missing categories."""
    valid, miss = hand_freq("X", weight=True, codes=(8, 9))
    res = run_json("freq", mds, "X", "--include-missing", "--weight", "W")
    flagged = {r["value"]: (r["count"], r["weighted"]) for r in res["rows"] if r["missing"]}
    assert flagged == {k: (v[0], approx(v[1])) for k, v in miss.items()}


def test_include_missing_string(mds):
    res = run_json("freq", mds, "S", "--include-missing")
    rows = res["rows"]
    assert [disp(r) for r in rows] == ["a", "b", "c", None]
    assert [r["count"] for r in rows] == [4, 3, 2, 2]
    assert [r["missing"] for r in rows] == [False, False, False, True]
    plain = run_json("freq", mds, "S")
    assert [(disp(r), r["count"]) for r in plain["rows"]] == [("a", 4), ("b", 3), ("c", 2)]
    assert plain["total"]["count"] == 9


def test_tab_include_missing(mds):
    res = run_json("tab", mds, "X", "S", "--include-missing")
    t = res["tables"][0]
    rows = [(r["value"], r["missing"]) for r in t["rows"]]
    assert rows == [(1, False), (2, False), (8, True), (9, True), (None, True)]
    cols = [(disp(c), c["missing"]) for c in t["cols"]]
    assert cols == [("a", False), ("b", False), ("c", False), (None, True)]
    exp = {}
    for r in _rows():
        exp[(r["X"], r["S"])] = exp.get((r["X"], r["S"]), 0) + 1
    for i, (rv, _) in enumerate(rows):
        for j, (cv, _) in enumerate(cols):
            assert t["counts"][i][j] == exp.get((rv, cv), 0), (rv, cv)
    # without --include-missing only valid categories
    t = run_json("tab", mds, "X", "S")["tables"][0]
    assert [r["value"] for r in t["rows"]] == [1, 2]
    assert [disp(c) for c in t["cols"]] == ["a", "b", "c"]
    assert t["counts"] == [[2, 0, 1], [1, 1, 0]]


def test_info_nulls_and_missing_codes(mds):
    info = run_json("info", mds)
    v = {x["name"]: x for x in info["variables"]}
    assert info["rows"] == len(ROWS)
    assert v["X"]["nulls"] == 2 and v["Z"]["nulls"] == 3 and v["W"]["nulls"] == 1
    assert v["S"]["nulls"] == 2 and v["ID"]["nulls"] == 0
    assert sorted(v["X"]["missing_codes"]) == [8, 9]
    assert v["W"]["missing_codes"] == [-1.0]
    assert v["Z"]["missing_codes"] == []
    assert v["Z"]["min"] == 0 and v["Z"]["max"] == 7
