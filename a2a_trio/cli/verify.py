"""``a2a-trio card --verify``: check any agent's card signatures and say why they fail."""

from __future__ import annotations

import json
from pathlib import Path

import click
import httpx
import trio

from .._http import CLIENT_LIMITS
from ..client.cards import card_url, fetch_jwks
from ..protocol.signing import CardKeys, CardSignatureError, signature_headers, verify_card

__all__ = ["verify_remote_card"]


def verify_remote_card(url: str, jwks_url: str | None, key_file: Path | None) -> None:
    """Fetch the card at ``url``, print it, verify its signatures; exit 1 when they fail.

    Keys come from ``--key`` (a PEM public key), ``--jwks`` (a key set), or
    else from the ``jku`` the signatures' protected headers name, which proves
    only that the card is what the holder of that key set signed.
    """
    try:
        pinned = None
        if key_file is not None:
            try:
                pinned = (CardKeys.from_pem(key_file.read_bytes()), f"the key in {key_file}")
            except ValueError as error:
                raise ValueError(f"{key_file}: {error}") from None
        trio.run(_verify, url, jwks_url, pinned)
    except CardSignatureError as error:
        click.echo(f"\nthe card at {card_url(url)} does not verify: {error}", err=True)
        raise SystemExit(1) from None
    except (httpx.HTTPError, ValueError) as error:
        click.echo(f"error: {error}", err=True)
        raise SystemExit(1) from None


async def _verify(url: str, jwks_url: str | None, pinned: tuple[CardKeys, str] | None) -> None:
    where = card_url(url)
    async with httpx.AsyncClient(timeout=30.0, limits=CLIENT_LIMITS) as http:
        response = await http.get(where)
        if response.status_code != 200:
            raise ValueError(f"{where} answered HTTP {response.status_code}")
        try:
            card = response.json()
        except ValueError:
            raise ValueError(f"{where} did not answer JSON") from None
        if not isinstance(card, dict):
            raise ValueError(f"{where} did not answer a JSON object")
        click.echo(json.dumps(card, indent=2, ensure_ascii=False))
        keys, source = pinned or await _keys(card, http, jwks_url)
    verified = verify_card(card, keys)
    click.echo(
        f"\nthe card at {where} is signed: signature {verified.index + 1} "
        f"({verified.algorithm}, kid {verified.kid!r}) verifies with {source}",
        err=True,
    )


async def _keys(
    card: dict[str, object], http: httpx.AsyncClient, jwks_url: str | None
) -> tuple[CardKeys, str]:
    if jwks_url is not None:
        return await fetch_jwks(jwks_url, http), f"the key set at {jwks_url}"
    named = sorted({h["jku"] for h in signature_headers(card) if isinstance(h.get("jku"), str)})
    if not named:
        raise click.UsageError(
            "no key to verify with: pass --jwks URL or --key PEM "
            "(no signature of the card names a jku)"
        )
    by_kid: dict[str, object] = {}
    any_kid: list[object] = []
    for jku in named:
        keys = await fetch_jwks(jku, http)
        by_kid.update(keys.by_kid)
        any_kid.extend(keys.any_kid)
    return (
        CardKeys(by_kid, any_kid),
        f"the card's own jku {', '.join(named)} (trust it as far as you trust that address)",
    )
