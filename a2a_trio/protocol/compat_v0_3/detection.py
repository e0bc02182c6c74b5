"""Which version a request speaks: 1.0 stays as it is, 0.3 is recognised. Pure.

Spec 1.0 section 3.6.2 reads a missing ``A2A-Version`` as 0.3, and 0.3
clients send none. A request is therefore 0.3 when it uses a name only 0.3
has (a JSON-RPC method such as ``message/send``, an HTTP+JSON path under
``/v1/``), or when its header says 0.3. A request that uses a 1.0 name is
checked by ``negotiate_version`` exactly as before, header and all.
"""

from __future__ import annotations

from ..errors import VersionNotSupportedError
from ..versions import LEGACY_VERSION, PROTOCOL_VERSION, negotiate_version
from .methods import is_v0_3_method
from .routes import is_v0_3_path

__all__ = ["jsonrpc_version", "rest_version", "says_v0_3"]

_BOTH = frozenset({PROTOCOL_VERSION, LEGACY_VERSION})


def says_v0_3(header: str | None) -> bool:
    """True when an ``A2A-Version`` value means 0.3: missing, empty, or 0.3.x."""
    try:
        return negotiate_version(header, supported=_BOTH) == LEGACY_VERSION
    except VersionNotSupportedError:  # a malformed value is simply not 0.3
        return False


def jsonrpc_version(method: str, header: str | None) -> str:
    """The version a JSON-RPC call is served in: its method name decides first.

    A 0.3 method is 0.3 whatever the header says; any other method is
    negotiated as a 1.0 call always was (VersionNotSupportedError included).
    """
    if is_v0_3_method(method):
        return LEGACY_VERSION
    return negotiate_version(header)


def rest_version(path: str, header: str | None) -> str:
    """The version an HTTP+JSON request is served in; ``path`` is below the mount."""
    if is_v0_3_path(path):
        return LEGACY_VERSION
    return negotiate_version(header)
