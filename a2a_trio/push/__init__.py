"""Push notifications: webhook screening, the retry policy and the delivery worker."""

from __future__ import annotations

from .delivery import PushDispatcher
from .policy import Decision, PushSettings, decide, retry_after_seconds
from .screening import (
    AddressScreen,
    Resolver,
    ScreenedTarget,
    WebhookRefused,
    address_refusal,
    system_resolver,
)

__all__ = [
    "AddressScreen",
    "Decision",
    "PushDispatcher",
    "PushSettings",
    "Resolver",
    "ScreenedTarget",
    "WebhookRefused",
    "address_refusal",
    "decide",
    "retry_after_seconds",
    "system_resolver",
]
