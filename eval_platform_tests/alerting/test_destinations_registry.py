"""Alert destinations are a registry: each kind is one module of `alerting/destinations/` (a `DestinationBase` with
its secrets and its `deliver`), listed once in `Destination`; sending goes through the destination itself, so a new
kind needs no other file, and no file outside its module names it."""

from __future__ import annotations

import re
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import pytest

import eval_platform
import eval_platform.alerting.destinations as registry
from eval_platform.alerting.destinations import DeliveryError, Destination, send
from eval_platform.alerting.destinations.base import DestinationBase
from eval_platform.llm.redaction import redact

PACKAGE = Path(eval_platform.__file__).parent
FOLDER = PACKAGE / "alerting" / "destinations"
ALERT = {"alert_key": "k1", "evaluator": "quality", "day": "2026-11-09", "severity": "high", "message": "m"}


def _modules() -> list[str]:
    return sorted(p.stem for p in FOLDER.glob("*.py") if p.stem not in ("__init__", "base"))


def test_every_destination_module_is_registered_once():
    registered = typing.get_args(typing.get_args(Destination)[0])
    classes = [getattr(registry, name).DESTINATION for name in _modules()]
    assert sorted(c.__name__ for c in registered) == sorted(c.__name__ for c in classes)
    assert sorted(c.model_fields["type"].annotation.__args__[0] for c in classes) == _modules()


def test_no_file_outside_a_destination_module_names_its_class():
    names = {getattr(registry, module).DESTINATION.__name__: module for module in _modules()}
    for path in PACKAGE.rglob("*.py"):
        text = path.read_text()
        for name, module in names.items():
            if re.search(rf"\b{name}\b", text):
                assert path in (FOLDER / f"{module}.py", FOLDER / "__init__.py"), (path, name)


class Pager(DestinationBase):
    """A kind of destination written outside the package: what it sends, and a secret it reads."""

    type: Literal["pager"]
    token_env: str
    sent: list[str] = []

    def secret_names(self) -> list[tuple[str, bool]]:
        return [(self.token_env, False)]

    def deliver(self, alert: Mapping[str, Any], link: str, env: Mapping[str, str]) -> None:
        if alert["alert_key"] == "fail":
            raise RuntimeError(f"the pager refused token {env[self.token_env]}")
        self.sent.append(f"{alert['alert_key']} {link}")


def test_send_goes_through_the_destination_and_redacts_its_secret():
    pager = Pager(name="p", type="pager", token_env="PAGER_TOKEN", sent=[])
    env = {"PAGER_TOKEN": "pager-secret-Zq81xWv3"}
    send(pager, ALERT, "http://ui/x", env)
    assert pager.sent == ["k1 http://ui/x"]
    with pytest.raises(DeliveryError) as caught:
        send(pager, {**ALERT, "alert_key": "fail"}, "http://ui/x", env)
    assert "RuntimeError: the pager refused token" in str(caught.value)
    assert "pager-secret-Zq81xWv3" not in str(caught.value)
    assert "pager-secret-Zq81xWv3" not in redact("a log line with pager-secret-Zq81xWv3")
