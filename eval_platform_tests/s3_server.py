"""An S3-compatible server for the tests, started by the suite on 127.0.0.1: moto's (`moto[server]`, from PyPI).

`ThreadedMotoServer` runs moto's S3 in a thread of the test process on a free port: no binary to download, no
port to guess, stopped with the session. What the warehouse relies on is S3's own behaviour, which moto's S3
backend implements: a PUT replaces an object whole, a multipart upload's object appears only when the upload is
completed, listings (ListObjectsV2) show only complete objects.

`StallingProxy` stands between a writer and the server: it forwards what clients send up to a number of bytes,
then stops reading from them, so the writer is blocked in the middle of an upload (a stalled link), deterministically
and with no sleep: the test then kills it.
"""

from __future__ import annotations

import logging
import socket
import threading

import pyarrow.fs as pafs

ACCESS_KEY_ID = "eval-platform-test"
# Only this test suite's server knows it; the leak test searches every file and log for 8-character pieces of it.
SECRET_ACCESS_KEY = "Wq7Zk3Rv9Xm2Tb8Ny4Lp6Hs1Jd5Fg0Ca3Ue7Oi9Ky2"
REGION = "us-east-1"


class S3Server:
    def __init__(self) -> None:
        from moto.server import ThreadedMotoServer

        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise
        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self.host, self.port = "127.0.0.1", 0

    def start(self) -> None:
        self._server.start()
        self.host, self.port = self._server.get_host_and_port()

    def stop(self) -> None:
        self._server.stop()

    @property
    def endpoint_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def env(self, url: str, endpoint_url: str | None = None) -> dict[str, str]:
        """The environment that puts a data root's warehouse at `url` on this server."""
        return {
            "EVAL_PLATFORM_WAREHOUSE_URL": url,
            "AWS_ENDPOINT_URL": endpoint_url or self.endpoint_url,
            "AWS_REGION": REGION,
            "AWS_ACCESS_KEY_ID": ACCESS_KEY_ID,
            "AWS_SECRET_ACCESS_KEY": SECRET_ACCESS_KEY,
        }

    def filesystem(self) -> pafs.S3FileSystem:
        """The test's own view of the server (listing what is really there, creating buckets)."""
        return pafs.S3FileSystem(
            access_key=ACCESS_KEY_ID,
            secret_key=SECRET_ACCESS_KEY,
            region=REGION,
            endpoint_override=f"{self.host}:{self.port}",
            scheme="http",
            allow_bucket_creation=True,
        )

    def create_bucket(self, name: str) -> str:
        self.filesystem().create_dir(name)
        return name

    def objects(self, prefix: str) -> dict[str, int]:
        """Every object (complete upload) under `bucket/prefix`: its key and size."""
        selector = pafs.FileSelector(prefix, recursive=True, allow_not_found=True)
        infos = self.filesystem().get_file_info(selector)
        return {i.path: i.size for i in infos if i.type == pafs.FileType.File}

    def incomplete_uploads(self, bucket: str) -> list[str]:
        """The keys of multipart uploads begun and neither completed nor aborted."""
        import boto3

        client = boto3.client(
            "s3",
            endpoint_url=self.endpoint_url,
            region_name=REGION,
            aws_access_key_id=ACCESS_KEY_ID,
            aws_secret_access_key=SECRET_ACCESS_KEY,
        )
        return [upload["Key"] for upload in client.list_multipart_uploads(Bucket=bucket).get("Uploads", [])]


class StallingProxy:
    """A TCP proxy to `target` that forwards the first `limit` bytes clients send (all connections together),
    then stops reading from them and sets `stalled`. `received` counts the bytes it passed back to clients (what
    a reader downloaded)."""

    def __init__(self, target: tuple[str, int], limit: int) -> None:
        self.target, self.limit = target, limit
        self.forwarded = self.received = 0
        self.stalled = threading.Event()
        self._closing = threading.Event()
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def endpoint_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while not self._closing.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            with self._lock:
                self._sockets += [client, upstream]
            threading.Thread(target=self._up, args=(client, upstream), daemon=True).start()
            threading.Thread(target=self._down, args=(upstream, client), daemon=True).start()

    def _up(self, client: socket.socket, upstream: socket.socket) -> None:
        try:
            while True:
                with self._lock:
                    allowed = self.limit - self.forwarded
                if allowed <= 0:
                    self.stalled.set()
                    self._closing.wait()  # stop reading: the client's sends block once its buffers are full
                    return
                data = client.recv(min(65536, allowed))
                if not data:
                    return
                with self._lock:
                    self.forwarded += len(data)
                upstream.sendall(data)
        except OSError:
            return

    def _down(self, upstream: socket.socket, client: socket.socket) -> None:
        try:
            while data := upstream.recv(65536):
                with self._lock:
                    self.received += len(data)
                client.sendall(data)
        except OSError:
            return

    def close(self) -> None:
        self._closing.set()
        self._listener.close()
        with self._lock:
            for sock in self._sockets:
                sock.close()
