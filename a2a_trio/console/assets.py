"""The console's page and the files it loads, served from the package's ``static`` folder.

The page holds no data: its script asks the JSON API (:mod:`.api`) and the
feed (:mod:`.feed`) with the operator's token.
"""

from __future__ import annotations

from importlib.resources import files

from quart import Response

from .responses import error_response

__all__ = ["ASSETS", "asset", "page"]

#: The files the page loads, and their content types.
ASSETS = {
    "console.css": "text/css; charset=utf-8",
    "console.js": "text/javascript; charset=utf-8",
}


async def page() -> Response:
    """The console's page."""
    return _file("console.html", "text/html; charset=utf-8")


async def asset(name: str) -> Response:
    """One of :data:`ASSETS`, or 404."""
    if name not in ASSETS:
        return error_response(404, "NOT_FOUND", f"no console file {name!r}")
    return _file(name, ASSETS[name])


def _file(name: str, content_type: str) -> Response:
    body = files("a2a_trio.console").joinpath("static", name).read_bytes()
    return Response(body, content_type=content_type, headers={"Cache-Control": "no-cache"})
