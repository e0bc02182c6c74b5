"""How a command says it cannot run: ``error: ...`` on standard error, exit 2."""

from __future__ import annotations

from typing import IO, Any

import click

__all__ = ["CannotRun"]


class CannotRun(click.ClickException):
    """A configuration, an application or an agent's module that cannot be used.

    Exits 2 with ``error: MESSAGE`` alone: the message names the key, file or
    command that changes it, so click's usage text would only hide it.
    """

    exit_code = 2

    def show(self, file: IO[Any] | None = None) -> None:
        click.echo(f"error: {self.format_message()}", err=True, file=file)
