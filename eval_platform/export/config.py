"""Where verdicts are exported: `<data root>/verdict_export.yaml`. Without the file (or with no destination)
nothing is exported: the export is off by default.

    destinations:
      - name: collector
        type: otlp                      # OpenTelemetry GenAI evaluation events over OTLP/HTTP (export/otlp.py)
        endpoint: http://collector:4318 # /v1/logs is appended
        headers_env: OTEL_EXPORT_HEADERS  # optional: `key=value,...` headers (an API key) from this variable
      - name: phoenix
        type: phoenix                   # Arize Phoenix span annotations (export/phoenix.py)
        url: http://phoenix:6006
        api_key_env: PHOENIX_API_KEY    # optional, when Phoenix's auth is on
        evaluators: [helpfulness]       # optional: only these evaluators' verdicts

Validated like every config file (pydantic, `extra="forbid"`, errors naming the file and the field). Secrets are
never in the file: it names the environment variables holding them, read when a batch is sent.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, model_validator

from eval_platform.config_files import read_mapping, validate
from eval_platform.export.registry import AnyDestination
from eval_platform.strict import Strict

EXPORT_FILE = "verdict_export.yaml"


class ExportConfigError(ValueError):
    """A broken verdict_export.yaml: the message names the file and the field."""


class ExportConfig(Strict):
    destinations: list[AnyDestination] = Field(default_factory=list)
    retry_interval_s: int = Field(
        300, ge=30, le=86_400, description="How often the retry sensor looks for verdicts recorded failed."
    )
    max_automatic_attempts: int = Field(
        5, ge=1, le=100, description="The sensor retries a verdict's export until it was tried this many times."
    )

    @model_validator(mode="after")
    def _unique_names(self) -> ExportConfig:
        names = [destination.name for destination in self.destinations]
        repeated = sorted({name for name in names if names.count(name) > 1})
        if repeated:
            raise ValueError(f"destination names must be unique: {repeated} appear more than once")
        return self


def load_export_config(root: Path) -> ExportConfig | None:
    """The data root's verdict_export.yaml, or None when there is none (the export is off)."""
    path = root / EXPORT_FILE
    if not path.is_file():
        return None
    raw = read_mapping(path, ExportConfigError, "a mapping with `destinations`")
    return validate(path, ExportConfig, raw, ExportConfigError)
