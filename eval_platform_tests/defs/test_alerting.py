"""Alerts that reach someone, end to end: judge scores materialized through the local judge over HTTP in a real
Dagster instance (temp DAGSTER_HOME), the `alerts` asset raising threshold alerts, and the real sensor delivering
them to a webhook, a Slack incoming webhook and an SMTP server the test starts on 127.0.0.1."""

from __future__ import annotations

import json
import socket
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import parse_qs, quote, urlsplit

import dagster as dg
import polars as pl
import pytest
import yaml

from eval_platform.alerting.delivery import DeliveryLog
from eval_platform.definitions import build_definitions
from eval_platform.defs.alerting import AlertDeliveryFailed, alert_delivery_sensor
from eval_platform.llm.shared_state import SharedState
from eval_platform.storage.location import DataRoot
from eval_platform.storage.warehouse import read_partition
from eval_platform_tests.alerting.receivers import HttpReceiver, SmtpReceiver
from eval_platform_tests.conftest import write_evaluator

UI_URL = "http://dagster.example.internal:3000"
SMTP_USER, SMTP_PASSWORD = "alerts@example.com", "smtp-pw-Q7x9Lm2Vz4Kd"


@pytest.fixture
def instance(tmp_path):
    (tmp_path / "dagster_home").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path / "dagster_home")) as instance:
        yield instance


@pytest.fixture
def http_receiver():
    receiver = HttpReceiver().start()
    yield receiver
    receiver.stop()


@pytest.fixture
def smtp_receiver():
    receiver = SmtpReceiver(SMTP_USER, SMTP_PASSWORD).start()
    yield receiver
    receiver.stop()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def scripted_day(root: Path, day: str, scores: list[float], unparseable: int = 0) -> None:
    """Traces whose output is the `echo/output` local judge's reply: each trace scripts its own verdict."""
    folder = root / "traces" / day
    folder.mkdir(parents=True)
    replies = [json.dumps({"score": s, "reasoning": "scripted"}) for s in scores] + ["no verdict here"] * unparseable
    lines = [
        json.dumps({"trace_id": f"{day}-{i}", "timestamp": f"{day}T12:00:00Z", "input": f"q{i}", "output": reply})
        for i, reply in enumerate(replies)
    ]
    (folder / "export.jsonl").write_text("\n".join(lines) + "\n")


def judge_day(defs: dg.Definitions, instance, day: str) -> None:
    assets = list(defs.assets)
    assert dg.materialize(
        assets, selection=["traces"], partition_key=day, instance=instance, resources=defs.resources
    ).success
    key = dg.MultiPartitionKey({"date": day, "evaluator": "quality"})
    assert dg.materialize(
        assets, selection=["judge_scores"], partition_key=key, instance=instance, resources=defs.resources
    ).success
    assert dg.materialize(assets, selection=["alerts"], instance=instance, resources=defs.resources).success


def tick(defs: dg.Definitions, instance):
    """One evaluation of the sensor, as the daemon makes it (its resources, the instance)."""
    return alert_delivery_sensor(dg.build_sensor_context(instance=instance, resources=defs.resources))


def setup_project(root: Path, judge_url: str, http: HttpReceiver, smtp: SmtpReceiver, monkeypatch) -> dg.Definitions:
    write_evaluator(
        root,
        "quality",
        mode="score",
        score_scale={"min": 0, "max": 1},
        model="openai/echo/output",
        api_base=judge_url,
        prompt="{{input}} -> {{output}}",
        max_retries=0,
        alerts=["rate(score < 0.5) > 10%", {"rule": "failed_rate > 20%", "severity": "high"}],
    )
    (root / "alerting.yaml").write_text(
        yaml.safe_dump(
            {
                "destinations": [
                    {"name": "oncall", "type": "webhook", "url_env": "TEST_ALERT_WEBHOOK_URL"},
                    {"name": "quality-channel", "type": "slack", "webhook_url_env": "TEST_SLACK_WEBHOOK_URL"},
                    {
                        "name": "ml-team",
                        "type": "email",
                        "host": "127.0.0.1",
                        "port": smtp.port,
                        "security": "none",
                        "username": SMTP_USER,
                        "password_env": "TEST_SMTP_PASSWORD",
                        "sender": "alerts@example.com",
                        "to": ["ml-team@example.com"],
                    },
                ]
            }
        )
    )
    monkeypatch.setenv("TEST_ALERT_WEBHOOK_URL", f"{http.url}/hooks/eval")
    monkeypatch.setenv("TEST_SLACK_WEBHOOK_URL", f"{http.url}/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX")
    monkeypatch.setenv("TEST_SMTP_PASSWORD", SMTP_PASSWORD)
    monkeypatch.setenv("EVAL_PLATFORM_UI_URL", UI_URL)
    return build_definitions(root)


def test_alerts_reach_webhook_slack_and_email_once_per_day_and_failed_sends_are_retried(
    data_root, local_judge, instance, http_receiver, smtp_receiver, monkeypatch
):
    today = datetime.now(UTC).date()
    day1, day2 = (today - timedelta(days=2)).isoformat(), (today - timedelta(days=1)).isoformat()
    defs = setup_project(data_root, local_judge.base_url, http_receiver, smtp_receiver, monkeypatch)
    webhook, slack = "/hooks/eval", "/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX"

    # Day 1: 3 of 10 answers score below 0.5 (30 % > 10 %), nothing failed.
    scripted_day(data_root, day1, [0.9] * 7 + [0.2] * 3)
    judge_day(defs, instance, day1)
    table = read_partition(DataRoot.from_env(data_root), "alerts", {})
    [alert] = table.filter(pl.col("kind") == "threshold").to_dicts()
    assert (alert["day"], alert["rule"], alert["value"], alert["n"]) == (day1, "rate(score < 0.5) > 10%", 0.3, 10)

    result = tick(defs, instance)
    assert isinstance(result, dg.SkipReason) and "3 delivered, 0 failed" in result.skip_message
    [posted] = http_receiver.to(webhook)
    body = posted.json
    assert body["idempotency_key"] == alert["alert_key"] == posted.headers["Idempotency-Key"]
    assert body["alert"]["rule"] == "rate(score < 0.5) > 10%" and body["alert"]["value"] == 0.3
    assert (
        body["alert"]["message"]
        == f"quality on {day1}: rate(score < 0.5) = 30.0% (3 of 10), rule rate(score < 0.5) > 10%"
    )
    # The link opens the judge_scores partition the alert is about, in the configured UI, and that partition exists.
    link = urlsplit(body["link"])
    assert f"{link.scheme}://{link.netloc}" == UI_URL and link.path == "/assets/judge_scores"
    query = parse_qs(link.query)
    assert query["view"] == ["partitions"]
    [partition] = query["partition"]
    assert partition == str(dg.MultiPartitionKey({"date": day1, "evaluator": "quality"}))
    assert partition in instance.get_materialized_partitions(dg.AssetKey("judge_scores"))
    assert body["link"].endswith(quote(partition, safe=""))
    [slack_message] = http_receiver.to(slack)
    assert slack_message.json["text"].startswith(f"medium threshold alert: quality on {day1}: ")
    assert f"<{body['link']}|Open the partition in Dagster>" in json.dumps(slack_message.json["blocks"])
    [email] = smtp_receiver.messages
    assert email["Subject"] == f"[eval_platform] medium alert: quality on {day1}"
    assert body["link"] in email.get_content() and alert["alert_key"] in email["Message-ID"]
    assert smtp_receiver.recipients == [["ml-team@example.com"]] and smtp_receiver.logins == 1

    # A second tick the same day sends nothing, nor does a restart (a new instance of the record, same state).
    result = tick(defs, instance)
    assert "0 delivered, 0 failed" in result.skip_message
    assert (len(http_receiver.requests), len(smtp_receiver.messages)) == (2, 1)
    # Re-materializing the alerts (a day rescored, the asset refreshed) does not repeat it either.
    assert dg.materialize(list(defs.assets), selection=["alerts"], instance=instance, resources=defs.resources).success
    assert "0 delivered" in tick(defs, instance).skip_message
    assert (len(http_receiver.requests), len(smtp_receiver.messages)) == (2, 1)

    # Day 2 breaks both rules (4 of 8 low, 3 of 11 failed); the webhook is down (HTTP 500).
    scripted_day(data_root, day2, [0.9] * 4 + [0.1] * 4, unparseable=3)
    judge_day(defs, instance, day2)
    new = read_partition(DataRoot.from_env(data_root), "alerts", {}).filter(pl.col("day") == day2).sort("rule")
    assert new["rule"].to_list() == ["failed_rate > 20%", "rate(score < 0.5) > 10%"]
    http_receiver.status = 500
    with pytest.raises(AlertDeliveryFailed, match=r"2 delivered, 2 failed, 2 postponed.*oncall: HTTP 500"):
        tick(defs, instance)  # Slack shares the server: failed too; email delivered both
    assert len(smtp_receiver.messages) == 3
    # one try per destination per tick: the second alert waits for the next tick
    assert (len(http_receiver.to(webhook)), len(http_receiver.to(slack))) == (2, 2)
    log = DeliveryLog.of(SharedState.of(data_root, instance))
    records = {(r["day"], r["rule"], r["destination"]): r for r in log.rows()}
    failed = [r for r in records.values() if r["status"] == "failed"]
    assert {(r["day"], r["destination"], r["attempts"]) for r in failed} == {
        (day2, "oncall", 1),
        (day2, "quality-channel", 1),
    }
    assert all(r["last_error"].startswith("HTTP 500") and r["delivered_at"] is None for r in failed)

    with pytest.raises(AlertDeliveryFailed):
        tick(defs, instance)  # still down: tried again, still not recorded as delivered
    assert (len(http_receiver.to(webhook)), len(smtp_receiver.messages)) == (3, 3)

    http_receiver.status = 200
    assert "4 delivered, 0 failed" in tick(defs, instance).skip_message
    day2_posts = [r.json for r in http_receiver.to(webhook)[1:]]
    assert {p["alert"]["day"] for p in day2_posts} == {day2}
    keys = set(new["alert_key"])
    assert {p["idempotency_key"] for p in day2_posts} == keys  # retries carry the alert's key
    records = {(r["alert_key"], r["destination"]): r for r in log.rows()}
    assert len(records) == 9 and all(r["status"] == "delivered" for r in records.values())
    assert sorted(r["attempts"] for r in records.values() if r["destination"] == "oncall") == [1, 1, 3]
    assert "0 delivered, 0 failed" in tick(defs, instance).skip_message
    assert (len(http_receiver.requests), len(smtp_receiver.messages)) == (2 + 2 + 2 + 4, 3)


def test_no_destination_secret_reaches_a_row_a_log_or_a_message(
    data_root, local_judge, instance, http_receiver, smtp_receiver, monkeypatch, caplog, capsys, tmp_path
):
    today = datetime.now(UTC).date()
    day = (today - timedelta(days=1)).isoformat()
    defs = setup_project(data_root, local_judge.base_url, http_receiver, smtp_receiver, monkeypatch)
    token = "T0SECRET/B0SECRET/xoxbLeakCanary9Zq"
    monkeypatch.setenv("TEST_SLACK_WEBHOOK_URL", f"{http_receiver.url}/services/{token}?key=qs-Canary-7h3k")
    # basic auth in the URL, to a port nothing listens on
    monkeypatch.setenv("TEST_ALERT_WEBHOOK_URL", f"http://user:pw-Canary-88zz@127.0.0.1:{free_port()}/hook")
    monkeypatch.setenv("TEST_SMTP_PASSWORD", "wrong-" + SMTP_PASSWORD)  # refused: the error path runs
    secrets = [token, "xoxbLeakCanary9Zq", "qs-Canary-7h3k", "pw-Canary-88zz", "wrong-" + SMTP_PASSWORD, SMTP_PASSWORD]
    http_receiver.status = 500  # its error body echoes the path, token and all

    scripted_day(data_root, day, [0.1] * 5)
    judge_day(defs, instance, day)
    with caplog.at_level("DEBUG"), pytest.raises(AlertDeliveryFailed) as failure:
        tick(defs, instance)
    assert "quality-channel: HTTP 500: server error handling [REDACTED]" in str(failure.value)
    assert "oncall: cannot reach the receiver: [Errno 111] Connection refused" in str(failure.value)
    assert "ml-team: SMTPAuthenticationError: (535" in str(failure.value)
    out, err = capsys.readouterr()
    shown = [
        str(failure.value),
        caplog.text,
        out,
        err,
        json.dumps(DeliveryLog.of(SharedState.of(data_root, instance)).rows()),
    ]
    shown += [json.dumps(r.json) for r in http_receiver.requests]  # what was sent does not carry the URL either
    shown += [str(read_partition(DataRoot.from_env(data_root), "alerts", {}).to_dicts())]
    # every file the platform and the instance wrote (Parquet, DuckDB, SQLite state, event logs)
    stored = b"".join(
        p.read_bytes() for p in [*data_root.rglob("*"), *(tmp_path / "dagster_home").rglob("*")] if p.is_file()
    )
    for secret in secrets:
        pieces = {secret[i : i + 8] for i in range(len(secret) - 7)}
        for text in shown:
            assert not any(piece in text for piece in pieces), (secret, text[:200])
        assert not any(piece.encode() in stored for piece in pieces), secret
