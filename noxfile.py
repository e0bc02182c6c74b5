"""Developer tasks: ``nox -s tests``, ``nox -s lint``, ``nox -s docs``, ``nox -s dist``,
``nox -s serve``, ``nox -s bench``, ``nox -s protos``."""

from __future__ import annotations

import glob
import logging
import re
import shutil
from pathlib import Path

import nox

# The standard library's venv: nothing to install beyond Python itself.
nox.options.default_venv_backend = "venv"
# nox looks for uv before every session, whatever the backend, and logs
# "uv binary not found." when there is none; with venv that only misleads.
logging.getLogger("nox").addFilter(lambda record: record.getMessage() != "uv binary not found.")
nox.options.sessions = ["tests", "lint"]
nox.options.reuse_existing_virtualenvs = True


#: pytest-xdist's workers for the first pass. The suite mostly waits (on server
#: subprocesses, sockets, PostgreSQL), so twice a 2-core machine's cores pays;
#: more starts more servers at once than such a machine answers in time.
TEST_WORKERS = "4"


@nox.session
def tests(session: nox.Session) -> None:
    """The whole test suite in two passes (pass pytest arguments after --).

    First every test not marked ``serial`` on pytest-xdist's workers, a test
    file to a worker (its module fixtures, a server fleet say, are made once);
    then the ``serial`` tests one at a time on a quiet machine: the one that
    restarts PostgreSQL under every other test's feet, those that measure real time.
    """
    session.install("-e", ".[dev]")
    # Arguments that select tests (a file, -k) may select none of one pass:
    # pytest's "no tests collected" (5) is then no failure.
    codes = [0, 5] if session.posargs else [0]
    session.run(
        "python",
        "-m",
        "pytest",
        "-n",
        TEST_WORKERS,
        "--dist",
        "loadfile",
        "-m",
        "not serial",
        *session.posargs,
        success_codes=codes,
    )
    session.run("python", "-m", "pytest", "-m", "serial", *session.posargs, success_codes=codes)


@nox.session
def lint(session: nox.Session) -> None:
    """ruff (style and bugs), mypy --strict over the package and its tests, the docs' build."""
    session.install("-e", ".[dev]")
    session.run("ruff", "check", "a2a_trio", "tests", "examples", "bench", "tools", "noxfile.py")
    session.run(
        "ruff", "format", "--check", "a2a_trio", "tests", "examples", "bench", "tools", "noxfile.py"
    )
    session.run("mypy", "a2a_trio", "tests", "tools", "noxfile.py")
    session.run("mkdocs", "build", "--strict", "--quiet")


@nox.session
def docs(session: nox.Session) -> None:
    """The guides and the API reference (docs/api.md) as a site in build/docs.

    Strict: a warning (a broken link, a docstring mkdocstrings cannot read) fails it.
    """
    session.install("-e", ".[docs]")
    session.run("mkdocs", "build", "--strict")


@nox.session
def dist(session: nox.Session) -> None:
    """Build the sdist and the wheel into dist/ and check their metadata with twine."""
    session.install("build", "twine")
    shutil.rmtree("dist", ignore_errors=True)
    session.run("python", "-m", "build")
    session.run("twine", "check", "--strict", *sorted(glob.glob("dist/*")))


@nox.session
def serve(session: nox.Session) -> None:
    """Serve ``a2a_trio:app`` (a2a.toml, or the echo agent) on http://127.0.0.1:8000.

    Each request is logged on standard output (hypercorn's access log).
    """
    session.install("-e", ".")
    bind = session.posargs[0] if session.posargs else "127.0.0.1:8000"
    session.run(
        "hypercorn",
        "--worker-class",
        "trio",
        "--access-logfile",
        "-",
        "--keep-alive",  # as a2a-trio serve (docs/deployment.md, "Slow clients")
        "75",
        "--bind",
        bind,
        "a2a_trio:app",
    )


@nox.session
def tck(session: nox.Session) -> None:
    """The official conformance kit: nox -s tck -- --tck-dir ../a2a-tck [options]."""
    session.install("-e", ".")
    session.run("a2a-trio", "tck", *session.posargs)


@nox.session
def bench(session: nox.Session) -> None:
    """a2a-trio against the a2a-sdk reference server: nox -s bench -- [--quick] [options].

    Needs wrk on PATH (and taskset for pinning) and, for the *-pg servers, a local
    PostgreSQL (--pg-url); see bench/README.md.
    """
    # The reference on PostgreSQL: the SDK's SQLAlchemy stores on asyncpg.
    session.install("-e", ".[bench]")
    session.run("python", "-m", "bench", *session.posargs)


PROTO_DIR = Path("a2a_trio/protocol/proto")


@nox.session
def protos(session: nox.Session) -> None:
    """Regenerate a2a_trio/protocol/proto/a2a_pb2.py(i) from a2a.proto with grpcio-tools.

    Update a2a.proto first (copy the specification's specification/a2a.proto
    below its header). The generated module registers in the private pool of
    ``_pool.py`` instead of protobuf's default one (see there why); the
    runtime needs a protobuf at least as new as the generator's (pyproject.toml).
    """
    session.install("grpcio-tools", "googleapis-common-protos")
    include = session.run(
        "python",
        "-c",
        "import grpc_tools, google.api, pathlib; "
        "print(pathlib.Path(grpc_tools.__file__).parent / '_proto'); "
        "print(pathlib.Path(google.api.__path__[0]).parent.parent)",
        silent=True,
    )
    assert isinstance(include, str)
    protoc_include, common_protos = include.split()
    session.run(
        "python",
        "-m",
        "grpc_tools.protoc",
        f"-I{PROTO_DIR}",
        f"-I{common_protos}",
        f"-I{protoc_include}",
        f"--python_out={PROTO_DIR}",
        f"--pyi_out={PROTO_DIR}",
        str(PROTO_DIR / "a2a.proto"),
    )
    generated = PROTO_DIR / "a2a_pb2.py"
    text = generated.read_text()
    text, count = re.subn(
        r"_descriptor_pool\.Default\(\)\.AddSerializedFile",
        "_private_pool.POOL.AddSerializedFile",
        text,
    )
    assert count == 1, "protoc's output changed shape: update the protos session"
    text = text.replace(
        "# @@protoc_insertion_point(imports)",
        "# @@protoc_insertion_point(imports)\nfrom . import _pool as _private_pool",
        1,
    )
    generated.write_text(text)


@nox.session(name="bench-cluster")
def bench_cluster(session: nox.Session) -> None:
    """Several processes on one PostgreSQL: nox -s bench-cluster -- [options].

    Cross-process latency beside a2a-sdk 1.3's cluster mode, and SendMessage
    throughput and CPU per request of 1 and 2 processes (bench/README.md).
    """
    session.install("-e", ".[bench]")
    session.run("python", "-m", "bench.cluster", *session.posargs)
