"""The tiny models the local-model tests share, built once per session in a temp folder."""

from __future__ import annotations

import ipaddress
import socket

import pytest

from eval_platform_tests.local_models.tiny_models import build_tiny_bert


@pytest.fixture(scope="session")
def tiny_bert(tmp_path_factory):
    return build_tiny_bert(tmp_path_factory.mktemp("models") / "tiny-bert")


def _loopback(host) -> bool:
    try:
        return ipaddress.ip_address(str(host).split("%")[0]).is_loopback
    except ValueError:
        return str(host) == "localhost"


@pytest.fixture
def network_attempts(monkeypatch):
    """Every connection or name lookup to a host off this machine, refused and recorded: a test asserts none."""
    attempts: list[str] = []
    connect, lookup = socket.socket.connect, socket.getaddrinfo

    def guarded_connect(self, address):
        host = address[0] if isinstance(address, tuple) else address
        if not isinstance(address, str | bytes) and not _loopback(host):
            attempts.append(f"connect {address}")
            raise ConnectionRefusedError(f"test: no network beyond 127.0.0.1 ({address})")
        return connect(self, address)

    def guarded_lookup(host, *args, **kwargs):
        if host is not None and not _loopback(host):
            attempts.append(f"lookup {host}")
            raise socket.gaierror(f"test: no name lookup beyond localhost ({host})")
        return lookup(host, *args, **kwargs)

    monkeypatch.setattr(socket.socket, "connect", guarded_connect)
    monkeypatch.setattr(socket, "getaddrinfo", guarded_lookup)
    # transformers' and huggingface_hub's own offline switches off: the loader alone must keep off the network
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(name, raising=False)
    return attempts
