"""Judge verdicts produced elsewhere -> `imported_judgments`: the PandaLM recordings, other formats, quarantine."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import polars as pl

from eval_platform.ingest.judgments import read_judgments
from eval_platform.schemas import IMPORTED_JUDGMENT_SCHEMA
from eval_platform_tests.conftest import REPO_DATA


def write(root: Path, name: str, text: str) -> Path:
    path = root / "judgments" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_the_pandalm_recordings_are_imported_verbatim(tmp_path):
    shutil.copytree(REPO_DATA / "judgments", tmp_path / "judgments")
    result = read_judgments(tmp_path)

    frame = result.judgments
    assert result.quarantine.height == 0
    assert frame.schema == pl.Schema(IMPORTED_JUDGMENT_SCHEMA)
    assert frame.height == 1998
    assert result.files == ["judgments/pandalm_gpt-3.5-turbo.jsonl", "judgments/pandalm_pandalm-7b.jsonl"]
    counts = Counter(frame.select("source", "verdict").rows())
    # The published distributions (data/sources/pandalm/PROVENANCE.md).
    gpt, panda = "gpt-3.5-turbo (PandaLM study)", "pandalm-7b (PandaLM study)"
    assert counts == {
        (gpt, "1"): 460,
        (gpt, "2"): 476,
        (gpt, "Tie"): 38,
        (gpt, "garbage"): 25,
        (panda, "0"): 107,
        (panda, "1"): 433,
        (panda, "2"): 459,
    }
    # Each verdict and reason is exactly the recorded one.
    recorded = json.loads((REPO_DATA / "sources/pandalm/gpt-3.5-turbo-testset-v1.json").read_text(encoding="utf-8"))
    rows = {r["item_id"]: r for r in frame.filter(pl.col("source") == gpt).iter_rows(named=True)}
    for entry in recorded:
        row = rows[f"pandalm-{entry['idx']:04d}"]
        assert (row["verdict"], row["reasoning"]) == (entry["gpt_result"], entry["gpt_reason"])
    # A numeric verdict also lands in `value`; "Tie" and "garbage" do not.
    assert frame.filter(pl.col("verdict").is_in(["Tie", "garbage"]))["value"].null_count() == 63
    assert frame.filter(~pl.col("verdict").is_in(["Tie", "garbage"]))["value"].null_count() == 0
    first = frame.row(0, named=True)
    assert (first["response1_trace_id"], first["source_file"], first["source_line"]) == (
        "pandalm-0000-bloom-7b",
        "judgments/pandalm_gpt-3.5-turbo.jsonl",
        1,
    )


def test_other_shapes_scores_and_default_source(tmp_path):
    write(
        tmp_path,
        "phoenix_relevance.csv",
        "item_id,label,score,explanation,judged_at\n"
        'q1,relevant,0.9,"cites the doc,\nverbatim",2026-11-10T09:00:00Z\n'
        "q2,,0.25,,\n",
    )
    write(
        tmp_path,
        "ragas.json",
        json.dumps(
            [
                {
                    "judge": "ragas-faithfulness",
                    "trace_id": "t-9",
                    "criterion": "faithfulness",
                    "score": 1,
                    "tags": ["x"],
                },
                {"judge": "ragas-faithfulness", "trace_id": "t-10", "criterion": "faithfulness", "verdict": True},
            ]
        ),
    )
    result = read_judgments(tmp_path)
    assert result.quarantine.height == 0, result.quarantine.to_dicts()
    got = result.judgments.select("source", "item_id", "criterion", "verdict", "value", "reasoning", "trace_id").rows()
    assert got == [
        ("phoenix_relevance", "q1", None, "relevant", 0.9, "cites the doc,\nverbatim", None),
        ("phoenix_relevance", "q2", None, "0.25", 0.25, None, None),
        ("ragas-faithfulness", "t-9", "faithfulness", "1", 1.0, None, "t-9"),
        ("ragas-faithfulness", "t-10", "faithfulness", "true", None, None, "t-10"),
    ]
    assert result.judgments["judged_at"][0].isoformat() == "2026-11-10T09:00:00+00:00"
    assert json.loads(result.judgments["metadata"][2]) == {"tags": ["x"]}


def test_bad_rows_are_quarantined_with_file_line_and_reason(tmp_path):
    good = {"source": "s", "item_id": "i1", "verdict": "A"}
    write(
        tmp_path,
        "bad.jsonl",
        "\n".join(
            json.dumps(row) if not isinstance(row, str) else row
            for row in [
                good,  # 1 kept
                {"source": "s", "verdict": "A"},  # 2 no item
                {"source": "s", "item_id": "i2"},  # 3 no verdict, no score
                {"source": "s", "item_id": "i3", "score": "high"},  # 4 score not a number
                {"source": "s", "item_id": "i4", "verdict": {"winner": "A"}},  # 5 verdict not a scalar
                good,  # 6 duplicate of line 1
                "{broken",  # 7
                {"source": "s", "item_id": "i5", "verdict": "B", "judged_at": "last week"},  # 8
            ]
        )
        + "\n",
    )
    write(tmp_path, "empty.json", "")
    result = read_judgments(tmp_path)

    assert result.judgments.select("source", "item_id", "verdict").rows() == [("s", "i1", "A")]
    reasons = {(r["reason"], r["file"], r["line"]) for r in result.quarantine.iter_rows(named=True)}
    file = "judgments/bad.jsonl"
    assert reasons == {
        ("missing_field:item_id", file, 2),
        ("missing_field:verdict", file, 3),
        ("invalid_type:score", file, 4),
        ("invalid_type:verdict", file, 5),
        ("duplicate_judgment", file, 6),
        ("invalid_json", file, 7),
        ("invalid_timestamp", file, 8),
        ("invalid_json", "judgments/empty.json", None),
    }
    detail = result.quarantine.filter(pl.col("line") == 6)["detail"][0]
    assert detail == f"{file} line 6: 's' already judged item 'i1' in {file} line 1; the first occurrence is kept"
    assert set(result.quarantine["source"]) == {"imported_judgments"}
