"""Resources: environment values reach runs as `dg.EnvVar`, so the UI shows the variable's name, not its value."""

from __future__ import annotations

import dagster as dg

from eval_platform.definitions import build_definitions
from eval_platform.defs.resources import LOCAL_JUDGE_URL_ENV, JudgeResource


def _declared_config(resource: dg.ConfigurableResource) -> dict:
    return resource.get_resource_definition().config_schema.default_value


def test_local_judge_url_is_an_env_var_resolved_at_run_time(tmp_path, monkeypatch):
    url = "http://127.0.0.1:59123/v1"
    monkeypatch.setenv(LOCAL_JUDGE_URL_ENV, url)
    defs = build_definitions(tmp_path)
    judge = defs.resources["judge"]
    assert isinstance(judge, JudgeResource)
    # what the code location declares (and the UI shows): the variable's name, never its value
    declared = _declared_config(judge)
    assert declared["local_judge_url"] == {"env": LOCAL_JUDGE_URL_ENV}
    assert url not in repr(declared)
    # what a run gets: the value, read when the resource is built for the run
    with dg.build_resources({"judge": judge}) as resources:
        assert resources.judge.runtime(tmp_path).local_judge_url == url


def test_without_the_variable_no_local_judge_is_configured(tmp_path, monkeypatch):
    monkeypatch.delenv(LOCAL_JUDGE_URL_ENV, raising=False)
    judge = build_definitions(tmp_path).resources["judge"]
    assert _declared_config(judge).get("local_judge_url") is None
    with dg.build_resources({"judge": judge}) as resources:
        assert resources.judge.runtime(tmp_path).local_judge_url is None
