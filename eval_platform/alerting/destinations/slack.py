"""`type: slack`: a Slack incoming webhook (https://api.slack.com/messaging/webhooks), Slack's message payload
(text + blocks); the webhook's URL, whose path is its token, is read from the environment variable
`webhook_url_env`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field

from eval_platform.alerting.destinations.base import DestinationBase, post_json, secret


def slack_payload(alert: Mapping[str, Any], link: str) -> dict[str, Any]:
    """Slack's incoming-webhook payload: `text` (notifications, fallback) and `blocks` (the message shown)."""
    title = f"{alert['severity']} {alert['kind']} alert: {alert['evaluator']} on {alert['day']}"
    return {
        "text": f"{title}: {alert['message']}",
        "blocks": [
            {"type": "section", "text": {"type": "mrkdwn", "text": f"*{title}*\n{alert['message']}"}},
            {"type": "section", "text": {"type": "mrkdwn", "text": f"<{link}|Open the partition in Dagster>"}},
            {"type": "context", "elements": [{"type": "mrkdwn", "text": f"alert key `{alert['alert_key']}`"}]},
        ],
    }


class SlackDestination(DestinationBase):
    """A Slack incoming webhook (https://api.slack.com/messaging/webhooks): Slack's message payload."""

    type: Literal["slack"]
    webhook_url_env: str = Field(description="The environment variable holding the incoming webhook's URL.")

    def secret_names(self) -> list[tuple[str, bool]]:
        return [(self.webhook_url_env, True)]

    def deliver(self, alert: Mapping[str, Any], link: str, env: Mapping[str, str]) -> None:
        url = secret(env, self.webhook_url_env, "the Slack webhook URL")
        post_json(url, slack_payload(alert, link), alert["alert_key"], self.timeout_s)


DESTINATION = SlackDestination
