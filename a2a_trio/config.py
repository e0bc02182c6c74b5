"""The configuration file, and building the app from it.

``a2a_trio:app`` reads ``a2a.toml`` from the working directory (or the file
named by ``A2A_TRIO_CONFIG``); without one it serves the bundled echo agent.
``A2A_TRIO_DATABASE`` overrides ``storage.url``. Every key is documented in
docs/configuration.md.
"""

from __future__ import annotations

import difflib
import os
import tomllib
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PrivateAttr, ValidationError

from .console import ConsoleSettings, attach_console
from .protocol.limits import DEPTH_CEILING, Limits
from .protocol.operations import describe_problem
from .protocol.signing import CardSigner, SigningAlgorithm
from .push import PushSettings
from .runtime import HostSettings
from .runtime.retention import RetentionSettings, duration_seconds
from .server import (
    A2AApp,
    ApiKeyAuthenticator,
    Authenticator,
    BasicAuthenticator,
    BearerAuthenticator,
    JWTAuthenticator,
    MutualTLSAuthenticator,
    ServerSettings,
)
from .server.cards import describe_failure, import_object
from .store.postgres import PoolSettings
from .store.retention import DEFAULT_BATCH
from .store.url import (
    DATABASE_ENV,
    DEFAULT_URL,
    DatabaseLocation,
    DatabaseURLError,
    parse_database_url,
)

__all__ = ["AgentSettings", "ConfigError", "Settings", "build_app", "load_settings"]

CONFIG_ENV = "A2A_TRIO_CONFIG"
#: The console's defaults, in one place (an app built in code gets the same).
_CONSOLE = ConsoleSettings()
DEFAULT_CONFIG = "a2a.toml"


class ConfigError(Exception):
    """The configuration cannot be used; the message names the key."""


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class StorageSettings(_Section):
    #: ``sqlite:///a2a.db`` (the default), a plain path, or ``postgresql://user@host/db``.
    url: str = DEFAULT_URL
    #: The older spelling of a SQLite ``url``: a path (ignored when ``url`` is set).
    path: str | None = None
    secret_key: str | None = None
    #: PostgreSQL only: connections per process, and their timeouts in seconds.
    pool_size: int = Field(default=10, ge=1, le=1000)
    connect_timeout: float = Field(default=5.0, gt=0)
    statement_timeout: float = Field(default=30.0, gt=0)
    #: Seconds a pooled connection may stay unused before it is closed.
    pool_idle: float = Field(default=30.0, gt=0)
    #: Which setting ``url`` came from, for messages (``A2A_TRIO_DATABASE`` overrides).
    _source: str = PrivateAttr(default="storage.url")

    def location(self) -> DatabaseLocation:
        """Where the database is; DatabaseURLError names the setting it came from."""
        return parse_database_url(self.url, key=self._source)

    def take_url(self, url: str, source: str) -> None:
        """Use ``url``, which came from the setting ``source`` (named in messages)."""
        self.url, self._source = url, source

    def pool(self) -> PoolSettings:
        return PoolSettings(
            size=self.pool_size,
            connect_timeout=self.connect_timeout,
            statement_timeout=self.statement_timeout,
            idle_seconds=self.pool_idle,
        )


class ClusterSection(_Section):
    """Several processes on one PostgreSQL database (docs/deployment.md)."""

    #: Seconds a process lives without a heartbeat (one every quarter of it):
    #: after a crash, its running tasks end FAILED within this much.
    lease_seconds: float = Field(default=10.0, ge=0.5, le=3600)


class WorkerSection(_Section):
    """``a2a-trio worker`` processes (docs/deployment.md, "Queue workers")."""

    #: Seconds a stopping worker lets its running executions finish (its
    #: runtime.shutdown_grace); queued agents are for long work.
    grace: float = Field(default=900.0, ge=0)
    #: A worker's storage.pool_size: its executions' events are committed in
    #: rounds, a few connections at most.
    pool_size: int = Field(default=4, ge=1, le=1000)


#: Seconds, or a duration with its unit: "30d", "12h", "15m", "90s", "250ms".
Duration = Annotated[float, BeforeValidator(duration_seconds)]


class RetentionSection(_Section):
    """Finished tasks pruned on a schedule inside the server (docs/deployment.md, "Retention").

    Off unless ``max_age`` is set: what a deployment must keep, and for how
    long, is its own decision; a default would delete someone's records.
    """

    max_age: Duration | None = Field(default=None, gt=0)
    interval: Duration = Field(default=3600.0, gt=0)
    batch: int = Field(default=DEFAULT_BATCH, ge=1, le=10_000)
    pause: Duration = Field(default=0.05, ge=0)
    share: float = Field(default=0.2, gt=0, le=1)

    def settings(self) -> RetentionSettings:
        return RetentionSettings(**self.model_dump())


class RuntimeSettings(_Section):
    cancel_grace: float = Field(default=5.0, ge=0)
    shutdown_grace: float = Field(default=10.0, ge=0)
    queue_size: int = Field(default=256, ge=1)
    list_history_length: int | None = Field(default=0, ge=0)
    retry_window: float = Field(default=600.0, ge=0)


class LimitsSection(_Section):
    """What one request may carry (see protocol.limits.Limits)."""

    json_depth: int = Field(default=32, ge=1, le=DEPTH_CEILING)
    json_items: int = Field(default=100_000, ge=1)
    id_bytes: int = Field(default=1_024, ge=36, le=2_048)
    parts: int = Field(default=1_000, ge=1)
    artifacts: int = Field(default=1_000, ge=1)
    history_messages: int = Field(default=1_000, ge=1)
    history_bytes: int = Field(default=1024 * 1024, ge=1)


class ServerSection(_Section):
    public_url: str | None = None
    allowed_hosts: list[str] = Field(default_factory=list)
    max_body_bytes: int = Field(default=10 * 1024 * 1024, ge=1024)
    body_timeout: float = Field(default=30.0, gt=0)
    body_budget: int = Field(default=256 * 1024 * 1024, ge=1024)
    body_budget_wait: float = Field(default=1.0, ge=0)
    send_timeout: float = Field(default=60.0, gt=0)
    header_timeout: float = Field(default=10.0, gt=0)
    keepalive_interval: float = Field(default=15.0, gt=0)
    card_max_age: int = Field(default=300, ge=0)
    freeze_gc: bool = True


class PushSection(_Section):
    enabled: bool = True
    queue: bool = True
    max_attempts: int = Field(default=3, ge=1)
    backoff: float = Field(default=0.5, ge=0)
    timeout: float = Field(default=5.0, gt=0)
    max_wait: float = Field(default=30.0, ge=0)
    allowed_hosts: list[str] = Field(default_factory=list)
    screening: bool = True
    concurrency: int = Field(default=16, ge=1)
    per_host: int = Field(default=4, ge=1)
    breaker_threshold: int = Field(default=5, ge=1)
    breaker_cooldown: float = Field(default=30.0, ge=0)
    max_pending_per_webhook: int = Field(default=100, ge=1)
    max_pending_per_task: int = Field(default=1000, ge=1)


class SigningSection(_Section):
    """The key every served card (and extended card) is signed with (spec 8.4)."""

    algorithm: SigningAlgorithm
    #: A PEM private key (unencrypted PKCS#8, or the traditional EC/RSA form).
    key_file: str
    kid: str = Field(min_length=1)
    jku: str | None = None
    #: Serve the empty values spec 8.4.1 keeps ("capabilities": {}, a scheme
    #: required with no scopes): a2a-sdk and @a2a-js/sdk 1.3 then fail to
    #: verify the card (they drop them before canonicalising).
    keep_empty: bool = False


class SchemeSettings(_Section):
    """The authenticator behind one security scheme of the cards."""

    type: Literal["api_key", "bearer", "basic", "jwt", "mtls"]
    #: api_key: the header, query parameter or cookie name, and where it is.
    name: str | None = None
    location: Literal["header", "query", "cookie"] = "header"
    #: Static secrets: api_key key -> identifier, bearer token -> identifier,
    #: basic user -> password.
    keys: dict[str, str] | None = None
    tokens: dict[str, str] | None = None
    users: dict[str, str] | None = None
    #: Import path of a verification callback, instead of static secrets.
    verify: str | None = None
    #: jwt: who issues the tokens, for whom, and the keys that sign them.
    issuer: str | None = None
    audience: str | list[str] | None = None
    jwks_url: str | None = None
    public_keys: list[str] = Field(default_factory=list)
    algorithms: list[str] = Field(default_factory=lambda: ["RS256", "ES256", "PS256", "EdDSA"])
    identifier_claim: str = "sub"


class ConsoleSection(_Section):
    """The operator console, its live feed and ``/metrics`` (docs/console.md).

    Its defaults are :class:`ConsoleSettings`'s, which an app built in code gets too.
    """

    enabled: bool = _CONSOLE.enabled
    path: str = _CONSOLE.path
    #: The operators' bearer token. Unset: a random one, logged with the
    #: console's URL at start, in development mode; no console in production.
    token: str | None = _CONSOLE.token
    #: Or operators are the principals of this security scheme holding ``scope``.
    scheme: str | None = _CONSOLE.scheme
    scope: str | None = _CONSOLE.scope
    metrics: bool = _CONSOLE.metrics
    metrics_path: str = _CONSOLE.metrics_path
    metrics_token: str | None = _CONSOLE.metrics_token
    backlog: int = Field(default=_CONSOLE.backlog, ge=0)
    buffer: int = Field(default=_CONSOLE.buffer, ge=1)


class AgentSettings(_Section):
    name: str = "default"
    prefix: str = ""
    executor: str
    card: str | dict[str, Any]
    extended_card: str | dict[str, Any] | None = None
    well_known: bool | None = None
    #: Serve protocol 0.3 clients too (docs/compatibility.md).
    compat_0_3: bool = True
    #: Answer a card request without ``A2A-Version`` at the default card path
    #: with the card holding the 0.3 keys too (docs/compatibility.md).
    default_card_0_3: bool = False
    #: ``queued``: executions run on ``a2a-trio worker`` processes (PostgreSQL).
    execution: Literal["inline", "queued"] = "inline"
    #: Queued only: an execution a stopping worker cannot finish within its
    #: grace may run again from the start on another worker (else it ends FAILED).
    restartable: bool = False
    #: Serve the gRPC binding too, on the same port over HTTP/2 (docs/protocol.md).
    grpc: bool = True
    #: Where this agent's tasks live when not in storage.url: a path, a
    #: sqlite:/// or a postgresql:// URL (docs/deployment.md, "Several databases").
    storage: str | None = None


class Settings(_Section):
    #: ``production`` refuses to start without ``storage.secret_key``, and
    #: serves no console without ``console.token``.
    mode: Literal["development", "production"] = "development"
    #: The security scheme whose identifier owns tasks (default: the first satisfied).
    guard: str | None = None
    security_schemes: dict[str, SchemeSettings] = Field(default_factory=dict)
    storage: StorageSettings = Field(default_factory=StorageSettings)
    cluster: ClusterSection = Field(default_factory=ClusterSection)
    worker: WorkerSection = Field(default_factory=WorkerSection)
    retention: RetentionSection = Field(default_factory=RetentionSection)
    runtime: RuntimeSettings = Field(default_factory=RuntimeSettings)
    limits: LimitsSection = Field(default_factory=LimitsSection)
    server: ServerSection = Field(default_factory=ServerSection)
    push: PushSection = Field(default_factory=PushSection)
    signing: SigningSection | None = None
    console: ConsoleSection = Field(default_factory=ConsoleSection)
    agents: list[AgentSettings] = Field(default_factory=list)


def load_settings(path: str | Path | None = None) -> Settings:
    """Read the configuration file (if any) and apply environment overrides."""
    data: dict[str, Any] = {}
    chosen = path or os.environ.get(CONFIG_ENV)
    config_path = Path(chosen) if chosen else Path(DEFAULT_CONFIG)
    if config_path.exists():
        try:
            data = tomllib.loads(config_path.read_text())
        except tomllib.TOMLDecodeError as error:
            raise ConfigError(f"{config_path}: not valid TOML: {error}") from None
    elif chosen:
        raise ConfigError(f"configuration file {config_path} does not exist")
    try:
        settings = Settings.model_validate(data)
    except ValidationError as error:
        raise ConfigError(f"{config_path}: {_describe(error)}") from None
    storage = settings.storage
    database = os.environ.get(DATABASE_ENV)
    if database:
        storage.take_url(database, DATABASE_ENV)
    elif storage.path is not None and "url" not in storage.model_fields_set:
        storage.take_url(storage.path, "storage.path")
    try:
        storage.location()
    except DatabaseURLError as error:
        raise ConfigError(str(error)) from None
    return settings


def _describe(error: ValidationError) -> str:
    """Each problem with its key; an unknown key with the known one it is closest to."""
    problems = []
    for item in error.errors(include_url=False):
        path = item["loc"]
        if item["type"] != "extra_forbidden" or not path:
            problems.append(describe_problem(item))
            continue
        known = _keys_at(path[:-1])
        key = ".".join(str(part) for part in path)
        close = difflib.get_close_matches(str(path[-1]), known, n=1)
        if close:
            guess = ".".join([*(str(part) for part in path[:-1]), close[0]])
            problems.append(f"{key}: unknown key; did you mean {guess}?")
        else:
            problems.append(f"{key}: unknown key; the keys here are {', '.join(known)}")
    return "; ".join(problems)


def _keys_at(path: tuple[int | str, ...]) -> list[str]:
    """The keys a section of the configuration takes (``path`` as pydantic reports it)."""
    model: type[BaseModel] = Settings
    for part in path:
        field = model.model_fields.get(part) if isinstance(part, str) else None
        if field is not None:  # a list index or a mapping's key keeps the model it is in
            model = _model_in(field.annotation) or model
    return list(model.model_fields)


def _model_in(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for argument in get_args(annotation):
        found = _model_in(argument)
        if found is not None:
            return found
    return None


def _pem(value: str) -> str:
    # A key given inline, or the path of a file holding it.
    if "-----BEGIN" in value:
        return value
    path = Path(value)
    if not path.exists():
        raise ConfigError(f"public key file {value} does not exist")
    return path.read_text()


def _authenticator(name: str, scheme: SchemeSettings) -> Authenticator:
    key = f"security_schemes.{name}"
    try:
        verify = import_object(scheme.verify) if scheme.verify else None
    except (ImportError, AttributeError, ValueError) as error:
        raise ConfigError(f"{key}.verify: cannot import {scheme.verify!r}: {error}") from None
    try:
        match scheme.type:
            case "api_key":
                if not scheme.name:
                    raise ConfigError(f"{key}.name: the API key's header, query or cookie name")
                return ApiKeyAuthenticator(
                    name=scheme.name, location=scheme.location, keys=scheme.keys, verify=verify
                )
            case "bearer":
                return BearerAuthenticator(tokens=scheme.tokens, verify=verify)
            case "basic":
                return BasicAuthenticator(users=scheme.users, verify=verify)
            case "jwt":
                return JWTAuthenticator(
                    issuer=scheme.issuer,
                    audience=scheme.audience,
                    keys=[_pem(value) for value in scheme.public_keys],
                    jwks_url=scheme.jwks_url,
                    algorithms=scheme.algorithms,
                    identifier_claim=scheme.identifier_claim,
                )
            case "mtls":
                if verify is None:
                    raise ConfigError(
                        f"{key}: mutual TLS needs a verify callback that maps a client "
                        "certificate to a principal"
                    )
                return MutualTLSAuthenticator(verify)
    except ValueError as error:
        raise ConfigError(f"{key}: {error}") from None
    raise AssertionError(scheme.type)  # pragma: no cover


def _card_signer(signing: SigningSection | None) -> CardSigner | None:
    if signing is None:
        return None
    try:
        pem = Path(signing.key_file).read_bytes()
    except OSError as error:
        raise ConfigError(f"signing.key_file: cannot read {signing.key_file}: {error}") from None
    try:
        return CardSigner(
            pem,
            algorithm=signing.algorithm,
            kid=signing.kid,
            jku=signing.jku,
            keep_empty=signing.keep_empty,
        )
    except ValueError as error:
        raise ConfigError(f"signing.key_file: {signing.key_file}: {error}") from None


def build_app(settings: Settings | None = None) -> A2AApp:
    """The app the settings describe; the echo agent when they name none."""
    settings = settings or load_settings()
    if settings.mode == "production" and not settings.storage.secret_key:
        raise ConfigError(
            "storage.secret_key: required in production mode (it encrypts webhook "
            "secrets at rest); make one with: python -c 'from cryptography.fernet "
            "import Fernet; print(Fernet.generate_key().decode())'"
        )
    push = settings.push.model_dump()
    push["allowed_hosts"] = tuple(push["allowed_hosts"])
    app = A2AApp(
        database=settings.storage.location(),
        secret_key=settings.storage.secret_key,
        pool=settings.storage.pool(),
        lease_seconds=settings.cluster.lease_seconds,
        settings=ServerSettings(**settings.server.model_dump()),
        host_settings=HostSettings(
            **settings.runtime.model_dump(), limits=Limits(**settings.limits.model_dump())
        ),
        push_settings=PushSettings(**push),
        card_signer=_card_signer(settings.signing),
        retention=settings.retention.settings(),
    )
    authenticators = {
        name: _authenticator(name, scheme) for name, scheme in settings.security_schemes.items()
    }
    try:
        attach_console(
            app,
            ConsoleSettings(**settings.console.model_dump()),
            mode=settings.mode,
            authenticators=authenticators,
        )
    except ValueError as error:
        raise ConfigError(str(error)) from None
    if not settings.agents:
        from .echo import EchoExecutor, echo_card

        app.mount("", card=echo_card(), executor=EchoExecutor(), name="echo")
        return app
    if settings.guard is not None and settings.guard not in settings.security_schemes:
        raise ConfigError(f"guard: {settings.guard!r} is not one of security_schemes")
    for index, agent in enumerate(settings.agents):
        try:
            # Parsed here, so that errors (a connection refused, later) name the key.
            key = f"agents[{index}].storage"
            storage = None if agent.storage is None else parse_database_url(agent.storage, key=key)
        except DatabaseURLError as error:
            raise ConfigError(str(error)) from None
        try:
            app.mount(
                agent.prefix,
                card=agent.card,
                executor=agent.executor,
                name=agent.name,
                well_known=agent.well_known,
                extended_card=agent.extended_card,
                authenticators=authenticators,
                guard=settings.guard,
                compat_v0_3=agent.compat_0_3,
                default_card_v0_3=agent.default_card_0_3,
                execution=agent.execution,
                restartable=agent.restartable,
                grpc=agent.grpc,
                storage=storage,
            )
        except (ValueError, TypeError, ImportError, AttributeError, ValidationError) as error:
            raise ConfigError(f"agents[{index}] ({agent.name}): {error}") from None
        except Exception as error:  # the agent's own code failed: say what and where
            problem = describe_failure(error)
            raise ConfigError(f"agents[{index}] ({agent.name}): {problem}") from None
    return app
