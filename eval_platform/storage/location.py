"""Where the warehouse's Parquet files live: a folder on local disk (the default) or an S3-compatible bucket.

Both stores answer the same few questions for `warehouse.py` (write a file whole, read one, list a table's
files, name a location for polars and DuckDB), so every asset reads and writes through the same functions
whichever store holds the data.

- `LocalStore`: `<data root>/warehouse`. A file is written to a temporary name in its folder and renamed over
  the old one (`os.replace`): a reader sees the old file or the new one.
- `S3Store`: `s3://bucket/prefix`, written with pyarrow's S3 filesystem. An object store has no rename; its
  atomic step is the put itself: an object becomes visible only when its upload completes (a single PUT, or
  CompleteMultipartUpload for a large one), and then replaces the previous version whole. The Parquet file is
  first written to a local temporary file, then handed to the upload in one call, so no Python code runs
  between the first part sent and the last: an exception while encoding uploads nothing, and a writer killed
  mid-upload leaves an incomplete multipart upload, which no reader lists or reads (the bucket's lifecycle rule
  `AbortIncompleteMultipartUpload` deletes its parts; see the README).

Which store a data root uses is bound by the Dagster resource (`defs/resources.WarehouseResource`) when a run
asks it for the root (`bind`); outside Dagster (scripts, an analyst's session) it comes from the environment:
`EVAL_PLATFORM_WAREHOUSE_URL` and the standard AWS variables (`settings.py`). The secret access key is never
part of a repr, a log line or a file: it is remembered by the redaction rule (`llm/redaction.py`) as soon as a
store holds it, and handed only to the S3 clients.
"""

from __future__ import annotations

import os
import tempfile
import threading
import uuid
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from functools import cache, cached_property
from pathlib import Path
from typing import Protocol
from urllib.parse import urlparse

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from eval_platform.llm.redaction import remember
from eval_platform.settings import (
    S3_ACCESS_KEY_ID_ENV,
    S3_ENDPOINT_URL_ENV,
    S3_REGION_ENV,
    S3_SECRET_ACCESS_KEY_ENV,
    WAREHOUSE_URL_ENV,
    warehouse_dir,
)

TEMP_PREFIX, TEMP_SUFFIX = ".part-", ".tmp"


class WarehouseConfigError(ValueError):
    """The warehouse URL or its store's settings cannot be used (the message names the setting)."""


class Store(Protocol):
    """What `warehouse.py` needs from the place the partition files live."""

    @property
    def url(self) -> str:
        """The warehouse's folder or `s3://bucket/prefix`."""
        ...

    def location(self, *parts: str) -> str:
        """The path or URL of `parts` under the warehouse, as polars and DuckDB are given it."""
        ...

    def write(self, parts: tuple[str, ...], frame: pl.DataFrame) -> Path | str:
        """Replace the file at `parts` with `frame` as Parquet, whole or not at all; returns its path or URL."""
        ...

    def staged(self, parts: tuple[str, ...]) -> AbstractContextManager[Path]:
        """A local file to write; it replaces the file at `parts` whole when the block ends without an exception,
        and is discarded otherwise (the old file stays). `write` is this with one frame."""
        ...

    def read(self, parts: tuple[str, ...]) -> pl.DataFrame | None: ...

    def schema(self, parts: tuple[str, ...]) -> dict[str, pl.DataType] | None: ...

    def parquet_file(self, parts: tuple[str, ...]) -> pq.ParquetFile | None:
        """The Parquet file at `parts`, opened to be read a batch at a time (None when there is none)."""
        ...

    def files(self, parts: tuple[str, ...], name: str) -> list[tuple[str, ...]]:
        """The files called `name` anywhere under `parts`, as parts relative to the warehouse, sorted."""
        ...

    def children(self, parts: tuple[str, ...]) -> list[str]:
        """The names of the folders directly under `parts`, sorted."""
        ...

    @property
    def storage_options(self) -> dict[str, str] | None:
        """What polars needs to read `location(...)` (None on local disk)."""
        ...

    def register(self, conn: duckdb.DuckDBPyConnection) -> None:
        """Let this DuckDB connection read `location(...)`."""
        ...


@dataclass(frozen=True)
class LocalStore:
    folder: Path

    @property
    def url(self) -> str:
        return str(self.folder)

    def location(self, *parts: str) -> str:
        return str(self.folder.joinpath(*parts))

    def write(self, parts: tuple[str, ...], frame: pl.DataFrame) -> Path | str:
        with self.staged(parts) as tmp:
            frame.write_parquet(tmp)
        return self.folder.joinpath(*parts)

    @contextmanager
    def staged(self, parts: tuple[str, ...]) -> Iterator[Path]:
        """A temporary file in the file's folder, renamed over the file at `parts` if the block ends without an
        exception (and removed either way)."""
        path = self.folder.joinpath(*parts)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.parent / f"{TEMP_PREFIX}{uuid.uuid4().hex}{TEMP_SUFFIX}"
        try:
            yield tmp
            os.replace(tmp, path)
        finally:
            if tmp.exists():
                tmp.unlink()

    def read(self, parts: tuple[str, ...]) -> pl.DataFrame | None:
        path = self.folder.joinpath(*parts)
        return pl.read_parquet(path) if path.exists() else None

    def schema(self, parts: tuple[str, ...]) -> dict[str, pl.DataType] | None:
        path = self.folder.joinpath(*parts)
        return dict(pl.read_parquet_schema(path)) if path.exists() else None

    def parquet_file(self, parts: tuple[str, ...]) -> pq.ParquetFile | None:
        path = self.folder.joinpath(*parts)
        return pq.ParquetFile(path) if path.exists() else None

    def files(self, parts: tuple[str, ...], name: str) -> list[tuple[str, ...]]:
        folder = self.folder.joinpath(*parts)
        found = folder.rglob(name) if folder.is_dir() else []
        return sorted(p.relative_to(self.folder).parts for p in found)

    def children(self, parts: tuple[str, ...]) -> list[str]:
        folder = self.folder.joinpath(*parts)
        return sorted(p.name for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else []

    @property
    def storage_options(self) -> dict[str, str] | None:
        return None

    def register(self, conn: duckdb.DuckDBPyConnection) -> None:
        return None


@dataclass(frozen=True)
class S3Store:
    """`s3://bucket/prefix` on an S3-compatible store. Unset settings fall to the AWS SDK's defaults (its
    credential chain, its region); `endpoint_url` is needed for anything but AWS itself."""

    bucket: str
    prefix: str = ""
    endpoint_url: str | None = None
    region: str | None = None
    access_key_id: str | None = None
    secret_access_key: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        remember(self.secret_access_key)  # from here on, no log line or printed message carries it

    @property
    def url(self) -> str:
        return f"s3://{self._key()}"

    def _key(self, *parts: str) -> str:
        return "/".join(p for p in (self.bucket, self.prefix, *parts) if p)

    def location(self, *parts: str) -> str:
        return f"s3://{self._key(*parts)}"

    @cached_property
    def filesystem(self) -> pafs.S3FileSystem:
        options: dict[str, object] = {"region": self.region or "us-east-1"}
        if self.access_key_id or self.secret_access_key:
            options |= {"access_key": self.access_key_id, "secret_key": self.secret_access_key}
        if self.endpoint_url:
            endpoint = urlparse(self.endpoint_url)
            if endpoint.scheme not in ("http", "https") or not endpoint.netloc:
                raise WarehouseConfigError(
                    f"{S3_ENDPOINT_URL_ENV}: {self.endpoint_url!r} is not an http(s)://host[:port] URL"
                )
            options |= {"endpoint_override": endpoint.netloc, "scheme": endpoint.scheme}
        return pafs.S3FileSystem(**options)

    def write(self, parts: tuple[str, ...], frame: pl.DataFrame) -> Path | str:
        with self.staged(parts) as local:
            frame.write_parquet(local)
        return self.location(*parts)

    @contextmanager
    def staged(self, parts: tuple[str, ...]) -> Iterator[Path]:
        """A local temporary file, put as the object at `parts` if the block ends without an exception."""
        key = self._key(*parts)
        with tempfile.TemporaryDirectory(prefix="eval_platform-put-") as folder:
            local = Path(folder) / "part.parquet"
            yield local
            # One write call of the whole (memory-mapped, not loaded) file: the upload's parts are sent by
            # pyarrow's own threads, and the object appears only when close() completes the upload.
            with pa.memory_map(str(local)) as source, self.filesystem.open_output_stream(key) as out:
                out.write(source.read_buffer())

    def _is_file(self, key: str) -> bool:
        return self.filesystem.get_file_info(key).type == pafs.FileType.File

    def read(self, parts: tuple[str, ...]) -> pl.DataFrame | None:
        key = self._key(*parts)
        if not self._is_file(key):
            return None
        return pl.read_parquet(self.location(*parts), storage_options=self.storage_options)

    def schema(self, parts: tuple[str, ...]) -> dict[str, pl.DataType] | None:
        key = self._key(*parts)
        if not self._is_file(key):
            return None
        scan = pl.scan_parquet(self.location(*parts), storage_options=self.storage_options, hive_partitioning=False)
        return dict(scan.collect_schema())  # the footer only

    def parquet_file(self, parts: tuple[str, ...]) -> pq.ParquetFile | None:
        key = self._key(*parts)
        if not self._is_file(key):
            return None
        return pq.ParquetFile(self.filesystem.open_input_file(key))  # reads the ranges it needs, as it needs them

    def _listing(self, parts: tuple[str, ...], recursive: bool) -> list[pafs.FileInfo]:
        selector = pafs.FileSelector(self._key(*parts), allow_not_found=True, recursive=recursive)
        return self.filesystem.get_file_info(selector)

    def _relative(self, key: str) -> tuple[str, ...]:
        return tuple(key.removeprefix(self._key() + "/").split("/"))

    def files(self, parts: tuple[str, ...], name: str) -> list[tuple[str, ...]]:
        infos = self._listing(parts, recursive=True)
        return sorted(self._relative(i.path) for i in infos if i.type == pafs.FileType.File and i.base_name == name)

    def children(self, parts: tuple[str, ...]) -> list[str]:
        infos = self._listing(parts, recursive=False)
        return sorted(i.base_name for i in infos if i.type == pafs.FileType.Directory)

    @property
    def storage_options(self) -> dict[str, str] | None:
        options = {"aws_region": self.region or "us-east-1"}
        if self.access_key_id:
            options["aws_access_key_id"] = self.access_key_id
        if self.secret_access_key:
            options["aws_secret_access_key"] = self.secret_access_key
        if self.endpoint_url:
            options["aws_endpoint_url"] = self.endpoint_url
            if self.endpoint_url.startswith("http://"):
                options["aws_allow_http"] = "true"
        return options

    def register(self, conn: duckdb.DuckDBPyConnection) -> None:
        # DuckDB reads s3:// through its httpfs extension, which it downloads at first use; here it reads them
        # through this store's pyarrow filesystem instead (fsspec's wrapper), so nothing is fetched at run time.
        conn.register_filesystem(_s3_for_duckdb()(self.filesystem))


@cache
def _s3_for_duckdb() -> type:
    from fsspec.implementations.arrow import ArrowFSWrapper  # imported only when a bucket is in use

    class S3ForDuckDB(ArrowFSWrapper):
        """pyarrow's S3 filesystem under the `s3://` scheme: DuckDB's fsspec hook routes URLs by protocol."""

        protocol = "s3"

    return S3ForDuckDB


@cache
def parse_url(
    url: str,
    endpoint_url: str | None = None,
    region: str | None = None,
    access_key_id: str | None = None,
    secret_access_key: str | None = None,
) -> S3Store:
    """The S3 store an `s3://bucket/prefix` URL names, with its settings (one per setting: one S3 client)."""
    parsed = urlparse(url)
    if parsed.scheme != "s3" or not parsed.netloc or parsed.query or parsed.fragment:
        raise WarehouseConfigError(
            f"warehouse URL {url!r}: expected s3://bucket/prefix (unset: <data root>/warehouse on local disk)"
        )
    return S3Store(
        bucket=parsed.netloc,
        prefix=parsed.path.strip("/"),
        endpoint_url=endpoint_url or None,
        region=region or None,
        access_key_id=access_key_id or None,
        secret_access_key=secret_access_key or None,
    )


_BOUND: dict[Path, Store] = {}
_LOCK = threading.Lock()


def bind(root: Path, store: Store) -> None:
    """From now on in this process, the warehouse of data root `root` is `store` (the resource's choice)."""
    with _LOCK:
        _BOUND[Path(root)] = store


def store_for(root: Path) -> Store:
    """The store of `root`'s warehouse: the one bound by the resource, else the environment's, else local disk."""
    root = Path(root)
    bound = _BOUND.get(root)
    if bound is not None:
        return bound
    url = os.environ.get(WAREHOUSE_URL_ENV)
    if not url:
        return LocalStore(warehouse_dir(root))
    names = (S3_ENDPOINT_URL_ENV, S3_REGION_ENV, S3_ACCESS_KEY_ID_ENV, S3_SECRET_ACCESS_KEY_ENV)
    return parse_url(url, *(os.environ.get(name) for name in names))
