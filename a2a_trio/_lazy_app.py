"""An ASGI app built on first use, in a module light enough for ``a2a_trio`` to import."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Generic, Protocol, TypeVar

__all__ = ["LazyApp"]


class ASGIApp(Protocol):
    """What a lazy app builds: an ASGI application."""

    def __call__(self, scope: Any, receive: Any, send: Any) -> Awaitable[None]:
        """Serve one ASGI connection (or the lifespan)."""
        ...


AppT = TypeVar("AppT", bound=ASGIApp)


class LazyApp(Generic[AppT]):
    """An ASGI app built by ``factory`` on first use (first call or attribute).

    Module-level apps served by ``hypercorn module:app`` use it so that
    importing the module reads no configuration and opens no database.
    """

    def __init__(self, factory: Callable[[], AppT]) -> None:
        self._factory = factory
        self._app: AppT | None = None

    def build(self) -> AppT:
        """The app, built by the factory on the first call."""
        if self._app is None:
            self._app = self._factory()
        return self._app

    @property
    def app(self) -> AppT:
        """The app (built now if it was not), where ASGI wrappers keep what they wrap.

        hypercorn's mends find each app's ``send_timeout`` through it.
        """
        return self.build()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        """The ASGI entry point of the app, built on the first call."""
        await self.build()(scope, receive, send)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.build(), name)
