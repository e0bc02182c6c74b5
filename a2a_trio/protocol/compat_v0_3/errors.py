"""1.0 errors as a 0.3 client reads them (0.3 spec section 8).

0.3 gives the same JSON-RPC codes to the errors both versions share
(-32001 to -32006, and -32007 for an extended card that is not configured);
1.0's later errors keep their codes, which sit in the server-error range that
0.3 leaves to implementations. 0.3 has no ``google.rpc.ErrorInfo``: what
1.0 carries there goes in ``data`` as an object. Pure.
"""

from __future__ import annotations

from typing import Any

from ..errors import A2AError

__all__ = ["error_to_v0_3", "rest_error_to_v0_3"]


def _data(error: A2AError) -> dict[str, Any]:
    data: dict[str, Any] = {"reason": error.spec.reason}
    if error.metadata:
        data["metadata"] = error.metadata
    return data


def error_to_v0_3(error: A2AError) -> dict[str, Any]:
    """The ``error`` member of a 0.3 JSON-RPC error response (``JSONRPCError``)."""
    return {"code": error.code, "message": error.message, "data": _data(error)}


def rest_error_to_v0_3(error: A2AError) -> dict[str, Any]:
    """The body of a 0.3 HTTP+JSON error response; the status is ``error.http_status``.

    @a2a-js/sdk 0.3 reads ``code`` (a JSON-RPC code) from the body to pick the
    error it raises; a2a-sdk 0.3 reads only the status. The JSON-RPC error
    object satisfies both.
    """
    return error_to_v0_3(error)
