"""The Dagster instance files the package ships (see `eval_platform.instance_config`)."""
