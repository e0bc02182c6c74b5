"""Retried messages: a SendMessage repeated by a caller who lost the answer (spec 3.3.1).

A retry is a message whose sender cannot know what became of the first
one: its request went away (a timeout, a dropped connection) before the
answer reached it. A client that got its answer and sends the same
message again asks again, and gets new work (the conformance kit does
just that). So a message is joined while its execution runs and no
client has had the answer, and its receipt is stored only once its
request went away without one.

Every SendMessage asks whether it is a retry, so the question is cheap:
a dict lookup by (caller, messageId). Only a message that shares those
with a running one, or with one whose receipt is stored, is compared in
content (running: equal messages; stored: a digest of the message).
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import trio

from ..protocol import InvalidParamsError, Message, Role, SendMessageRequest, utcnow
from ..store import Receipt, ReceiptWrite
from .executor import Principal
from .state import Execution, HostState, LiveTask, RetryKey

__all__ = ["Earlier", "Retries"]

log = logging.getLogger("a2a_trio.runtime")


@dataclass(frozen=True, slots=True)
class Earlier:
    """A stored receipt that a retry gets its answer from."""

    key: RetryKey
    digest: str
    receipt: Receipt


class Retries:
    """Recognises one agent's retried messages: joins running originals, keeps receipts."""

    def __init__(self, state: HostState) -> None:
        self.name = state.name
        self.store = state.store
        self.settings = state.settings
        #: Running executions by their message's retry key: a retry arriving
        #: meanwhile joins the original instead of starting the work again.
        #: Several, when one messageId came with different contents.
        self.running: dict[RetryKey, list[tuple[LiveTask, Execution]]] = {}
        #: Keys with a stored receipt (read at start, kept up to date after):
        #: only these are looked up in the store. One process serves a store.
        self._stored: set[RetryKey] = set()
        #: Receipts being dropped (see answered): no retry finds them meanwhile.
        self._dropping: set[tuple[str, str, str]] = set()

    async def load(self) -> None:
        """Learn which messages have receipts stored (at start)."""
        if self.settings.retry_window > 0:
            since = utcnow() - timedelta(seconds=self.settings.retry_window)
            self._stored = set(await self.store.remembered_messages(self.name, since))

    def key(self, request: SendMessageRequest, caller: Principal) -> RetryKey | None:
        """The key a retry of this message would share with it (None: retries not recognised)."""
        message = request.message
        if message.role is not Role.USER:
            raise InvalidParamsError("message.role: a client message must have role ROLE_USER")
        if self.settings.retry_window <= 0:
            return None
        return caller.identifier, message.message_id

    def _original(self, key: RetryKey, message: Message) -> tuple[LiveTask, Execution] | None:
        for live, execution in self.running.get(key, ()):
            if execution.retry_message == message:
                return live, execution
        return None

    def join(self, key: RetryKey, message: Message) -> tuple[LiveTask, Execution] | None:
        """The execution a retry joins: its original's, while that still runs."""
        found = self._original(key, message)
        if found is not None:
            found[0].users += 1  # held by this request, like the original's
        return found

    async def earlier(self, key: RetryKey | None, message: Message) -> Earlier | None:
        """What an earlier, unanswered SendMessage of this content started, if anything."""
        if key is None or key not in self._stored:
            return None
        if self._original(key, message) is not None:
            return None  # a running original is joined (see join) instead
        digest = await _digest_off_loop(message)
        if (*key, digest) in self._dropping:
            return None
        since = utcnow() - timedelta(seconds=self.settings.retry_window)
        receipt = await self.store.find_message(self.name, *key, digest, since)
        return None if receipt is None else Earlier(key, digest, receipt)

    def started(self, live: LiveTask, execution: Execution) -> None:
        """The execution runs: a retry of its message joins it from now on."""
        if execution.retry_key is not None:
            self.running.setdefault(execution.retry_key, []).append((live, execution))

    def finished(self, execution: Execution) -> None:
        """The execution ended: a retry of its message no longer joins it."""
        self._stopped_running(execution)

    def remember(self, execution: Execution, **receipt: Any) -> ReceiptWrite | None:
        """Note what the execution's message started.

        Returns the receipt to store with the recorder's write when the
        request went away already (see :meth:`unanswered`).
        """
        if execution.retry_key is None:
            return None
        execution.receipt = receipt
        return self._receipt(execution) if execution.unanswered else None

    def _receipt(self, execution: Execution) -> ReceiptWrite:
        key, message = execution.retry_key, execution.retry_message
        assert key is not None and message is not None and execution.receipt is not None
        self._stored.add(key)
        return ReceiptWrite(*key, _digest(message), **execution.receipt)

    def answered(self, execution: Execution) -> ReceiptWrite | None:
        """A client has the answer: the same message again is new work from now on.

        Returns the receipt to drop when one was stored because an earlier
        request for this execution went away (a retry that joined it now has
        the answer): else the next copy would be taken for a retry too.
        """
        self._stopped_running(execution)
        if not execution.unanswered:
            return None
        execution.unanswered = False  # nor is one stored from now on
        if execution.receipt is None:
            return None
        receipt = self._receipt(execution)
        self._dropping.add((receipt.owner, receipt.message_id, receipt.digest))
        return receipt

    def dropped(self, receipt: ReceiptWrite) -> None:
        """The receipt :meth:`answered` returned is gone from the store (or stays, failing)."""
        self._dropping.discard((receipt.owner, receipt.message_id, receipt.digest))

    def _stopped_running(self, execution: Execution) -> None:
        key = execution.retry_key
        if key is None or key not in self.running:
            return
        running = [entry for entry in self.running[key] if entry[1] is not execution]
        if running:
            self.running[key] = running
        else:
            del self.running[key]

    async def answered_again(self, earlier: Earlier) -> None:
        """A retry got the answer its original missed: the next such message is new work."""
        try:
            await self.store.forget_message(self.name, *earlier.key, earlier.digest)
        except Exception:  # the receipt stays: the next copy is taken for a retry too
            log.exception("agent %s: could not drop a message receipt", self.name)

    def unanswered(self, execution: Execution) -> ReceiptWrite | None:
        """The request went away without its answer: a retry must find the original.

        Returns the receipt to store now, when what the message started is
        stored already; else the recorder stores it with that (:meth:`remember`).
        """
        if execution.retry_key is None or execution.unanswered:
            return None
        execution.unanswered = True
        return None if execution.receipt is None else self._receipt(execution)


#: Messages whose parts carry this many bytes or more are digested on a thread.
_LARGE_CONTENT = 256 * 1024


def _content_size(message: Message) -> int:
    """Roughly how large the message's parts are (text, raw bytes and URLs)."""
    return sum(len(p.text or "") + len(p.raw or b"") + len(p.url or "") for p in message.parts)


def _digest(message: Message) -> str:
    """What "the same content" means for a stored receipt: the message's JSON, hashed."""
    return hashlib.sha256(message.to_json().encode()).hexdigest()


async def _digest_off_loop(message: Message) -> str:
    if _content_size(message) < _LARGE_CONTENT:
        return _digest(message)
    # ~30 ms for 10 MiB (hashlib lets the GIL go; rendering the JSON does not).
    return await trio.to_thread.run_sync(_digest, message)
