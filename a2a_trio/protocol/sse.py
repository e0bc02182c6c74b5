"""Server-sent event framing (text/event-stream). Pure."""

from __future__ import annotations

__all__ = ["KEEPALIVE", "format_event"]

#: A comment frame: keeps proxies and clients from timing out an idle stream.
KEEPALIVE = b": keep-alive\n\n"


def format_event(data: str, *, event_id: int | None = None) -> bytes:
    """One SSE frame; ``data`` is a single JSON text, so one ``data:`` line."""
    if "\n" in data or "\r" in data:
        data = data.replace("\r\n", "\n").replace("\r", "\n").replace("\n", "\ndata: ")
    if event_id is None:
        return f"data: {data}\n\n".encode()
    return f"id: {event_id}\ndata: {data}\n\n".encode()
