"""The operator console: a live feed over WebSocket, a page, JSON endpoints, ``/metrics``.

See docs/console.md and docs/metrics.md. :func:`attach_console` serves it on
an app; ``a2a_trio:app`` attaches it as the ``[console]`` section of the
configuration says, and an app built in code gets the default one when it
starts (:func:`ensure_console`), unless it was built with ``console=False``.
"""

from __future__ import annotations

from .events import KINDS, FeedFilter
from .hub import FeedHub, Subscriber
from .metrics import Metrics
from .web import Console, ConsoleSettings, attach_console, console_of, ensure_console

__all__ = [
    "KINDS",
    "Console",
    "ConsoleSettings",
    "FeedFilter",
    "FeedHub",
    "Metrics",
    "Subscriber",
    "attach_console",
    "console_of",
    "ensure_console",
]
