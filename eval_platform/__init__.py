"""eval_platform: LLM-as-judge evaluation on Dagster, with results in Parquet and DuckDB."""

import os

from eval_platform.llm.redaction import install_log_redaction

# litellm fetches its model price map from the network on import unless told otherwise.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
# Every process that imports the platform (Dagster's run and step processes, the dry run, tests) logs and prints
# through the key redaction: no log line or warning carries a provider key.
install_log_redaction()
