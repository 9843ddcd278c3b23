"""What every alert destination is (`DestinationBase`) and what several share: reading a secret from the
environment, POSTing JSON to a webhook. A destination module imports this module, never the registry
(`alerting.destinations`, which imports them all)."""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

from pydantic import Field

from eval_platform.llm.redaction import clip
from eval_platform.strict import Strict

USER_AGENT = "eval_platform-alerts/1"


class DeliveryError(Exception):
    """A send that did not reach its destination; the message is redacted (no secret in it)."""


class DestinationBase(Strict):
    """One entry of `destinations:` in alerting.yaml. A destination module subclasses it with its own
    `type: Literal["<type>"]` and fields, says which environment variables hold its secrets (`secret_names`) and
    delivers one alert (`deliver`, raising on failure: the registry's `send` turns any error into a redacted
    `DeliveryError`)."""

    name: str = Field(min_length=1, description="Names the destination in the delivery record and in errors.")
    evaluators: list[str] | None = Field(None, description="Only these evaluators' alerts; unset: every one.")
    timeout_s: float = Field(10.0, gt=0, le=120, description="One send's time limit (the sensor's tick waits).")

    def wants(self, evaluator: str) -> bool:
        return self.evaluators is None or evaluator in self.evaluators

    def secret_names(self) -> list[tuple[str, bool]]:
        """(environment variable, is it a URL) of each secret this destination reads when it sends."""
        raise NotImplementedError

    def deliver(self, alert: Mapping[str, Any], link: str, env: Mapping[str, str]) -> None:
        """Send one alert (`link`: its partition in the Dagster UI; `env`: where the secrets are)."""
        raise NotImplementedError


def secret(env: Mapping[str, str], name: str, what: str) -> str:
    """The value of environment variable `name`; a `DeliveryError` saying `what` is missing otherwise."""
    value = env.get(name)
    if not value:
        raise DeliveryError(f"environment variable {name} ({what}) is not set")
    return value


def post_json(url: str, payload: dict[str, Any], key: str, timeout_s: float) -> None:
    """POST `payload` as JSON with an `Idempotency-Key` header; user info in the URL becomes HTTP basic auth."""
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
