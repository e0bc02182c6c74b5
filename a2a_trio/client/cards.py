"""An agent's card: where it is, and the keys its signatures are checked with."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import httpx

from ..protocol import InvalidAgentResponseError

# Card signatures (cryptography, PyJWT) are imported by the calls that check them.
if TYPE_CHECKING:
    from ..protocol.signing import CardKeys

__all__ = ["WELL_KNOWN_PATH", "card_url", "fetch_jwks", "verified"]

WELL_KNOWN_PATH = "/.well-known/agent-card.json"


def card_url(agent_url: str) -> str:
    """Where an agent's card is: ``agent_url`` itself when it names a .json file."""
    if agent_url.endswith(".json"):
        return agent_url
    return agent_url.rstrip("/") + WELL_KNOWN_PATH


async def fetch_jwks(url: str, http: httpx.AsyncClient) -> CardKeys:
    """The card-signing keys of the JWKS at ``url`` (raises ValueError if it is none)."""
    response = await http.get(url)
    if response.status_code != 200:
        raise ValueError(f"{url} answered HTTP {response.status_code}, not a JWKS")
    try:
        document = response.json()
    except ValueError:
        raise ValueError(f"{url} did not answer JSON, not a JWKS") from None
    from ..protocol.signing import CardKeys

    try:
        return CardKeys.from_jwks(document)
    except ValueError as error:
        raise ValueError(f"{url}: {error}") from None


def verified(document: Any, keys: CardKeys | None, what: str) -> Any:
    """``document`` itself, once one of its signatures verifies with ``keys`` (if any).

    The received JSON is checked, not a model rebuilt from it: fields this
    client does not know are covered by the signature too.
    """
    if keys is None:
        return document
    if not isinstance(document, dict):
        raise InvalidAgentResponseError(f"{what} is not a JSON object")
    from ..protocol.signing import CardSignatureError, verify_card

    try:
        verify_card(document, keys)
    except CardSignatureError as error:
        raise CardSignatureError(f"{what}: {error}") from None
    return document
