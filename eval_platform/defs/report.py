"""`report`: the static HTML report (plots and tables) of judging, agreement, experiments and benchmarks."""

import dagster as dg

from eval_platform.defs.partitions import REFRESH_AFTER_UPDATES
from eval_platform.defs.resources import WarehouseResource
from eval_platform.report import build_report


def build_report_asset(upstream: list) -> dg.AssetsDefinition:
    @dg.asset(
        name="report",
        description=(
            "One self-contained HTML file (`reports/report.html` under the data root): per evaluator the daily mean "
            "score, FAILED rate and judge cost; judge-vs-human agreement; experiment differences with 95% CIs; the "
            "benchmark leaderboard. Plots are matplotlib PNGs inlined in the page (no network needed to view it)."
        ),
        group_name="reports",
        deps=upstream,
        kinds={"python", "html"},
        automation_condition=REFRESH_AFTER_UPDATES,
    )
    def report(warehouse: WarehouseResource) -> dg.MaterializeResult:
        summary = build_report(warehouse.root.path)
        return dg.MaterializeResult(
            metadata={
                "path": dg.MetadataValue.path(str(summary.path)),
                "open": dg.MetadataValue.url(summary.path.as_uri()),
                "evaluators": summary.evaluators,
                "plots": summary.plots,
                "empty_sections": dg.MetadataValue.json(summary.sections_empty),
            }
        )

    return report
