"""Encryption of secrets at rest (push tokens and credentials) with Fernet."""

from __future__ import annotations

import logging
import os
import secrets
from collections.abc import Callable
from pathlib import Path

from cryptography.fernet import Fernet, InvalidToken

__all__ = ["SecretBox", "SecretKeyError", "development_key", "development_token"]

log = logging.getLogger("a2a_trio.store")


class SecretKeyError(RuntimeError):
    """The key is missing, malformed, or does not open stored secrets."""


class SecretBox:
    """Encrypts and decrypts short strings with one Fernet key."""

    def __init__(self, key: str | bytes) -> None:
        try:
            self._fernet = Fernet(key)
        except (ValueError, TypeError):
            raise SecretKeyError(
                "the secret key must be 32 url-safe base64-encoded bytes "
                "(make one with: python -c 'from cryptography.fernet import Fernet; "
                "print(Fernet.generate_key().decode())')"
            ) from None

    def seal(self, plaintext: str | None) -> str | None:
        if plaintext is None:
            return None
        return self._fernet.encrypt(plaintext.encode()).decode("ascii")

    def open(self, sealed: str | None) -> str | None:
        if sealed is None:
            return None
        try:
            return self._fernet.decrypt(sealed.encode("ascii")).decode()
        except InvalidToken:
            raise SecretKeyError("a stored secret does not open with the configured key") from None


def development_key(database_path: Path) -> bytes:
    """The key kept beside a development database, made on first use.

    Production deployments configure their own key; this one exists so that
    a fresh checkout runs, and it says so in the log.
    """
    key_path, key, made = _kept_beside(database_path, ".key", Fernet.generate_key)
    if made:
        log.warning(
            "no secret key configured: generated a development key at %s; "
            "set storage.secret_key (A2AApp(secret_key=...) in code) for production",
            key_path,
        )
    return key


def development_token(database_path: Path) -> str:
    """The console's token kept beside a development database (``NAME.console-token``).

    Made on first use, so the console's address stays the same from one start
    to the next; a deployment that sets ``[console] token`` (or a scheme)
    never reads it.
    """
    _, token, _ = _kept_beside(
        database_path, ".console-token", lambda: secrets.token_urlsafe(24).encode()
    )
    return token.decode()


def _kept_beside(
    database_path: Path, suffix: str, make: Callable[[], bytes]
) -> tuple[Path, bytes, bool]:
    """The value in the file ``NAME{suffix}`` beside the database (owner-only), made if
    missing; (its path, the value, whether it was made now)."""
    path = database_path.with_name(database_path.name + suffix)
    if path.exists():
        return path, path.read_bytes().strip(), False
    value = make()
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # made meanwhile by another process on the same file
        return path, path.read_bytes().strip(), False
    with os.fdopen(fd, "wb") as handle:
        handle.write(value + b"\n")
    return path, value, True
