"""What a client hears of a failure that no A2A error names.

A database out of reach is a condition, not a bug: its callers are told to
try again (:class:`~a2a_trio.protocol.StorageUnavailableError`, HTTP 503 with
``Retry-After``), and the store has logged the outage once
(:mod:`a2a_trio.store.outage`), so the refusal adds no line of its own.
Anything else is the server's fault: logged with its traceback, answered
:class:`~a2a_trio.protocol.InternalError`, whose text says nothing of it.
"""

from __future__ import annotations

import logging

from ..protocol import A2AError, InternalError, StorageUnavailableError
from ..store.outage import unreachable

__all__ = ["answer_for"]


def answer_for(error: Exception, log: logging.Logger, what: str) -> A2AError:
    """The error to answer for ``error``; logs ``what`` failed, unless the database is away."""
    if unreachable(error):
        return StorageUnavailableError()
    log.error("%s", what, exc_info=error)
    return InternalError()
