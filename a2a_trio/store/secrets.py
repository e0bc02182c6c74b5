"""Encryption of secrets at rest (push tokens and credentials) with Fernet."""

from __future__ import annotations

import logging
import os
from pathlib import Path

from cryptography.fernet import Fernet, InvalidToken

__all__ = ["SecretBox", "SecretKeyError", "development_key"]

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
    key_path = database_path.with_name(database_path.name + ".key")
    if key_path.exists():
        return key_path.read_bytes().strip()
    key = Fernet.generate_key()
    fd = os.open(key_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(key + b"\n")
    log.warning(
        "no secret key configured: generated a development key at %s; "
        "set storage.secret_key (A2AApp(secret_key=...) in code) for production",
        key_path,
    )
    return key
