"""Errors: exit code, exactly one `error:` line on stderr naming the file,
line and column; a failed import creates nothing under the target name."""

import pytest

from conftest import assert_one_error, make_dataset, run, run_json, write


def failed_import(tmp_path, name, data, *args, line=None, needles=()):
    d = tmp_path / "w"
    d.mkdir(exist_ok=True)
    src = write(d / f"{name}.csv", data)
    before = sorted(p.name for p in d.iterdir())
    target = d / f"{name}.mtab"
    p = run("import", src, target, *args, ok=None)
    msg = assert_one_error(p, src.name, *needles, line=line)
    assert not target.exists(), "failed import left something at the target path"
    assert sorted(p.name for p in d.iterdir()) == before, "failed import left files behind"
    return msg


def test_missing_input_file(tmp_path):
    target = tmp_path / "x.mtab"
    p = run("import", tmp_path / "nope.csv", target, ok=None)
    assert_one_error(p, "nope.csv")
    assert not target.exists()


def test_ragged_row_short(tmp_path):
    failed_import(tmp_path, "short", "A,B\n1,2\n3,4\n5\n6,7\n", line=4)


def test_ragged_row_long(tmp_path):
    failed_import(tmp_path, "long", "A,B\n1,2\n3,4,5\n", line=3)


def test_ragged_row_after_quoted_newline(tmp_path):
    """Line numbers count physical lines: a quoted field spanning two lines
    pushes the ragged row to line 5."""
    failed_import(tmp_path, "qn", 'A,B\n1,"x\ny"\n2,z\n3\n', line=5)


def test_bad_utf8(tmp_path):
    failed_import(tmp_path, "utf", b"ID,BADCOL\n1,ok\n2,b\xffad\n3,fine\n", line=3, needles=("BADCOL",))


def test_non_numeric_after_many_numeric_rows(tmp_path):
    n = 50_000
    body = "".join(f"{i},{i % 100}\n" for i in range(n))
    failed_import(tmp_path, "nonnum", "ID,NUMCOL\n" + body + f"{n},x\n", line=n + 2,
                  needles=("NUMCOL",))


def test_non_numeric_in_declared_int_column(tmp_path):
    failed_import(tmp_path, "declared", "A,NUMCOL\n1,2\n3,x\n", "--type", "NUMCOL=int",
                  line=3, needles=("NUMCOL",))


def test_unknown_variable(census):
    for args in (["freq", census.ds, "NOPE_VAR"],
                 ["tab", census.ds, "SEX", "NOPE_VAR"],
                 ["means", census.ds, "NOPE_VAR", "--by", "SEX"],
                 ["means", census.ds, "AGE", "--by", "NOPE_VAR"],
                 ["freq", census.ds, "SEX", "--weight", "NOPE_VAR"],
                 ["freq", census.ds, "SEX", "--filter", "NOPE_VAR(1)"]):
        assert_one_error(run(*args, ok=None), "NOPE_VAR")


@pytest.mark.parametrize("flt", ["AGE(25-", "AGE(25-64", "AGE()", "AGE(x-y)", "AGE<", "(25-64)",
                                 "AGE=>5", "AGE(64-25-3)"])
def test_malformed_filter(census, flt):
    p = run("freq", census.ds, "SEX", "--filter", flt, ok=None)
    assert_one_error(p)


def test_import_onto_existing_without_force(tmp_path):
    _, ds = make_dataset(tmp_path, "old", "A\n1\n1\n2\n")
    before = run_json("freq", ds, "A")
    src = write(tmp_path / "new.csv", "A\n7\n")
    p = run("import", src, ds, ok=None)
    assert_one_error(p, ds.name)
    assert run_json("freq", ds, "A") == before


def test_missing_dataset(tmp_path):
    p = run("freq", tmp_path / "absent.mtab", "A", ok=None)
    assert_one_error(p, "absent.mtab")


def test_bad_usage_exit_2(census):
    assert run("freq", census.ds, "SEX", "--no-such-flag", ok=None).returncode == 2
    assert run("freq", census.ds, ok=None).returncode == 2
    assert run("tab", census.ds, "SEX", ok=None).returncode == 2
    assert run("freq", census.ds, "SEX", "--pct", "row", ok=None).returncode == 2
    assert run("tab", census.ds, "SEX", "EDUC", "--pct", "diag", ok=None).returncode == 2
