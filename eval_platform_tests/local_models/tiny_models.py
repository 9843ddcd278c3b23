"""Tiny models the tests build themselves (nothing downloaded): a 2-layer BERT with hidden size 32, random weights
from a fixed seed and a WordPiece vocabulary of the tests' own words, saved as `save_pretrained` saves a model;
and sentence-transformers folders around it, written by the sentence-transformers package itself."""

from __future__ import annotations

import json
from pathlib import Path

WORDS = (
    "the a an cat dog fox bird sat on mat rug quick brown jumps over lazy ran fast slow red blue green big small "
    "answer is 18 village name old man hills rivers nobody knew of that somewhere far beyond and two how many"
).split()
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS, "##s", "##ed", "##ing", ".", ",", "?"]
HIDDEN = 32
LAYERS = 2


def build_tiny_bert(folder: Path, seed: int = 0) -> Path:
    """A BERT model folder (config.json, model.safetensors, tokenizer files) in `folder`."""
    import torch
    from transformers import BertConfig, BertModel, BertTokenizer

    folder.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(seed)
    config = BertConfig(
        vocab_size=len(VOCAB),
        hidden_size=HIDDEN,
        num_hidden_layers=LAYERS,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
    )
    BertModel(config).eval().save_pretrained(folder)
    tokenizer = BertTokenizer(vocab={token: index for index, token in enumerate(VOCAB)}, model_max_length=64)
    tokenizer.save_pretrained(folder)
    (folder / "vocab.txt").write_text("\n".join(VOCAB) + "\n")  # what older BERT folders carry beside tokenizer.json
    return folder


def build_sentence_transformers(folder: Path, bert: Path, pooling: str | tuple[str, ...], normalize: bool) -> Path:
    """A sentence-transformers model folder over the tiny BERT, saved by sentence-transformers."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.base.modules.normalize import Normalize
    from sentence_transformers.base.modules.transformer import Transformer
    from sentence_transformers.sentence_transformer.modules import Pooling

    transformer = Transformer(str(bert))
    modules = [transformer, Pooling(transformer.get_embedding_dimension(), pooling_mode=pooling)]
    if normalize:
        modules.append(Normalize())
    # no model card: writing one looks the base model up on the hub
    SentenceTransformer(modules=modules, device="cpu").save(str(folder), create_model_card=False)
    return folder


def rewrite_as_legacy(folder: Path) -> None:
    """The same model in the layout sentence-transformers wrote before version 6 (how most downloaded models
    are laid out): `sentence_transformers.models.*` module types, one boolean per pooling mode,
    sentence_bert_config.json with max_seq_length and do_lower_case."""
    modules = json.loads((folder / "modules.json").read_text())
    for module in modules:
        module["type"] = "sentence_transformers.models." + module["type"].rsplit(".", 1)[-1]
    (folder / "modules.json").write_text(json.dumps(modules))
    pooling_file = folder / "1_Pooling" / "config.json"
    pooling = json.loads(pooling_file.read_text())
    modes = (pooling["pooling_mode"],) if isinstance(pooling["pooling_mode"], str) else pooling["pooling_mode"]
    legacy = {"word_embedding_dimension": pooling["embedding_dimension"]}
    for key, mode in (
        ("pooling_mode_cls_token", "cls"),
        ("pooling_mode_mean_tokens", "mean"),
        ("pooling_mode_max_tokens", "max"),
        ("pooling_mode_mean_sqrt_len_tokens", "mean_sqrt_len_tokens"),
        ("pooling_mode_weightedmean_tokens", "weightedmean"),
        ("pooling_mode_lasttoken", "lasttoken"),
    ):
        legacy[key] = mode in modes
    pooling_file.write_text(json.dumps(legacy))
    (folder / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 64, "do_lower_case": False}))
