"""Pages of webhook deliveries read from several databases, and the token that continues them.

A delivery's id is numbered in its database's outbox, so ids of two
databases do not compare: the console reads each database newest first (by
id) and merges the rows by the time they were queued. The page token holds
where each database stopped (the last id shown, or that it has no more) and
what the page was read with; it is opaque to the client, versioned, and
refused with :class:`PageTokenError` when it was not issued by this server,
or was issued for other databases or other filters.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import heapq
import itertools
import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..store import Delivery

__all__ = ["DeliveryPage", "PageTokenError", "read_page"]

#: The token's format; a token of another version is refused, never guessed at.
VERSION = 1
#: A database with no more rows to show.
_DONE = 0
#: Delivery ids are 64-bit: a cursor past them was never issued (and no database takes it).
_ID_LIMIT = 2**63

#: One database's page: ``(before, limit)`` to rows newest first, ids below ``before``.
ReadRows = Callable[[int | None, int], Awaitable[list[Delivery]]]


class PageTokenError(ValueError):
    """A page token this server did not issue, or issued for other databases or filters."""


@dataclass(frozen=True, slots=True)
class DeliveryPage:
    #: Each delivery with the index of the database it was read from.
    rows: list[tuple[int, Delivery]]
    #: Empty on the last page.
    next_page_token: str


def _fingerprint(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()[:12]


def encode(databases: Sequence[str], filters: str, cursors: Sequence[int | None]) -> str:
    """The token of the page after the one that stopped at ``cursors`` (one per database)."""
    body = {
        "v": VERSION,
        "f": _fingerprint(filters),
        "d": [
            [_fingerprint(name), cursor] for name, cursor in zip(databases, cursors, strict=True)
        ],
    }
    raw = json.dumps(body, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def decode(token: str, databases: Sequence[str], filters: str) -> list[int | None]:
    """Where each of ``databases`` stopped (None: at its newest, not read yet).

    :class:`PageTokenError` says which of these it is: not a token of this
    server, of another version, of other filters, of other databases.
    """
    try:
        body = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        if not isinstance(body, dict) or not isinstance(body.get("v"), int):
            raise ValueError
    except (ValueError, TypeError, RecursionError, binascii.Error):  # nested past the limit
        raise PageTokenError("pageToken: not a token this server issued") from None
    if body["v"] != VERSION:
        raise PageTokenError(
            f"pageToken: version {body['v']} is not one this server reads (it reads"
            f" {VERSION}); start again without pageToken"
        )
    entries = body.get("d")
    if (
        not isinstance(body.get("f"), str)
        or not isinstance(entries, list)
        or not all(_is_entry(entry) for entry in entries)
    ):
        raise PageTokenError("pageToken: not a token this server issued")
    if body["f"] != _fingerprint(filters):
        raise PageTokenError(
            "pageToken: issued for other filters (agent, task, state); page with the"
            " filters it was issued for, or start again without pageToken"
        )
    if [entry[0] for entry in entries] != [_fingerprint(name) for name in databases]:
        raise PageTokenError(
            "pageToken: issued for other databases (the deployment's databases changed);"
            " start again without pageToken"
        )
    return [entry[1] for entry in entries]


def _is_entry(entry: Any) -> bool:
    return (
        isinstance(entry, list)
        and len(entry) == 2
        and isinstance(entry[0], str)
        and (entry[1] is None or (type(entry[1]) is int and 0 <= entry[1] < _ID_LIMIT))
    )


async def read_page(
    databases: Sequence[str],
    readers: Sequence[ReadRows],
    filters: str,
    page_token: str | None,
    size: int,
) -> DeliveryPage:
    """Up to ``size`` deliveries of every database, the most recently queued first.

    Each database's rows stay in their own order (newest id first), so the
    rows shown of each are a prefix of what it holds below its cursor, and
    the next page continues each one exactly where this one stopped.
    """
    cursors: list[int | None] = (
        decode(page_token, databases, filters) if page_token else [None] * len(databases)
    )
    fetched: list[list[Delivery]] = []
    for cursor, read in zip(cursors, readers, strict=True):
        fetched.append([] if cursor == _DONE else await read(cursor, size + 1))
    streams = [[(index, row) for row in rows] for index, rows in enumerate(fetched)]
    merged = heapq.merge(
        *streams, key=lambda item: (item[1].created_at, -item[0], item[1].id), reverse=True
    )
    shown = list(itertools.islice(merged, size))
    taken = [0] * len(databases)
    for index, _ in shown:
        taken[index] += 1
    after: list[int | None] = []
    for index, rows in enumerate(fetched):
        if cursors[index] == _DONE or taken[index] == len(rows):  # all it had is shown
            after.append(_DONE)
        elif taken[index]:
            after.append(rows[taken[index] - 1].id)
        else:
            after.append(cursors[index])
    more = any(cursor != _DONE for cursor in after)
    return DeliveryPage(shown, encode(databases, filters, after) if more else "")
