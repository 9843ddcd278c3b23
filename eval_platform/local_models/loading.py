"""A model folder on this machine, loaded once per process: never a download, never code from the folder.

A folder is either what transformers' `save_pretrained` writes (config.json, the weights, the tokenizer files) or
a sentence-transformers model folder (modules.json beside them, its pooling in `1_Pooling/config.json`). It is
read with `local_files_only=True` and `trust_remote_code=False`, and its existence is checked first, so a wrong
path is an error naming it, never a name transformers would look up on a model hub.

torch and transformers are imported on first use: the platform imports without them (the `local-models` extra).
"""

from __future__ import annotations

import importlib.util
import json
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

EXTRA = "local-models"
_PACKAGES = ("torch", "transformers")


class LocalModelError(ValueError):
    """A local model that cannot be used: the message names the folder (or the package) and what is wrong.

    A ValueError, so a benchmark row or a check it scores is FAILED with this reason, never scored 0."""


class MissingLocalModelPackages(LocalModelError):
    """torch or transformers is not installed."""


def missing_packages() -> list[str]:
    """The packages local models need that are not installed (without importing them: cheap at config load)."""
    return [name for name in _PACKAGES if importlib.util.find_spec(name) is None]


def _install_hint(missing: list[str]) -> str:
    return (
        f"local models need {' and '.join(missing)}, not installed: pip install 'eval_platform[{EXTRA}]' "
        "(or the pinned versions from requirements.lock)"
    )


def check_installed() -> None:
    """`MissingLocalModelPackages` naming the extra to install when torch or transformers is missing."""
    missing = missing_packages()
    if missing:
        raise MissingLocalModelPackages(_install_hint(missing))


def require_packages() -> tuple[Any, Any]:
    """(torch, transformers), imported; `MissingLocalModelPackages` naming the extra to install otherwise."""
    check_installed()
    import torch
    import transformers

    return torch, transformers


# What a sentence-transformers Pooling module can do, in the order it concatenates several modes.
POOLING_MODES = ("cls", "max", "mean", "mean_sqrt_len_tokens", "weightedmean", "lasttoken")
_LEGACY_POOLING_KEYS = {
    "pooling_mode_cls_token": "cls",
    "pooling_mode_max_tokens": "max",
    "pooling_mode_mean_tokens": "mean",
    "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len_tokens",
    "pooling_mode_weightedmean_tokens": "weightedmean",
    "pooling_mode_lasttoken": "lasttoken",
}
DEFAULT_POOLING = "mean over the attention mask (no sentence-transformers pooling config in the folder)"


@dataclass(frozen=True)
class FolderLayout:
    """What a model folder holds, read from its JSON files only (no torch): cheap enough for config validation."""

    folder: Path  # the folder the user named, resolved
    transformer: Path  # the folder of the transformers model and its tokenizer (the same, or a module's subfolder)
    num_hidden_layers: int | None
    pooling: tuple[str, ...]  # sentence embedding pooling modes, concatenated in this order
    pooling_source: str  # where `pooling` comes from, for messages and the README
    normalize: bool  # a sentence-transformers Normalize module: unit-length sentence embeddings
    max_seq_length: int | None  # sentence-transformers' truncation length, when its config gives one
    do_lower_case: bool
    prompt: str  # sentence-transformers' default prompt, prepended to each text


def _read_json(path: Path, folder: str) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise LocalModelError(f"model_path '{folder}': cannot read {path.name}: {exc}") from None


def _pooling(config: dict, where: Path, folder: str) -> tuple[str, ...]:
    if "pooling_mode" in config:
        raw = config["pooling_mode"]
        modes = (raw,) if isinstance(raw, str) else tuple(raw)
    else:  # sentence-transformers before 6: one boolean per mode
        modes = tuple(mode for key, mode in _LEGACY_POOLING_KEYS.items() if config.get(key))
        modes = modes or ("mean",)
    unknown = [mode for mode in modes if mode not in POOLING_MODES]
    if unknown:
        raise LocalModelError(
            f"model_path '{folder}': {where.name} in {where.parent.name}: unknown pooling mode(s) {unknown}; "
            f"known: {list(POOLING_MODES)}"
        )
    if config.get("include_prompt", True) is False:
        raise LocalModelError(
            f"model_path '{folder}': {where.parent.name}/config.json excludes the prompt from pooling "
            "(include_prompt: false), which is not supported here"
        )
    return modes


def read_layout(model_path: str) -> FolderLayout:
    """The folder's layout; `LocalModelError` naming the path when it is missing or not a model folder."""
    folder = Path(model_path).expanduser()
    if not folder.is_dir():
        raise LocalModelError(
            f"model_path '{model_path}': no such folder (a local model is read from a folder on this machine, "
            "never downloaded: save or copy the model there first)"
        )
    folder = folder.resolve()
    transformer = folder
    pooling: tuple[str, ...] = ("mean",)
    pooling_source = DEFAULT_POOLING
    normalize = False
    max_seq_length = None
    do_lower_case = False
    prompt = ""
    modules_file = folder / "modules.json"
    if modules_file.is_file():  # a sentence-transformers model folder
        modules = _read_json(modules_file, model_path)
        for module in modules:
            kind = str(module.get("type", "")).rsplit(".", 1)[-1]
            path = folder / module.get("path", "")
            if kind == "Transformer":
                transformer = path
                settings = path / "sentence_bert_config.json"
                if settings.is_file():
                    config = _read_json(settings, model_path)
                    max_seq_length = config.get("max_seq_length")
                    do_lower_case = bool(config.get("do_lower_case", False))
            elif kind == "Pooling":
                pooling = _pooling(_read_json(path / "config.json", model_path), path / "config.json", model_path)
                pooling_source = f"sentence-transformers pooling in {path.relative_to(folder)}/config.json"
            elif kind == "Normalize":
                normalize = True
            else:
                raise LocalModelError(
                    f"model_path '{model_path}': modules.json has a {module.get('type')} module "
                    f"('{module.get('path')}'), which is not supported here (only Transformer, Pooling and "
                    "Normalize): its embeddings would not be the model's"
                )
        settings = folder / "config_sentence_transformers.json"
        if settings.is_file():
            config = _read_json(settings, model_path)
            name = config.get("default_prompt_name")
            if name:
                prompt = (config.get("prompts") or {}).get(name, "")
    config_file = transformer / "config.json"
    if not config_file.is_file():
        raise LocalModelError(
            f"model_path '{model_path}': no config.json in {transformer}: not a transformers model folder (one "
            "written by save_pretrained, or a sentence-transformers model folder)"
        )
    config = _read_json(config_file, model_path)
    layers = config.get("num_hidden_layers")
    return FolderLayout(
        folder=folder,
        transformer=transformer,
        num_hidden_layers=layers if isinstance(layers, int) else None,
        pooling=pooling,
        pooling_source=pooling_source,
        normalize=normalize,
        max_seq_length=max_seq_length,
        do_lower_case=do_lower_case,
        prompt=prompt,
    )


@dataclass(frozen=True)
class LocalModel:
    """A loaded model (eval mode, CPU) with its tokenizer and folder layout."""

    layout: FolderLayout
    model: Any
    tokenizer: Any
    max_length: int  # tokens per text, special tokens included; longer texts are truncated

    @property
    def num_layers(self) -> int:
        return int(self.model.config.num_hidden_layers)


_LOADED: dict[Path, LocalModel] = {}
_LOCK = threading.Lock()


def load_model(model_path: str) -> LocalModel:
    """The model in `model_path`, loaded on first use and kept for the process (one copy per folder)."""
    layout = read_layout(model_path)
    with _LOCK:
        loaded = _LOADED.get(layout.folder)
        if loaded is None:
            loaded = _LOADED[layout.folder] = _load(model_path, layout)
    return loaded


def _load(model_path: str, layout: FolderLayout) -> LocalModel:
    _torch, transformers = require_packages()
    source = str(layout.transformer)
    try:
        tokenizer = transformers.AutoTokenizer.from_pretrained(source, local_files_only=True, trust_remote_code=False)
        model = transformers.AutoModel.from_pretrained(source, local_files_only=True, trust_remote_code=False)
    except Exception as exc:  # noqa: BLE001 - a corrupt weights file raises safetensors' own error, among others
        raise LocalModelError(
            f"model_path '{model_path}': cannot load the model in {source}: {type(exc).__name__}: {exc}"
        ) from None
    model.eval()
    # The tokenizer's own limit is often unset (a huge number); the position embeddings are the real one.
    limits = [getattr(tokenizer, "model_max_length", None), getattr(model.config, "max_position_embeddings", None)]
    if layout.max_seq_length:
        limits.append(layout.max_seq_length)
    usable = [int(limit) for limit in limits if isinstance(limit, int) and 0 < limit < 1_000_000]
    if not usable:
        raise LocalModelError(f"model_path '{model_path}': no maximum sequence length in its tokenizer or config")
    return LocalModel(layout=layout, model=model, tokenizer=tokenizer, max_length=min(usable))
