"""The delivery record and its guarantees without Dagster: one row per alert and destination on both homes of the
shared state, a sender killed (SIGKILL) between the receiver's accepting and the record's commit sends again with the
same idempotency key, and alerting.yaml's errors name the file and the field."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from datetime import date

import polars as pl
import pytest
import yaml

from eval_platform.alerting.delivery import DeliveryLog, deliver
from eval_platform.alerting.destinations import AlertingConfigError, load_alerting
from eval_platform.alerting.rules import alert_key
from eval_platform.llm.statedb import postgres_state
from eval_platform.schemas import ALERT_SCHEMA, conform
from eval_platform_tests.alerting.receivers import HttpReceiver

DAY = "2026-11-20"
TODAY = date(2026, 11, 21)


def alerts_table(*days: str) -> pl.DataFrame:
    rows = [
        {
            "evaluator": "toxicity",
            "day": day,
            "kind": "threshold",
            "rule": "rate(score < 0.5) > 2%",
            "value": 0.06,
            "threshold": 0.02,
            "severity": "high",
            "message": f"toxicity on {day}: ...",
            "alert_key": alert_key("threshold", "toxicity", "rate(score < 0.5) > 2%", day),
        }
        for day in days
    ]
    return conform(pl.DataFrame(rows), ALERT_SCHEMA)


@pytest.fixture
def receiver():
    server = HttpReceiver().start()
    yield server
    server.stop()


def webhook_config(root, **extra) -> None:
    destination = {"name": "oncall", "type": "webhook", "url_env": "HOOK_URL", **extra}
    (root / "alerting.yaml").write_text(yaml.safe_dump({"deliver_days": 2, "destinations": [destination]}))


def test_the_record_keeps_attempts_and_deliveries_across_restarts(state_backend, tmp_path, receiver):
    where = postgres_state(state_backend.postgres_url) if state_backend.postgres_url else tmp_path / "d.sqlite"
    webhook_config(tmp_path)
    config = load_alerting(tmp_path)
    env = {"HOOK_URL": f"{receiver.url}/hook"}
    table = alerts_table("2026-11-18", DAY, "2026-11-21")  # the first is older than deliver_days: never sent

    receiver.status = 503
    report = deliver(table, config, DeliveryLog(where), lambda a: "http://ui/x", TODAY, env)
    assert (len(report.delivered), len(report.failed), report.postponed) == (0, 1, 1)
    receiver.status = 200
    report = deliver(table, config, DeliveryLog(where), lambda a: "http://ui/x", TODAY, env)  # a restarted process
    assert [key for key, _ in report.delivered] == list(table["alert_key"][1:])
    rows = DeliveryLog(where).rows()
    assert [(r["day"], r["status"], r["attempts"]) for r in rows] == [
        (DAY, "delivered", 2),
        ("2026-11-21", "delivered", 1),
    ]
    assert rows[0]["last_error"] is None and rows[0]["delivered_at"] >= rows[0]["first_attempt_at"]
    assert deliver(table, config, DeliveryLog(where), lambda a: "http://ui/x", TODAY, env).delivered == []
    assert [r.path for r in receiver.requests] == ["/hook"] * 3


SENDER = textwrap.dedent(
    """
    import sys
    from datetime import date
    import polars as pl
    from pathlib import Path
    from eval_platform.alerting.delivery import DeliveryLog, deliver
    from eval_platform.alerting.destinations import load_alerting
    root = Path(sys.argv[1])
    table = pl.read_parquet(root / "alerts.parquet")
    deliver(table, load_alerting(root), DeliveryLog(root / "d.sqlite"), lambda a: "http://ui/x", date(2026, 11, 21),
            {"HOOK_URL": sys.argv[2]})
    """
)


def test_a_sender_killed_before_recording_sends_again_with_the_same_key(tmp_path, receiver):
    """At least once: the receiver accepted, the process died before the record committed; the next tick sends
    the alert again, carrying the key a receiver dedupes on, and records it once."""
    webhook_config(tmp_path)
    table = alerts_table(DAY)
    table.write_parquet(tmp_path / "alerts.parquet")
    sender = subprocess.Popen([sys.executable, "-c", SENDER, str(tmp_path), f"{receiver.url}/hook"])
    receiver.kill_on_receipt = sender.pid
    assert sender.wait(timeout=120) == -9
    [first] = receiver.requests
    assert DeliveryLog(tmp_path / "d.sqlite").rows() == []  # sent, not recorded: killed in between

    env = {"HOOK_URL": f"{receiver.url}/hook"}
    report = deliver(table, load_alerting(tmp_path), DeliveryLog(tmp_path / "d.sqlite"), lambda a: "x", TODAY, env)
    assert len(report.delivered) == 1
    second = receiver.requests[1]
    assert first.headers["Idempotency-Key"] == second.headers["Idempotency-Key"] == table["alert_key"][0]
    assert first.json["idempotency_key"] == second.json["idempotency_key"]
    assert [r["status"] for r in DeliveryLog(tmp_path / "d.sqlite").rows()] == ["delivered"]


@pytest.mark.parametrize(
    ("destination", "error"),
    [
        ({"name": "a", "type": "pager"}, r"field 'destinations\.0': Input tag 'pager'"),
        (
            {"name": "a", "type": "slack", "webhook_url": "https://hooks"},
            r"field 'destinations\.0\.slack\.webhook_url_env'",
        ),
        (
            {
                "name": "a",
                "type": "email",
                "host": "smtp.example.com",
                "security": "none",
                "username": "u",
                "password_env": "P",
                "sender": "a@example.com",
                "to": ["b@example.com"],
            },
            r"field 'destinations\.0\.email': Value error, security 'none' would send the password to smtp\.",
        ),
        ({"name": "a", "type": "email", "host": "h", "sender": "s", "to": []}, r"field 'destinations\.0\.email\.to'"),
    ],
)
def test_a_broken_alerting_file_names_the_file_and_the_field(tmp_path, destination, error):
    (tmp_path / "alerting.yaml").write_text(yaml.safe_dump({"destinations": [destination]}))
    with pytest.raises(AlertingConfigError, match=r"alerting\.yaml: " + error):
        load_alerting(tmp_path)


def test_destination_names_are_unique_and_no_file_means_no_delivery(tmp_path):
    assert load_alerting(tmp_path) is None
    hook = {"name": "a", "type": "webhook", "url_env": "U"}
    (tmp_path / "alerting.yaml").write_text(yaml.safe_dump({"destinations": [hook, hook]}))
    with pytest.raises(AlertingConfigError, match=r"destination names must be unique .*\['a'\]"):
        load_alerting(tmp_path)
