"""storage.url and A2A_TRIO_DATABASE: which database, and errors that leak no password."""

from __future__ import annotations

from pathlib import Path

import pytest

from a2a_trio.store.url import (
    DatabaseURLError,
    PostgresLocation,
    SqliteLocation,
    parse_database_url,
)


def test_plain_path_is_a_sqlite_file() -> None:
    assert parse_database_url("/var/lib/a2a.db") == SqliteLocation(Path("/var/lib/a2a.db"))


def test_sqlite_url_with_three_slashes_is_relative() -> None:
    assert parse_database_url("sqlite:///a2a.db") == SqliteLocation(Path("a2a.db"))


def test_sqlite_url_with_four_slashes_is_absolute() -> None:
    assert parse_database_url("sqlite:////srv/a2a.db") == SqliteLocation(Path("/srv/a2a.db"))


def test_postgresql_url_gives_every_part() -> None:
    location = parse_database_url("postgresql://app:s3cret@db.internal:6432/a2a?sslmode=require")
    assert location == PostgresLocation(
        host="db.internal",
        port=6432,
        dbname="a2a",
        user="app",
        password="s3cret",
        options=(("sslmode", "require"),),
    )


def test_postgres_scheme_and_default_port() -> None:
    location = parse_database_url("postgres://db.internal/a2a")
    assert isinstance(location, PostgresLocation)
    assert (location.port, location.user, location.password) == (5432, None, None)


def test_percent_encoded_password_is_decoded() -> None:
    location = parse_database_url("postgresql://app:p%40ss@h/a2a")
    assert isinstance(location, PostgresLocation)
    assert location.password == "p@ss"


def test_password_is_not_in_repr_or_display() -> None:
    location = parse_database_url("postgresql://app:s3cret@db.internal/a2a")
    assert "s3cret" not in repr(location)
    assert isinstance(location, PostgresLocation)
    assert location.display == "app@db.internal:5432/a2a"


def test_conninfo_carries_the_password_to_the_driver() -> None:
    location = parse_database_url("postgresql://app:s3cret@h:5433/a2a?connect_timeout=3")
    assert isinstance(location, PostgresLocation)
    assert location.conninfo_kwargs() == {
        "connect_timeout": "3",
        "host": "h",
        "port": "5433",
        "dbname": "a2a",
        "user": "app",
        "password": "s3cret",
    }


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("", "empty"),
        ("mysql://h/db", "unsupported scheme 'mysql'"),
        ("sqlite://a2a.db", "sqlite:///path"),
        ("postgresql:///a2a", "needs a host"),
        ("postgresql://db.internal", "host 'db.internal' needs one database name"),
        ("postgresql://db.internal/a/b", "host 'db.internal' needs one database name"),
        ("postgresql://db.internal/a2a?host=other", "'host'"),
    ],
)
def test_malformed_url_names_the_key_and_says_what_is_wrong(value: str, expected: str) -> None:
    with pytest.raises(DatabaseURLError) as raised:
        parse_database_url(value, key="A2A_TRIO_DATABASE")
    message = str(raised.value)
    assert message.startswith("A2A_TRIO_DATABASE: ")
    assert expected in message


def test_bad_port_names_the_host_but_not_the_password() -> None:
    with pytest.raises(DatabaseURLError) as raised:
        parse_database_url("postgresql://app:s3cret@db.internal:54x/a2a")
    message = str(raised.value)
    assert message.startswith("storage.url: ")
    assert "db.internal" in message
    assert "s3cret" not in message


def test_password_in_query_is_refused_without_echoing_it() -> None:
    with pytest.raises(DatabaseURLError) as raised:
        parse_database_url("postgresql://db.internal/a2a?password=s3cret")
    assert "s3cret" not in str(raised.value)
