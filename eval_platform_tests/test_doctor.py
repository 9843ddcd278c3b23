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


def test_check_shows_each_schedule_and_sensor_apart_from_its_state(data_root, capsys, monkeypatch):
    """The longest sensor name (judge_traces_updated_while_judging_sensor) once ran into its "on"."""
    monkeypatch.setenv("DAGSTER_HOME", str(data_root / "dagster_home"))
    write_evaluator(
        data_root,
        "single",
        name="single",
        model="openai/gpt-4o-mini",
        mode="score",
        score_scale={"min": 1, "max": 5},
        prompt="Rate: {{output}}",
    )
    doctor.main(["--no-cost"])
    out = capsys.readouterr().out
    section = out.split("schedules and sensors")[1].split("\n\n")[0].splitlines()[1:]
    rows = [line.split() for line in section]
    assert rows and all(len(row) == 3 and row[0] in ("schedule", "sensor") and row[2] in ("on", "off") for row in rows)
    assert ["sensor", "judge_traces_updated_while_judging_sensor", "on"] in rows
