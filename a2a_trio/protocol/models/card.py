"""The Agent Card: interfaces, capabilities, skills, signatures and security schemes."""

from __future__ import annotations

from pydantic import (
    Field,
    model_validator,
)

from .._base import ProtoModel, oneof_count
from .fields import Struct

__all__ = [
    "APIKeySecurityScheme",
    "AgentCapabilities",
    "AgentCard",
    "AgentCardSignature",
    "AgentExtension",
    "AgentInterface",
    "AgentProvider",
    "AgentSkill",
    "AuthorizationCodeOAuthFlow",
    "ClientCredentialsOAuthFlow",
    "DeviceCodeOAuthFlow",
    "HTTPAuthSecurityScheme",
    "ImplicitOAuthFlow",
    "MutualTlsSecurityScheme",
    "OAuth2SecurityScheme",
    "OAuthFlows",
    "OpenIdConnectSecurityScheme",
    "PasswordOAuthFlow",
    "SecurityRequirement",
    "SecurityScheme",
    "StringList",
]


class AgentInterface(ProtoModel):
    """One way to reach the agent: a URL, its protocol binding and version."""

    url: str
    protocol_binding: str
    tenant: str | None = None
    protocol_version: str


class AgentProvider(ProtoModel):
    """The organisation that provides the agent."""

    url: str
    organization: str


class AgentExtension(ProtoModel):
    """A protocol extension the agent supports, and whether clients must too."""

    uri: str | None = None
    description: str | None = None
    required: bool | None = None
    params: Struct | None = None


class AgentCapabilities(ProtoModel):
    """What the agent can do: streaming, push notifications, extensions, an extended card."""

    streaming: bool | None = None
    push_notifications: bool | None = None
    extensions: list[AgentExtension] | None = None
    extended_agent_card: bool | None = None


class StringList(ProtoModel):
    """A list of strings, as the wire format nests it (``{"list": [...]}``)."""

    values: list[str] = Field(default_factory=list, alias="list")


class SecurityRequirement(ProtoModel):
    """The schemes a caller must satisfy together, each with the scopes it needs."""

    schemes: dict[str, StringList] = Field(default_factory=dict)


class AgentSkill(ProtoModel):
    """One thing the agent is good at, with examples and the media types it takes and gives."""

    id: str
    name: str
    description: str
    tags: list[str]
    examples: list[str] | None = None
    input_modes: list[str] | None = None
    output_modes: list[str] | None = None
    security_requirements: list[SecurityRequirement] | None = None


class AgentCardSignature(ProtoModel):
    """A JWS signature over the card (spec 8.4): protected header, signature, unprotected header."""

    protected: str
    signature: str
    header: Struct | None = None


class APIKeySecurityScheme(ProtoModel):
    """An API key sent in a header, query parameter or cookie."""

    description: str | None = None
    location: str
    name: str


class HTTPAuthSecurityScheme(ProtoModel):
    """HTTP authentication (RFC 9110): Basic, Bearer and the like."""

    description: str | None = None
    scheme: str
    bearer_format: str | None = None


class AuthorizationCodeOAuthFlow(ProtoModel):
    """OAuth 2.0's authorization code flow."""

    authorization_url: str
    token_url: str
    refresh_url: str | None = None
    scopes: dict[str, str] = Field(default_factory=dict)
    pkce_required: bool | None = None


class ClientCredentialsOAuthFlow(ProtoModel):
    """OAuth 2.0's client credentials flow."""

    token_url: str
    refresh_url: str | None = None
    scopes: dict[str, str] = Field(default_factory=dict)


class ImplicitOAuthFlow(ProtoModel):
    """OAuth 2.0's implicit flow (deprecated by OAuth 2.1)."""

    authorization_url: str | None = None
    refresh_url: str | None = None
    scopes: dict[str, str] | None = None


class PasswordOAuthFlow(ProtoModel):
    """OAuth 2.0's resource owner password flow (deprecated by OAuth 2.1)."""

    token_url: str | None = None
    refresh_url: str | None = None
    scopes: dict[str, str] | None = None


class DeviceCodeOAuthFlow(ProtoModel):
    """OAuth 2.0's device authorization flow (RFC 8628)."""

    device_authorization_url: str
    token_url: str
    refresh_url: str | None = None
    scopes: dict[str, str] = Field(default_factory=dict)


class OAuthFlows(ProtoModel):
    """A oneof: exactly one flow is described."""

    authorization_code: AuthorizationCodeOAuthFlow | None = None
    client_credentials: ClientCredentialsOAuthFlow | None = None
    implicit: ImplicitOAuthFlow | None = None
    password: PasswordOAuthFlow | None = None
    device_code: DeviceCodeOAuthFlow | None = None

    @model_validator(mode="after")
    def _exactly_one_flow(self) -> OAuthFlows:
        if oneof_count(self) != 1:
            raise ValueError("OAuth flows must describe exactly one flow")
        return self


class OAuth2SecurityScheme(ProtoModel):
    """OAuth 2.0, with the one flow the agent accepts."""

    description: str | None = None
    flows: OAuthFlows
    oauth2_metadata_url: str | None = None


class OpenIdConnectSecurityScheme(ProtoModel):
    """OpenID Connect, from its discovery document."""

    description: str | None = None
    open_id_connect_url: str


class MutualTlsSecurityScheme(ProtoModel):
    """Mutual TLS: the client presents a certificate."""

    description: str | None = None


class SecurityScheme(ProtoModel):
    """A oneof: exactly one of the scheme kinds is set."""

    api_key_security_scheme: APIKeySecurityScheme | None = None
    http_auth_security_scheme: HTTPAuthSecurityScheme | None = None
    oauth2_security_scheme: OAuth2SecurityScheme | None = None
    open_id_connect_security_scheme: OpenIdConnectSecurityScheme | None = None
    mtls_security_scheme: MutualTlsSecurityScheme | None = None

    @model_validator(mode="after")
    def _exactly_one_scheme(self) -> SecurityScheme:
        if oneof_count(self) != 1:
            raise ValueError("a security scheme must set exactly one scheme kind")
        return self


class AgentCard(ProtoModel):
    """The agent's self-description served for discovery."""

    name: str
    description: str
    supported_interfaces: list[AgentInterface] | None = None
    provider: AgentProvider | None = None
    version: str
    documentation_url: str | None = None
    capabilities: AgentCapabilities = Field(default_factory=AgentCapabilities)
    security_schemes: dict[str, SecurityScheme] | None = None
    security_requirements: list[SecurityRequirement] | None = None
    default_input_modes: list[str]
    default_output_modes: list[str]
    skills: list[AgentSkill]
    signatures: list[AgentCardSignature] | None = None
    icon_url: str | None = None
