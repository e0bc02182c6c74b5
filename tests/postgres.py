"""A fresh PostgreSQL database for the test run, found at A2A_TRIO_TEST_POSTGRES.

Where no server answers, the tests that need one are skipped with the reason (pytest's
``-ra`` summary shows it); under ``CI=true`` that is a failure instead, so CI cannot go
green by skipping them.
"""

from __future__ import annotations

import dataclasses
import os
import uuid
from collections.abc import Iterator

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

from a2a_trio.store.url import PostgresLocation, parse_database_url

DEFAULT_SERVER = "postgresql://postgres@127.0.0.1:5432/postgres"


def _server() -> PostgresLocation:
    location = parse_database_url(
        os.environ.get("A2A_TRIO_TEST_POSTGRES", DEFAULT_SERVER), key="A2A_TRIO_TEST_POSTGRES"
    )
    assert isinstance(location, PostgresLocation), "A2A_TRIO_TEST_POSTGRES is not PostgreSQL"
    return location


def admin_connect(location: PostgresLocation) -> psycopg.Connection[tuple[object, ...]]:
    """A plain autocommit connection, for set-up and for playing the other client."""
    conninfo = make_conninfo("", **location.conninfo_kwargs())
    return psycopg.connect(conninfo, autocommit=True, connect_timeout=3)


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresLocation]:
    """Where the run's own database is; created now, dropped when the run ends."""
    server = _server()
    try:
        admin = admin_connect(server)
    except psycopg.OperationalError as error:
        # One line, so the -ra summary shows all of it.
        detail = " ".join(str(error).split())
        reason = f"no PostgreSQL at {server.display} (A2A_TRIO_TEST_POSTGRES): {detail}"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    name = f"a2a_trio_test_{uuid.uuid4().hex[:12]}"
    with admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        try:
            yield dataclasses.replace(server, dbname=name)
        finally:
            # FORCE ends connections a failed test left behind (PostgreSQL 13+).
            admin.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))
