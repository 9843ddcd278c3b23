"""Annotation tasks against a real Label Studio server (started once per session, see label_studio_server.py), on
a real Dagster instance over a temp data root: a task is exported (its project and one Label Studio task per
item), three users made through Label Studio's API annotate, and the annotations come back into
`human_annotations` through its import, with progress, agreement and ground truth; a re-run imports nothing twice,
a label the task does not allow is quarantined with its reason, and the API key is nowhere."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import dagster as dg
import duckdb
import polars as pl
import pytest
import yaml

from eval_platform.annotation.label_studio import API_KEY_ENV, URL_ENV, LabelStudioClient, LabelStudioError
from eval_platform.definitions import build_definitions

JOB = "annotation_tasks_job"
ASSETS = ["annotation_task_exports", "annotation_task_pulls", "annotation_progress", "annotation_ground_truth"]
CASES = [
    {"case_id": f"c{i}", "input": f"What is {i} + {i}?", "expected_output": str(2 * i), "metadata": {"level": i}}
    for i in range(1, 6)
]
TASK = {
    "description": "Are the answers right?",
    "source": {"dataset": {"name": "sums", "version": 1}},
    "instructions": "Is the answer right? Rate its clarity. Which is better, A or B?",
    "criteria": {
        "correct": {"schema": "classification", "labels": {"yes": 1, "no": 0}},
        "clarity": {"schema": "rating", "min": 1, "max": 5},
        "better": {"schema": "ranking", "candidates": ["A", "B"]},
        "comment": {"schema": "text"},
    },
    "annotations_per_item": 2,
    "sampling": {"method": "random", "seed": 3},
    "size": 4,
    "consensus_threshold": 0.66,
}


def result(correct, clarity, better, comment=None) -> list[dict]:
    """An annotation's result as Label Studio's editor submits it for the task's labelling interface."""
    regions = [
        {"from_name": "correct", "to_name": "item_input", "type": "choices", "value": {"choices": [correct]}},
        {"from_name": "clarity", "to_name": "item_input", "type": "rating", "value": {"rating": clarity}},
    ]
    regions += [
        {"from_name": f"better__rank_{k}", "to_name": "item_input", "type": "choices", "value": {"choices": [c]}}
        for k, c in enumerate(better, start=1)
    ]
    if comment:
        regions.append(
            {"from_name": "comment", "to_name": "item_input", "type": "textarea", "value": {"text": [comment]}}
        )
    return regions


@pytest.fixture
def project(data_root, tmp_path, label_studio_server, monkeypatch):
    (data_root / "datasets" / "sums").mkdir(parents=True)
    (data_root / "datasets" / "sums" / "v1.jsonl").write_text("".join(json.dumps(c) + "\n" for c in CASES))
    (data_root / "annotation_tasks").mkdir()
    (data_root / "annotation_tasks" / "sums_review.yaml").write_text(yaml.safe_dump(TASK, sort_keys=False))
    monkeypatch.setenv(URL_ENV, label_studio_server.url)
    monkeypatch.setenv(API_KEY_ENV, label_studio_server.legacy_token)
    (tmp_path / "dagster_home").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path / "dagster_home")) as instance:
        defs = build_definitions(data_root)
        instance.add_dynamic_partitions("dataset_versions", ["sums@v1"])  # what the dataset sensor does
        assert dg.materialize(
            assets=list(defs.assets), selection=["dataset_versions"], partition_key="sums@v1", instance=instance,
            resources=defs.resources,
        ).success  # fmt: skip
        yield data_root, defs, instance


def run_job(defs, instance) -> dg.ExecuteInProcessResult:
    return defs.resolve_job_def(JOB).execute_in_process(instance=instance, raise_on_error=False)


def metadata(instance, asset: str) -> dict:
    event = instance.get_latest_materialization_event(dg.AssetKey(asset))
    return {key: value.value for key, value in event.asset_materialization.metadata.items()}


def query(root: Path, sql: str) -> list[tuple]:
    with duckdb.connect(str(root / "eval_platform.duckdb"), read_only=True) as conn:
        return conn.sql(sql).fetchall()


def key_pieces(key: str) -> list[str]:
    return sorted({key[i : i + 8] for i in range(len(key) - 7)})


def assert_no_key_anywhere(key: str, root: Path, instance, home: Path) -> None:
    """No 8-character piece of the key in any file under the data root or DAGSTER_HOME (Parquet decoded cell by
    cell), nor in any event of the instance (logs, metadata, failures)."""
    pieces = key_pieces(key)
    texts: dict[str, str] = {}
    for path in [*root.rglob("*"), *home.rglob("*")]:
        if not path.is_file():
            continue
        if path.suffix == ".parquet":
            texts[str(path)] = pl.read_parquet(path).cast(pl.String, strict=False).write_csv()
        else:
            texts[str(path)] = path.read_bytes().decode("utf-8", errors="replace")
    for run in instance.get_runs():
        for entry in instance.all_logs(run.run_id):
            texts[f"event log of run {run.run_id}"] = texts.get(
                f"event log of run {run.run_id}", ""
            ) + dg.serialize_value(entry)
    leaks = sorted({where for where, text in texts.items() for piece in pieces if piece in text})
    assert not leaks, f"the API key leaked into {leaks}"


def test_a_task_goes_to_label_studio_and_its_annotations_come_back(project, label_studio_server):
    root, defs, instance = project
    first = run_job(defs, instance)
    assert first.success, [e.message for e in first.all_events if e.is_failure]

    exported = metadata(instance, "annotation_task_exports")
    url = exported["project_urls"]["sums_review"]
    assert url.startswith(f"{label_studio_server.url}/projects/")
    assert (exported["items_exported"], exported["items_already_present"]) == (4, 0)
    items = query(root, "SELECT item_id, position, input, reference FROM annotation_task_items ORDER BY position")
    assert len(items) == 4 and {i[0] for i in items} <= {c["case_id"] for c in CASES}
    assert all(i[2].startswith("What is") and i[3] for i in items)

    admin = label_studio_server.admin()
    project_id = int(url.rsplit("/", 1)[1])
    made = admin.get(f"/api/projects/{project_id}").json()
    assert made["maximum_annotations"] == 2 and "sums_review" in made["title"]
    tasks = {
        t["data"]["item_id"]: t["id"] for t in admin.get("/api/tasks", params={"project": project_id}).json()["tasks"]
    }
    assert sorted(tasks) == sorted(i[0] for i in items)

    # Three annotators, made through Label Studio's API; each annotation is theirs (completed_by) and took time.
    users = {}
    for name in ("ann1", "ann2", "ann3"):
        created = admin.post("/api/users", json={"email": f"{name}@example.com", "username": name})
        assert created.status_code == 201, created.text
        users[name] = created.json()["id"]
    a, b, c, d = (i[0] for i in items)

    def annotate(item, user, regions, lead_time, cancelled=False):
        body = {"result": regions, "completed_by": users[user], "lead_time": lead_time, "was_cancelled": cancelled}
        answer = admin.post(f"/api/tasks/{tasks[item]}/annotations", json=body)
        assert answer.status_code == 201, answer.text

    annotate(a, "ann1", result("yes", 4, ["A", "B"], "fine"), 10.0)
    annotate(a, "ann2", result("yes", 4, ["A", "B"]), 20.0)
    annotate(b, "ann1", result("yes", 3, ["B", "A"]), 5.0)
    annotate(b, "ann3", result("no", 2, ["A", "B"]), 7.0)
    annotate(c, "ann2", result("maybe", 5, ["A", "B"]), 9.0)  # not a label of `correct`
    annotate(c, "ann3", [], 1.0, cancelled=True)  # skipped in the tool: no labels

    again = run_job(defs, instance)
    assert again.success, [e.message for e in again.all_events if e.is_failure]
    rerun = metadata(instance, "annotation_task_exports")
    assert (rerun["items_exported"], rerun["items_already_present"]) == (0, 4)  # nothing imported twice
    assert rerun["project_urls"]["sums_review"] == url
    assert len(admin.get("/api/tasks", params={"project": project_id}).json()["tasks"]) == 4
    titles = [p["title"] for p in admin.get("/api/projects").json()["results"] if "sums_review" in p["title"]]
    assert len(titles) == 1

    pulled = metadata(instance, "annotation_task_pulls")["tasks"]["sums_review"]
    assert (pulled["annotations"], pulled["skipped_in_tool"]) == (5, 1)
    assert (root / pulled["file"]).is_file() and pulled["file"].startswith("annotations/label_studio/")

    rows = query(
        root,
        "SELECT item_id, annotator, criterion, label, value FROM human_annotations WHERE task = 'sums_review' "
        "ORDER BY item_id, annotator, criterion, value",
    )
    assert (a, "ann1@example.com", "comment", "fine", None) in rows
    assert (a, "ann2@example.com", "correct", "yes", 1.0) in rows
    assert (b, "ann3@example.com", "clarity", "2", 2.0) in rows
    assert (b, "ann1@example.com", "better", "B", 1.0) in rows and (b, "ann1@example.com", "better", "A", 2.0) in rows
    assert not [r for r in rows if r[0] == c]  # the bad annotation is quarantined whole, the skipped one is no row
    assert query(
        root, "SELECT count(DISTINCT (item_id, annotator)) FROM human_annotations WHERE task='sums_review'"
    ) == [(4,)]
    quarantined = query(root, "SELECT file, reason, detail FROM quarantine WHERE source = 'human_annotations'")
    assert [(q[0], q[1]) for q in quarantined] == [(pulled["file"], "label_not_allowed:correct")]
    assert "'maybe'" in quarantined[0][2]
    lead = query(root, f"SELECT json_extract(metadata, '$.lead_time_s') FROM human_annotations WHERE item_id = '{a}' "
                 "AND annotator = 'ann2@example.com' LIMIT 1")  # fmt: skip
    assert float(lead[0][0]) == 20.0

    progress = {
        (r[0], r[1], r[2]): r[3:]
        for r in query(
            root,
            "SELECT level, annotator, criterion, items_done, items_complete, annotations, time_spent_s, "
            "percent_agreement FROM annotation_progress WHERE task = 'sums_review'",
        )
    }
    # items a and b have their 2 annotations; c's only annotation was quarantined; 10 + 20 + 5 + 7 s spent
    assert progress[("task", None, None)][:4] == (2, 2, 4, 42.0)
    assert progress[("annotator", "ann1@example.com", None)][:4] == (2, 2, 2, 15.0)
    # agreement so far on `correct`: a (yes, yes) agrees, b (yes, no) does not
    assert query(
        root,
        "SELECT items_compared, percent_agreement FROM annotation_progress "
        "WHERE task = 'sums_review' AND level = 'task' AND criterion = 'correct'",
    ) == [(2, 0.5)]
    shown = metadata(instance, "annotation_progress")
    assert "sums_review" in shown["progress"] and "ann3@example.com" in shown["annotators"]

    # ground truth at 0.66 with N = 2: item a is settled (both said yes, 4, A > B); item b is split on everything
    truth = query(root, "SELECT item_id, criterion, label, consensus FROM annotation_ground_truth ORDER BY criterion")
    assert truth == [(a, "better", "A > B", 1.0), (a, "clarity", "4", 1.0), (a, "correct", "yes", 1.0)]
    assert metadata(instance, "annotation_ground_truth")["tasks"]["sums_review"]["labelled_not_settled"] == 3

    home = Path(instance.root_directory)
    assert_no_key_anywhere(label_studio_server.legacy_token, root, instance, home)


class _EchoingServer(BaseHTTPRequestHandler):
    """A server that echoes the request's credentials (header and body) in its error body, as some gateways do."""

    def do_GET(self):  # noqa: N802 (http.server's name)
        sent = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()
        body = json.dumps({"detail": f"bad credentials: {self.headers.get('Authorization')} {sent}"}).encode()
        self.send_response(401)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_POST = do_GET  # noqa: N815

    def log_message(self, *args):
        pass


def test_both_kinds_of_key_work_and_a_key_echoed_back_is_never_shown(label_studio_server, tmp_path, caplog):
    with LabelStudioClient(label_studio_server.url, label_studio_server.personal_access_token) as client:
        assert client.user_emails()[1] == "admin@example.com"  # a personal access token, exchanged for access
    with LabelStudioClient(label_studio_server.url, label_studio_server.legacy_token) as client:
        assert client.user_emails()[1] == "admin@example.com"

    echo = ThreadingHTTPServer(("127.0.0.1", 0), _EchoingServer)
    thread = threading.Thread(target=echo.serve_forever, daemon=True)
    thread.start()
    try:
        for key in (label_studio_server.legacy_token, label_studio_server.personal_access_token):
            with LabelStudioClient(f"http://127.0.0.1:{echo.server_port}", key) as client:
                with pytest.raises(LabelStudioError) as raised:
                    list(client.projects())
            message = str(raised.value)
            assert "HTTP 401" in message and "[REDACTED]" in message
            assert not [p for p in key_pieces(key) if p in message]
    finally:
        echo.shutdown()
        echo.server_close()
    assert not [p for p in key_pieces(label_studio_server.legacy_token) if p in caplog.text]
