"""A command line that helps (issue 31, item 4): "did you mean" for
variables, subcommands, options and option values; how to see every
variable; how to quote a name with spaces or punctuation; errors that name
the dataset, not its internal files; decimal-comma CSVs; progress only on
a terminal. Each hint's exact text is checked, and so is what it names
(the command it names lists every variable)."""

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import duckdb
import pytest

from conftest import BIN, run, run_json, write

VARS = ["AGE", "SEX", "Body Mass (g)", "Flipper Length", "PERWT"] + [f"V{i}" for i in range(20)]


@pytest.fixture(scope="module")
def wide(tmp_path_factory):
    """A dataset of 25 variables, two of them with spaces in their names."""
    tmp = tmp_path_factory.mktemp("hints")
    rows = [",".join(f'"{v}"' if " " in v else v for v in VARS)]
    for i in range(60):
        rows.append(",".join([str(20 + i % 50), str(1 + i % 2), str(3000 + 17 * i), str(180 + i % 9), str(1 + i % 4)]
                             + [str(i % 3) for _ in range(20)]))
    csv = write(tmp / "w.csv", "\n".join(rows) + "\n")
    ds = tmp / "w.mtab"
    run("import", csv, ds)
    return ds


def err(p):
    """The one error line of a failed command."""
    assert p.returncode != 0
    lines = [line for line in p.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, p.stderr
    return lines[0]


FIRST12 = "the first 12 of its 25 variables: AGE, SEX, Body Mass (g), Flipper Length, PERWT, V0, V1, V2, V3, V4, V5, V6, …"


def test_unknown_variable_everywhere_says_did_you_mean_and_how_to_list_all(wide):
    tail = f"; {FIRST12}; `microtab info {wide}` lists all 25"
    cases = [
        (("freq", wide, "AEG"), "AEG", "AGE"),
        (("freq", wide, "AGE", "--weight", "PERWTT"), "PERWTT", "PERWT"),
        (("means", wide, "AGE", "--by", "sxe"), "sxe", "SEX"),
        (("tab", wide, "AGE", "SEXX"), "SEXX", "SEX"),
        (("codebook", wide, "AEG"), "AEG", "AGE"),
        (("label", wide, "AEG", "1=x"), "AEG", "AGE"),
        (("missing", wide, "AEG", "9"), "AEG", "AGE"),
        (("list", wide, "AEG"), "AEG", "AGE"),
        (("subset", wide, wide.parent / "o.mtab", "--vars", "AGE,SEXX"), "SEXX", "SEX"),
        (("drop", wide, "PERWTX"), "PERWTX", "PERWT"),
        (("rename", wide, "PERWTT", "W"), "PERWTT", "PERWT"),
        (("design", wide, "--weight", "PERWTT"), "PERWTT", "PERWT"),
        (("freq", wide, "AGE", "--filter", "SXE=1"), "SXE", "SEX"),
    ]
    for args, bad, good in cases:
        line = err(run(*args, ok=False))
        assert f"unknown variable '{bad}' in {wide} (did you mean '{good}'?)" in line, line
        assert line.endswith(tail), line
    # Case, spaces and punctuation aside, the same name.
    line = err(run("freq", wide, "body_mass_g", ok=False))
    assert f"unknown variable 'body_mass_g' in {wide} (did you mean 'Body Mass (g)'?)" in line
    # Nothing close: no guess, still the count and the command.
    line = err(run("freq", wide, "ZZZ", ok=False))
    assert line == f"error: unknown variable 'ZZZ' in {wide}{tail}"
    # The command the hint names lists every variable.
    info = run("info", wide).stdout
    assert all(v in info for v in VARS)
    assert len(run_json("info", wide)["variables"]) == 25


def test_a_small_dataset_lists_all_its_variables(tmp_path):
    csv = write(tmp_path / "s.csv", "AGE,SEX\n1,2\n")
    ds = tmp_path / "s.mtab"
    run("import", csv, ds)
    assert err(run("freq", ds, "AEG", ok=False)) == (
        f"error: unknown variable 'AEG' in {ds} (did you mean 'AGE'?); variables: AGE, SEX"
    )


def test_subcommands_options_and_values_did_you_mean(wide):
    for bad in ("frq", "FREQ", "feq"):
        p = run(bad, wide, "AGE", ok=False)
        assert f"error: unrecognized subcommand '{bad}'" in p.stderr
        assert "tip: a similar subcommand exists: 'freq'" in p.stderr, p.stderr
    p = run("freq", wide, "AGE", "--wieght", "PERWT", ok=False)
    assert "error: unexpected argument '--wieght' found" in p.stderr
    assert "tip: a similar argument exists: '--weight'" in p.stderr, p.stderr
    assert "use '-- --wieght'" not in p.stderr
    p = run("means", wide, "AGE", "--bye", "SEX", ok=False)
    assert "tip: a similar argument exists: '--by'" in p.stderr, p.stderr
    p = run("freq", wide, "AGE", "--format", "jsn", ok=False)
    assert "tip: a similar value exists: 'json'" in p.stderr, p.stderr
    # Nothing close: no tip.
    p = run("freq", wide, "AGE", "--zzzzzz", ok=False)
    assert "similar" not in p.stderr


QUOTE = "inside a longer argument a name with spaces or punctuation is quoted with backticks (or double quotes): "


def test_names_with_spaces_hint_shows_the_quoted_argument(wide):
    cases = [
        (("means", wide, "AGE", "--by", "Body Mass (g), SEX"), "--by '`Body Mass (g)`, SEX'"),
        (("freq", wide, "AGE", "--filter", "Body Mass (g)>4000"), "--filter '`Body Mass (g)`>4000'"),
        (("list", wide, "AGE", "Flipper Length,SEX"), "'`Flipper Length`,SEX'"),
        (("subset", wide, wide.parent / "q.mtab", "--vars", "AGE,Flipper Length"), "--vars 'AGE,`Flipper Length`'"),
    ]
    for args, fixed in cases:
        line = err(run(*args, ok=False))
        assert line.endswith("; " + QUOTE + fixed), line
    # The shell cut the name at its spaces.
    line = err(run("means", wide, "AGE", "--by", "Flipper", "Length", ok=False))
    assert line.endswith("; Flipper Length has spaces: quote it for the shell, as one argument: --by 'Flipper Length'"), line
    p = run("freq", wide, "AGE", "--weight", "Flipper", "Length", ok=False)
    assert "tip: Flipper Length has spaces: quote it for the shell, as one argument: --weight 'Flipper Length'" in p.stderr
    # The advice works: quoted as shown, each answers.
    means = run_json("means", wide, "AGE", "--by", "`Body Mass (g)`, SEX")
    assert means
    f = run_json("freq", wide, "AGE", "--filter", "`Body Mass (g)`>4000")
    want = duckdb.sql(f"SELECT count(*) FROM read_csv('{wide.parent / 'w.csv'}') WHERE \"Body Mass (g)\" > 4000").fetchall()[0][0]
    assert f["total"]["count"] == want
    run("list", wide, "AGE", "`Flipper Length`,SEX")
    # Whole or quoted names need no advice: those commands succeed.
    run("freq", wide, "Body Mass (g)")


def test_a_filter_the_shell_split_gets_the_quoted_filter(wide, tmp_path):
    tip = ("tip: a filter with spaces is one argument: quote it for the shell, as in --filter {} "
           "(unquoted, the shell splits it at its spaces, and a < or > in it sends the output to a "
           "file or reads one)")
    # `--filter AGE == 25`, and `--filter AGE >= 25` as the shell passes it on
    # (the `>=` became a redirection to a file named `=`), and `--filter=`.
    for args, shown in [(("--filter", "AGE", "==", "25"), "'AGE == 25'"),
                        (("--filter", "AGE", "25"), "'AGE 25'"),
                        (("--filter=AGE", "in", "(25,", "26)"), "'AGE in (25, 26)'"),
                        (("--filter", "SEX(1)", "and", "AGE", "<", "30", "--weight", "PERWT"), "'SEX(1) and AGE < 30'")]:
        p = run("freq", wide, "SEX", *args, ok=False)
        assert p.returncode == 2 and tip.format(shown) in p.stderr, p.stderr
    # Quoted as the tip shows, it answers (DuckDB counts the same records).
    f = run_json("freq", wide, "SEX", "--filter", "AGE == 25")
    want = duckdb.sql(f"SELECT count(*) FROM read_csv('{wide.parent / 'w.csv'}') WHERE AGE = 25").fetchall()[0][0]
    assert f["total"]["count"] == want > 0
    # Other stray arguments get no filter tip.
    p = run("freq", wide, "SEX", "AGE", ok=False)
    assert "filter" not in p.stderr, p.stderr


def as_other_user():
    """Runs a child as `nobody` when these tests run as root (root writes
    anywhere); None when not root."""
    if os.geteuid() != 0:
        return None
    return 65534


def test_unwritable_dataset_error_names_the_dataset(tmp_path):
    user = as_other_user()
    # pytest's own directories are private to root: `nobody` works in a
    # directory of its own under the system's temporary directory.
    base = Path(tempfile.mkdtemp()) if user is not None else tmp_path
    try:
        unwritable(base, user)
    finally:
        for root, dirs, files in os.walk(base):
            os.chmod(root, 0o755)
        if user is not None:
            shutil.rmtree(base)


def unwritable(base, user):
    base.chmod(0o755)
    csv = write(base / "p.csv", "AGE,W\n1,2\n3,4\n")
    csv.chmod(0o644)
    ro = base / "ro"
    ro.mkdir()
    ro.chmod(0o755)
    ds = ro / "p.mtab"
    run("import", csv, ds)
    for root, dirs, files in os.walk(ds):
        for f in files:
            os.chmod(os.path.join(root, f), 0o644)
        os.chmod(root, 0o755)
    ds.chmod(0o555)

    def attempt(*args):
        return subprocess.run([str(BIN), *map(str, args)], capture_output=True, text=True, user=user)

    want = f"error: cannot write to dataset {ds}: permission denied"
    for args in (("label", ds, "AGE", "1=one"), ("missing", ds, "AGE", "9"),
                 ("compute", ds, "NEW", "=", "AGE + 1"), ("rename", ds, "AGE", "AGE2"),
                 ("drop", ds, "W"), ("design", ds, "--weight", "W"),
                 ("import", csv, ds, "--force")):
        p = attempt(*args)
        assert err(p) == want, (args, p.stderr)
        assert ".lock" not in p.stderr
    ro.chmod(0o555)
    p = attempt("import", csv, ro / "q.mtab")
    assert err(p) == f"error: cannot write to dataset {ro / 'q.mtab'}: permission denied"
    assert ".importing" not in p.stderr
    # Reading it still works.
    assert attempt("freq", ds, "AGE").returncode == 0
    # A dataset that cannot be read is named, not its manifest.
    ds.chmod(0o700)
    if user is not None:
        p = attempt("freq", ds, "AGE")
        assert err(p) == f"error: cannot read dataset {ds}: permission denied", p.stderr
        assert "manifest.json" not in p.stderr


def decimal_comma_csv(path, rows=3000):
    """A ';'-separated CSV with numbers written with a decimal comma, a
    missing value, negative numbers, integers and a text column."""
    lines = ["ID;INC;W;NAME"]
    for i in range(rows):
        inc = "" if i % 97 == 0 else f"{'-' if i % 5 == 0 else ''}{i * 37 % 10000},{i % 100:02d}"
        w = f"{1 + i % 9},{i % 4 * 25}" if i % 3 else str(1 + i % 7)
        lines.append(f"{i};{inc};{w};n{i % 11}")
    return write(path, "\n".join(lines) + "\n")


def test_decimal_comma_note_names_the_columns(tmp_path):
    csv = decimal_comma_csv(tmp_path / "dc.csv", 50)
    p = run("import", csv, tmp_path / "t.mtab")
    notes = [line for line in p.stderr.splitlines() if line.startswith("note:")]
    assert notes == [
        "note: columns are separated by ';' (detected from the first lines); -d chooses another",
        'note: column INC is read as text: its numbers are written with a decimal comma ("37,01" on line 3); --decimal-comma reads them as numbers',
        'note: column W is read as text: its numbers are written with a decimal comma ("2,25" on line 3); --decimal-comma reads them as numbers',
    ], p.stderr
    # A text column of other words is no decimal-comma column.
    csv2 = write(tmp_path / "words.csv", "A;B\n1,5;x\nfoo;2\n")
    p = run("import", csv2, tmp_path / "w.mtab")
    assert "decimal comma" not in p.stderr


@pytest.mark.parametrize("chunk", [None, "4096"])
def test_decimal_comma_import_reads_the_numbers_pandas_and_duckdb_read(tmp_path, chunk):
    import pandas as pd
    csv = decimal_comma_csv(tmp_path / "dc.csv")
    ds = tmp_path / "dc.mtab"
    env = dict(os.environ, **({"MICROTAB_CHUNK_BYTES": chunk} if chunk else {}))
    p = run("import", csv, ds, "--decimal-comma", env=env)
    assert "decimal comma" not in p.stderr
    info = {v["name"]: v for v in run_json("info", ds)["variables"]}
    assert info["INC"]["kind"] != "string" and info["W"]["kind"] != "string", info
    frame = pd.read_csv(csv, sep=";", decimal=",")
    duck = duckdb.sql(f"SELECT * FROM read_csv('{csv}', delim=';', decimal_separator=',', header=true)").df()
    got = {r["value"]: r["count"] for r in run_json("freq", ds, "INC", "--include-missing")["rows"] if not r["missing"]}
    want = frame["INC"].dropna().value_counts().to_dict()
    assert {float(k): v for k, v in got.items()} == {float(k): v for k, v in want.items()}
    assert sorted(duck["INC"].dropna().astype(float)) == sorted(frame["INC"].dropna())
    # Exact decimals: the weighted totals are DuckDB's exact decimal sums.
    m = run_json("means", ds, "INC", "--by", "NAME", "--weight", "W")["total"]
    total, mean = duckdb.sql(
        f"SELECT sum(W), sum(INC * W) / sum(W) FROM read_csv('{csv}', delim=';', decimal_separator=',', header=true) WHERE INC IS NOT NULL"
    ).fetchall()[0]
    assert abs(m["sum_weights"] - float(total)) < 1e-9 * float(total), m
    assert abs(m["mean"] - float(mean)) < 1e-9 * abs(float(mean)), m
    # Each record's values, as pandas reads them.
    rows = run_json("list", ds, "ID", "INC", "W", "--limit", "100000")["records"]
    assert len(rows) == len(frame)
    for r, (inc, w) in zip(rows, zip(frame["INC"], frame["W"])):
        assert (r["INC"] is None and pd.isna(inc)) or r["INC"] == inc, (r, inc)
        assert r["W"] == w, (r, w)


def test_decimal_comma_refused_where_it_cannot_apply(tmp_path):
    comma = write(tmp_path / "c.csv", "A,B\n1,2\n")
    assert err(run("import", comma, tmp_path / "c.mtab", "--decimal-comma", ok=False)) == (
        f"error: {comma}: numbers with a decimal comma need a field delimiter other than the comma; the fields are separated by commas"
    )
    semi = write(tmp_path / "s.csv", "A;B\n1,5;2.5\n")
    run("import", semi, tmp_path / "s.mtab", "--decimal-comma")
    info = {v["name"]: v["kind"] for v in run_json("info", tmp_path / "s.mtab")["variables"]}
    assert info == {"A": "int", "B": "string"}, info


def on_a_terminal(*args, env=None):
    """Runs microtab with stderr on a pseudo-terminal: (exit code, what
    the terminal got, stdout)."""
    import pty
    main, sub = pty.openpty()
    p = subprocess.Popen([str(BIN), *map(str, args)], stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=sub, env=env)
    os.close(sub)
    seen = b""
    while True:
        try:
            data = os.read(main, 65536)
        except OSError:
            break
        if not data:
            break
        seen += data
    os.close(main)
    out = p.stdout.read()
    p.wait()
    return p.returncode, seen.decode("utf-8", "replace"), out.decode()


def test_progress_only_on_a_terminal(tmp_path, wide):
    out = tmp_path / "c.csv"
    # gen: a bar of records on a terminal, then its summary line.
    code, seen, _ = on_a_terminal("gen", "census", "--rows", "300000", "--out", out)
    assert code == 0 and f"generating {out} [" in seen and "/300,000 records" in seen, seen
    assert seen.rstrip().endswith(f"to {out} in " + seen.rstrip().split(" in ")[-1])
    # Captured: only the summary line.
    p = run("gen", "census", "--rows", "300000", "--out", out)
    assert p.stderr.startswith("wrote 300000 records (") and p.stderr.count("\n") == 1, p.stderr
    code, seen, _ = on_a_terminal("import", out, tmp_path / "c.mtab")
    assert code == 0 and "importing [" in seen, seen
    # The bar counts in the summary line's units: decimal MB, as the file
    # size os.path.getsize gives (not MiB).
    assert "MiB" not in seen and re.search(r"\d MB/\d+(\.\d+)? MB", seen), seen
    size = os.path.getsize(out) / 1e6
    assert f"({size:.1f} MB" in seen.split("imported ")[-1], seen
    # The spinner of a command that runs for a while (here: at once).
    env = dict(os.environ, MICROTAB_PROGRESS_DELAY_MS="0")
    for args, what in [(("freq", wide, "SEX"), "answering"), (("verify", wide), f"checking {wide}"),
                       (("subset", wide, tmp_path / "s.mtab", "--vars", "AGE"), f"writing {tmp_path / 's.mtab'}"),
                       (("compute", wide, "A2", "=", "AGE * 2"), "computing A2"),
                       (("codebook", wide, "AGE"), "describing the variables")]:
        code, seen, stdout = on_a_terminal(*args, env=env)
        assert code == 0 and what in seen, (args, seen)
        # The spinner's line is cleared before anything else is written.
        assert "\x1b[2K" in seen
    code, seen, stdout = on_a_terminal("freq", wide, "SEX", env=env)
    assert stdout == run("freq", wide, "SEX").stdout
    # Not a terminal: nothing on stderr, even with no delay.
    p = run("freq", wide, "SEX", env=env)
    assert p.stderr == ""
    # A command faster than the delay draws nothing.
    code, seen, _ = on_a_terminal("freq", wide, "SEX")
    assert seen == "", seen


def test_negative_codes_and_values_as_arguments(tmp_path):
    """`missing DS V -99`, `label DS V -1="Don't know"` and `compute DS Z =
    -X` take negative numbers as typed (clap read `-99` as flags and
    suggested `-- -9`, which set the wrong code). Checked against the
    data: the codes are missing, the labels attach, the negation is exact."""
    csv = write(tmp_path / "n.csv", "NEG,X\n-99,1\n-1,2\n5,3\n")
    ds = tmp_path / "n.mtab"
    run("import", csv, ds)
    run("missing", ds, "NEG", "-99", "-1")
    # A label or an expression starting with '-': the tip shows the whole
    # command with '--' (options before it), and works as typed.
    p = run("label", ds, "NEG", "-99=Refused", "-1=Don't know", "--var-label", "Codes", ok=False)
    tip = f"microtab label {ds} NEG --var-label Codes -- -99=Refused '-1=Don'\\''t know'"
    assert tip in p.stderr, p.stderr
    run("label", ds, "NEG", "--var-label", "Codes", "--", "-99=Refused", "-1=Don't know")
    p = run("compute", ds, "Z", "=", "-X", ok=False)
    assert f"microtab compute {ds} Z = -- -X" in p.stderr, p.stderr
    run("compute", ds, "Z", "=", "--", "-X")
    v = {x["name"]: x for x in run_json("info", ds)["variables"]}
    assert v["NEG"]["missing_codes"] == [-99, -1]
    assert v["NEG"]["value_labels"] == {"-99": "Refused", "-1": "Don't know"}
    f = run_json("freq", ds, "NEG")
    assert [(r["value"], r["count"]) for r in f["rows"]] == [(5, 1)]
    assert [r["Z"] for r in run_json("list", ds, "Z", "--all")["records"]] == [-1, -2, -3]


def test_a_copied_executable_says_where_its_siblings_come_from(tmp_path):
    # `cp .venv/bin/microtab elsewhere`: serve and export need the
    # executables installed beside it; the error says how to get them.
    alone = tmp_path / "alone"
    alone.mkdir()
    shutil.copy2(BIN, alone / "microtab")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    for args in (["serve", str(tmp_path)], ["export", str(tmp_path / "x.mtab"), str(tmp_path / "x.parquet")]):
        p = subprocess.run([str(alone / "microtab"), *args], capture_output=True, text=True, env=env, timeout=60)
        assert p.returncode != 0
        err = p.stderr
        assert "is not installed beside microtab or on the PATH" in err, err
        assert "pip install microtab" in err and "link to it rather than copy it" in err, err
