"""tracekit.sqlite: read-only SQLite access shared by the nsys and rocprof database readers,
on small databases written by the tests (SQLite is dynamically typed: any column can hold
anything)."""

from __future__ import annotations

import sqlite3

import pyarrow as pa
import pytest
from tracekit.errors import TraceReadError
from tracekit.sqlite import SqliteInput, column, int_or_none, reason, text_or_none


def database(path, create: str, rows: list[tuple], *statements: str):
    con = sqlite3.connect(path)
    try:
        con.execute(create)
        marks = ", ".join("?" * len(rows[0])) if rows else ""
        con.executemany(f"INSERT INTO t VALUES ({marks})", rows)
        for statement in statements:
            con.execute(statement)
        con.commit()
    finally:
        con.close()
    return path


def test_invalid_utf8_and_blobs_come_back_as_valid_text_counted(tmp_path):
    path = database(tmp_path / "a.db", "CREATE TABLE t (a TEXT, b BLOB)",
                    [("ok", b"x")], "INSERT INTO t VALUES (CAST(x'61ff62' AS TEXT), x'ff')",
                    "INSERT INTO t VALUES (NULL, NULL)")
    with SqliteInput(path) as db:
        t = db.arrow("SELECT a, b FROM t ORDER BY rowid")
        assert column(t, "a", pa.string()).to_pylist() == ["ok", "a\ufffdb", None]
        assert column(t, "b", pa.string()).to_pylist() == ["x", "\ufffd", None]
        assert db.replaced == {"t": 2}
        assert db.scalar_rows("SELECT a FROM t WHERE rowid = 2") == [("a\ufffdb",)]
        assert db.replaced == {"t": 3}


@pytest.mark.parametrize(("value", "type_", "message"), [
    ("'abc'", pa.int64(), "1 value is not an integer (first: 'abc')"),
    ("x'ff'", pa.int64(), "1 value is not an integer (first: '\ufffd')"),
    ("3.7", pa.int64(), "1 value is not an integer (first: 3.7)"),
    ("1e300", pa.int64(), "1 value is not an integer (first: 1e+300)"),
    ("9223372036854775808", pa.int64(),
     "1 value is not an integer (first: 9.223372036854776e+18)"),
    ("2147483648", pa.int32(), "1 value is not a 32-bit integer (first: 2147483648)"),
    ("'x'", pa.float64(), "1 value is not a number (first: 'x')"),
])
@pytest.mark.parametrize("row", [2, 1500])  # in, and past, the driver's first 1024 rows
def test_a_value_of_the_wrong_type_names_file_table_and_column(tmp_path, value, type_, message,
                                                               row):
    path = database(tmp_path / "b.db", "CREATE TABLE t (n INTEGER, other)",
                    [(i, i) for i in range(2000)], f"UPDATE t SET n = {value} WHERE rowid = {row}",
                    "UPDATE t SET other = 'any text' WHERE rowid = 1900")
    with SqliteInput(path) as db:
        t = db.arrow('SELECT * FROM "t" ORDER BY rowid')
        assert column(t, "other", pa.string()).to_pylist()[1899] == "any text"
        with pytest.raises(TraceReadError) as info:
            column(t, "n", type_)
    assert str(info.value) == f"{path}: table t: column n: {message}"


def test_good_values_convert_and_nulls_stay_absent(tmp_path):
    path = database(tmp_path / "c.db", "CREATE TABLE t (n INTEGER, x REAL)",
                    [(i, i / 2) for i in range(1500)], "UPDATE t SET n = NULL WHERE rowid = 1200",
                    "UPDATE t SET x = 7 WHERE rowid = 1300")
    with SqliteInput(path) as db:
        t = db.arrow("SELECT n, x FROM t ORDER BY rowid")
        n = column(t, "n")
        assert n.type == pa.int64() and n.null_count == 1 and n[1199].as_py() is None
        assert column(t, "n", pa.int32())[1498].as_py() == 1498
        assert column(t, "x", pa.float64())[1299].as_py() == 7.0
        assert column(t, "absent").null_count == 1500


def test_several_bad_values_are_counted(tmp_path):
    path = database(tmp_path / "d.db", "CREATE TABLE t (n INTEGER)", [(i,) for i in range(10)],
                    "UPDATE t SET n = 'bad' || rowid WHERE rowid > 7")
    with SqliteInput(path) as db, pytest.raises(TraceReadError, match=r"table t: column n: "
                                                r"3 values are not integers \(first: 'bad8'\)$"):
        column(db.arrow("SELECT n FROM t"), "n")


def test_errors_are_one_line_naming_the_table_not_the_query(tmp_path):
    path = database(tmp_path / "e.db", "CREATE TABLE t (a)", [(1,)])
    with SqliteInput(path) as db:
        with pytest.raises(TraceReadError) as info:
            db.arrow("SELECT nosuch FROM t")
        assert str(info.value) == f"{path}: table t: cannot read rows: no such column: nosuch"
        with pytest.raises(TraceReadError) as info:
            db.scalar_rows("SELECT nosuch FROM t")
        assert str(info.value) == f"{path}: table t: cannot read: no such column: nosuch"


def test_directories_and_other_files(tmp_path):
    with pytest.raises(TraceReadError) as info:
        SqliteInput(tmp_path)
    assert str(info.value) == f"{tmp_path}: is a directory, not an SQLite database"
    text = tmp_path / "x.db"
    text.write_text("hello, not a database\n" * 10)
    with pytest.raises(TraceReadError) as info:
        SqliteInput(text)
    # Not one: said so from its first bytes, not as a damaged database.
    assert str(info.value) == (f"{text}: not an SQLite file (it does not start with "
                               "'SQLite format 3')")
    # One whose header is there but whose pages are not: damaged.
    damaged = tmp_path / "damaged.db"
    damaged.write_bytes(b"SQLite format 3\0" + bytes(range(256)) * 8)
    with pytest.raises(TraceReadError) as info:
        SqliteInput(damaged)
    assert str(info.value).startswith(f"{damaged}: not a readable SQLite database: ")
    assert str(info.value).endswith("(the file is damaged or truncated)")


def test_reason_and_scalar_helpers():
    assert reason(OSError("IO: [SQLite] Failed to step query: database disk image is "
                          "malformed\nquery: SELECT 1")) == (
        "database disk image is malformed (the file is damaged or truncated)")
    assert [int_or_none(v) for v in (5, -1, 2**63, 3.0, "5", b"5", None, True)] == \
        [5, -1, None, None, None, None, None, None]
    assert int_or_none(2**31, 32) is None and int_or_none(2**31 - 1, 32) == 2**31 - 1
    assert [text_or_none(v) for v in ("a", b"\xffb", 3, None)] == ["a", "\ufffdb", "3", None]


def test_numbers_written_as_text_are_judged_as_arrow_parses_them(tmp_path):
    texts = ["1", "12345678901234567890", "9223372036854775807", " 7", "+5", "-3"]
    path = database(tmp_path / "f.db", "CREATE TABLE t (n, x)",
                    [(v, f) for v, f in zip(texts, ["1.5", "x", "inf", "1e400", "-.5", "NaN"],
                                            strict=True)])
    with SqliteInput(path) as db:
        t = db.arrow("SELECT n, x FROM t")
        with pytest.raises(TraceReadError, match=r"column n: 3 values are not integers "
                                                 r"\(first: '12345678901234567890'\)$"):
            column(t, "n")
        with pytest.raises(TraceReadError, match=r"column x: 1 value is not a number "
                                                 r"\(first: 'x'\)$"):
            column(t, "x", pa.float64())
        assert column(t.slice(2, 1), "n").to_pylist() == [2**63 - 1]
