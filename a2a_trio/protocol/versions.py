"""The ``A2A-Version`` service parameter (spec 3.6). Pure."""

from __future__ import annotations

import re

from .errors import VersionNotSupportedError

__all__ = ["LEGACY_VERSION", "PROTOCOL_VERSION", "SUPPORTED_VERSIONS", "negotiate_version"]

PROTOCOL_VERSION = "1.0"
#: Spec 3.6.2: "Agents MUST interpret empty value as 0.3 version."
LEGACY_VERSION = "0.3"
SUPPORTED_VERSIONS = frozenset({PROTOCOL_VERSION})

_VERSION = re.compile(r"^\s*(\d+)\.(\d+)(?:\.\d+)?\s*$")


def negotiate_version(value: str | None, *, supported: frozenset[str] = SUPPORTED_VERSIONS) -> str:
    """The ``Major.Minor`` this request is served under.

    Patch numbers are ignored (``1.0.2`` is ``1.0``); a missing or empty value
    means 0.3. Anything not in ``supported`` raises VersionNotSupportedError.
    """
    if value == PROTOCOL_VERSION and value in supported:
        # What every 1.0 client sends: no regular expression on the hot path.
        return PROTOCOL_VERSION
    text = (value or "").strip()
    if not text:
        version = LEGACY_VERSION
    else:
        match = _VERSION.match(text)
        if match is None:
            raise VersionNotSupportedError(
                f"A2A-Version {text!r} is not a Major.Minor version; this agent serves "
                f"{_listing(supported)}",
                metadata={"requestedVersion": text[:64], "supportedVersions": _listing(supported)},
            )
        version = f"{int(match.group(1))}.{int(match.group(2))}"
    if version not in supported:
        shown = version if text else f"{version} (no A2A-Version header)"
        raise VersionNotSupportedError(
            f"A2A-Version {shown} is not supported; this agent serves {_listing(supported)}",
            metadata={"requestedVersion": version, "supportedVersions": _listing(supported)},
        )
    return version


def _listing(supported: frozenset[str]) -> str:
    return ", ".join(sorted(supported))
