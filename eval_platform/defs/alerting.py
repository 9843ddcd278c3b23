"""Delivering the `alerts` table: the sensor that sends each new alert to alerting.yaml's destinations."""

from __future__ import annotations

import os
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

import dagster as dg
from pydantic import Field

from eval_platform.alerting.delivery import DeliveryLog, deliver
from eval_platform.alerting.destinations import ALERTING_FILE, load_alerting
from eval_platform.alerting.rules import BUDGET_METRICS, parse_rule
from eval_platform.defs.resources import WarehouseResource
from eval_platform.llm.shared_state import SharedState
from eval_platform.schemas import ALERT_SCHEMA, conform
from eval_platform.storage.warehouse import read_partition

UI_URL_ENV = "EVAL_PLATFORM_UI_URL"
DEFAULT_UI_URL = "http://localhost:3000"


class AlertingResource(dg.ConfigurableResource):
    """How alerts link back to the Dagster UI. Destinations and their secrets are in alerting.yaml and the
    environment variables it names (never resource config: the UI shows resource config)."""

    ui_url: str = Field(default=DEFAULT_UI_URL, description=f"The Dagster UI's base URL (${UI_URL_ENV}).")

    def partition_link(self, alert: Mapping[str, Any]) -> str:
        """The alert's partition in the UI: the judge_scores partition (evaluator × day) the alert is about; for
        a budget rule (its day is the day of the calls, not of traces), the judge_cost_daily asset."""
        base = self.ui_url.rstrip("/")
        if alert.get("rule") and parse_rule(alert["rule"]).metric in BUDGET_METRICS:
            return f"{base}/assets/judge_cost_daily"
        key = dg.MultiPartitionKey({"date": alert["day"], "evaluator": alert["evaluator"]})
        return f"{base}/assets/judge_scores?view=partitions&partition={quote(str(key), safe='')}"


def alerting_resource() -> AlertingResource:
    """The UI's base URL from `EVAL_PLATFORM_UI_URL` as a `dg.EnvVar` when it is set (read when the sensor runs)."""
    if os.environ.get(UI_URL_ENV):
        return AlertingResource(ui_url=dg.EnvVar(UI_URL_ENV))
    return AlertingResource()


class AlertDeliveryFailed(Exception):
    """Some sends failed (each is recorded and retried on the next tick): the tick shows as failed in the UI."""


@dg.sensor(
    minimum_interval_seconds=60,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description=f"Sends each new row of `alerts` (regressions and threshold rules) to the destinations of "
    f"{ALERTING_FILE}: once per alert and destination, never again for the same alert (a record in the shared "
    "state survives restarts), retried on the next tick when a send fails. Does nothing without the file.",
)
def alert_delivery_sensor(
    context: dg.SensorEvaluationContext, warehouse: WarehouseResource, alerting: AlertingResource
):
    """Delivers the `alerts` of the last `deliver_days` UTC days that a destination has not had yet."""
    root = warehouse.root
    config = load_alerting(root.path)
    if config is None or not config.destinations:
        return dg.SkipReason(f"no destinations: {ALERTING_FILE} under the data root declares none")
    alerts = read_partition(root, "alerts", {})
    if alerts is None:
        return dg.SkipReason("no alerts table yet: materialize alerts")
    log = DeliveryLog.of(SharedState.of(root.path, context.instance))
    report = deliver(
        conform(alerts, ALERT_SCHEMA), config, log, alerting.partition_link, datetime.now(UTC).date(), os.environ
    )
    for key, destination in report.delivered:
        context.log.info(f"alert {key} delivered to {destination}")
    for key, destination, error in report.failed:
        context.log.warning(f"alert {key} not delivered to {destination}: {error}")
    if report.failed:
        failures = "; ".join(f"{destination}: {error}" for _, destination, error in report.failed)
        raise AlertDeliveryFailed(f"{report.summary()} ({failures}); failed sends are tried again on the next tick")
    return dg.SkipReason(report.summary())
