"""An S3-compatible server on 127.0.0.1 for the warehouse-on-object-storage tests (see s3_server.py)."""

from __future__ import annotations

import pytest

from eval_platform_tests.s3_server import S3Server


@pytest.fixture(scope="session")
def s3_server():
    server = S3Server()
    server.start()
    yield server
    server.stop()
