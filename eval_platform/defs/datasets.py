"""`dataset_versions`: versioned test-case datasets, one dynamic partition per `<dataset>@v<N>`."""

import hashlib
import json

import dagster as dg

from eval_platform.defs.catalog import refresh
from eval_platform.defs.partitions import DATASET_VERSIONS, dataset_versions_partitions
from eval_platform.defs.resources import WarehouseResource
from eval_platform.ingest.datasets import dataset_files, read_rows, validate_dataset, version_sha256
from eval_platform.storage.warehouse import write_partition, write_quarantine


@dg.asset(partitions_def=dataset_versions_partitions, kinds={"python", "parquet"}, group_name="ingest")
def dataset_versions(context: dg.AssetExecutionContext, warehouse: WarehouseResource) -> dg.MaterializeResult:
    """Validated test cases of one dataset version (`datasets/<name>/v<N>.<ext>`), with schema hash and
    row count; bad rows are quarantined. Exposed as the `test_cases` view. Its data version is the file's sha256:
    materialized again with other content, it marks the benchmark tasks reading it stale."""
    root = warehouse.root
    key = context.partition_key
    path = dataset_files(root.path).get(key)
    if path is None:
        raise dg.Failure(f"no file for dataset version {key} under {root.path / 'datasets'}")
    name, version = key.split("@v")
    cases, rejects = validate_dataset(root.path, name, int(version), path)
    write_partition(root, "test_cases", {"dataset": name, "version": version}, cases)
    write_quarantine(root, "dataset_versions", key, rejects)
    refresh(root)
    columns = sorted({k for row in read_rows(path) if isinstance(row[1], dict) for k in row[1]})
    return dg.MaterializeResult(
        data_version=dg.DataVersion(version_sha256(path)),
        metadata={
            "rows": cases.height,
            "quarantined": rejects.height,
            "schema_hash": hashlib.sha256(json.dumps(columns).encode()).hexdigest()[:16],
            "columns": dg.MetadataValue.json(columns),
            "file": str(path.relative_to(root.path)),
        },
    )


dataset_job = dg.define_asset_job("ingest_dataset_versions", selection=[dataset_versions])


@dg.sensor(
    job=dataset_job,
    minimum_interval_seconds=60,
    default_status=dg.DefaultSensorStatus.STOPPED,
    description="Adds a dataset_versions partition for each new datasets/<name>/v<N>.<ext> file and ingests it.",
)
def new_dataset_files_sensor(context: dg.SensorEvaluationContext, warehouse: WarehouseResource):
    """Adds a `dataset_versions` partition for each new `datasets/<name>/v<N>.<ext>` file and ingests it."""
    files = dataset_files(warehouse.root.path)
    known = set(context.instance.get_dynamic_partitions(DATASET_VERSIONS))
    new = sorted(set(files) - known)
    return dg.SensorResult(
        run_requests=[dg.RunRequest(run_key=key, partition_key=key) for key in new],
        dynamic_partitions_requests=[dataset_versions_partitions.build_add_request(new)] if new else [],
    )
