"""h2's check of the characters of received headers, done by regular expressions.

RFC 9113 (8.2.1) forbids some characters in a field's name (controls,
space, uppercase, DEL and above, a colon past the first byte) and value
(NUL, LF, CR; space or tab at either end). h2 4.4 checks every received
header for them in ``h2.utilities._reject_illegal_characters``, one byte at
a time in Python: about 4,900 interpreted bytecodes for the eleven headers
of a gRPC call, 11 % of all the Python a2a-trio runs to answer it, more
than all of its own gRPC binding and protobuf codec together.

:func:`reject_illegal_characters` makes the same checks in the same order
and raises the same ``ProtocolError`` with the same message; ``re`` finds
the first offending byte in C. :func:`install` puts it in h2's place, for
the h2 releases whose function it was compared with (:data:`CHECKED_VERSIONS`,
by the equivalence test in tests/test_h2_header_checks.py); on any other
release h2's own stays. docs/upstream/h2-header-characters.md writes the
cost up for h2.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Generator, Iterable
from importlib.metadata import version

import h2.utilities
from h2.exceptions import ProtocolError

__all__ = ["CHECKED_VERSIONS", "install", "installed", "reject_illegal_characters"]

#: The h2 releases whose ``_reject_illegal_characters`` this module matches.
CHECKED_VERSIONS = ("4.4.1",)

_log = logging.getLogger("a2a_trio.server")

#: What a field name must not hold (RFC 9113, 8.2.1): 0x00-0x20, A-Z, 0x7f-0xff.
_NAME_FORBIDDEN = re.compile(rb"[\x00-\x20A-Z\x7f-\xff]")
#: What a field value must not hold anywhere: NUL, LF, CR.
_VALUE_FORBIDDEN = re.compile(rb"[\x00\n\r]")
_BLANKS = (0x20, 0x09)

#: h2's own, which the tests compare with :func:`reject_illegal_characters`.
H2_OWN = vars(h2.utilities)["_reject_illegal_characters"]


def reject_illegal_characters(
    headers: Iterable[tuple[bytes, bytes]], hdr_validation_flags: object
) -> Generator[tuple[bytes, bytes], None, None]:
    """Each of ``headers`` as it comes; ``ProtocolError`` at the first forbidden character.

    h2's ``_reject_illegal_characters``, check for check and message for message.
    """
    for header in headers:
        name = header[0]
        if (found := _NAME_FORBIDDEN.search(name)) is not None:
            byte = name[found.start()]
            if 0x41 <= byte <= 0x5A:
                raise ProtocolError(f"Received uppercase header name {name!r}.")
            raise ProtocolError(f"Illegal character '{chr(byte)}' in header name: {name!r}")
        if name.find(b":", 1) != -1:
            raise ProtocolError(f"Illegal character ':' in header name: {name!r}")
        if value := header[1]:
            if (found := _VALUE_FORBIDDEN.search(value)) is not None:
                byte = value[found.start()]
                raise ProtocolError(f"Illegal character '{chr(byte)}' in header value: {value!r}")
            if value[0] in _BLANKS or value[-1] in _BLANKS:
                raise ProtocolError(f"Received header value surrounded by whitespace {value!r}")
        yield header


def installed() -> bool:
    """Whether h2 checks received headers with :func:`reject_illegal_characters`."""
    return vars(h2.utilities)["_reject_illegal_characters"] is reject_illegal_characters


def install() -> bool:
    """Put :func:`reject_illegal_characters` in h2's place, on a checked release; whether it is.

    Idempotent; the first install says so in a DEBUG line of the
    ``a2a_trio.server`` logger, as does h2's own check staying on a release
    outside :data:`CHECKED_VERSIONS` (slower, as correct). Not at INFO: a
    start that fails says one line (``a2a-trio serve``), and the hypercorn
    mends say nothing either when they apply (docs/deployment.md lists them).
    """
    running = version("h2")
    if running not in CHECKED_VERSIONS:
        _log.debug(
            "h2 %s: its own header character check stays (%s checked)",
            running,
            ", ".join(CHECKED_VERSIONS),
        )
        return installed()
    if not installed():
        # h2.utilities.validate_headers looks the function up by its global name on each call.
        setattr(h2.utilities, "_reject_illegal_characters", reject_illegal_characters)  # noqa: B010
        _log.debug(
            "h2 %s: received header characters checked by a2a_trio.server.h2_header_checks"
            " (the same checks by regular expression; docs/upstream/h2-header-characters.md)",
            running,
        )
    return installed()
