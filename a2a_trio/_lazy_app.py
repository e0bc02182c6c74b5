"""An ASGI app built on first use, in a module light enough for ``a2a_trio`` to import."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .server.app import A2AApp

__all__ = ["LazyApp"]


class LazyApp:
    """An ASGI app built by ``factory`` on first use (first call or attribute).

    Module-level apps served by ``hypercorn module:app`` use it so that
    importing the module reads no configuration and opens no database.
    """

    def __init__(self, factory: Callable[[], A2AApp]) -> None:
        self._factory = factory
        self._app: A2AApp | None = None

    def build(self) -> A2AApp:
        """The app, built by the factory on the first call."""
        if self._app is None:
            self._app = self._factory()
        return self._app

    @property
    def app(self) -> A2AApp:
        """The app (built now if it was not), where ASGI wrappers keep what they wrap.

        hypercorn's mends find each app's ``send_timeout`` through it.
        """
        return self.build()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        """The ASGI entry point of the app, built on the first call."""
        await self.build()(scope, receive, send)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.build(), name)
