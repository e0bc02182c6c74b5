"""The console's JSON answers: never cached, errors in the AIP-193 shape the app uses."""

from __future__ import annotations

import json

from quart import Response

__all__ = ["error_response", "json_response"]


def json_response(body: object, status: int = 200) -> Response:
    """``body`` as JSON (UTF-8, not escaped), ``Cache-Control: no-store``."""
    return Response(
        json.dumps(body, ensure_ascii=False),
        status=status,
        content_type="application/json",
        headers={"Cache-Control": "no-store"},
    )


def error_response(status: int, code: str, message: str) -> Response:
    """An error: ``{"error": {"code": status, "status": code, "message": message}}``."""
    return json_response({"error": {"code": status, "status": code, "message": message}}, status)
