"""Fine-tuning data: the day's traces that pass declared evaluator thresholds, as chat-format JSONL."""
