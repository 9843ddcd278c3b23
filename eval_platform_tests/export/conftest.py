"""The export tests' receivers (servers.py): a Rotel collector per test, a Phoenix server per session."""

from eval_platform_tests.export.servers import collector, phoenix_server

__all__ = ["collector", "phoenix_server"]
