"""Recorded judge outputs published by others, replayed through our parser and verdict logic."""
