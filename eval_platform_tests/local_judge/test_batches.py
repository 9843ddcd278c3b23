"""The local judge's Files and Batch APIs at the wire, as an OpenAI client sees them."""

from __future__ import annotations

import json
import time

import httpx
import pytest

from eval_platform_tests.local_judge.test_server import SCORE_SCHEMA, judge_prompt
from tools.local_judge_wires import WiredJudgeServer

HTTP = httpx.Client(trust_env=False)


def line(custom_id: str, model: str, output: str) -> str:
    body = {"model": model, "messages": judge_prompt(SCORE_SCHEMA, output=output), "temperature": 0, "max_tokens": 64}
    return json.dumps({"custom_id": custom_id, "method": "POST", "url": "/v1/chat/completions", "body": body})


def upload(base_url: str, lines: list[str], purpose: str = "batch") -> httpx.Response:
    content = ("\n".join(lines) + "\n").encode()
    return HTTP.post(
        f"{base_url}/files", data={"purpose": purpose}, files={"file": ("in.jsonl", content, "application/jsonl")}
    )


def create(base_url: str, file_id: str, **overrides) -> httpx.Response:
    body = {"input_file_id": file_id, "endpoint": "/v1/chat/completions", "completion_window": "24h", **overrides}
    return HTTP.post(f"{base_url}/batches", json=body)


def finished(base_url: str, batch_id: str) -> dict:
    while True:
        batch = HTTP.get(f"{base_url}/batches/{batch_id}").json()
        if batch["status"] in {"completed", "expired", "failed", "cancelled"}:
            return batch
        time.sleep(0.02)


def jsonl(base_url: str, file_id: str | None) -> list[dict]:
    if file_id is None:
        return []
    response = HTTP.get(f"{base_url}/files/{file_id}/content")
    assert response.status_code == 200
    return [json.loads(text) for text in response.text.splitlines()]


def test_each_line_is_answered_as_a_chat_completion_would_be():
    with WiredJudgeServer() as server:
        base = server.base_url
        lines = [
            line("a", "mock", "four"),
            line("b", "fault/server_error", "five"),
            line("c", 'fixed/{"score": 2}', "x"),
        ]
        file_id = upload(base, lines).json()["id"]
        batch = create(base, file_id, metadata={"evaluator": "e"}).json()
        assert batch["status"] == "in_progress" and batch["request_counts"]["total"] == 3
        batch = finished(base, batch["id"])
        assert batch["status"] == "completed" and batch["metadata"] == {"evaluator": "e"}
        assert batch["request_counts"] == {"total": 3, "completed": 2, "failed": 1}
        output = {item["custom_id"]: item["response"] for item in jsonl(base, batch["output_file_id"])}
        errors = {item["custom_id"]: item["response"] for item in jsonl(base, batch["error_file_id"])}
        assert set(output) == {"a", "c"} and set(errors) == {"b"}
        direct = HTTP.post(f"{base}/chat/completions", json=json.loads(lines[0])["body"]).json()
        assert output["a"]["status_code"] == 200
        assert output["a"]["body"]["choices"] == direct["choices"] and output["a"]["body"]["usage"] == direct["usage"]
        assert json.loads(output["c"]["body"]["choices"][0]["message"]["content"]) == {"score": 2}
        assert (
            errors["b"]["status_code"] == 500 and "internal error injected" in errors["b"]["body"]["error"]["message"]
        )
        stats = HTTP.get(f"{base}/stats/batches").json()
        assert stats == {"batches": 1, "files": 3, "batch_lines": 3}
        assert HTTP.get(f"{base}/stats").json()["requests"] == 1  # only the direct call


def test_an_expiring_batch_answers_the_first_lines_and_lists_the_rest_as_expired():
    with WiredJudgeServer(batch_expire_after=1) as server:
        base = server.base_url
        file_id = upload(base, [line(f"r{i}", "mock", f"answer {i}") for i in range(3)]).json()["id"]
        batch = finished(base, create(base, file_id).json()["id"])
        assert batch["status"] == "expired" and batch["expired_at"]
        assert [item["custom_id"] for item in jsonl(base, batch["output_file_id"])] == ["r0"]
        expired = jsonl(base, batch["error_file_id"])
        assert [item["custom_id"] for item in expired] == ["r1", "r2"]
        assert {item["error"]["code"] for item in expired} == {"batch_expired"}
        assert all(item["response"] is None for item in expired)


def test_a_batch_can_be_cancelled_while_it_waits():
    with WiredJudgeServer(batch_delay_s=30) as server:
        base = server.base_url
        file_id = upload(base, [line("r0", "mock", "x")]).json()["id"]
        batch_id = create(base, file_id).json()["id"]
        assert HTTP.post(f"{base}/batches/{batch_id}/cancel").json()["status"] == "cancelling"
        batch = finished(base, batch_id)
        assert batch["status"] == "cancelled" and batch["output_file_id"] is None
        assert batch["request_counts"] == {"total": 1, "completed": 0, "failed": 1}
        assert HTTP.get(f"{base}/stats/batches").json()["batch_lines"] == 0


@pytest.mark.parametrize(
    ("send", "code"),
    [
        (lambda base: upload(base, [line("a", "mock", "x")], purpose="fine-tune"), "invalid_purpose"),
        (lambda base: upload(base, ['{"custom_id": "a"}']), "invalid_jsonl"),
        (lambda base: create(base, "file-nope"), "file_not_found"),
        (
            lambda base: create(base, upload(base, [line("a", "mock", "x")]).json()["id"], endpoint="/v1/embeddings"),
            "unsupported_endpoint",
        ),
        (lambda base: HTTP.get(f"{base}/batches/batch_nope"), "batch_not_found"),
        (lambda base: HTTP.get(f"{base}/files/file-nope/content"), "file_not_found"),
    ],
)
def test_bad_batch_requests_get_openai_shaped_errors(local_judge, send, code):
    response = send(local_judge.base_url)
    assert response.status_code in (400, 404)
    assert response.json()["error"]["code"] == code


def test_batches_are_listed_newest_first_page_by_page():
    with WiredJudgeServer() as server:
        base = server.base_url
        file_id = upload(base, [line("a", "mock", "x")]).json()["id"]
        ids = [create(base, file_id, metadata={"n": str(i)}).json()["id"] for i in range(3)]
        first = HTTP.get(f"{base}/batches", params={"limit": 2}).json()
        assert [b["id"] for b in first["data"]] == ids[::-1][:2] and first["has_more"] is True
        rest = HTTP.get(f"{base}/batches", params={"limit": 2, "after": first["last_id"]}).json()
        assert [b["id"] for b in rest["data"]] == [ids[0]] and rest["has_more"] is False
        assert rest["data"][0]["metadata"] == {"n": "0"}
