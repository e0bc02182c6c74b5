"""Retried messages: a SendMessage repeated by a caller who lost the answer (spec 3.3.1).

A retry is a message whose sender cannot know what became of the first
one: its request went away (a timeout, a dropped connection) before the
answer reached it. A client that got its answer and sends the same
message again asks again, and gets new work (the conformance kit does
just that). So a message is joined while its execution runs and no
client has had the answer, and its receipt is stored only once its
request went away without one.
"""

from __future__ import annotations

import hashlib
import logging
from datetime import timedelta
from typing import Any

import trio

from ..protocol import InvalidParamsError, Message, Role, SendMessageRequest, utcnow
from ..store import Receipt, TaskStore
from .executions import Execution, LiveTask, RetryKey
from .executor import Principal
from .settings import HostSettings

__all__ = ["Retries"]

log = logging.getLogger("a2a_trio.runtime")


class Retries:
    """Recognises one agent's retried messages: joins running originals, keeps receipts."""

    def __init__(self, *, name: str, store: TaskStore, settings: HostSettings) -> None:
        self.name = name
        self.store = store
        self.settings = settings
        #: Running executions by their message's retry key: a retry arriving
        #: meanwhile joins the original instead of starting the work again.
        self.running: dict[RetryKey, tuple[LiveTask, Execution]] = {}

    async def key(self, request: SendMessageRequest, caller: Principal) -> RetryKey | None:
        """The key a retry of this message would share with it (None: retries not recognised)."""
        message = request.message
        if message.role is not Role.USER:
            raise InvalidParamsError("message.role: a client message must have role ROLE_USER")
        if self.settings.retry_window <= 0:
            return None
        if _content_size(message) < _LARGE_CONTENT:
            digest = _digest(message)
        else:  # ~30 ms for 10 MiB: the event loop goes on meanwhile
            digest = await trio.to_thread.run_sync(_digest, message)
        return caller.identifier, message.message_id, digest

    def join(self, key: RetryKey) -> tuple[LiveTask, Execution] | None:
        """The execution a retry joins: its original's, while that still runs."""
        found = self.running.get(key)
        if found is None:
            return None
        live, execution = found
        live.users += 1  # held by this request, like the original's
        return live, execution

    def earlier(self, key: RetryKey | None) -> Receipt | None:
        """What an earlier SendMessage with this key started and no longer runs, if anything."""
        if key is None or key in self.running:
            return None  # a running original is joined (see join) instead
        since = utcnow() - timedelta(seconds=self.settings.retry_window)
        return self.store.find_message(self.name, *key, since)

    def started(self, live: LiveTask, execution: Execution) -> None:
        """The execution runs: a retry of its message joins it from now on."""
        if execution.retry_key is not None:
            self.running[execution.retry_key] = (live, execution)

    def finished(self, execution: Execution) -> None:
        """The execution ended: a retry of its message no longer joins it."""
        if execution.retry_key is not None:
            self.running.pop(execution.retry_key, None)

    def remember(self, execution: Execution, **receipt: Any) -> None:
        """Note what the execution's message started (stored if it goes unanswered)."""
        if execution.retry_key is None:
            return
        execution.receipt = receipt
        if execution.unanswered:  # in the recorder's transaction
            self._store_receipt(execution)

    def _store_receipt(self, execution: Execution) -> None:
        assert execution.retry_key is not None and execution.receipt is not None
        owner, message_id, digest = execution.retry_key
        self.store.remember_message(self.name, owner, message_id, digest, **execution.receipt)

    def answered(self, execution: Execution) -> None:
        """A client has the answer: the same message again is new work from now on."""
        key = execution.retry_key
        if key is not None and self.running.get(key, (None, None))[1] is execution:
            del self.running[key]

    def answered_again(self, key: RetryKey) -> None:
        """A retry got the answer its original missed: the next such message is new work."""
        try:
            self.store.forget_message(self.name, *key)
        except Exception:  # the receipt stays: the next copy is taken for a retry too
            log.exception("agent %s: could not drop a message receipt", self.name)

    def unanswered(self, execution: Execution) -> None:
        """The request went away without its answer: a retry must find the original."""
        if execution.retry_key is None or execution.unanswered:
            return
        execution.unanswered = True
        if execution.receipt is not None:
            try:
                self._store_receipt(execution)
            except Exception:  # a failing store costs a retry its answer, nothing more
                log.exception("agent %s: could not store a message receipt", self.name)


#: Messages whose parts carry this many bytes or more are digested on a thread.
_LARGE_CONTENT = 256 * 1024


def _content_size(message: Message) -> int:
    """Roughly how large the message's parts are (text, raw bytes and URLs)."""
    return sum(len(p.text or "") + len(p.raw or b"") + len(p.url or "") for p in message.parts)


def _digest(message: Message) -> str:
    """What "the same content" means for a retried message: its JSON, hashed."""
    return hashlib.sha256(message.to_json().encode()).hexdigest()
