"""The local PostgreSQL the ``*-pg`` servers run on: databases per server, and pinning.

:class:`LocalPostgres` talks to the server named by ``--pg-url`` (default
``postgresql://postgres@127.0.0.1:5432/postgres``), which must be on the loopback
interface of this machine. It creates a fresh database (``bench_<uuid hex>``) for
every server process the harness starts and drops it (``WITH (FORCE)``) once that
process has stopped.

:meth:`LocalPostgres.pinned` pins PostgreSQL to one core (the load generator's)
for the duration of a run and restores what it changed at the end. It touches
only the processes of that server: the postmaster is the parent of the backend
that answers ``SELECT pg_backend_pid()``, and it must be a ``postgres`` process
whose working directory is the server's ``data_directory``; its children are the
rest. New backends are forked by the postmaster and inherit its affinity, so the
backends the servers under test open are pinned too. On the way out every process
pinned is given back the mask it had, and a child that appeared meanwhile gets
the postmaster's original mask. If the harness is killed with SIGKILL it cannot
restore anything: the log line printed when pinning gives the command that does.
"""

from __future__ import annotations

import contextlib
import os
import signal
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import sql

__all__ = ["DEFAULT_PG_URL", "LOOPBACK_HOSTS", "LocalPostgres", "PostgresError"]

DEFAULT_PG_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
#: The only hosts the bench sends traffic to.
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
DATABASE_PREFIX = "bench_"
CONNECT_TIMEOUT_S = 5


class PostgresError(RuntimeError):
    """PostgreSQL is unreachable, not local, or refused what the bench asked."""


def _children(parent: int) -> list[int]:
    """The PIDs whose parent is ``parent`` (from ``/proc/*/stat``)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # gone meanwhile
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == parent:
            found.append(int(entry.name))
    return found


def _parent(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat.rsplit(")", 1)[1].split()[1])


def _start_time(pid: int) -> int:
    """Clock ticks since boot at which ``pid`` started: tells a reused PID apart."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat.rsplit(")", 1)[1].split()[19])


def _cores_text(cores: set[int]) -> str:
    return ",".join(str(core) for core in sorted(cores))


@dataclass
class Pinning:
    """What :meth:`LocalPostgres.pinned` changed, to be put back."""

    postmaster: int
    core: int
    #: pid -> (start time, previous mask) for every process pinned.
    previous: dict[int, tuple[int, set[int]]] = field(default_factory=dict)

    @property
    def original(self) -> set[int]:
        return self.previous[self.postmaster][1]

    def describe(self) -> str:
        return (
            f"core {self.core}: the postmaster (pid {self.postmaster}) and its "
            f"{len(self.previous) - 1} processes at the start, and the backends it forks "
            f"meanwhile; restored to cores {_cores_text(self.original)} at the end"
        )

    def restore_command(self) -> str:
        return (
            f"for p in {self.postmaster} $(pgrep -P {self.postmaster}); do "
            f"taskset -apc {_cores_text(self.original)} $p; done"
        )


def _set_affinity(pid: int, cores: set[int]) -> None:
    """Every thread of ``pid`` (``taskset -a``); a process gone meanwhile is skipped."""
    try:
        threads = [int(name) for name in os.listdir(f"/proc/{pid}/task")]
    except FileNotFoundError:
        return
    for thread in threads:
        with contextlib.suppress(ProcessLookupError):
            os.sched_setaffinity(thread, cores)


class LocalPostgres:
    """The PostgreSQL server at ``admin_url`` (a superuser's URL on 127.0.0.1)."""

    def __init__(self, admin_url: str = DEFAULT_PG_URL) -> None:
        parts = urlsplit(admin_url)
        if parts.scheme not in ("postgresql", "postgres"):
            raise PostgresError(f"--pg-url must be postgresql://...; got {parts.scheme!r}")
        if parts.hostname not in LOOPBACK_HOSTS:
            raise PostgresError(
                f"--pg-url must name a PostgreSQL on this machine ({', '.join(LOOPBACK_HOSTS)}); "
                f"got {parts.hostname!r}"
            )
        self.admin_url = admin_url
        self._parts = parts

    # --- connections and databases ----------------------------------------------------

    def connect(self) -> psycopg.Connection[Any]:
        try:
            return psycopg.connect(
                self.admin_url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S
            )
        except psycopg.Error as error:
            raise PostgresError(f"cannot reach PostgreSQL at {self.display}: {error}") from None

    @property
    def display(self) -> str:
        """host:port, safe to print (no password)."""
        return f"{self._parts.hostname}:{self._parts.port or 5432}"

    def url_for(self, database: str) -> str:
        """The admin URL with ``database`` instead of its path (same user, host, query)."""
        return urlunsplit(self._parts._replace(path=f"/{database}"))

    def create_database(self, prefix: str = DATABASE_PREFIX) -> str:
        """A new empty database ``<prefix><uuid hex>``; returns its name.

        ``prefix`` must begin with ``bench_`` (only such databases are dropped).
        """
        if not prefix.startswith(DATABASE_PREFIX):
            raise PostgresError(f"a bench database's name begins with {DATABASE_PREFIX!r}")
        name = f"{prefix}{uuid.uuid4().hex}"
        with self.connect() as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        return name

    def drop_database(self, name: str) -> None:
        """Drop a database this harness created (its connections are closed by FORCE)."""
        if not name.startswith(DATABASE_PREFIX):
            raise PostgresError(f"refusing to drop {name!r}: not a bench database")
        with self.connect() as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )

    def table_count(self, name: str) -> int:
        """How many tables database ``name`` holds (outside the system schemas)."""
        try:
            conn = psycopg.connect(
                self.url_for(name), autocommit=True, connect_timeout=CONNECT_TIMEOUT_S
            )
        except psycopg.Error as error:
            raise PostgresError(f"cannot reach database {name}: {error}") from None
        with conn:
            row = conn.execute(
                "SELECT count(*) FROM pg_tables"
                " WHERE schemaname NOT IN ('pg_catalog', 'information_schema')"
            ).fetchone()
        return int(row[0]) if row else 0

    def backend_pids(self, name: str) -> list[int]:
        """The PIDs of the backends connected to database ``name`` right now."""
        with self.connect() as conn:
            rows = conn.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = %s", (name,)
            ).fetchall()
        return [int(row[0]) for row in rows]

    def describe(self) -> dict[str, str]:
        """Version and the settings that shape write throughput, for the report."""
        names = (
            "fsync",
            "synchronous_commit",
            "wal_level",
            "full_page_writes",
            "shared_buffers",
            "max_connections",
        )
        with self.connect() as conn:
            version = conn.execute("SHOW server_version").fetchone()
            rows = conn.execute(
                "SELECT name, setting, unit FROM pg_settings WHERE name = ANY(%s) ORDER BY name",
                (list(names),),
            ).fetchall()
        settings = ", ".join(
            f"{name}={setting}{'' if unit in (None, '') else ' x ' + unit}"
            for name, setting, unit in rows
        )
        return {
            "postgresql": f"{version[0] if version else '?'} at {self.display}",
            "postgresql settings": settings,
        }

    # --- pinning ------------------------------------------------------------------------

    def postmaster_pid(self) -> int:
        """The PID of this server's postmaster, checked to be a local PostgreSQL."""
        with self.connect() as conn:  # the backend lives as long as this connection
            row = conn.execute(
                "SELECT pg_backend_pid(), current_setting('data_directory')"
            ).fetchone()
            assert row is not None
            backend, data_directory = int(row[0]), str(row[1])
            try:
                postmaster = _parent(backend)
                comm = Path(f"/proc/{postmaster}/comm").read_text().strip()
                cwd = os.path.realpath(f"/proc/{postmaster}/cwd")
            except OSError as error:
                raise PostgresError(
                    f"PostgreSQL's backend {backend} is not a process of this machine "
                    f"that the bench can see: {error}"
                ) from None
        if comm != "postgres" or cwd != os.path.realpath(data_directory):
            raise PostgresError(
                f"process {postmaster} (parent of backend {backend}) is {comm!r} in {cwd}, "
                f"not the postmaster of {data_directory}"
            )
        return postmaster

    @contextlib.contextmanager
    def pinned(self, core: int, log: Callable[[str], None]) -> Iterator[Pinning]:
        """Pin this PostgreSQL to ``core`` inside the block; put every mask back after.

        SIGTERM inside the block is turned into SystemExit so the masks are
        restored on the way out of a terminated run too.
        """
        postmaster = self.postmaster_pid()
        pinning = Pinning(postmaster, core)
        for pid in [postmaster, *_children(postmaster)]:
            try:
                pinning.previous[pid] = (_start_time(pid), os.sched_getaffinity(pid))
            except (OSError, ProcessLookupError):
                continue
        previous_handler = signal.getsignal(signal.SIGTERM)

        def terminated(_signum: int, _frame: FrameType | None) -> None:
            raise SystemExit(143)

        try:
            signal.signal(signal.SIGTERM, terminated)
            for pid in pinning.previous:
                _set_affinity(pid, {core})
            log(f"PostgreSQL pinned to {pinning.describe()}")
            log(f"  (if this run is killed, restore with: {pinning.restore_command()})")
            yield pinning
        finally:
            self._restore(pinning, log)
            signal.signal(signal.SIGTERM, previous_handler)

    @staticmethod
    def _restore(pinning: Pinning, log: Callable[[str], None]) -> None:
        restored = 0
        for pid, (started, mask) in pinning.previous.items():
            try:
                if _start_time(pid) != started:
                    continue  # that process is gone and its PID reused
            except OSError:
                continue
            _set_affinity(pid, mask)
            restored += 1
        # Processes forked meanwhile inherited the pinned mask: give them the original.
        with contextlib.suppress(OSError):
            for pid in _children(pinning.postmaster):
                if pid not in pinning.previous:
                    _set_affinity(pid, pinning.original)
                    restored += 1
        log(
            f"PostgreSQL affinity restored to cores {_cores_text(pinning.original)} "
            f"({restored} processes)"
        )
