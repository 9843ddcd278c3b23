"""eval_platform: LLM-as-judge evaluation on Dagster, with results in Parquet and DuckDB."""

import os

# litellm fetches its model price map from the network on import unless told otherwise.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
