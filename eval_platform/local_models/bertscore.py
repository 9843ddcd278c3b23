"""BERTScore (Zhang et al., 2020, "BERTScore: Evaluating Text Generation with BERT") from a local model folder.

Each text is encoded as the reference implementation (the `bert-score` package) encodes it: stripped, with the
tokenizer's special tokens, truncated to the model's length; its tokens are the contextual embeddings of one layer
(`num_layers`: the output of that many transformer layers; by default all of them). Each candidate token is
matched greedily to its most similar reference token by cosine (precision), each reference token to its most
similar candidate token (recall), and F1 is their harmonic mean. Token weights are 1, or with `idf` the inverse
document frequency over the references, log((M + 1) / (df + 1)) for a token in df of the M references and
log(M + 1) for a token in none; the [CLS]/[SEP] tokens (the tokenizer's cls and sep tokens) weigh 0, as in
the package: they are matched against but never counted. Against several references a candidate takes the best
value of each of P, R and F1 separately (as the package does).

Where it differs from the package: the greedy match is over a pair's own tokens only. The package pads a batch of
pairs and zeroes the padding's similarity, so a token whose every similarity is negative scores 0 rather than its
best (negative) similarity, depending on which other pairs share its batch. An empty candidate or reference
scores 0 on all three, as there. No baseline rescaling: the package ships baselines for its named hub models
only and downloads none for a model folder (README "BERTScore").
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from eval_platform.local_models.loading import LocalModel, LocalModelError, load_model, require_packages

# Texts per forward pass, and candidates whose texts are embedded together before they are matched: what bounds
# memory (a batch's activations of every layer, a chunk's token embeddings), not the number of pairs.
DEFAULT_BATCH_SIZE = 16
_PAIRS_PER_CHUNK = 64


@dataclass(frozen=True)
class BertScore:
    precision: float
    recall: float
    f1: float

    def metric(self, name: str) -> float:
        return {"precision": self.precision, "recall": self.recall, "f1": self.f1}[name]


@dataclass(frozen=True)
class IdfWeights:
    """Token id -> idf over a set of references (the package's `get_idf_dict`)."""

    by_token: Mapping[int, float]
    unseen: float  # a token in none of the references: log(M + 1)

    def __getitem__(self, token: int) -> float:
        return self.by_token.get(token, self.unseen)


def encode(model: LocalModel, text: str) -> list[int]:
    """The token ids the package scores `text` by (its `sent_encode`): stripped, with special tokens."""
    _, transformers = require_packages()
    tokenizer = model.tokenizer
    text = text.strip()
    if not text:  # the special tokens alone (the package's `build_inputs_with_special_tokens([])`)
        return list(tokenizer.encode("", add_special_tokens=True))
    extra = {}
    if isinstance(tokenizer, transformers.GPT2Tokenizer | transformers.RobertaTokenizer):
        extra["add_prefix_space"] = True  # byte-level BPE: a word's first piece as inside a sentence
    return list(tokenizer.encode(text, add_special_tokens=True, max_length=model.max_length, truncation=True, **extra))


def idf_weights(model_path: str, references: Sequence[str]) -> IdfWeights:
    """Inverse document frequencies of the references' tokens, the reference implementation's formula."""
    model = load_model(model_path)
    documents = Counter(token for reference in references for token in set(encode(model, reference)))
    total = len(references)
    return IdfWeights(
        by_token={token: math.log((total + 1) / (count + 1)) for token, count in documents.items()},
        unseen=math.log(total + 1),
    )


def check_layers(model: LocalModel, num_layers: int | None) -> int:
    layers = model.num_layers
    if num_layers is None:
        return layers
    if not 0 <= num_layers <= layers:
        raise LocalModelError(
            f"model_path '{model.layout.folder}': num_layers {num_layers} is not between 0 and the model's {layers}"
        )
    return num_layers


def _token_embeddings(model: LocalModel, encoded: Sequence[list[int]], layer: int, batch_size: int) -> list[Any]:
    """Per text, its tokens' embeddings from `layer` (tokens x dim, unit length, float64)."""
    torch, _ = require_packages()
    pad = model.tokenizer.pad_token_id if model.tokenizer.pad_token_id is not None else 0
    out: list[Any] = []
    with torch.inference_mode():
        for start in range(0, len(encoded), batch_size):
            batch = encoded[start : start + batch_size]
            width = max(len(ids) for ids in batch)
            ids = torch.full((len(batch), width), pad, dtype=torch.long)
            mask = torch.zeros((len(batch), width), dtype=torch.long)
            for row, tokens in enumerate(batch):
                ids[row, : len(tokens)] = torch.tensor(tokens, dtype=torch.long)
                mask[row, : len(tokens)] = 1
            if layer == model.num_layers:  # the model's output, as the package's model cut to `layer` layers gives
                states = model.model(input_ids=ids, attention_mask=mask).last_hidden_state
            else:  # hidden_states[0] is the embedding layer's output, [k] the k-th layer's
                states = model.model(input_ids=ids, attention_mask=mask, output_hidden_states=True).hidden_states[layer]
            for row, tokens in enumerate(batch):
                vectors = states[row, : len(tokens)].double().numpy()
                out.append(vectors / np.linalg.norm(vectors, axis=1, keepdims=True))
    return out


def _weights(model: LocalModel, ids: list[int], idf: IdfWeights | None) -> np.ndarray:
    if idf is not None:
        return np.array([idf[token] for token in ids])
    special = {model.tokenizer.cls_token_id, model.tokenizer.sep_token_id}
    return np.array([0.0 if token in special else 1.0 for token in ids])


def _pair(candidate: tuple[Any, np.ndarray], reference: tuple[Any, np.ndarray], where: str) -> BertScore:
    (c_embeddings, c_weights), (r_embeddings, r_weights) = candidate, reference
    similarity = c_embeddings @ r_embeddings.T
    if c_weights.sum() <= 0 or r_weights.sum() <= 0:
        raise LocalModelError(
            f"{where}: every token weighs 0 (with idf: each of its tokens is in every reference); "
            "idf needs references that differ, or use idf: false"
        )
    precision = float(c_weights @ similarity.max(axis=1) / c_weights.sum())
    recall = float(r_weights @ similarity.max(axis=0) / r_weights.sum())
    f1 = 2 * precision * recall / (precision + recall) if precision + recall != 0 else 0.0
    return BertScore(precision, recall, f1)


def bertscore(
    model_path: str,
    candidates: Sequence[str],
    references: Sequence[Sequence[str]],
    num_layers: int | None = None,
    idf: IdfWeights | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
) -> list[BertScore]:
    """BERTScore of each candidate against its references (a list per candidate: the best of each metric)."""
    if len(candidates) != len(references):
        raise ValueError(f"{len(candidates)} candidates but {len(references)} reference lists")
    if any(not refs for refs in references):
        raise ValueError("a candidate has no reference")
    model = load_model(model_path)
    layer = check_layers(model, num_layers)
    scores: list[BertScore] = []
    for start in range(0, len(candidates), _PAIRS_PER_CHUNK):
        chunk_candidates = candidates[start : start + _PAIRS_PER_CHUNK]
        chunk_references = references[start : start + _PAIRS_PER_CHUNK]
        texts = sorted({*chunk_candidates, *(r for refs in chunk_references for r in refs)}, key=lambda t: (len(t), t))
        encoded = [encode(model, text) for text in texts]
        embeddings = _token_embeddings(model, encoded, layer, batch_size)
        tokens = {
            text: (vectors, _weights(model, ids, idf))
            for text, ids, vectors in zip(texts, encoded, embeddings, strict=True)
        }
        for offset, (candidate, refs) in enumerate(zip(chunk_candidates, chunk_references, strict=True)):
            if not candidate.strip():
                scores.append(BertScore(0.0, 0.0, 0.0))
                continue
            per_reference = [
                _pair(tokens[candidate], tokens[ref], f"case {start + offset}")
                if ref.strip()
                else BertScore(0.0, 0.0, 0.0)
                for ref in refs
            ]
            scores.append(
                BertScore(
                    max(s.precision for s in per_reference),
                    max(s.recall for s in per_reference),
                    max(s.f1 for s in per_reference),
                )
            )
    return scores
