"""Label Studio (https://labelstud.io) as the labelling tool of an annotation task: its REST API, spoken with httpx.

- `labeling_config(config, fields)`: the project's labelling interface (XML) from the task's criteria. The item is
  shown as `Text` tags (input, output, reference, context, conversation: those the items have); then one control
  per criterion, each asking for an answer:
  classification -> `Choices` (one choice among the declared labels; free text when none are declared),
  rating -> `Rating` (stars) when the range is 1..k with k <= 10, else `Number` with the declared min/max,
  ranking -> one single-choice `Choices` per position (`<criterion>__rank_<k>`, k = 1..candidates): Label Studio's
  `Ranker` orders items of a list in the task data, which would make each candidate a task field; positions are
  plain choices whose answers the import checks (every candidate exactly once) like any ranking it reads,
  text -> `TextArea` (one answer). The task's instructions are the project's instructions, shown before labelling.
- `LabelStudioClient`: the project of a task (found by the marker in its description, so a re-run finds it and
  never creates a second one; its title is the task's name and config hash), the items imported as tasks (`item_id`
  in the task data; an item already there is never imported again), each task asking for N annotations
  (`maximum_annotations`, overlap 100 %), and the export of the annotations made.
- `annotation_rows(tasks, config, ...)`: each annotation as one row of the `human_annotations` import format
  (`ingest/annotations.py`): annotator (the Label Studio user's email), item_id, labels per criterion,
  annotated_at (the annotation's created_at) and lead_time_s (the time the annotator spent). The rows are written
  where the import reads them; its validation decides what is kept and quarantines the rest with a reason. A
  skipped (cancelled) annotation has no labels and is not a row.

The API key is a legacy token (sent as `Token <key>`) or a personal access token (a JWT refresh token, exchanged
for a short-lived access token sent as `Bearer`, refreshed when it expires). It is remembered as a secret
(`llm.redaction`) the moment the client is made: no log line shows it, and every error this module raises is
redacted and never carries a request's headers.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx

from eval_platform.annotation.config import AnnotationTaskConfig
from eval_platform.ingest.annotation_criteria import CriterionSpec
from eval_platform.llm.redaction import clip, redact, remember

URL_ENV = "LABEL_STUDIO_URL"
API_KEY_ENV = "LABEL_STUDIO_API_KEY"
# What the item shows, in this order; each is a Text tag named `item_<field>` when the items have it.
ITEM_FIELDS = ("input", "output", "reference", "context", "conversation")
TITLE_MAX = 50  # Label Studio's limit on a project title
RANK_MARK = "__rank_"
IMPORT_BATCH = 500
PAGE_SIZE = 100
MAX_STARS = 10


class LabelStudioError(RuntimeError):
    """A request Label Studio refused or could not answer; the message is redacted."""


# ---- the labelling interface ------------------------------------------------------------------------------


def _number_text(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def uses_stars(spec: CriterionSpec) -> bool:
    """A rating asked as stars: 1..k with k a whole number up to MAX_STARS (Label Studio's Rating starts at 1)."""
    return (
        spec.min in (None, 1) and spec.max is not None and float(spec.max).is_integer() and 2 <= spec.max <= MAX_STARS
    )


def _criterion_controls(view: ET.Element, name: str, spec: CriterionSpec, to_name: str) -> None:
    header = name if not spec.description else f"{name}: {spec.description}"
    ET.SubElement(view, "Header", value=header, size="5")
    if spec.schema_ == "classification" and spec.allowed is not None:
        choices = ET.SubElement(view, "Choices", name=name, toName=to_name, choice="single-radio", required="true")
        for label in spec.allowed:
            ET.SubElement(choices, "Choice", value=label)
    elif spec.schema_ == "rating" and uses_stars(spec):
        assert spec.max is not None  # `uses_stars`: stars go up to the rating's maximum
        ET.SubElement(view, "Rating", name=name, toName=to_name, maxRating=_number_text(spec.max), required="true")
    elif spec.schema_ == "rating":
        bounds = {k: _number_text(v) for k, v in (("min", spec.min), ("max", spec.max)) if v is not None}
        ET.SubElement(view, "Number", {"name": name, "toName": to_name, "required": "true", **bounds})
    elif spec.schema_ == "ranking" and spec.candidates:
        for position in range(1, len(spec.candidates) + 1):
            ET.SubElement(view, "Header", value=f"{name}: place {position}", size="6")
            choices = ET.SubElement(
                view, "Choices", name=f"{name}{RANK_MARK}{position}", toName=to_name, choice="single", required="true"
            )
            for candidate in spec.candidates:
                ET.SubElement(choices, "Choice", value=candidate)
    else:
        # free text; a classification without declared labels; a ranking without declared candidates, written
        # best first as `B > A > C`
        hint = "best first, e.g. B > A > C" if spec.schema_ == "ranking" else ""
        required = "false" if spec.schema_ == "text" else "true"
        ET.SubElement(
            view, "TextArea", name=name, toName=to_name, rows="2", maxSubmissions="1", required=required,
            placeholder=hint,
        )  # fmt: skip


def labeling_config(config: AnnotationTaskConfig, fields: Iterable[str]) -> str:
    """The labelling interface (XML) of a task whose items have `fields` (of ITEM_FIELDS)."""
    shown = [field for field in ITEM_FIELDS if field in set(fields)] or ["input"]
    view = ET.Element("View")
    for field in shown:
        ET.SubElement(view, "Header", value=field, size="4")
        ET.SubElement(view, "Text", name=f"item_{field}", value=f"${field}")
    to_name = "item_output" if "output" in shown else f"item_{shown[0]}"
    for name, spec in config.criteria.items():
        _criterion_controls(view, name, spec, to_name)
    return ET.tostring(view, encoding="unicode")


def project_marker(config: AnnotationTaskConfig) -> str:
    """The line in the project's description that says which task and config it holds (how a re-run finds it)."""
    return f"[eval_platform annotation task={config.name} config={config.config_hash}]"


def project_title(config: AnnotationTaskConfig) -> str:
    suffix = f" [{config.config_hash[:8]}]"
    name = config.name if len(config.name) + len(suffix) <= TITLE_MAX else config.name[: TITLE_MAX - len(suffix) - 1]
    return name + ("…" if name != config.name else "") + suffix


def _text(value: Any) -> str:
    return "" if value is None else value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def task_data(item: dict[str, Any], fields: Iterable[str]) -> dict[str, Any]:
    """One item as a Label Studio task's data: `item_id` (and `trace_id`), and the text of each shown field."""
    data = {"item_id": item["item_id"], "trace_id": item.get("trace_id")}
    data.update({field: _text(item.get(field)) for field in fields})
    return data


# ---- the client -------------------------------------------------------------------------------------------


def _is_personal_access_token(key: str) -> bool:
    """Label Studio's personal access tokens are JWTs (three base64url parts); legacy tokens are hex."""
    return key.startswith("eyJ") and key.count(".") == 2


@dataclass(frozen=True)
class Project:
    id: int
    title: str
    url: str


class LabelStudioClient:
    """Label Studio's REST API at `url` with `api_key` (a legacy token or a personal access token)."""

    def __init__(self, url: str, api_key: str, timeout_s: float = 60.0):
        if not url or not api_key:
            raise LabelStudioError(
                f"Label Studio needs a URL and an API key (${URL_ENV} and ${API_KEY_ENV} unless configured otherwise)"
            )
        remember(api_key)
        self.url = url.rstrip("/")
        self._key = api_key
        self._access: str | None = None
        self._http = httpx.Client(base_url=self.url, timeout=timeout_s, follow_redirects=False)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> LabelStudioClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- requests

    def _auth(self, refresh: bool = False) -> dict[str, str]:
        if not _is_personal_access_token(self._key):
            return {"Authorization": f"Token {self._key}"}
        if self._access is None or refresh:
            answer = self._send("POST", "/api/token/refresh/", json={"refresh": self._key}, auth={})
            self._access = answer.json().get("access")
            if not self._access:
                raise LabelStudioError("Label Studio gave no access token for the personal access token")
        return {"Authorization": f"Bearer {self._access}"}

    def _send(self, method: str, path: str, auth: dict[str, str], **kwargs) -> httpx.Response:
        try:
            response = self._http.request(method, path, headers=auth, **kwargs)
        except httpx.HTTPError as exc:
            raise LabelStudioError(
                redact(f"Label Studio at {self.url} did not answer {method} {path}: {type(exc).__name__}: {exc}")
            ) from None
        if response.status_code >= 400:
            raise LabelStudioError(
                f"Label Studio refused {method} {path}: HTTP {response.status_code}: {clip(_detail(response), 300)}"
            )
        return response

    def request(self, method: str, path: str, **kwargs) -> Any:
        try:
            response = self._send(method, path, self._auth(), **kwargs)
        except LabelStudioError as exc:
            # an expired access token: exchange the personal access token again, once
            if not (_is_personal_access_token(self._key) and "HTTP 401" in str(exc)):
                raise
            response = self._send(method, path, self._auth(refresh=True), **kwargs)
        return response.json() if response.content else None

    # -- projects

    def projects(self) -> Iterator[dict[str, Any]]:
        page = 1
        while True:
            answer = self.request("GET", "/api/projects", params={"page": page, "page_size": PAGE_SIZE})
            yield from answer.get("results", [])
            if not answer.get("next"):
                return
            page += 1

    def _project(self, found: dict[str, Any]) -> Project:
        return Project(id=int(found["id"]), title=found["title"], url=f"{self.url}/projects/{found['id']}")

    def find_project(self, config: AnnotationTaskConfig) -> Project | None:
        marker = project_marker(config)
        found = [p for p in self.projects() if marker in (p.get("description") or "")]
        if len(found) > 1:
            ids = sorted(p["id"] for p in found)
            raise LabelStudioError(
                f"Label Studio has {len(found)} projects of annotation task '{config.name}' (config "
                f"{config.config_hash}): {ids}; keep one (the others' description must not carry {marker})"
            )
        return self._project(found[0]) if found else None

    def create_project(self, config: AnnotationTaskConfig, label_config: str) -> Project:
        body = {
            "title": project_title(config),
            "description": f"{config.description}\n\n{project_marker(config)}".strip(),
            "label_config": label_config,
            "expert_instruction": _instructions_html(config.instructions),
            "show_instruction": True,
            "maximum_annotations": config.annotations_per_item,
            "overlap_cohort_percentage": 100,
            "show_skip_button": True,
        }
        return self._project(self.request("POST", "/api/projects", json=body))

    def set_annotations_per_item(self, project: Project, n: int) -> bool:
        """Ask N annotations per task (N is not part of the config hash: raising it keeps the project); True when
        it changed."""
        current = self.request("GET", f"/api/projects/{project.id}")
        if current.get("maximum_annotations") == n:
            return False
        self.request("PATCH", f"/api/projects/{project.id}", json={"maximum_annotations": n})
        return True

    # -- tasks and annotations

    def tasks(self, project: Project) -> Iterator[dict[str, Any]]:
        """Every task of the project with its data (not its annotations)."""
        page, seen = 1, 0
        while True:
            answer = self.request(
                "GET", "/api/tasks", params={"project": project.id, "page": page, "page_size": PAGE_SIZE}
            )
            found = answer.get("tasks", [])
            yield from found
            seen += len(found)
            if not found or seen >= int(answer.get("total", 0)):
                return
            page += 1

    def item_ids(self, project: Project) -> set[str]:
        return {str(t["data"]["item_id"]) for t in self.tasks(project) if (t.get("data") or {}).get("item_id")}

    def import_tasks(self, project: Project, data: list[dict[str, Any]]) -> int:
        imported = 0
        for start in range(0, len(data), IMPORT_BATCH):
            batch = data[start : start + IMPORT_BATCH]
            answer = self.request("POST", f"/api/projects/{project.id}/import", json=batch)
            imported += int((answer or {}).get("task_count", len(batch)))
        return imported

    def annotated_tasks(self, project: Project) -> list[dict[str, Any]]:
        """The project's tasks that have annotations, each with its annotations (Label Studio's JSON export)."""
        return self.request("GET", f"/api/projects/{project.id}/export", params={"exportType": "JSON"}) or []

    def user_emails(self) -> dict[int, str]:
        return {int(u["id"]): u.get("email") or "" for u in self.request("GET", "/api/users") or []}


def _detail(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text
    if isinstance(body, dict):
        return str(body.get("detail") or body.get("validation_errors") or body)
    return str(body)


def _instructions_html(text: str) -> str:
    escaped = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return f'<pre style="white-space: pre-wrap">{escaped}</pre>'


# ---- annotations back --------------------------------------------------------------------------------------


def result_labels(result: list[dict[str, Any]], config: AnnotationTaskConfig) -> dict[str, Any]:
    """criterion -> the raw label of one annotation's result, as the import reads labels: a choice (a list when
    several were picked: the import rejects it as not one label), a number, text, or a ranking best first (the
    choice at each place; a place left empty leaves the ranking short, which the import rejects). A control
    that is not a criterion of the task keeps its name, and the import quarantines it as an unknown criterion."""
    labels: dict[str, Any] = {}
    places: dict[str, dict[int, Any]] = {}
    for region in result or []:
        name, value = str(region.get("from_name", "")), region.get("value") or {}
        label = _region_label(value)
        if label is None:
            continue
        criterion, _, place = name.partition(RANK_MARK)
        if place.isdigit() and criterion in config.criteria:
            places.setdefault(criterion, {})[int(place)] = label
        else:
            labels[name] = label
    for criterion, chosen in places.items():
        labels[criterion] = [chosen[k] for k in sorted(chosen)]
    return labels


def _region_label(value: dict[str, Any]) -> Any:
    if "choices" in value:
        choices = value["choices"]
        return choices[0] if isinstance(choices, list) and len(choices) == 1 else choices
    if "rating" in value:
        return value["rating"]
    if "number" in value:
        return value["number"]
    if "text" in value:
        text = value["text"]
        return "\n".join(str(t) for t in text) if isinstance(text, list) else text
    return None


def annotation_rows(
    tasks: list[dict[str, Any]], config: AnnotationTaskConfig, emails: dict[int, str], project: Project
) -> tuple[list[dict[str, Any]], int]:
    """(rows in the human_annotations import format, annotations skipped in the tool) of an export."""
    rows, skipped = [], 0
    for task in tasks:
        data = task.get("data") or {}
        for annotation in task.get("annotations") or []:
            if annotation.get("was_cancelled"):
                skipped += 1
                continue
            user = annotation.get("completed_by")
            user_id = user.get("id") if isinstance(user, dict) else user
            annotator = emails.get(int(user_id)) if user_id is not None else None
            rows.append(
                {
                    "task": config.name,
                    "item_id": data.get("item_id"),
                    "trace_id": data.get("trace_id"),
                    "annotator": annotator or (f"label-studio-user-{user_id}" if user_id is not None else None),
                    "labels": result_labels(annotation.get("result") or [], config),
                    "annotated_at": annotation.get("created_at"),
                    "lead_time_s": annotation.get("lead_time"),
                    "metadata": {
                        "label_studio": {
                            "project": project.id,
                            "task": task.get("id"),
                            "annotation": annotation.get("id"),
                            "updated_at": annotation.get("updated_at"),
                        }
                    },
                }
            )
    rows.sort(key=lambda r: (r["metadata"]["label_studio"]["task"] or 0, r["metadata"]["label_studio"]["annotation"]))
    return rows, skipped
