"""Resources: environment values reach runs as `dg.EnvVar`, so the UI shows the variable's name, not its value."""

from __future__ import annotations

import dagster as dg
import pytest

from eval_platform.definitions import build_definitions
from eval_platform.defs.resources import LOCAL_JUDGE_URL_ENV, JudgeResource
from eval_platform.settings import LOCAL_JUDGE_FOR_MISSING_KEYS_ENV


def _declared_config(resource: dg.ConfigurableResource) -> dict:
    return resource.get_resource_definition().config_schema.default_value


@pytest.fixture
def tmp_path(tmp_path):
    """A data root: a folder with an `evaluators/` folder (a code location refuses to load without one)."""
    (tmp_path / "evaluators").mkdir()
    return tmp_path


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


def test_the_local_judge_answers_for_missing_keys_only_when_told_to(tmp_path, monkeypatch):
    """The URL alone never stands in for a real provider; the demo's mode is its own variable, declared."""
    monkeypatch.setenv(LOCAL_JUDGE_URL_ENV, "http://127.0.0.1:59123/v1")
    monkeypatch.delenv(LOCAL_JUDGE_FOR_MISSING_KEYS_ENV, raising=False)
    judge = build_definitions(tmp_path).resources["judge"]
    with dg.build_resources({"judge": judge}) as resources:
        assert not resources.judge.runtime(tmp_path).local_judge_for_missing_keys
    monkeypatch.setenv(LOCAL_JUDGE_FOR_MISSING_KEYS_ENV, "1")
    judge = build_definitions(tmp_path).resources["judge"]
    assert _declared_config(judge)["local_judge_for_missing_keys"] is True
    with dg.build_resources({"judge": judge}) as resources:
        assert resources.judge.runtime(tmp_path).local_judge_for_missing_keys


S3_SETTINGS = {
    "EVAL_PLATFORM_WAREHOUSE_URL": "s3://team-bucket/eval",
    "AWS_ENDPOINT_URL": "http://127.0.0.1:59124",
    "AWS_REGION": "eu-west-1",
    "AWS_ACCESS_KEY_ID": "eval-platform-id",
    "AWS_SECRET_ACCESS_KEY": "Xr4Tn8Qm2Vb6Lc1Hz9Pw3Kd7Jf5Gs0Ya8Ue2Oi6",
}


def test_the_warehouse_stays_on_local_disk_unless_a_bucket_is_configured(tmp_path, monkeypatch):
    from eval_platform.storage.location import LocalStore, S3Store

    for name in S3_SETTINGS:
        monkeypatch.delenv(name, raising=False)
    warehouse = build_definitions(tmp_path).resources["warehouse"]
    assert _declared_config(warehouse).get("warehouse_url") is None
    with dg.build_resources({"warehouse": warehouse}) as resources:
        root = resources.warehouse.root
        assert root.path == tmp_path.resolve() and root.store == LocalStore(tmp_path.resolve() / "warehouse")

    for name, value in S3_SETTINGS.items():
        monkeypatch.setenv(name, value)
    warehouse = build_definitions(tmp_path).resources["warehouse"]
    declared = _declared_config(warehouse)
    assert declared["warehouse_url"] == {"env": "EVAL_PLATFORM_WAREHOUSE_URL"}
    assert declared["s3_secret_access_key"] == {"env": "AWS_SECRET_ACCESS_KEY"}
    assert S3_SETTINGS["AWS_SECRET_ACCESS_KEY"] not in repr(declared)
    with dg.build_resources({"warehouse": warehouse}) as resources:
        store = resources.warehouse.root.store  # what the storage functions are given in a run
    assert isinstance(store, S3Store) and (store.bucket, store.prefix, store.region) == (
        "team-bucket",
        "eval",
        "eu-west-1",
    )
    assert S3_SETTINGS["AWS_SECRET_ACCESS_KEY"] not in repr(store)
