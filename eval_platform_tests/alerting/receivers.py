"""Receivers the alert tests start on 127.0.0.1: an HTTP server (a webhook, a Slack incoming webhook) and an SMTP
server with AUTH (aiosmtpd), each recording what it was sent."""

from __future__ import annotations

import json
import os
import signal
import socket
import threading
from dataclasses import dataclass, field
from email import message_from_bytes, policy
from email.message import EmailMessage
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def json(self):
        return json.loads(self.body)


class HttpReceiver:
    """Answers every POST with `status` (a failure's body echoes the request's path, as some servers do: the
    platform must not keep it, since a webhook's path carries its token)."""

    def __init__(self) -> None:
        self.requests: list[Received] = []
        self.status = 200
        self.kill_on_receipt: int | None = None  # a pid killed (SIGKILL) once a request is in, before the answer
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                receiver.requests.append(Received(self.path, dict(self.headers), body))
                if receiver.kill_on_receipt is not None:
                    os.kill(receiver.kill_on_receipt, signal.SIGKILL)
                    receiver.kill_on_receipt = None
                reply = b"ok" if receiver.status < 400 else f"server error handling {self.path}".encode()
                self.send_response(receiver.status)
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def start(self) -> HttpReceiver:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def to(self, path: str) -> list[Received]:
        return [r for r in self.requests if r.path == path]


@dataclass
class SmtpReceiver:
    """An SMTP server requiring AUTH LOGIN/PLAIN with `username` / `password` (no TLS: loopback only)."""

    username: str
    password: str
    messages: list[EmailMessage] = field(default_factory=list)
    recipients: list[list[str]] = field(default_factory=list)
    logins: int = 0

    def start(self) -> SmtpReceiver:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self._controller = Controller(
            self, hostname="127.0.0.1", port=self.port, authenticator=self._authenticate, auth_require_tls=False
        )
        self._controller.start()
        return self

    def stop(self) -> None:
        self._controller.stop()

    def _authenticate(self, server, session, envelope, mechanism, auth_data) -> AuthResult:
        ok = (
            isinstance(auth_data, LoginPassword)
            and auth_data.login.decode() == self.username
            and auth_data.password.decode() == self.password
        )
        self.logins += ok
        return AuthResult(success=ok, handled=False)  # aiosmtpd answers 535 itself on a failure

    async def handle_DATA(self, server, session, envelope) -> str:  # noqa: N802 - aiosmtpd's hook name
        if not session.authenticated:
            return "530 Authentication required"
        self.messages.append(message_from_bytes(envelope.content, policy=policy.default))
        self.recipients.append(list(envelope.rcpt_tos))
        return "250 OK"
