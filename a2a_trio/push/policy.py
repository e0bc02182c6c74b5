"""What to do after a delivery attempt: the retry policy, as pure functions."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Literal

__all__ = ["Decision", "PushSettings", "decide", "retry_after_seconds"]

#: Statuses worth another try: timeouts, "too early", rate limits, server errors.
RETRYABLE_STATUSES = frozenset({408, 425, 429})


@dataclass(frozen=True, slots=True)
class PushSettings:
    """The ``push.*`` settings."""

    enabled: bool = True
    #: Deliver from the outbox worker (True) or right after each event is saved.
    queue: bool = True
    max_attempts: int = 3
    #: Base of the exponential backoff, in seconds: 0.5, 1, 2, ...
    backoff: float = 0.5
    #: Seconds allowed for one attempt.
    timeout: float = 5.0
    #: No wait between attempts is longer, whatever Retry-After says.
    max_wait: float = 30.0
    allowed_hosts: tuple[str, ...] = ()
    screening: bool = True
    #: Attempts in flight at once across all webhooks.
    concurrency: int = 16
    #: Attempts in flight at once to one host (scheme, name, port): a host
    #: that hangs holds this many slots of ``concurrency``, never all of them.
    per_host: int = 4
    #: Attempts in a row without an HTTP answer that open a host's circuit ...
    breaker_threshold: int = 5
    #: ... for this many seconds, while its deliveries wait (no attempt spent).
    breaker_cooldown: float = 30.0
    #: Notifications a webhook config of one task may have pending; the
    #: queue past it keeps the oldest and records the newer as dead letters.
    max_pending_per_webhook: int = 100
    #: Notifications one task may have pending across all its webhook configs.
    max_pending_per_task: int = 1000


@dataclass(frozen=True, slots=True)
class Decision:
    """The verdict on one attempt: done, try again after ``wait`` seconds, or give up."""

    outcome: Literal["delivered", "retry", "failed"]
    wait: float = 0.0
    error: str | None = None


def retry_after_seconds(value: str | None, now: datetime | None = None) -> float | None:
    """A Retry-After header (delta-seconds or HTTP-date) as seconds from now."""
    if value is None:
        return None
    text = value.strip()
    if text.isascii() and text.isdigit():
        return float(text)
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


def decide(
    attempt: int,
    settings: PushSettings,
    *,
    status: int | None = None,
    error: str | None = None,
    retry_after: str | None = None,
    retryable_error: bool = True,
    now: datetime | None = None,
) -> Decision:
    """Judge attempt number ``attempt`` (1-based) by its status or its error.

    2xx is delivered. Network errors (``error`` with no status), 408, 425, 429
    and 5xx are retried with exponential backoff, Retry-After taking
    precedence, every wait capped at ``max_wait``, until ``max_attempts``.
    Redirects are never followed and, like every other 4xx, end delivery.
    """
    if status is not None and 200 <= status < 300:
        return Decision("delivered")
    if status is not None:
        if 300 <= status < 400:
            error = f"HTTP {status}: redirects are not followed"
            retryable = False
        else:
            error = f"HTTP {status}"
            retryable = status in RETRYABLE_STATUSES or status >= 500
    else:
        error = error or "no response"
        retryable = retryable_error
    if not retryable or attempt >= settings.max_attempts:
        if retryable:
            error = f"{error} (gave up after {attempt} attempts)"
        return Decision("failed", error=error)
    wait = settings.backoff * (2 ** (attempt - 1))
    hinted = retry_after_seconds(retry_after, now)
    if hinted is not None:
        wait = hinted
    return Decision("retry", wait=min(wait, settings.max_wait), error=error)
