"""Server-sent event framing (text/event-stream). Pure."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["KEEPALIVE", "SSEDecoder", "ServerSentEvent", "format_event"]

#: A comment frame: keeps proxies and clients from timing out an idle stream.
KEEPALIVE = b": keep-alive\n\n"


def format_event(data: str, *, event_id: int | None = None) -> bytes:
    """One SSE frame; ``data`` is a single JSON text, so one ``data:`` line."""
    if "\n" in data or "\r" in data:
        data = data.replace("\r\n", "\n").replace("\r", "\n").replace("\n", "\ndata: ")
    if event_id is None:
        return f"data: {data}\n\n".encode()
    return f"id: {event_id}\ndata: {data}\n\n".encode()


@dataclass(frozen=True, slots=True)
class ServerSentEvent:
    data: str
    id: str | None = None
    event: str | None = None


class SSEDecoder:
    """Reads a text/event-stream line by line (the WHATWG parsing rules, minus retry)."""

    def __init__(self) -> None:
        self._data: list[str] = []
        self._id: str | None = None
        self._event: str | None = None

    def feed(self, line: str) -> ServerSentEvent | None:
        """One line without its terminator; returns an event when a blank line ends one."""
        if not line:
            if not self._data:
                self._event = None
                return None
            event = ServerSentEvent("\n".join(self._data), self._id, self._event)
            self._data, self._event = [], None
            return event
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "data":
            self._data.append(value)
        elif name == "id" and "\0" not in value:
            self._id = value
        elif name == "event":
            self._event = value
        return None
