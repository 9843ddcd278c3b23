"""`type: webhook`: a generic webhook, the alert as JSON POSTed to a URL with an `Idempotency-Key` header (the URL,
which may carry a token, is read from the environment variable `url_env`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field

from eval_platform.alerting.destinations.base import DestinationBase, post_json, secret


def webhook_payload(alert: Mapping[str, Any], link: str) -> dict[str, Any]:
    """The generic webhook's JSON: the alert's fields, its link, and the idempotency key a receiver dedupes on."""
    fields = ("evaluator", "day", "kind", "rule", "value", "threshold", "severity", "message", "mean", "n")
    return {
        "source": "eval_platform",
        "idempotency_key": alert["alert_key"],
        "alert": {name: alert.get(name) for name in fields},
        "link": link,
    }


class WebhookDestination(DestinationBase):
    """A generic webhook: the alert as JSON, POSTed with an `Idempotency-Key` header."""

    type: Literal["webhook"]
    url_env: str = Field(description="The environment variable holding the URL (it may carry a token).")

    def secret_names(self) -> list[tuple[str, bool]]:
        return [(self.url_env, True)]

    def deliver(self, alert: Mapping[str, Any], link: str, env: Mapping[str, str]) -> None:
        url = secret(env, self.url_env, "the webhook URL")
        post_json(url, webhook_payload(alert, link), alert["alert_key"], self.timeout_s)


DESTINATION = WebhookDestination
