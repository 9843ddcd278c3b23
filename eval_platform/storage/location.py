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
  `AbortIncompleteMultipartUpload` deletes its parts; see the README). The local copy is staged in a folder
  `eval_platform-put-*` of the system's temporary folder, with an `owner` file naming the host and process that
  upload from it; a writer killed mid-upload leaves that folder behind, and the first upload of every later process
  removes each such folder whose owner on this host is gone (`sweep_staging`).

Reads stream: a partition is read row group by row group (`batches`, through pyarrow's `ParquetFile` over the
store's file: on a bucket, ranged GETs of the row group's column chunks), so a reader that goes batch by batch
holds one row group and one batch at a time, never the whole object; `read` gathers the same batches into one
frame without first downloading the object whole.

Which store a data root uses is part of the value every storage function is given (`DataRoot`: the root's folder
and its store), built where a process starts: by the Dagster resource (`defs/resources.WarehouseResource`) from
its config, and outside Dagster (scripts, an analyst's session) by `DataRoot.from_env`, from
`EVAL_PLATFORM_WAREHOUSE_URL` and the standard AWS variables (`settings.py`). Nothing here remembers a choice.
The secret access key is never part of a repr, a log line or a file: it is remembered by the redaction rule
(`llm/redaction.py`) as soon as a store holds it, and handed only to the S3 clients.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
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
from eval_platform.processes import HOST, process_alive
from eval_platform.settings import (
    S3_ACCESS_KEY_ID_ENV,
    S3_ENDPOINT_URL_ENV,
    S3_REGION_ENV,
    S3_SECRET_ACCESS_KEY_ENV,
    WAREHOUSE_URL_ENV,
    data_root,
    warehouse_dir,
)

TEMP_PREFIX, TEMP_SUFFIX = ".part-", ".tmp"
# An upload's local copy: a folder of the system's temporary folder, with the owner's "<host> <pid>" in OWNER_FILE.
STAGING_PREFIX, OWNER_FILE = "eval_platform-put-", "owner"
# A staging folder without an owner file (written by a version before it) is removed once this old.
UNOWNED_STAGING_AGE_S = 3600.0

log = logging.getLogger(__name__)
BATCH_ROWS = 65_536  # rows per frame a streaming read hands over (a row group is decoded whole, though)


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

    def read(self, parts: tuple[str, ...], columns: list[str] | None = None) -> pl.DataFrame | None: ...

    def batches(
        self, parts: tuple[str, ...], batch_rows: int = BATCH_ROWS, columns: list[str] | None = None
    ) -> Iterator[pl.DataFrame] | None:
        """The file at `parts` as frames of at most `batch_rows` rows, read as they are consumed (None: no file)."""
        ...

    def write_bytes(self, parts: tuple[str, ...], data: bytes) -> Path | str:
        """Replace the file at `parts` with `data`, whole or not at all (a non-Parquet output: an export)."""
        ...

    def read_bytes(self, parts: tuple[str, ...]) -> bytes | None: ...

    def schema(self, parts: tuple[str, ...]) -> dict[str, pl.DataType] | None: ...

    def files(self, parts: tuple[str, ...], name: str) -> list[tuple[str, ...]]:
        """The files called `name` anywhere under `parts`, as parts relative to the warehouse, sorted."""
        ...

    def footer(self, parts: tuple[str, ...]) -> tuple[int, dict[str, str]] | None:
        """The Parquet file's row count and key-value metadata, from its footer alone (None: no file)."""
        ...

    def delete(self, parts: tuple[str, ...]) -> None:
        """Remove the file at `parts` (nothing when there is none)."""
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

    def locations(self, files: list[tuple[str, ...]]) -> list[str]:
        """`location(*parts)` of each of `files`, in their order."""
        ...

    def schemas(self, files: list[tuple[str, ...]]) -> list[dict[str, pl.DataType] | None]:
        """`schema(parts)` of each of `files`, in their order."""
        ...

    def write_all(self, frames: dict[tuple[str, ...], pl.DataFrame]) -> None:
        """`write(parts, frame)` of each item (each file whole or not at all, one after the other)."""
        ...


class _Several:
    """A store's questions about several files at once: the catalog asks them for every table in one call."""

    def locations(self: Store, files: list[tuple[str, ...]]) -> list[str]:
        return [self.location(*parts) for parts in files]

    def schemas(self: Store, files: list[tuple[str, ...]]) -> list[dict[str, pl.DataType] | None]:
        return [self.schema(parts) for parts in files]

    def write_all(self: Store, frames: dict[tuple[str, ...], pl.DataFrame]) -> None:
        for parts, frame in frames.items():
            self.write(parts, frame)


@dataclass(frozen=True)
class LocalStore(_Several):
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

    def write_bytes(self, parts: tuple[str, ...], data: bytes) -> Path | str:
        with self.staged(parts) as tmp:
            tmp.write_bytes(data)
        return self.folder.joinpath(*parts)

    def read_bytes(self, parts: tuple[str, ...]) -> bytes | None:
        path = self.folder.joinpath(*parts)
        return path.read_bytes() if path.exists() else None

    def read(self, parts: tuple[str, ...], columns: list[str] | None = None) -> pl.DataFrame | None:
        path = self.folder.joinpath(*parts)
        return pl.read_parquet(path, columns=columns) if path.exists() else None

    def batches(
        self, parts: tuple[str, ...], batch_rows: int = BATCH_ROWS, columns: list[str] | None = None
    ) -> Iterator[pl.DataFrame] | None:
        path = self.folder.joinpath(*parts)
        return _batches(lambda: pa.OSFile(str(path)), batch_rows, columns) if path.exists() else None

    def schema(self, parts: tuple[str, ...]) -> dict[str, pl.DataType] | None:
        path = self.folder.joinpath(*parts)
        return dict(pl.read_parquet_schema(path)) if path.exists() else None

    def files(self, parts: tuple[str, ...], name: str) -> list[tuple[str, ...]]:
        folder = self.folder.joinpath(*parts)
        found = folder.rglob(name) if folder.is_dir() else []
        return sorted(p.relative_to(self.folder).parts for p in found)

    def children(self, parts: tuple[str, ...]) -> list[str]:
        folder = self.folder.joinpath(*parts)
        return sorted(p.name for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else []

    def footer(self, parts: tuple[str, ...]) -> tuple[int, dict[str, str]] | None:
        path = self.folder.joinpath(*parts)
        return _footer(lambda: pa.OSFile(str(path))) if path.exists() else None

    def delete(self, parts: tuple[str, ...]) -> None:
        self.folder.joinpath(*parts).unlink(missing_ok=True)

    @property
    def storage_options(self) -> dict[str, str] | None:
        return None

    def register(self, conn: duckdb.DuckDBPyConnection) -> None:
        return None


@dataclass(frozen=True)
class S3Store(_Several):
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
        _sweep_once()
        folder = Path(tempfile.mkdtemp(prefix=STAGING_PREFIX))
        try:
            (folder / OWNER_FILE).write_text(f"{HOST} {os.getpid()}\n")
            local = folder / "part.parquet"
            yield local
            # One write call of the whole (memory-mapped, not loaded) file: the upload's parts are sent by
            # pyarrow's own threads, and the object appears only when close() completes the upload.
            with pa.memory_map(str(local)) as source, self.filesystem.open_output_stream(key) as out:
                out.write(source.read_buffer())
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    def write_bytes(self, parts: tuple[str, ...], data: bytes) -> Path | str:
        with self.staged(parts) as local:
            local.write_bytes(data)
        return self.location(*parts)

    def _is_file(self, key: str) -> bool:
        return self.filesystem.get_file_info(key).type == pafs.FileType.File

    def read_bytes(self, parts: tuple[str, ...]) -> bytes | None:
        key = self._key(*parts)
        if not self._is_file(key):
            return None
        with self.filesystem.open_input_stream(key) as source:
            return source.read()

    def read(self, parts: tuple[str, ...], columns: list[str] | None = None) -> pl.DataFrame | None:
        batches = self.batches(parts, columns=columns)
        return None if batches is None else _concat(batches)

    def batches(
        self, parts: tuple[str, ...], batch_rows: int = BATCH_ROWS, columns: list[str] | None = None
    ) -> Iterator[pl.DataFrame] | None:
        key = self._key(*parts)
        if not self._is_file(key):
            return None
        return _batches(lambda: self.filesystem.open_input_file(key), batch_rows, columns)

    def schema(self, parts: tuple[str, ...]) -> dict[str, pl.DataType] | None:
        key = self._key(*parts)
        if not self._is_file(key):
            return None
        scan = pl.scan_parquet(self.location(*parts), storage_options=self.storage_options, hive_partitioning=False)
        return dict(scan.collect_schema())  # the footer only

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

    def footer(self, parts: tuple[str, ...]) -> tuple[int, dict[str, str]] | None:
        key = self._key(*parts)
        return _footer(lambda: self.filesystem.open_input_file(key)) if self._is_file(key) else None

    def delete(self, parts: tuple[str, ...]) -> None:
        key = self._key(*parts)
        if self._is_file(key):
            self.filesystem.delete_file(key)

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


def sweep_staging(temp_dir: Path | None = None) -> list[Path]:
    """Remove the upload staging folders (`eval_platform-put-*` in `temp_dir`, default the system's temporary
    folder) left by processes that died mid-upload: those whose owner file names this host and a process that is
    gone, and those without an owner file older than UNOWNED_STAGING_AGE_S. Another host's folder (a temporary
    folder shared between hosts), another user's (unreadable) and a live process's are kept. Returns the removed."""
    removed = []
    for folder in Path(temp_dir or tempfile.gettempdir()).glob(f"{STAGING_PREFIX}*"):
        try:
            if folder.is_symlink() or not folder.is_dir():
                continue
            owner = (folder / OWNER_FILE).read_text().split()
        except FileNotFoundError:  # no owner file: written before there was one (or it is being written now)
            try:
                if time.time() - folder.stat().st_mtime < UNOWNED_STAGING_AGE_S:
                    continue
            except FileNotFoundError:
                continue
        except OSError:  # another user's folder
            continue
        else:
            if len(owner) != 2 or not owner[1].isdigit() or owner[0] != HOST or process_alive(int(owner[1])):
                continue
        shutil.rmtree(folder, ignore_errors=True)
        if not folder.exists():
            removed.append(folder)
    if removed:
        log.info("removed %d upload staging folder(s) left by processes that died mid-upload", len(removed))
    return removed


@cache
def _sweep_once() -> None:
    """The first upload of a process sweeps what dead writers left (a run is a process: every run sweeps)."""
    sweep_staging()


def _batches(
    open_file: Callable[[], pa.NativeFile], batch_rows: int, columns: list[str] | None
) -> Iterator[pl.DataFrame]:
    """A Parquet file's rows in frames of at most `batch_rows`, decoded one row group at a time as consumed. A file
    of no rows gives one empty frame with its schema, as `pl.read_parquet` does."""
    with open_file() as source:
        parquet = pq.ParquetFile(source)
        empty = True
        # One row group per reader: a reader over all of them reads ahead through the whole file (on a bucket, the
        # whole object was downloaded before the first batch came out).
        for group in range(parquet.num_row_groups):
            for batch in parquet.iter_batches(batch_rows, row_groups=[group], columns=columns, use_threads=False):
                empty = False
                yield _frame(batch)
        if empty:
            schema = parquet.schema_arrow
            yield _frame(schema.empty_table().select(columns) if columns else schema.empty_table())


def _footer(open_file: Callable[[], pa.NativeFile]) -> tuple[int, dict[str, str]]:
    """A Parquet file's row count and its key-value metadata (text), from the footer."""
    with open_file() as source:
        meta = pq.read_metadata(source)
    pairs = meta.metadata or {}
    return meta.num_rows, {k.decode(): v.decode() for k, v in pairs.items() if not k.startswith(b"ARROW:")}


def _frame(data: pa.RecordBatch | pa.Table) -> pl.DataFrame:
    frame = pl.from_arrow(data)
    assert isinstance(frame, pl.DataFrame)  # a record batch or table gives a frame, never a series
    return frame


def _concat(batches: Iterator[pl.DataFrame]) -> pl.DataFrame:
    return pl.concat(list(batches), how="vertical", rechunk=True)


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


@dataclass(frozen=True)
class DataRoot:
    """A data root: its folder (`path`: inputs, state, the DuckDB catalog) and the store its warehouse is in.

    Built once where a process starts (the Dagster resource, a CLI command, a test, a script) and handed to every
    storage function: which store a root uses is this value, never a lookup elsewhere. Two data roots with two
    stores can be used side by side in one process."""

    path: Path
    store: Store

    @classmethod
    def local(cls, path: Path | str) -> DataRoot:
        """`path` with its warehouse on local disk (`<path>/warehouse`)."""
        path = Path(path)
        return cls(path, LocalStore(warehouse_dir(path)))

    @classmethod
    def from_env(cls, path: Path | str | None = None, environ: Mapping[str, str] | None = None) -> DataRoot:
        """`path` (default: the environment's data root, `EVAL_PLATFORM_DATA_DIR`) with the store the environment
        names: `EVAL_PLATFORM_WAREHOUSE_URL` and the AWS variables, else local disk. For scripts and an analyst's
        session; a Dagster run gets its store from the warehouse resource's config."""
        env = os.environ if environ is None else environ
        folder = Path(path) if path is not None else data_root()
        url = env.get(WAREHOUSE_URL_ENV)
        if not url:
            return cls.local(folder)
        names = (S3_ENDPOINT_URL_ENV, S3_REGION_ENV, S3_ACCESS_KEY_ID_ENV, S3_SECRET_ACCESS_KEY_ENV)
        return cls(folder, parse_url(url, *(env.get(name) for name in names)))
