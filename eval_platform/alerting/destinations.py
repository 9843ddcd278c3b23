"""Where alerts go: `<data root>/alerting.yaml`, and one sender per kind of destination.

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

Secrets (a webhook URL carries its token; an SMTP password) are never in the file: it names the environment
variables holding them, read when an alert is sent. Each value read is remembered by `llm.redaction`, so no log
line, error or stored row of the platform shows it, and every error text of a send is redacted before it is kept.

Email goes through the standard library's `smtplib` and `email.message`: maintained with Python itself, it speaks
SMTP with STARTTLS, implicit TLS and AUTH, which is all an alert needs; `apprise` would add a dependency (and its
own plugins' dependencies) to send the same message. Webhooks use `urllib.request`, also in the standard library.
"""

from __future__ import annotations

import base64
import json
import smtplib
import ssl
import urllib.error
import urllib.request
from collections.abc import Mapping
from email.message import EmailMessage
from email.utils import formatdate
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import unquote, urlsplit, urlunsplit

from pydantic import Field, model_validator

from eval_platform.config_files import read_mapping, validate
from eval_platform.llm.redaction import clip, remember
from eval_platform.strict import Strict

ALERTING_FILE = "alerting.yaml"
DEFAULT_DELIVER_DAYS = 3
USER_AGENT = "eval_platform-alerts/1"
_LOOPBACK = ("127.0.0.1", "::1", "localhost")


class AlertingConfigError(ValueError):
    """A broken alerting.yaml: the message names the file and the field."""


class DeliveryError(Exception):
    """A send that did not reach its destination; the message is redacted (no secret in it)."""


class _Destination(Strict):
    name: str = Field(min_length=1, description="Names the destination in the delivery record and in errors.")
    evaluators: list[str] | None = Field(None, description="Only these evaluators' alerts; unset: every one.")
    timeout_s: float = Field(10.0, gt=0, le=120, description="One send's time limit (the sensor's tick waits).")

    def wants(self, evaluator: str) -> bool:
        return self.evaluators is None or evaluator in self.evaluators


class WebhookDestination(_Destination):
    """A generic webhook: the alert as JSON, POSTed with an `Idempotency-Key` header."""

    type: Literal["webhook"]
    url_env: str = Field(description="The environment variable holding the URL (it may carry a token).")


class SlackDestination(_Destination):
    """A Slack incoming webhook (https://api.slack.com/messaging/webhooks): Slack's message payload."""

    type: Literal["slack"]
    webhook_url_env: str = Field(description="The environment variable holding the incoming webhook's URL.")


class EmailDestination(_Destination):
    """An email through an SMTP server."""

    type: Literal["email"]
    host: str
    port: int | None = Field(None, ge=1, le=65535, description="Default: 587 (starttls), 465 (ssl), 25 (none).")
    security: Literal["starttls", "ssl", "none"] = "starttls"
    username: str | None = None
    password_env: str | None = Field(None, description="The environment variable holding the SMTP password.")
    sender: str
    to: list[str] = Field(min_length=1)

    @model_validator(mode="after")
    def _safe(self) -> EmailDestination:
        if (self.username is None) != (self.password_env is None):
            raise ValueError("give both username and password_env (SMTP AUTH), or neither")
        if self.password_env and self.security == "none" and self.host not in _LOOPBACK:
            raise ValueError(
                f"security 'none' would send the password to {self.host} in clear text: use starttls or ssl "
                "(none is for a relay on this machine only)"
            )
        return self

    @property
    def smtp_port(self) -> int:
        return self.port or {"starttls": 587, "ssl": 465, "none": 25}[self.security]


Destination = Annotated[WebhookDestination | SlackDestination | EmailDestination, Field(discriminator="type")]


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


def _secret(env: Mapping[str, str], name: str, what: str) -> str:
    value = env.get(name)
    if not value:
        raise DeliveryError(f"environment variable {name} ({what}) is not set")
    return value


def secret_parts(value: str, is_url: bool) -> list[str]:
    """What of a destination's secret must never be shown: a password whole; of a URL, its user info, path, query
    and fragment (a Slack webhook's token is its path). A URL's scheme and host are not secret, and remembering them
    would redact every `https://` the platform logs."""
    if not is_url:
        return [value]
    parts = urlsplit(value)
    tail = parts.path + (f"?{parts.query}" if parts.query else "") + (f"#{parts.fragment}" if parts.fragment else "")
    return [piece for piece in (parts.password, parts.username, tail) if piece]


def remember_secrets(config: AlertingConfig, env: Mapping[str, str]) -> None:
    """Remember every destination secret that is set, before anything is sent or logged: from then on no log line,
    warning or clipped text of this process shows it (`llm.redaction`)."""
    for destination in config.destinations:
        for name, is_url in _secret_names(destination):
            if env.get(name):
                remember(*secret_parts(env[name], is_url))


def _secret_names(destination: Destination) -> list[tuple[str, bool]]:
    if isinstance(destination, WebhookDestination):
        return [(destination.url_env, True)]
    if isinstance(destination, SlackDestination):
        return [(destination.webhook_url_env, True)]
    return [(destination.password_env, False)] if destination.password_env else []


def webhook_payload(alert: Mapping[str, Any], link: str) -> dict[str, Any]:
    """The generic webhook's JSON: the alert's fields, its link, and the idempotency key a receiver dedupes on."""
    fields = ("evaluator", "day", "kind", "rule", "value", "threshold", "severity", "message", "mean", "n")
    return {
        "source": "eval_platform",
        "idempotency_key": alert["alert_key"],
        "alert": {name: alert.get(name) for name in fields},
        "link": link,
    }


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


def email_message(destination: EmailDestination, alert: Mapping[str, Any], link: str) -> EmailMessage:
    message = EmailMessage()
    message["Subject"] = f"[eval_platform] {alert['severity']} alert: {alert['evaluator']} on {alert['day']}"
    message["From"] = destination.sender
    message["To"] = ", ".join(destination.to)
    message["Date"] = formatdate(usegmt=True)
    # The same id on every retry: a mail system that saw it already may drop the repeat.
    message["Message-ID"] = f"<{alert['alert_key']}.{destination.name}@eval-platform>"
    message["X-Eval-Platform-Alert-Key"] = alert["alert_key"]
    message.set_content(
        f"{alert['message']}\n\nOpen the partition in Dagster: {link}\n\nalert key {alert['alert_key']}\n"
    )
    return message


def send(destination: Destination, alert: Mapping[str, Any], link: str, env: Mapping[str, str]) -> None:
    """Deliver one alert to one destination, or raise `DeliveryError` (redacted)."""
    for name, is_url in _secret_names(destination):
        if env.get(name):
            remember(*secret_parts(env[name], is_url))
    try:
        if isinstance(destination, WebhookDestination):
            url = _secret(env, destination.url_env, "the webhook URL")
            _post_json(url, webhook_payload(alert, link), alert["alert_key"], destination.timeout_s)
        elif isinstance(destination, SlackDestination):
            url = _secret(env, destination.webhook_url_env, "the Slack webhook URL")
            _post_json(url, slack_payload(alert, link), alert["alert_key"], destination.timeout_s)
        else:
            _send_email(destination, email_message(destination, alert, link), env)
    except DeliveryError:
        raise
    except Exception as exc:  # noqa: BLE001 - any failure of a send is a failed delivery, named and redacted
        raise DeliveryError(clip(f"{type(exc).__name__}: {exc}", 300)) from None


def _post_json(url: str, payload: dict[str, Any], key: str, timeout_s: float) -> None:
    headers = {"Content-Type": "application/json", "Idempotency-Key": key, "User-Agent": USER_AGENT}
    parts = urlsplit(url)
    if parts.username is not None:  # https://user:password@host/...: HTTP basic auth (urllib does not read it)
        credentials = f"{unquote(parts.username)}:{unquote(parts.password or '')}".encode()
        headers["Authorization"] = "Basic " + base64.b64encode(credentials).decode()
        url = urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))
    request = urllib.request.Request(url, data=json.dumps(payload).encode(), method="POST", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:  # noqa: S310 - the URL is the user's
            response.read()
    except urllib.error.HTTPError as exc:
        body = exc.read().decode("utf-8", "replace")
        raise DeliveryError(clip(f"HTTP {exc.code}: {body}", 300)) from None
    except urllib.error.URLError as exc:
        raise DeliveryError(clip(f"cannot reach the receiver: {exc.reason}", 300)) from None


def _send_email(destination: EmailDestination, message: EmailMessage, env: Mapping[str, str]) -> None:
    password = _secret(env, destination.password_env, "the SMTP password") if destination.password_env else None
    context = ssl.create_default_context()
    port, timeout = destination.smtp_port, destination.timeout_s
    smtp_class = smtplib.SMTP_SSL if destination.security == "ssl" else smtplib.SMTP
    kwargs: dict[str, Any] = {"context": context} if destination.security == "ssl" else {}
    with smtp_class(destination.host, port, timeout=timeout, **kwargs) as smtp:
        if destination.security == "starttls":
            smtp.starttls(context=context)
        if destination.username and password:
            smtp.login(destination.username, password)
        smtp.send_message(message)
