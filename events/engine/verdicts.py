"""What one attempt's result means for its event, and why, in words a bot
developer can act on."""

from dataclasses import dataclass
from http import HTTPStatus

from events.engine.webhook_client import Failure, WebhookResult
from events.models import AttemptOutcome

_EXCERPT_IN_REASON = 300


@dataclass(frozen=True)
class Verdict:
    outcome: AttemptOutcome
    reason: str = ""


def _status_words(code: int) -> str:
    try:
        return f"HTTP {code} {HTTPStatus(code).phrase}"
    except ValueError:
        return f"HTTP {code}"


def _answered(result: WebhookResult, code: int) -> str:
    words = f"The webhook answered {_status_words(code)}"
    excerpt = " ".join(result.response_excerpt.split())[:_EXCERPT_IN_REASON]
    return f"{words}: {excerpt}" if excerpt else words


def judge(result: WebhookResult) -> Verdict:
    """2xx is processed; a timeout, a connection error, 429 or 5xx is retried;
    any other answer fails at once."""
    code = result.status_code
    if code is None:
        if result.failure == Failure.INVALID_URL:
            return Verdict(AttemptOutcome.FAILED, result.error)
        return Verdict(AttemptOutcome.RETRY, result.error)
    if 200 <= code < 300:
        return Verdict(AttemptOutcome.PROCESSED)
    if code == 429 or code >= 500:
        return Verdict(AttemptOutcome.RETRY, _answered(result, code))
    if 300 <= code < 400:
        return Verdict(
            AttemptOutcome.FAILED,
            f"The webhook answered {_status_words(code)}; redirects are not followed, "
            "so set the bot's webhook URL to the address it redirects to",
        )
    return Verdict(AttemptOutcome.FAILED, _answered(result, code))
