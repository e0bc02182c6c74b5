"""``a2a-trio tck``: the command line of the conformance kit run (see :mod:`.tck`)."""

from __future__ import annotations

from pathlib import Path

import click

from ..conformance import PROFILES
from ..store.url import DatabaseURLError
from .tck import LEVELS, TRANSPORTS, KitError, exit_status, run_kit, summarise

__all__ = ["tck"]


def _split(ctx: click.Context, param: click.Parameter, value: str) -> list[str]:
    items = [item.strip() for item in value.split(",") if item.strip()]
    allowed = TRANSPORTS if param.name == "transport" else (*PROFILES, "all")
    unknown = [item for item in items if item not in allowed]
    if unknown or not items:
        raise click.BadParameter(f"choose from {', '.join(allowed)}")
    if "all" in items:
        return list(PROFILES)
    return items


@click.command()
@click.option(
    "--tck-dir",
    required=True,
    type=click.Path(path_type=Path),
    help="A checkout of a2aproject/a2a-tck (branch 1.0-dev).",
)
@click.option("--level", type=click.Choice(LEVELS), help="Run only this level (default: all).")
@click.option(
    "--transport",
    default=",".join(TRANSPORTS),
    show_default=True,
    callback=_split,
    help="Comma-separated transports to test.",
)
@click.option(
    "--profile",
    default="all",
    show_default=True,
    callback=_split,
    help=f"Card profiles to run, comma-separated: {', '.join(PROFILES)}, or all.",
)
@click.option(
    "--reports",
    type=click.Path(path_type=Path),
    default=Path("tck-reports"),
    show_default=True,
    help="Where each profile's kit reports are kept.",
)
@click.option(
    "--database",
    metavar="URL",
    help="Serve on this database (e.g. postgresql://...) instead of a fresh SQLite file"
    " per profile; its rows are kept.",
)
@click.option(
    "--processes",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Serve from this many processes (hypercorn --workers); needs a PostgreSQL --database.",
)
def tck(
    tck_dir: Path,
    level: str | None,
    transport: list[str],
    profile: list[str],
    reports: Path,
    database: str | None,
    processes: int,
) -> None:
    """Run the official A2A conformance kit against the conformance agent.

    Serves the conformance agent on a free loopback port for each card
    profile, runs the kit's run_tck.py from TCK_DIR (in TCK_DIR/.venv, created
    when missing), prints a summary per level and exits 1 if any MUST
    requirement failed or the kit could not run. A profile none of whose
    tests is at the chosen level is reported as selecting nothing.
    """
    try:
        runs = run_kit(
            tck_dir.resolve(),
            level=level,
            transports=transport,
            profiles=profile,
            reports_dir=reports.resolve(),
            echo=click.echo,
            database=database,
            processes=processes,
        )
    except (KitError, DatabaseURLError) as error:
        raise click.UsageError(str(error)) from None
    counts, names = summarise(runs)
    click.echo("\n== conformance summary (requirements, all profiles) ==")
    for lvl in ("MUST", "SHOULD", "MAY"):
        tally = counts.get(lvl)
        if tally is None:
            continue
        click.echo(
            f"{lvl:<7} passed {tally['PASS']:>3}   failed {tally['FAIL']:>3}   "
            f"skipped {tally['SKIPPED']:>3}   not tested {tally['NOT TESTED']:>3}"
        )
        for status in ("FAIL", "SKIPPED"):
            listed = names.get(f"{lvl} {status}")
            if listed:
                click.echo(f"        {status.lower()}: {', '.join(listed)}")
    for run in runs:
        if run.selected_nothing:
            click.echo(f"profile {run.profile}: no test of the kit matches; nothing ran")
        elif run.broken:
            click.echo(f"profile {run.profile}: the kit could not run (exit {run.exit_code})")
    for run in runs:
        click.echo(f"reports ({run.profile}): {run.reports}")
    raise SystemExit(exit_status(runs))
