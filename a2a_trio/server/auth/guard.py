"""One agent's protocol routes protected as its card's security says."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ...protocol import AgentCard, ForbiddenError, SecurityScheme, UnauthenticatedError
from ...runtime import Principal
from ...runtime.executor import ANONYMOUS
from .credentials import AuthenticationFailed, Authenticator, RequestCredentials
from .schemes import MutualTLSAuthenticator

__all__ = ["CardGuard"]


class CardGuard:
    """Protects one agent's protocol routes as its card's security says."""

    def __init__(
        self,
        card: AgentCard,
        authenticators: Mapping[str, Authenticator],
        *,
        owner_scheme: str | None = None,
    ) -> None:
        schemes: Mapping[str, SecurityScheme] = card.security_schemes or {}
        requirements = card.security_requirements or []
        missing = [name for name in schemes if name not in authenticators]
        if missing:
            raise ValueError(
                "the card declares security scheme(s) without an authenticator: "
                + ", ".join(sorted(missing))
            )
        for name, scheme in schemes.items():
            if scheme.mtls_security_scheme is not None and not isinstance(
                authenticators[name], MutualTLSAuthenticator
            ):
                raise ValueError(
                    f"security scheme {name!r} is mutual TLS: it needs a MutualTLSAuthenticator "
                    "with a callback that maps client certificates to principals"
                )
        undeclared = sorted(
            {name for req in requirements for name in req.schemes if name not in schemes}
        )
        if undeclared:
            raise ValueError(
                "securityRequirements name undeclared scheme(s): " + ", ".join(undeclared)
            )
        self._authenticators = {name: authenticators[name] for name in schemes}
        self._requirements = [
            {name: frozenset(scopes.values) for name, scopes in req.schemes.items()}
            for req in requirements
        ]
        self._owner_scheme = owner_scheme
        self.protected = bool(self._requirements)

    @property
    def declares_security(self) -> bool:
        """Whether any authenticator is configured (the card declares security schemes)."""
        return bool(self._authenticators)

    async def __call__(self, request: RequestCredentials) -> Principal:
        """The caller, or UnauthenticatedError / ForbiddenError.

        Every scheme is tried; a requirement is met when all its schemes
        authenticated (a scheme that refused its credentials only fails the
        requirements that need it).
        """
        found: dict[str, Principal] = {}
        failures: dict[str, str] = {}
        for name, authenticator in self._authenticators.items():
            try:
                principal = await authenticator.authenticate(request)
            except AuthenticationFailed as failure:
                failures[name] = str(failure)
                continue
            if principal is not None:
                found[name] = principal
        if not self.protected:
            if failures and not found:
                raise self._refusal(failures)
            return self._owner(found, found.keys()) if found else ANONYMOUS
        short_of_scopes: list[str] = []
        for requirement in self._requirements:
            if not all(name in found for name in requirement):
                continue
            lacking = [
                f"{name}: {', '.join(sorted(scopes - found[name].scopes))}"
                for name, scopes in requirement.items()
                if not scopes <= found[name].scopes
            ]
            if not lacking:
                return self._owner(found, requirement.keys())
            short_of_scopes += lacking
        if short_of_scopes:
            raise ForbiddenError("missing scope(s): " + "; ".join(short_of_scopes))
        raise self._refusal(failures)

    def challenge(self) -> str:
        """The ``WWW-Authenticate`` value naming every scheme of the card."""
        return ", ".join(a.challenge() for a in self._authenticators.values())

    def _refusal(self, failures: Mapping[str, str]) -> UnauthenticatedError:
        if failures:
            detail = "; ".join(f"{name}: {reason}" for name, reason in failures.items())
            return _unauthenticated(detail, self.challenge())
        return _unauthenticated("this agent requires authentication", self.challenge())

    def _owner(self, found: Mapping[str, Principal], used: Iterable[str]) -> Principal:
        if self._owner_scheme is not None and self._owner_scheme in found:
            return found[self._owner_scheme]
        for name in used:
            if name in found:
                return found[name]
        return next(iter(found.values()))


def _unauthenticated(message: str, challenge: str) -> UnauthenticatedError:
    error = UnauthenticatedError(message)
    error.challenge = challenge  # type: ignore[attr-defined]
    return error
