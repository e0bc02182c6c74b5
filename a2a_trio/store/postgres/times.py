"""Times into and out of ``timestamptz``: aware UTC in, SQLite's order keys out.

Outside the store every time a backend hands back is the string
:func:`~a2a_trio.store.records.order_key` makes (delivery and attempt times,
page tokens), so the two backends cannot be told apart by what they return.
"""

from __future__ import annotations

from datetime import UTC, datetime

from ...protocol import InvalidParamsError
from ...protocol._base import utc_naive

__all__ = ["page_time", "utc"]


def utc(moment: datetime) -> datetime:
    """``moment`` as an aware UTC time; a naive one is taken as UTC, as order_key does.

    psycopg would send a naive time as ``timestamp``, which PostgreSQL reads
    in the session's time zone instead.
    """
    return utc_naive(moment).replace(tzinfo=UTC)


def page_time(text: str) -> datetime:
    """The time a page token holds; InvalidParamsError when it holds no time.

    On SQLite the cursor's time is compared as text, so any string merely
    finds no tasks; here it becomes a parameter, and a database error is no
    answer to a forged token.
    """
    try:
        return utc(datetime.fromisoformat(text))
    except (ValueError, OverflowError):
        raise InvalidParamsError(
            "pageToken: not a token this server issued", metadata={"field": "pageToken"}
        ) from None
