"""The built-in evaluator templates `eval-platform init` starts from (one YAML file each)."""
