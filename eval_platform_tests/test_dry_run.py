"""A dry run counts exactly the calls a run would make, prices their worst case, and sends nothing."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import httpx
import polars as pl
import pytest

from eval_platform.dry_run import estimate, main
from eval_platform.ingest.traces import read_trace_day
from eval_platform.judging.loading import load_evaluators
from eval_platform.judging.runner import judge_day
from eval_platform.llm.budget import BudgetLedger
from eval_platform.llm.cache import ModelCache
from eval_platform.llm.client import LiteLLMModelClient
from eval_platform.llm.runtime import ModelRuntime
from eval_platform.settings import state_dir
from eval_platform.storage.location import DataRoot
from eval_platform_tests.conftest import (
    copy_sample_days,
    judge_requests,
    write_evaluator,
)

DAYS = ["2026-11-09", "2026-11-10"]


@pytest.mark.parametrize("mode", ["score", "pairwise"])
def test_dry_run_counts_the_calls_a_run_makes_and_sends_nothing(data_root, local_judge, mode, capsys):
    prompt = "Rate {{output}}" if mode == "score" else "{{output_a}} or {{output_b}}"
    extra = {"score_scale": {"min": 0, "max": 1}, "samples": 2} if mode == "score" else {}
    write_evaluator(
        data_root,
        "priced",
        mode=mode,
        model="openai/mock",
        api_base=local_judge.base_url,
        prompt=prompt,
        trigger="sampled",
        sample_rate=0.1,
        input_cost_per_million=1.0,
        output_cost_per_million=2.0,
        max_tokens=100,
        **extra,
    )
    copy_sample_days(data_root, DAYS)
    config = load_evaluators(data_root / "evaluators")["priced"]

    before = judge_requests(local_judge)
    bill = estimate(config, DAYS, DataRoot.from_env(data_root))
    assert judge_requests(local_judge) == before  # nothing was sent
    assert bill.calls > 0 and bill.cached == 0 and bill.days == 2
    assert bill.worst_case_usd > 0 and bill.unpriced_calls == 0

    runtime = ModelRuntime(
        LiteLLMModelClient(),
        ModelCache(state_dir(data_root) / "judge_cache"),
        BudgetLedger(data_root / "ledger.sqlite"),
        env={},
    )
    made, spent = 0, 0.0
    for day in DAYS:
        rows = judge_day(config, day, read_trace_day(data_root, day).traces, runtime).rows
        made += int(rows["calls"].sum())
        spent += float(rows["cost_usd"].fill_null(0).sum())
    # the run sends each distinct request once (identical ones wait for it, or find its reply in the cache)
    assert bill.distinct == made <= bill.calls
    assert spent <= bill.worst_case_usd  # the worst case bounds the bill

    again = estimate(config, DAYS, DataRoot.from_env(data_root))
    assert again.calls == 0 and again.worst_case_usd == 0.0  # what the cache answers is free
    assert again.cached == bill.calls  # every request is now answered by the cache

    assert main(["--start", DAYS[0], "--end", DAYS[1]]) == 0
    printed = capsys.readouterr().out
    assert "nothing is sent" in printed and "priced" in printed
    assert judge_requests(local_judge) == before + made


def test_a_call_without_a_known_price_is_counted_as_unknown_not_free(data_root):
    write_evaluator(
        data_root,
        "mystery",
        mode="score",
        model="openai/my-private-model",
        api_key_env="MYSTERY_KEY",
        prompt="Rate {{output}}",
        score_scale={"min": 0, "max": 1},
        trigger="sampled",
        sample_rate=0.05,
    )
    copy_sample_days(data_root, DAYS[:1])
    bill = estimate(load_evaluators(data_root / "evaluators")["mystery"], DAYS[:1], DataRoot.from_env(data_root))
    assert bill.calls > 0 and bill.unpriced_calls == bill.calls and bill.worst_case_usd == 0.0


assert pl  # polars is the frame library of the rows compared above


def test_a_batch_evaluator_dry_run_submits_nothing_and_prices_at_the_discount(data_root, local_judge):
    common = dict(
        mode="score",
        model="openai/mock",
        api_base=local_judge.base_url,
        prompt="Rate {{output}}",
        score_scale={"min": 0, "max": 1},
        input_cost_per_million=1.0,
        output_cost_per_million=2.0,
        max_tokens=100,
    )
    write_evaluator(data_root, "interactive", name="interactive", **common)
    write_evaluator(data_root, "batched", name="batched", batch={"discount": 0.5}, **common)
    copy_sample_days(data_root, DAYS)
    evaluators = load_evaluators(data_root / "evaluators")
    before = judge_requests(local_judge)
    batches_before = httpx.get(f"{local_judge.base_url}/stats/batches", trust_env=False).json()["batches"]
    one_by_one, batched = (
        estimate(evaluators["interactive"], DAYS, DataRoot.from_env(data_root)),
        estimate(evaluators["batched"], DAYS, DataRoot.from_env(data_root)),
    )
    assert judge_requests(local_judge) == before
    assert httpx.get(f"{local_judge.base_url}/stats/batches", trust_env=False).json()["batches"] == batches_before
    assert batched.calls == one_by_one.calls > 0
    assert batched.worst_case_usd == pytest.approx(0.5 * one_by_one.worst_case_usd)


def test_dry_run_of_a_suite_counts_model_and_judge_calls_sends_nothing_and_bounds_the_bill(
    data_root, local_judge, tmp_path, monkeypatch, capsys
):
    """gsm8k for one priced model: `answer` (50 calls to the model), `careful` (gated; 3 samples) and `judged`
    (the helpfulness judge on answer's outputs). Nothing reaches the provider, no ledger is written, the real
    run's spend stays under the worst case, and what the cache then holds is free."""
    import shutil

    import dagster as dg
    import yaml

    from eval_platform.benchmarks.config import load_models, load_suites
    from eval_platform.benchmarks.runner import benchmark_ledger
    from eval_platform.dry_run import estimate_suite
    from eval_platform_tests.benchmarks.test_generation_suite import (
        materialize,
        query,
        requests_for,
    )
    from eval_platform_tests.conftest import REPO_DATA

    fixed = "fixed/The answer is 18."
    shutil.copytree(REPO_DATA / "datasets" / "gsm8k", data_root / "datasets" / "gsm8k")
    shutil.copy(REPO_DATA / "evaluators" / "helpfulness.yaml", data_root / "evaluators")
    (data_root / "benchmarks").mkdir()
    shutil.copy(REPO_DATA / "benchmarks" / "gsm8k.yaml", data_root / "benchmarks")
    model = {
        "model": f"local/{fixed}",
        "input_cost_per_million": 1000.0,
        "output_cost_per_million": 1000.0,
        "max_daily_cost_usd": 1000.0,
    }
    (data_root / "benchmarks" / "models.yaml").write_text(yaml.safe_dump({"models": {"priced-18": model}}))
    monkeypatch.setenv("EVAL_PLATFORM_LOCAL_JUDGE_URL", local_judge.base_url)
    monkeypatch.setenv("EVAL_PLATFORM_DATA_DIR", str(data_root))
    evaluators = load_evaluators(data_root / "evaluators")
    suites, _ = load_suites(data_root / "benchmarks", data_root, set(evaluators))
    models = load_models(data_root / "benchmarks" / "models.yaml")

    asked, judged_before = requests_for(local_judge, fixed), judge_requests(local_judge)
    bills = {
        b.task: b
        for b in estimate_suite(data_root, "gsm8k", suites["gsm8k"], "priced-18", models["priced-18"], evaluators)
    }
    assert requests_for(local_judge, fixed) == asked and judge_requests(local_judge) == judged_before  # nothing sent
    assert not benchmark_ledger(data_root).totals()  # the model's budget ledger untouched
    assert (bills["answer"].model_calls, bills["answer"].judge_calls) == (50, 0)
    assert (bills["careful"].model_calls, bills["careful"].cases) == (150, 150)  # gate assumed passed
    assert (bills["judged"].model_calls, bills["judged"].judge_calls) == (0, 50)  # the judge, on answer's outputs
    assert all(b.worst_case_usd > 0 and b.unpriced_calls == 0 for b in bills.values())

    (tmp_path / "dagster_home").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path / "dagster_home")) as instance:
        instance.add_dynamic_partitions("benchmark_models", ["priced-18"])
        materialize(
            data_root, instance, "priced-18", dg.AssetSelection.assets(dg.AssetKey(["benchmark", "gsm8k", "answer"]))
        )
    [(spent, completed)] = query(
        data_root, "SELECT sum(cost_usd), count(*) FILTER (status = 'COMPLETED') FROM benchmark_cases"
    )
    assert completed == 50 and 0 < spent <= bills["answer"].worst_case_usd  # the worst case bounds the bill

    again = {
        b.task: b
        for b in estimate_suite(data_root, "gsm8k", suites["gsm8k"], "priced-18", models["priced-18"], evaluators)
    }
    assert again["answer"].cached == 50 and again["answer"].worst_case_usd == 0.0  # the cache answers: free

    assert main(["--suite", "gsm8k"]) == 0
    printed = capsys.readouterr().out
    assert "nothing is sent" in printed and "priced-18" in printed and "judged" in printed
    assert "estimate" in printed  # the judge's price on outputs not yet generated is said to be an estimate


def test_a_suite_dry_run_leaves_out_only_a_broken_model_entry(data_root, local_judge, monkeypatch, capsys):
    monkeypatch.setenv("EVAL_PLATFORM_LOCAL_JUDGE_URL", local_judge.base_url)
    monkeypatch.setenv("EVAL_PLATFORM_DATA_DIR", str(data_root))
    (data_root / "datasets" / "qa").mkdir(parents=True)
    (data_root / "datasets" / "qa" / "v1.jsonl").write_text('{"input": "2+2?", "expected_output": "4"}\n')
    (data_root / "benchmarks").mkdir()
    (data_root / "benchmarks" / "qa.yaml").write_text(
        "tasks:\n  t:\n    dataset: qa\n    prompt: '{{input}}'\n    scorers: [{name: numeric_match}]\n"
    )
    (data_root / "benchmarks" / "models.yaml").write_text(
        "models:\n  fine: {model: 'local/fixed/It is 4.'}\n  typo: {model: 'local/fixed/It is 4.', onyl: [qa]}\n"
    )
    assert main(["--suite", "qa"]) == 0
    printed = capsys.readouterr().out
    assert "fine" in printed and "left out, broken in benchmarks/models.yaml: typo" in printed
    with pytest.raises(SystemExit):
        main(["--suite", "qa", "--model", "typo"])
    assert "field 'models.typo.onyl'" in capsys.readouterr().err


def test_a_session_evaluator_is_priced_on_every_turn_its_prompt_holds(data_root, local_judge):
    """The 10th's session prompt holds the 9th's turns too (read from the export files, as they are not ingested
    yet): the worst case of that one call counts them, the way the run will send them."""
    long_turn = "x" * 40_000
    for day, trace_id, text in (("2026-11-09", "t1", long_turn), ("2026-11-10", "t2", "short")):
        folder = data_root / "traces" / day
        folder.mkdir(parents=True)
        line = {"trace_id": trace_id, "timestamp": f"{day}T10:00:00Z", "session_id": "s", "input": text, "output": "ok"}
        (folder / "chat.jsonl").write_text(json.dumps(line) + "\n")
    common = {"mode": "score", "model": "openai/mock", "api_base": local_judge.base_url, "prompt": "{{conversation}}"}
    prices = {"input_cost_per_million": 1.0, "output_cost_per_million": 1.0, "max_tokens": 10}
    write_evaluator(data_root, "session", target="session", **common, **prices)
    write_evaluator(data_root, "same_day", target="session", session_lookback_days=0, **common, **prices)
    evaluators = load_evaluators(data_root / "evaluators")
    whole, alone = (
        estimate(evaluators[name], ["2026-11-10"], DataRoot.from_env(data_root)) for name in ("session", "same_day")
    )
    assert whole.calls == alone.calls == 1 and whole.traces == alone.traces == 1
    assert whole.worst_case_usd - alone.worst_case_usd >= 40_000 / 1e6  # every byte of the 9th's turn a token


def test_an_evaluator_with_dataset_references_is_priced_on_the_prompts_a_run_sends(data_root, local_judge):
    """A reference evaluator's prompt holds each trace's gold answer from the dataset: the dry run plans from the
    same prepared traces as the run (projects, references), so it counts the run's calls and their gold bytes."""
    from eval_platform.storage.warehouse import write_partition

    day = "2026-11-10"
    gold = "g" * 20_000
    traces = pl.DataFrame(
        {
            "trace_id": [f"t{i}" for i in range(3)],
            "timestamp": [f"{day}T10:00:0{i}Z" for i in range(3)],
            "input": ["q"] * 3,
            "output": ["a"] * 3,
            "metadata": [json.dumps({"case": f"c{i}"}) for i in range(3)],
        }
    )
    folder = data_root / "traces" / day
    folder.mkdir(parents=True)
    (folder / "export.jsonl").write_text("\n".join(json.dumps(row) for row in traces.to_dicts()) + "\n")
    cases = pl.DataFrame({"case_id": [f"c{i}" for i in range(3)], "expected_output": [gold] * 3})
    write_partition(DataRoot.from_env(data_root), "test_cases", {"dataset": "gold", "version": "1"}, cases)
    (data_root / "datasets" / "gold").mkdir(parents=True)
    (data_root / "datasets" / "gold" / "v1.jsonl").write_text(
        "\n".join(json.dumps({"case_id": f"c{i}", "input": "q", "expected_output": gold}) for i in range(3)) + "\n"
    )
    write_evaluator(
        data_root,
        "correct",
        mode="reference",
        model="openai/mock",
        api_base=local_judge.base_url,
        prompt="Question: {{input}}\nAnswer: {{output}}\nGold: {{expected}}",
        reference={"source": "dataset", "dataset": "gold", "match_on": "metadata.case"},
        input_cost_per_million=1.0,
        output_cost_per_million=1.0,
        max_tokens=10,
    )
    bill = estimate(load_evaluators(data_root / "evaluators")["correct"], [day], DataRoot.from_env(data_root))
    assert bill.traces == 3 and bill.calls == 3
    assert bill.worst_case_usd >= 3 * 20_000 / 1e6  # every byte of each gold answer a token


GOOD = {"mode": "score", "prompt": "Rate {{output}}", "score_scale": {"min": 0, "max": 1}, "max_tokens": 10}


def test_a_data_root_that_does_not_exist_or_has_no_evaluators_folder_is_refused_by_name(tmp_path, monkeypatch, capsys):
    """A mistyped EVAL_PLATFORM_DATA_DIR used to price nothing ("worst case in all: 0.0000 USD") and exit 0."""
    missing = tmp_path / "no" / "such"
    monkeypatch.setenv("EVAL_PLATFORM_DATA_DIR", str(missing))
    with pytest.raises(SystemExit) as exit_:
        main(["--start", DAYS[0], "--end", DAYS[1]])
    error = capsys.readouterr().err
    assert exit_.value.code == 2 and str(missing) in error and "EVAL_PLATFORM_DATA_DIR" in error
    assert "worst case" not in error

    missing.mkdir(parents=True)  # the folder exists, but holds no evaluators/
    with pytest.raises(SystemExit) as exit_:
        main(["--suite", "gsm8k"])
    error = capsys.readouterr().err
    assert exit_.value.code == 2 and str(missing / "evaluators") in error and "EVAL_PLATFORM_DATA_DIR" in error


def test_a_broken_evaluator_file_is_named_and_the_others_are_priced(data_root, local_judge, capsys):
    """One typo in one file used to crash the dry run with a traceback, even with `--evaluator` naming another."""
    write_evaluator(data_root, "good_one", model="openai/mock", api_base=local_judge.base_url, **GOOD)
    write_evaluator(data_root, "typo", model="openai/mock", api_base=local_judge.base_url, sampel_rate=0.1, **GOOD)
    copy_sample_days(data_root, DAYS[:1])
    day = ["--start", DAYS[0], "--end", DAYS[0]]

    for args in ([], ["--evaluator", "good_one"]):
        assert main(day + args) == 0
        printed = capsys.readouterr().out
        assert "typo.yaml" in printed and "field 'sampel_rate'" in printed  # named: the file and the field
        [line] = [line for line in printed.splitlines() if line.startswith("good_one")]
        assert int(line.split()[3]) > 0  # the good evaluator is priced: its calls
    assert main([*day, "--strict"]) == 1  # priced, and the exit status says a file is broken
    assert "good_one" in capsys.readouterr().out

    with pytest.raises(SystemExit) as exit_:  # the broken one, named: its own error
        main([*day, "--evaluator", "typo"])
    assert exit_.value.code == 2 and "field 'sampel_rate'" in capsys.readouterr().err

    (data_root / "evaluators" / "good_one.yaml").unlink()  # nothing loads: nothing to price is an error
    assert main(day) == 1
    assert "no evaluator loads" in capsys.readouterr().err


def test_days_outside_the_partitions_are_refused_naming_the_setting_that_bounds_them(data_root, capsys):
    """Days before EVAL_PLATFORM_START_DATE (or not yet partitions) can be neither ingested nor judged: the dry run
    used to price them anyway."""
    write_evaluator(data_root, "good_one", model="openai/gpt-4o-mini", **GOOD)
    tomorrow = (datetime.now(UTC) + timedelta(days=1)).date().isoformat()
    for start, end, says in (
        ("2026-10-25", DAYS[0], "before EVAL_PLATFORM_START_DATE (2026-11-01)"),
        (DAYS[0], tomorrow, f"{tomorrow} is not a day partition yet"),
    ):
        with pytest.raises(SystemExit) as exit_:
            main(["--start", start, "--end", end])
        assert exit_.value.code == 2 and says in capsys.readouterr().err
    assert main(["--start", DAYS[0], "--end", DAYS[0]]) == 0  # a range of partitions is priced
    today = datetime.now(UTC).date().isoformat()
    assert main(["--start", today, "--end", today]) == 0  # today is a partition too (its files arrive through it)
