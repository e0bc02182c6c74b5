"""The retry policy of webhook delivery as pure functions: decide and retry_after_seconds."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest

from a2a_trio.push import Decision, PushSettings, decide, retry_after_seconds

#: A fixed "now" for every HTTP-date Retry-After.
NOW = datetime(2025, 3, 14, 12, 0, 0, tzinfo=UTC)
#: Settings generous with attempts, so only the status or error decides.
MANY_ATTEMPTS = PushSettings(max_attempts=100)


def http_date(moment: datetime) -> str:
    """The IMF-fixdate form of an HTTP date (``Fri, 14 Mar 2025 12:00:12 GMT``)."""
    return format_datetime(moment, usegmt=True)


# --- delivered ------------------------------------------------------------------


@pytest.mark.parametrize("status", [200, 201, 202, 204, 299])
def test_a_2xx_answer_is_delivered(status: int) -> None:
    assert decide(1, PushSettings(), status=status) == Decision("delivered")


def test_a_2xx_on_the_last_attempt_is_still_delivered() -> None:
    assert decide(3, PushSettings(max_attempts=3), status=200) == Decision("delivered")


def test_a_2xx_is_delivered_whatever_retry_after_says() -> None:
    assert decide(1, PushSettings(), status=200, retry_after="10") == Decision("delivered")


# --- retried with backoff -----------------------------------------------------------


@pytest.mark.parametrize("status", [408, 425, 429, 500, 502, 503, 504, 599])
def test_a_retryable_status_is_retried_after_the_backoff_base(status: int) -> None:
    decision = decide(1, MANY_ATTEMPTS, status=status)
    assert decision == Decision("retry", wait=0.5, error=f"HTTP {status}")


def test_the_default_backoff_doubles_from_half_a_second() -> None:
    waits = [decide(attempt, MANY_ATTEMPTS, status=503).wait for attempt in range(1, 7)]
    assert waits == [0.5, 1.0, 2.0, 4.0, 8.0, 16.0]


def test_the_backoff_base_comes_from_the_settings() -> None:
    settings = PushSettings(backoff=0.25, max_attempts=100)
    waits = [decide(attempt, settings, status=500).wait for attempt in range(1, 5)]
    assert waits == [0.25, 0.5, 1.0, 2.0]


def test_no_backoff_wait_is_longer_than_max_wait() -> None:
    waits = [decide(attempt, MANY_ATTEMPTS, status=503).wait for attempt in range(6, 20)]
    assert waits == [16.0] + [30.0] * 13


def test_max_wait_comes_from_the_settings() -> None:
    settings = PushSettings(max_attempts=100, max_wait=3.0)
    waits = [decide(attempt, settings, status=503).wait for attempt in range(1, 5)]
    assert waits == [0.5, 1.0, 2.0, 3.0]


def test_a_zero_backoff_retries_at_once() -> None:
    decision = decide(2, PushSettings(backoff=0.0), status=503)
    assert decision == Decision("retry", wait=0.0, error="HTTP 503")


# --- Retry-After ---------------------------------------------------------------------


def test_retry_after_in_seconds_takes_precedence_over_the_backoff() -> None:
    decision = decide(1, MANY_ATTEMPTS, status=429, retry_after="7")
    assert decision == Decision("retry", wait=7.0, error="HTTP 429")


def test_retry_after_is_honoured_on_a_5xx_too() -> None:
    assert decide(4, MANY_ATTEMPTS, status=503, retry_after="2").wait == 2.0


def test_retry_after_zero_means_retry_at_once() -> None:
    assert decide(3, MANY_ATTEMPTS, status=429, retry_after="0").wait == 0.0


def test_retry_after_as_an_http_date_is_the_time_until_then() -> None:
    later = http_date(NOW + timedelta(seconds=12))
    decision = decide(1, MANY_ATTEMPTS, status=503, retry_after=later, now=NOW)
    assert decision == Decision("retry", wait=12.0, error="HTTP 503")


def test_retry_after_in_seconds_is_capped_at_max_wait() -> None:
    assert decide(1, MANY_ATTEMPTS, status=429, retry_after="3600").wait == 30.0


def test_retry_after_as_a_distant_date_is_capped_at_max_wait() -> None:
    tomorrow = http_date(NOW + timedelta(days=1))
    assert decide(1, MANY_ATTEMPTS, status=429, retry_after=tomorrow, now=NOW).wait == 30.0


def test_retry_after_as_a_past_date_means_retry_at_once() -> None:
    earlier = http_date(NOW - timedelta(minutes=5))
    assert decide(1, MANY_ATTEMPTS, status=503, retry_after=earlier, now=NOW).wait == 0.0


@pytest.mark.parametrize("value", ["soon", "", "-5", "1.5", "+5", "1e3"])
def test_a_retry_after_that_is_neither_seconds_nor_a_date_leaves_the_backoff(value: str) -> None:
    assert decide(2, MANY_ATTEMPTS, status=503, retry_after=value).wait == 1.0


@pytest.mark.parametrize("value", ["²", "1²"])
def test_a_retry_after_with_non_ascii_digits_leaves_the_backoff(value: str) -> None:
    # httpx decodes a header that is not UTF-8 as Latin-1, where b"\xb2" is "²".
    assert decide(2, MANY_ATTEMPTS, status=503, retry_after=value).wait == 1.0


def test_retry_after_does_not_make_a_non_retryable_status_retryable() -> None:
    decision = decide(1, MANY_ATTEMPTS, status=404, retry_after="1")
    assert decision == Decision("failed", error="HTTP 404")


# --- retry_after_seconds on its own -----------------------------------------------------


def test_no_retry_after_header_gives_no_hint() -> None:
    assert retry_after_seconds(None) is None


def test_retry_after_seconds_ignores_surrounding_whitespace() -> None:
    assert retry_after_seconds(" 120 ") == 120.0


@pytest.mark.parametrize(
    "value",
    [
        "Fri, 14 Mar 2025 12:00:37 GMT",  # IMF-fixdate
        "Friday, 14-Mar-25 12:00:37 GMT",  # obsolete RFC 850 form
        "Fri Mar 14 12:00:37 2025",  # obsolete asctime form
    ],
)
def test_retry_after_accepts_all_three_http_date_forms(value: str) -> None:
    # RFC 9110 section 5.6.7: a recipient MUST accept all three.
    assert retry_after_seconds(value, NOW) == 37.0


# --- giving up ------------------------------------------------------------------------


def test_a_retryable_status_on_the_last_attempt_gives_up_saying_so() -> None:
    decision = decide(3, PushSettings(max_attempts=3), status=503)
    assert decision == Decision("failed", error="HTTP 503 (gave up after 3 attempts)")


def test_attempts_before_the_last_are_retried() -> None:
    outcomes = [decide(n, PushSettings(max_attempts=4), status=500).outcome for n in range(1, 5)]
    assert outcomes == ["retry", "retry", "retry", "failed"]


def test_a_single_allowed_attempt_gives_up_at_once() -> None:
    decision = decide(1, PushSettings(max_attempts=1), status=429, retry_after="1")
    assert decision == Decision("failed", error="HTTP 429 (gave up after 1 attempts)")


def test_a_network_error_on_the_last_attempt_gives_up_naming_the_error() -> None:
    decision = decide(3, PushSettings(), error="ConnectError: connection refused")
    assert decision == Decision(
        "failed", error="ConnectError: connection refused (gave up after 3 attempts)"
    )


# --- never retried ---------------------------------------------------------------------


@pytest.mark.parametrize("status", [300, 301, 302, 303, 307, 308])
def test_a_redirect_is_not_followed_nor_retried(status: int) -> None:
    decision = decide(1, MANY_ATTEMPTS, status=status)
    assert decision == Decision("failed", error=f"HTTP {status}: redirects are not followed")


def test_a_redirect_on_the_last_attempt_does_not_claim_to_have_given_up() -> None:
    decision = decide(3, PushSettings(max_attempts=3), status=302)
    assert decision.error == "HTTP 302: redirects are not followed"


@pytest.mark.parametrize("status", [400, 401, 403, 404, 405, 409, 410, 413, 422])
def test_a_client_error_is_not_retried(status: int) -> None:
    assert decide(1, MANY_ATTEMPTS, status=status) == Decision("failed", error=f"HTTP {status}")


# --- errors without a status -------------------------------------------------------------


def test_a_network_error_is_retried_with_backoff() -> None:
    decision = decide(1, MANY_ATTEMPTS, error="ReadTimeout")
    assert decision == Decision("retry", wait=0.5, error="ReadTimeout")


def test_an_attempt_with_neither_status_nor_error_counts_as_no_response() -> None:
    assert decide(1, MANY_ATTEMPTS) == Decision("retry", wait=0.5, error="no response")


def test_a_refusal_that_will_not_change_is_not_retried() -> None:
    refusal = "refused: hook.test resolves to a refused address: 10.0.0.1 is a private address"
    decision = decide(1, MANY_ATTEMPTS, error=refusal, retryable_error=False)
    assert decision == Decision("failed", error=refusal)


def test_a_refusal_that_may_pass_is_retried() -> None:
    decision = decide(2, MANY_ATTEMPTS, error="refused: hook.test does not resolve")
    assert decision == Decision("retry", wait=1.0, error="refused: hook.test does not resolve")


def test_a_status_decides_even_when_an_error_is_given() -> None:
    assert decide(1, MANY_ATTEMPTS, status=200, error="ignored") == Decision("delivered")
