"""Where alerts go: `<data root>/alerting.yaml`, and the only list of the kinds of destination.

    deliver_days: 3               # alerts of the last 3 UTC days (today included) are delivered; older ones are not
    destinations:
      - name: oncall
        type: webhook             # a JSON POST of the alert to a URL
        url_env: ALERT_WEBHOOK_URL
      - name: quality-channel
        type: slack               # a Slack incoming webhook (Slack's message payload: text + blocks)
        webhook_url_env: SLACK_WEBHOOK_URL
        evaluators: [toxicity]    # only these evaluators' alerts (default: every evaluator's)
      - name: ml-team
        type: email               # SMTP, with Python's smtplib
        host: smtp.example.com
        port: 587
        security: starttls        # starttls | ssl | none (none: only to a server on this machine)
        username: alerts@example.com
        password_env: SMTP_PASSWORD
        sender: alerts@example.com
        to: [ml-team@example.com]

Each kind of destination is one module of this package (`webhook.py`, `slack.py`, `email.py`): a `DestinationBase`
subclass (`base.py`) with its `type`, its fields, the environment variables holding its secrets and how it
delivers one alert. A destination module imports `base`, never this module; adding one is its module, its test and
its class in `Destination` below. Nothing else names a kind of destination.

Secrets (a webhook URL carries its token; an SMTP password) are never in the file: it names the environment
variables holding them, read when an alert is sent. Each value read is remembered by `llm.redaction`, so no log
line, error or stored row of the platform shows it, and every error text of a send is redacted before it is kept.
Webhooks use `urllib.request` and email `smtplib`, both in the standard library.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import urlsplit

from pydantic import Field, model_validator

from eval_platform.alerting.destinations import email, slack, webhook
from eval_platform.alerting.destinations.base import DeliveryError, DestinationBase
from eval_platform.config_files import read_mapping, validate
from eval_platform.llm.redaction import clip, remember
from eval_platform.strict import Strict

ALERTING_FILE = "alerting.yaml"
DEFAULT_DELIVER_DAYS = 3

# The only list of the kinds of destination (each its module's `DESTINATION`); `type:` in the file picks one.
Destination = Annotated[
    webhook.WebhookDestination | slack.SlackDestination | email.EmailDestination, Field(discriminator="type")
]


class AlertingConfigError(ValueError):
    """A broken alerting.yaml: the message names the file and the field."""


class AlertingConfig(Strict):
    deliver_days: int = Field(
        DEFAULT_DELIVER_DAYS,
        ge=1,
        le=366,
        description="Alerts of this many UTC days up to today are delivered; a backfill of older days pages nobody.",
    )
    destinations: list[Destination] = Field(default_factory=list)

    @model_validator(mode="after")
    def _unique_names(self) -> AlertingConfig:
        names = [d.name for d in self.destinations]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ValueError(f"destination names must be unique (the delivery record is kept per name): {repeated}")
        return self


def load_alerting(root: Path) -> AlertingConfig | None:
    """`<data root>/alerting.yaml`, or None when there is none (no alert is delivered)."""
    path = root / ALERTING_FILE
    if not path.is_file():
        return None
    raw = read_mapping(path, AlertingConfigError, "a mapping with `destinations`")
    return validate(path, AlertingConfig, raw, AlertingConfigError)


def secret_parts(value: str, is_url: bool) -> list[str]:
    """What of a destination's secret must never be shown: a password whole; of a URL, its user info, path, query
    and fragment (a Slack webhook's token is its path). A URL's scheme and host are not secret, and remembering them
    would redact every `https://` the platform logs."""
    if not is_url:
        return [value]
    parts = urlsplit(value)
    tail = parts.path + (f"?{parts.query}" if parts.query else "") + (f"#{parts.fragment}" if parts.fragment else "")
    return [piece for piece in (parts.password, parts.username, tail) if piece]


def _remember(destination: DestinationBase, env: Mapping[str, str]) -> None:
    for name, is_url in destination.secret_names():
        if env.get(name):
            remember(*secret_parts(env[name], is_url))


def remember_secrets(config: AlertingConfig, env: Mapping[str, str]) -> None:
    """Remember every destination secret that is set, before anything is sent or logged: from then on no log line,
    warning or clipped text of this process shows it (`llm.redaction`)."""
    for destination in config.destinations:
        _remember(destination, env)


def send(destination: DestinationBase, alert: Mapping[str, Any], link: str, env: Mapping[str, str]) -> None:
    """Deliver one alert to one destination, or raise `DeliveryError` (redacted)."""
    _remember(destination, env)
    try:
        destination.deliver(alert, link, env)
    except DeliveryError:
        raise
    except Exception as exc:  # noqa: BLE001 - any failure of a send is a failed delivery, named and redacted
        raise DeliveryError(clip(f"{type(exc).__name__}: {exc}", 300)) from None
