"""PandaLM replay keyed by item id: repeats of the same texts get their own recording in both orders."""

from __future__ import annotations

import json

import httpx
import pytest

from eval_platform.judging.fencing import REPLY_SCHEMA_MARKER, fence
from eval_platform.local_judge.pandalm_replay import (
    PandaLMRecordings,
    ReplayMismatch,
    item_id_from_metadata,
    item_index,
    trace_input_text,
)
from eval_platform_tests.conftest import REPO_DATA

PANDALM_DIR = REPO_DATA / "sources" / "pandalm"
PAIRWISE_SCHEMA = {
    "type": "object",
    "properties": {"winner": {"enum": ["A", "B", "tie"]}, "reasoning": {"type": "string"}},
    "required": ["winner", "reasoning"],
}
SWAP = {"A": "B", "B": "A", "tie": "tie"}
WINNER = {"1": "A", "2": "B", "Tie": "tie"}
HTTP = httpx.Client(trust_env=False)

# Items 66 and 70 show the same instruction and the same two texts in opposite orders. Looking up by text,
# item 70 shown in its swapped order found item 66's recording instead of its own.
REPEATS = (66, 70)


def _load(name: str) -> dict[int, dict]:
    return {row["idx"]: row for row in json.loads((PANDALM_DIR / name).read_text(encoding="utf-8"))}


@pytest.fixture(scope="module")
def items() -> dict[int, dict]:
    return _load("testset-v1.json")


@pytest.fixture(scope="module")
def gpt() -> dict[int, dict]:
    return _load("gpt-3.5-turbo-testset-v1.json")


@pytest.fixture(scope="module")
def recordings() -> PandaLMRecordings:
    return PandaLMRecordings.load(REPO_DATA)


def shown(item: dict, swapped: bool) -> tuple[str, str, str]:
    first, second = (item["response2"], item["response1"]) if swapped else (item["response1"], item["response2"])
    return trace_input_text(item), str(first), str(second)


def messages(item: dict, swapped: bool, metadata: dict | str | None) -> list[dict]:
    """A judge prompt shaped like the pairwise_preference evaluator's, metadata block optional."""
    trace_input, output_a, output_b = shown(item, swapped)
    body = f"Instruction:\n{fence('input', trace_input)}\n\nResponse A:\n{fence('output_a', output_a)}\n\n"
    body += f"Response B:\n{fence('output_b', output_b)}"
    if metadata is not None:
        text = metadata if isinstance(metadata, str) else json.dumps(metadata)
        body += f"\n\nItem metadata: {fence('metadata', text)}"
    body += f"\n\n{REPLY_SCHEMA_MARKER}\n{json.dumps(PAIRWISE_SCHEMA)}"
    return [{"role": "system", "content": "You are a careful judge."}, {"role": "user", "content": body}]


def chat(base_url: str, msgs: list[dict]) -> httpx.Response:
    return HTTP.post(
        f"{base_url}/chat/completions", json={"model": "replay/gpt-3.5-turbo", "messages": msgs}, timeout=10
    )


def test_item_ids_are_parsed_strictly():
    assert item_index("pandalm-0042") == 42
    assert item_index(" pandalm-7 ") == 7
    assert [item_index(v) for v in ("item-0042", "pandalm-", "pandalm-12x", None, 42)] == [None] * 5
    assert item_id_from_metadata('{"item_id": "pandalm-0001", "cmp_key": "a_b"}') == "pandalm-0001"
    assert [item_id_from_metadata(v) for v in (None, "", "not json", "[1]", '{"other": 1}')] == [None] * 5


def test_repeated_texts_get_their_own_item_in_both_orders(recordings, items, gpt):
    first, second = (items[i] for i in REPEATS)
    assert (first["response1"], first["response2"]) == (second["response2"], second["response1"])
    for idx in REPEATS:
        expected = WINNER[gpt[idx]["gpt_result"]]
        for swapped in (False, True):
            verdict = recordings.lookup("gpt-3.5-turbo", *shown(items[idx], swapped), item_id=f"pandalm-{idx:04d}")
            assert (verdict.idx, verdict.matched_by) == (idx, "item_id")
            assert verdict.winner == (SWAP[expected] if swapped else expected)
            assert verdict.reasoning == gpt[idx]["gpt_reason"]


def test_without_a_usable_item_id_the_texts_decide(recordings, items):
    # The text lookup cannot tell the repeats apart: item 70 in swapped order reads as item 66 recorded order.
    for item_id in (None, "pandalm-9999", "ticket-70"):
        verdict = recordings.lookup("gpt-3.5-turbo", *shown(items[70], swapped=True), item_id=item_id)
        assert (verdict.idx, verdict.matched_by) == (66, "text")
    assert recordings.lookup("gpt-3.5-turbo", "unknown", "x", "y", item_id=None) is None


def test_an_item_id_whose_responses_differ_is_a_mismatch_not_a_borrowed_verdict(recordings, items):
    trace_input, output_a, _ = shown(items[6], swapped=False)
    with pytest.raises(ReplayMismatch, match="pandalm-0006"):
        recordings.lookup("gpt-3.5-turbo", trace_input, output_a, "made up", item_id="pandalm-0006")
    # Item 7's texts under item 6's id: the texts would match item 7, but the id says otherwise.
    with pytest.raises(ReplayMismatch):
        recordings.lookup("gpt-3.5-turbo", *shown(items[7], swapped=False), item_id="pandalm-0006")


def test_over_http_the_metadata_item_id_picks_the_recording(local_judge, items, gpt):
    for idx in REPEATS:
        expected = WINNER[gpt[idx]["gpt_result"]]
        for swapped in (False, True):
            metadata = {"item_id": f"pandalm-{idx:04d}", "cmp_key": items[idx]["cmp_key"]}
            response = chat(local_judge.base_url, messages(items[idx], swapped, metadata))
            assert response.status_code == 200, response.text
            reply = json.loads(response.json()["choices"][0]["message"]["content"])
            assert reply == {"winner": SWAP[expected] if swapped else expected, "reasoning": gpt[idx]["gpt_reason"]}


def test_over_http_a_mismatched_item_is_a_replay_miss(local_judge, items):
    response = chat(local_judge.base_url, messages(items[7], False, {"item_id": "pandalm-0006"}))
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "replay_miss"
    assert error["message"] == "replay: the responses shown are not the two responses of recorded item pandalm-0006"


def test_over_http_metadata_that_is_not_json_falls_back_to_the_texts(local_judge, items, gpt):
    response = chat(local_judge.base_url, messages(items[6], True, "item pandalm-0006"))
    reply = json.loads(response.json()["choices"][0]["message"]["content"])
    assert reply["winner"] == SWAP[WINNER[gpt[6]["gpt_result"]]]


def test_garbage_recording_is_a_reply_the_parser_rejects(local_judge, items, gpt):
    from eval_platform.judging.config import EvaluatorConfig
    from eval_platform.judging.parsing import ParseFailure, parse_reply

    assert gpt[114]["gpt_result"] == "garbage"
    config = EvaluatorConfig.model_validate(
        {"name": "pw", "mode": "pairwise", "model": "openai/x", "prompt": "{{input}} {{output_a}} {{output_b}}"}
    )
    for swapped in (False, True):
        response = chat(local_judge.base_url, messages(items[114], swapped, {"item_id": "pandalm-0114"}))
        content = response.json()["choices"][0]["message"]["content"]
        assert content == "[recorded verdict unusable: garbage]"
        with pytest.raises(ParseFailure) as failure:
            parse_reply(config, content)
        assert failure.value.reason == "unparseable"
