"""Models read from a folder on this machine: sentence embeddings and BERTScore, on CPU, never downloaded.

torch and transformers (the `local-models` extra) are imported on first use, so the platform imports without
them; using a local model without them is a `MissingLocalModelPackages` error naming the extra to install.
"""

from __future__ import annotations

from eval_platform.local_models.embeddings import embed_texts
from eval_platform.local_models.loading import LocalModelError, MissingLocalModelPackages

__all__ = ["LocalModelError", "MissingLocalModelPackages", "embed_texts"]
