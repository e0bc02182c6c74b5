"""The operator commands: make-executor, card, prune, deliveries (serve and worker: running)."""

from __future__ import annotations

import json
import keyword
import logging
import re
from collections.abc import Awaitable, Callable
from datetime import timedelta
from pathlib import Path
from typing import TypeVar

import click
import trio
from pydantic import ValidationError

from ..config import ConfigError, Settings, build_app, load_settings
from ..protocol import AgentCard, utcnow
from ..server.app import normalise_prefix
from ..server.cards import ServedCard, card_problems, resolve_card
from ..server.databases import database_identity
from ..store import Store
from ..store.factory import store_at
from ..store.postgres import DatabaseUnavailable
from ..store.url import DatabaseLocation, DatabaseURLError, SqliteLocation, parse_database_url
from .errors import CannotRun
from .verify import verify_remote_card

__all__ = ["card", "config_option", "deliveries", "make_executor", "prune", "settings_at"]

T = TypeVar("T")

#: What ``prune`` counts (an empty database's all zero).
PRUNED = ("tasks", "events", "push_configs", "notifications", "attempts")

log = logging.getLogger("a2a_trio.cli")

config_option = click.option(
    "--config",
    "config_path",
    type=click.Path(path_type=Path),
    help="The configuration file (default: $A2A_TRIO_CONFIG or ./a2a.toml).",
)


def settings_at(config_path: Path | None) -> Settings:
    """The settings of ``config_path`` (or the default places); exit 2 naming what is wrong."""
    try:
        return load_settings(config_path)
    except ConfigError as error:
        raise CannotRun(str(error)) from None


database_option = click.option(
    "--database",
    "database",
    metavar="URL",
    help="The database (a path, sqlite:///path or postgresql://...); default: the configured one.",
)


def _store_at(location: DatabaseLocation, settings: Settings) -> Store | None:
    """The store at ``location``, or None when it is a SQLite file not made yet (never
    create one here)."""
    if isinstance(location, SqliteLocation) and not location.path.exists():
        return None
    storage = settings.storage
    return store_at(location, secret_key=storage.secret_key, pool=storage.pool())


def _databases(settings: Settings, database: str | None) -> list[tuple[str, Store | None]]:
    """(name, store or None) of each database to act on: ``--database``'s alone, else
    ``storage.url``'s and those the configuration's agents name (each once)."""
    try:
        if database:
            locations = [parse_database_url(database, key="--database")]
        else:
            locations = [settings.storage.location()]
            for index, agent in enumerate(settings.agents):
                if agent.storage is not None:
                    key = f"agents[{index}].storage"
                    locations.append(parse_database_url(agent.storage, key=key))
    except DatabaseURLError as error:
        raise CannotRun(str(error)) from None
    chosen: dict[object, DatabaseLocation] = {}
    for location in locations:
        chosen.setdefault(database_identity(location), location)
    return [(_display(location), _store_at(location, settings)) for location in chosen.values()]


def _display(location: DatabaseLocation) -> str:
    return str(location.path) if isinstance(location, SqliteLocation) else location.display


def _on_store(store: Store, work: Callable[[Store], Awaitable[T]]) -> T:
    """Open the store, run ``work`` on it, close it: one trio run."""

    async def run() -> T:
        try:
            await store.open()
            return await work(store)
        finally:
            await store.aclose()

    try:
        return trio.run(run)
    except (DatabaseUnavailable, RuntimeError) as error:  # unreachable, or a newer schema
        click.echo(f"error: {error}", err=True)
        raise SystemExit(1) from None


SKELETON = '''"""The {name} agent: replace the echo with your agent's work."""

from __future__ import annotations

from a2a_trio import (
    AgentCapabilities,
    AgentCard,
    AgentExecutor,
    AgentSkill,
    EventQueue,
    RequestContext,
    TaskUpdater,
)


class {name}Executor(AgentExecutor):
    """Answers every message with a completed task that echoes its text."""

    async def execute(self, context: RequestContext, queue: EventQueue) -> None:
        updater = TaskUpdater(queue, context.task_id, context.context_id)
        if context.current_task is None:
            await updater.submit()
        await updater.start_work()
        await updater.add_artifact(context.user_text(), name="answer")
        await updater.complete()


def card() -> AgentCard:
    """The {name} agent's card; supportedInterfaces is filled in when served."""
    return AgentCard(
        name="{name}",
        description="The {name} agent.",
        version="0.1.0",
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[
            AgentSkill(
                id="{module}",
                name="{name}",
                description="Echoes what it is told.",
                tags=["{module}"],
            )
        ],
    )
'''


@click.command("make-executor")
@click.argument("name")
@click.option(
    "--dir",
    "directory",
    type=click.Path(path_type=Path),
    default=Path("a2a_agents"),
    show_default=True,
    help="The application's A2A folder.",
)
def make_executor(name: str, directory: Path) -> None:
    """Write a skeleton NAMEExecutor (an echo agent that runs as is).

    Exits 1 without touching anything when the file exists.
    """
    if not re.match(r"^[A-Z][A-Za-z0-9]*$", name) or keyword.iskeyword(name):
        raise click.UsageError(f"NAME must be a CamelCase identifier like Hello, not {name!r}")
    module = re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()
    target = directory / f"{module}.py"
    if target.exists():
        click.echo(f"{target} exists; not overwriting it", err=True)
        raise SystemExit(1)
    directory.mkdir(parents=True, exist_ok=True)
    package = directory / "__init__.py"
    if not package.exists():
        package.write_text('"""The application\'s A2A agents."""\n')
    target.write_text(SKELETON.format(name=name, module=module))
    import_path = ".".join(directory.parts) + f".{module}"
    click.echo(f"wrote {target}")
    click.echo(
        f"mount it with: app.mount('/{module}', card={import_path}.card(), "
        f"executor={import_path}.{name}Executor(), name='{module}')"
    )
    click.echo(
        f'or in a2a.toml: executor = "{import_path}:{name}Executor", card = "{import_path}:card"'
    )


@click.command()
@click.argument("agent", required=False)
@config_option
@click.option(
    "--base-url",
    default=None,
    help="The address the card is served at (default: server.public_url or http://127.0.0.1:8000).",
)
@click.option(
    "--verify",
    is_flag=True,
    help="AGENT is the URL of any agent: fetch its card and verify its signatures.",
)
@click.option("--jwks", "jwks_url", help="With --verify: the key set (JWKS) URL to trust.")
@click.option(
    "--key",
    "key_file",
    type=click.Path(path_type=Path, exists=True, dir_okay=False),
    help="With --verify: a PEM public key to trust.",
)
def card(
    agent: str | None,
    config_path: Path | None,
    base_url: str | None,
    verify: bool,
    jwks_url: str | None,
    key_file: Path | None,
) -> None:
    """Print an agent's card exactly as served, and validate it.

    AGENT is the agent's name (default: the agent owning the root card).
    Exits 1 and lists the problems when the card is invalid.

    With --verify, AGENT is a URL: the card there is fetched and its
    signatures are checked with --key, --jwks or (neither given) the jku the
    signatures name; exits 1 and says why when none verifies.
    """
    if verify or jwks_url or key_file:
        _verify_option_checks(agent, verify, jwks_url, key_file)
        assert agent is not None
        verify_remote_card(agent, jwks_url, key_file)
        return
    settings = settings_at(config_path)
    base = base_url or settings.server.public_url or "http://127.0.0.1:8000"
    problems: list[str] = []
    try:
        app = build_app(settings)
    except ConfigError as error:
        # The app cannot be built (a card's security references, say): still
        # show and check the card as configured, and say why it cannot be served.
        agent, served = _configured_card(settings, agent, base)
        problems.append(f"the agent cannot be served: {error}")
    else:
        if agent is None:
            agent = next((n for n, m in app.mounts.items() if m.well_known), next(iter(app.mounts)))
        if agent not in app.mounts:
            raise click.UsageError(f"no agent named {agent!r}; agents: {', '.join(app.mounts)}")
        served = app.card_for(agent, base)
    click.echo(json.dumps(served.to_wire(), indent=2))
    problems = card_problems(served) + problems
    if problems:
        click.echo(f"\nthe card of {agent} is invalid:", err=True)
        for problem in problems:
            click.echo(f"  - {problem}", err=True)
        raise SystemExit(1)
    click.echo(f"\nthe card of {agent} is valid", err=True)


def _verify_option_checks(
    agent: str | None, verify: bool, jwks_url: str | None, key_file: Path | None
) -> None:
    if not verify:
        raise click.UsageError("--jwks and --key go with --verify")
    if jwks_url and key_file:
        raise click.UsageError("--jwks and --key are alternatives: pass one")
    if not agent or not agent.startswith(("http://", "https://")):
        raise click.UsageError("with --verify, give the agent's URL (http:// or https://)")


def _configured_card(settings: Settings, agent: str | None, base: str) -> tuple[str, AgentCard]:
    """An agent's card straight from the settings, interfaces filled in for ``base``."""
    configured = settings.agents
    chosen = next((a for a in configured if a.name == agent), None) if agent else None
    if chosen is None and agent is None and configured:
        chosen = next((a for a in configured if a.well_known), configured[0])
    if chosen is None:
        names = ", ".join(a.name for a in configured) or "none"
        raise click.UsageError(f"no agent named {agent!r}; agents: {names}")
    try:
        public = resolve_card(chosen.card)
    except (ImportError, AttributeError) as error:  # the configuration names what is not there
        raise CannotRun(f"agents ({chosen.name}): the card cannot be read: {error}") from None
    except (ValueError, TypeError, ValidationError) as error:
        click.echo(f"the card of {chosen.name} cannot be read: {error}", err=True)
        raise SystemExit(1) from None
    return chosen.name, ServedCard(public, normalise_prefix(chosen.prefix)).complete(base)


@click.command()
@click.option("--days", type=click.IntRange(min=0), default=7, show_default=True)
@click.option("--dry-run", is_flag=True, help="Count what would go; delete nothing.")
@config_option
@database_option
def prune(days: int, dry_run: bool, config_path: Path | None, database: str | None) -> None:
    """Delete finished tasks older than DAYS, with their events, configs and deliveries.

    In every database of the configuration (``storage.url`` and each agent's
    own ``storage``), or in ``--database`` alone.
    """
    databases = _databases(settings_at(config_path), database)
    cutoff = utcnow() - timedelta(days=days)
    verb = "would remove" if dry_run else "removed"
    for name, store in databases:
        if store is None:
            counts = dict.fromkeys(PRUNED, 0)
        else:
            counts = _on_store(store, lambda store: store.prune(cutoff, dry_run=dry_run))
        click.echo(
            (f"{name}: " if len(databases) > 1 else "")
            + f"{verb} {counts['tasks']} tasks, {counts['events']} events, "
            f"{counts['push_configs']} push configs, {counts['notifications']} notifications "
            f"and {counts['attempts']} delivery attempts (finished more than {days} days ago)"
        )


@click.command(context_settings={"ignore_unknown_options": False})
@click.argument("args", nargs=-1)
@config_option
@database_option
def deliveries(args: tuple[str, ...], config_path: Path | None, database: str | None) -> None:
    """List webhook deliveries (all, or of TASK); `deliveries retry ID` re-queues one.

    \b
    a2a-trio deliveries [TASK]
    a2a-trio deliveries retry ID
    """
    retry = bool(args) and args[0] == "retry"
    if retry and (len(args) != 2 or not args[1].isdigit()):
        raise click.UsageError("usage: a2a-trio deliveries retry ID")
    if not retry and len(args) > 1:
        raise click.UsageError("usage: a2a-trio deliveries [TASK]")
    databases = _databases(settings_at(config_path), database)
    if retry:
        if len(databases) > 1:
            names = ", ".join(name for name, _ in databases)
            raise click.UsageError(
                "delivery ids are numbered in each database and the configuration has"
                f" {len(databases)} ({names}): name the delivery's with --database"
            )
        outbox_id = int(args[1])
        store = databases[0][1]
        requeued = store is not None and _on_store(
            store, lambda store: store.requeue_notification(outbox_id)
        )
        if not requeued:
            click.echo(f"no failed delivery {args[1]}", err=True)
            raise SystemExit(1)
        click.echo(f"delivery {args[1]} queued again; the server delivers it shortly")
        return
    task_id = args[0] if args else None
    for name, store in databases:
        if len(databases) > 1:
            click.echo(f"database {name}:")
        rows = []
        if store is not None:
            rows = _on_store(store, lambda store: store.deliveries(task_id=task_id))
        if not rows:
            click.echo("no deliveries")
        for row in rows:
            click.echo(
                f"{row.id:>6}  {row.state:<9} task {row.task_id}  event {row.seq}  "
                f"config {row.config_id}  attempts {row.attempts_made}"
                + (f"  last error: {row.last_error}" if row.last_error else "")
            )
            for attempt in row.attempts:
                outcome = f"HTTP {attempt.status}" if attempt.status else attempt.error or "?"
                click.echo(
                    f"        #{attempt.number} {attempt.at}  {outcome}"
                    f"  {attempt.duration_ms:.0f} ms"
                )
