"""`eval-platform check` on a data root whose evaluators judge with one model or with several (consensus)."""

from __future__ import annotations

from eval_platform import doctor
from eval_platform_tests.conftest import write_evaluator


def test_check_lists_a_consensus_evaluator_by_its_models(data_root, capsys, monkeypatch):
    monkeypatch.setenv("DAGSTER_HOME", str(data_root / "dagster_home"))
    common = {"mode": "score", "score_scale": {"min": 1, "max": 5}, "prompt": "Rate: {{output}}"}
    write_evaluator(data_root, "single", name="single", model="openai/gpt-4o-mini", **common)
    write_evaluator(
        data_root,
        "panel",
        name="panel",
        models=[{"model": "openai/gpt-4o-mini"}, {"model": "anthropic/claude-3-5-haiku"}],
        **common,
    )
    doctor.main(["--no-cost"])
    out = capsys.readouterr().out
    assert "evaluators: 2 loaded, 0 broken" in out
    assert "openai/gpt-4o-mini, anthropic/claude-3-5-haiku" in out  # the panel's models, by name
