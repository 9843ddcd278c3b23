"""Sentence embeddings from a model folder the test builds: shape, determinism, the folder's pooling as
sentence-transformers computes it, and a wrong folder named in the error without any network."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from eval_platform.local_models import LocalModelError, embed_texts
from eval_platform.local_models.loading import DEFAULT_POOLING, load_model, read_layout
from eval_platform_tests.local_models.tiny_models import HIDDEN, build_sentence_transformers, rewrite_as_legacy

TEXTS = ["the cat sat on the mat", "a quick brown fox jumps over the lazy dog", "dogs ran", "the cat sat on the mat"]


def cosine(a, b) -> float:
    a, b = np.asarray(a), np.asarray(b)
    return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))


def test_a_model_folder_gives_one_deterministic_vector_per_text(tiny_bert, network_attempts):
    vectors = embed_texts(str(tiny_bert), TEXTS)
    assert len(vectors) == len(TEXTS) and all(len(v) == HIDDEN for v in vectors)
    assert all(isinstance(x, float) for x in vectors[0])
    assert embed_texts(str(tiny_bert), TEXTS) == vectors  # the same texts, the same vectors
    # A text's vector does not depend on the texts batched with it (padding is masked out of the mean).
    alone = embed_texts(str(tiny_bert), ["dogs ran"])[0]
    assert np.allclose(alone, vectors[2], atol=1e-5)
    assert np.allclose(embed_texts(str(tiny_bert), TEXTS, batch_size=1), vectors, atol=1e-5)
    assert cosine(vectors[0], vectors[3]) == pytest.approx(1.0, abs=1e-6)  # identical texts
    assert cosine(vectors[0], vectors[1]) < 0.999
    assert embed_texts(str(tiny_bert), []) == []
    assert read_layout(str(tiny_bert)).pooling_source == DEFAULT_POOLING
    assert network_attempts == []


def test_a_plain_folder_is_mean_pooled_over_the_attention_mask(tiny_bert):
    import torch
    from transformers import AutoModel, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(tiny_bert))
    model = AutoModel.from_pretrained(str(tiny_bert)).eval()
    with torch.inference_mode():
        for text in TEXTS[:3]:
            states = model(**tokenizer(text, return_tensors="pt")).last_hidden_state[0]
            assert embed_texts(str(tiny_bert), [text])[0] == pytest.approx(states.mean(dim=0).tolist(), abs=1e-6)


def test_the_model_is_loaded_once_per_folder(tiny_bert, monkeypatch):
    first = load_model(str(tiny_bert))
    monkeypatch.chdir(tiny_bert.parent)
    assert load_model(f"{tiny_bert.name}/") is first  # the same folder, spelled otherwise


@pytest.mark.parametrize(
    ("pooling", "normalize"),
    [
        ("mean", True),
        ("cls", False),
        ("max", False),
        ("mean_sqrt_len_tokens", False),
        ("weightedmean", False),
        ("lasttoken", False),
        (("cls", "mean"), True),
    ],
)
def test_a_sentence_transformers_folder_gives_sentence_transformers_vectors(
    tiny_bert, tmp_path, network_attempts, pooling, normalize
):
    from sentence_transformers import SentenceTransformer

    folder = build_sentence_transformers(tmp_path / "st", tiny_bert, pooling, normalize)
    theirs = SentenceTransformer(str(folder), device="cpu", local_files_only=True).encode(TEXTS)
    ours = np.asarray(embed_texts(str(folder), TEXTS))
    assert ours.shape == theirs.shape
    assert np.allclose(ours, theirs, atol=1e-6)
    if normalize:
        assert np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-6)
    assert "1_Pooling/config.json" in read_layout(str(folder)).pooling_source
    # The layout sentence-transformers wrote before version 6 (most downloaded models) reads the same.
    legacy = tmp_path / "legacy"
    shutil.copytree(folder, legacy)
    rewrite_as_legacy(legacy)
    assert np.allclose(embed_texts(str(legacy), TEXTS), theirs, atol=1e-6)
    assert network_attempts == []


def test_a_module_that_would_change_the_vectors_is_refused_not_skipped(tiny_bert, tmp_path):
    folder = build_sentence_transformers(tmp_path / "st", tiny_bert, "mean", False)
    modules = json.loads((folder / "modules.json").read_text())
    modules.append({"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"})
    (folder / "modules.json").write_text(json.dumps(modules))
    with pytest.raises(LocalModelError, match=r"modules.json has a sentence_transformers.models.Dense module"):
        embed_texts(str(folder), ["the cat"])


def test_a_missing_or_broken_folder_is_named_and_nothing_is_fetched(tiny_bert, tmp_path, network_attempts):
    missing = tmp_path / "no-such-model"
    with pytest.raises(LocalModelError, match=f"model_path '{missing}': no such folder .*never downloaded"):
        embed_texts(str(missing), ["the cat"])
    # A hub name is not a folder here: the same error, no lookup of the name anywhere.
    with pytest.raises(LocalModelError, match="model_path 'sentence-transformers/all-MiniLM-L6-v2': no such folder"):
        embed_texts("sentence-transformers/all-MiniLM-L6-v2", ["the cat"])
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(LocalModelError, match=f"model_path '{empty}': no config.json in {empty}"):
        embed_texts(str(empty), ["the cat"])
    broken = tmp_path / "broken"
    shutil.copytree(tiny_bert, broken)
    (broken / "model.safetensors").unlink()
    with pytest.raises(LocalModelError, match=f"model_path '{broken}': cannot load the model in {broken}"):
        embed_texts(str(broken), ["the cat"])
    assert network_attempts == []


def test_the_platform_imports_without_torch_and_says_which_extra_to_install(tiny_bert):
    # torch and transformers made unimportable in a fresh interpreter (None in sys.modules is "not installed").
    code = f"""
import sys
sys.modules["torch"] = sys.modules["transformers"] = None
import eval_platform.definitions
from eval_platform.local_models import MissingLocalModelPackages, embed_texts
from eval_platform.scoring import registry
try:
    embed_texts({str(tiny_bert)!r}, ["the cat"])
except MissingLocalModelPackages as exc:
    print("embed:", exc)
try:
    registry.get("bertscore").options(model_path={str(tiny_bert)!r})
except ValueError as exc:
    print("options:", exc)
"""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 0, run.stderr
    hint = "local models need torch and transformers, not installed: pip install 'eval_platform[local-models]'"
    lines = run.stdout.splitlines()
    assert lines[0] == f"embed: {hint} (or the pinned versions from requirements.lock)"
    assert lines[1].startswith("options: 1 validation error") and hint in run.stdout


def test_importing_the_platform_does_not_import_torch():
    code = "import sys, eval_platform.definitions, eval_platform.local_models, eval_platform.scoring.registry\n"
    code += "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[]"
