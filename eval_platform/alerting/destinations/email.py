"""`type: email`: an email through an SMTP server, with the standard library's `smtplib` and `email.message`
(maintained with Python itself, it speaks SMTP with STARTTLS, implicit TLS and AUTH, which is all an alert needs;
`apprise` would add a dependency, and its plugins' dependencies, to send the same message). The SMTP password is
read from the environment variable `password_env`."""

from __future__ import annotations

import smtplib
import ssl
from collections.abc import Mapping
from email.message import EmailMessage
from email.utils import formatdate
from typing import Any, Literal

from pydantic import Field, model_validator

from eval_platform.alerting.destinations.base import DestinationBase, secret

_LOOPBACK = ("127.0.0.1", "::1", "localhost")


class EmailDestination(DestinationBase):
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

    def secret_names(self) -> list[tuple[str, bool]]:
        return [(self.password_env, False)] if self.password_env else []

    def deliver(self, alert: Mapping[str, Any], link: str, env: Mapping[str, str]) -> None:
        message = email_message(self, alert, link)
        password = secret(env, self.password_env, "the SMTP password") if self.password_env else None
        context = ssl.create_default_context()
        port, timeout = self.smtp_port, self.timeout_s
        smtp_class = smtplib.SMTP_SSL if self.security == "ssl" else smtplib.SMTP
        kwargs: dict[str, Any] = {"context": context} if self.security == "ssl" else {}
        with smtp_class(self.host, port, timeout=timeout, **kwargs) as smtp:
            if self.security == "starttls":
                smtp.starttls(context=context)
            if self.username and password:
                smtp.login(self.username, password)
            smtp.send_message(message)


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


DESTINATION = EmailDestination
