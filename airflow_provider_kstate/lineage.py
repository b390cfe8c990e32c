"""OpenLineage of kstate: the topics and snapshots each operator reads and writes, in OpenLineage's naming.

* A Kafka topic is namespace ``kafka://{host}:{port}`` (the connection's first bootstrap server), name
  ``{topic}``: what the Kafka provider's ``kafka://`` asset converter gives, so an Asset of
  :mod:`airflow_provider_kstate.assets` and a dataset of this module name the same thing.
* A snapshot is its root directory (never a version directory: the version is a facet): namespace
  ``file``, name the absolute path for a local one; ``s3://{bucket}`` (also for ``s3a://``), ``gs://{bucket}``,
  ``abfs(s)://{container}@{account}`` with the key as name; ``hdfs://{namenode}:{port}`` with the path.

What each operator reports (``get_openlineage_facets_on_start`` names the datasets; ``..._on_complete``
adds what the run found, read from the task's XCom):

============================  =======================  ==========================
operator                      inputs                   outputs
============================  =======================  ==========================
plan, verify                  the topic                -
increase, seed, pause window  -                        the topic
fast check, deep check        changelog, snapshot      -
rebuild                       changelog                snapshot
============================  =======================  ==========================

Facets: a ``kstate`` dataset facet (partitions, offsets, rows, version, groups, the check's verdict, the
report's URI), the standard ``version`` (the snapshot's version), ``schema`` (the snapshot's columns),
``outputStatistics`` (rows written), ``inputStatistics`` (changelog records read) and
``dataQualityAssertions`` (a check's verdict).

``apache-airflow-providers-openlineage`` is optional (the ``[openlineage]`` extra): nothing here imports
it at module level, and without it the operators' lineage methods return None. The naming functions need
no OpenLineage at all.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from airflow_provider_kstate.increase.plan import Plan
from airflow_provider_kstate.store import uri as uris
from airflow_provider_kstate.store.results import CheckReport, RebuildReport, store_report

log = logging.getLogger(__name__)

#: The ``kstate`` facet lists per-partition offsets up to this many partitions (then totals only).
OFFSETS_CAP = 1024
#: The ``kstate`` facet names groups (with their class) up to this many.
GROUPS_CAP = 200
#: The key of the provider's own dataset facet.
FACET_KEY = "kstate"
#: Where the ``kstate`` facet is described.
FACET_SCHEMA_URL = "https://github.com/example-org/airflow-provider-kstate/blob/main/README.md#lineage"
#: The columns of every snapshot (the state model in the README).
SNAPSHOT_COLUMNS = (("key", "binary"), ("value", "binary"), ("offset", "long"), ("partition", "int"))
_OBJECT_STORES = {"s3": "s3", "s3a": "s3", "s3n": "s3", "gs": "gs", "abfs": "abfs", "abfss": "abfss"}


# ------------------------------------------------------------------------------------------- naming


def kafka_namespace(bootstrap_servers: str) -> str:
    """Return the OpenLineage namespace of a Kafka cluster: ``kafka://`` + its first bootstrap server.

    :param bootstrap_servers: the connection's ``bootstrap.servers`` (comma-separated ``host:port``).
    """
    server = str(bootstrap_servers or "").split(",")[0].strip()
    if not server:
        raise ValueError("a Kafka dataset needs a bootstrap server (bootstrap.servers is empty)")
    return f"kafka://{server}"


def topic_dataset(bootstrap_servers: str, topic: str) -> tuple[str, str]:
    """Return ``(namespace, name)`` of ``topic`` on the cluster of ``bootstrap_servers``."""
    if not topic:
        raise ValueError("a Kafka dataset needs a topic")
    return kafka_namespace(bootstrap_servers), topic


def snapshot_dataset(snapshot_uri: str) -> tuple[str, str]:
    """Return ``(namespace, name)`` of the snapshot rooted at ``snapshot_uri``.

    A local path (or ``file://`` URI) is namespace ``file`` and its absolute path, as the common.io
    provider names ``file://`` assets; an object store is ``scheme://bucket`` and the key; HDFS is
    ``hdfs://namenode:port`` and the path.
    """
    root = uris.local_path(snapshot_uri)
    if root is not None:
        return "file", os.path.abspath(str(root)).rstrip("/") or "/"
    parts = urlsplit(snapshot_uri.rstrip("/"))
    scheme = parts.scheme.lower()
    if scheme in _OBJECT_STORES:
        return f"{_OBJECT_STORES[scheme]}://{parts.netloc}", parts.path.lstrip("/") or "/"
    return f"{scheme}://{parts.netloc}", parts.path or "/"


def asset_dataset(asset_uri: str) -> tuple[str, str]:
    """Return ``(namespace, name)`` of an Asset URI of :mod:`airflow_provider_kstate.assets`.

    ``kafka://server/topic`` is a topic, anything else a snapshot (``file:///abs``, ``s3://...``).
    """
    parts = urlsplit(asset_uri)
    if parts.scheme == "kafka":
        return topic_dataset(parts.netloc, parts.path.lstrip("/"))
    return snapshot_dataset(asset_uri)


# ------------------------------------------------------------------------------------------- facets


def _capped_offsets(partitions: Mapping[int, Any], field: str) -> tuple[dict[str, int] | None, int]:
    """Return ``({partition: offset}`` up to OFFSETS_CAP partitions, else None``, total)`` of ``field`` of
    the report's typed per-partition entries."""
    values = {
        str(p): int(value) for p, e in partitions.items() if (value := getattr(e, field, None)) is not None
    }
    total = sum(values.values())
    return (values if len(values) <= OFFSETS_CAP else None), total


def store_facet(report: CheckReport | RebuildReport, side: str) -> dict[str, Any]:
    """Return the ``kstate`` facet fields of a check's or rebuild's report, for ``side`` ``changelog`` or ``snapshot``.

    :param report: the task's report (fast check, deep check or rebuild; :func:`~.store.results.store_report`
        reads it from the XCom).
    :param side: which dataset the facet goes on.
    """
    check = report if isinstance(report, CheckReport) else None
    partitions = report.partitions
    count = getattr(check, "topic_partitions" if side == "changelog" else "snapshot_partitions", None)
    out: dict[str, Any] = {"partitions": count if count is not None else (len(partitions) or None)}
    if side == "changelog":
        out["recordsRead"] = report.records_read
        offsets, total = _capped_offsets(partitions, "high_watermark")
    else:
        out["version"] = report.snapshot_version
        out["rows"] = _snapshot_rows(report)
        offsets, total = _capped_offsets(partitions, "end_offset")
    out["offsets"], out["offsetsTotal"] = offsets, (total or None)
    if isinstance(report, RebuildReport) and side == "snapshot":
        out["previousVersion"] = report.previous
    if check is not None and check.check and side == "snapshot":
        out.update(check=check.check, ok=check.ok, failedPartitions=check.failed_partitions)
    return {k: v for k, v in out.items() if v is not None}


def _snapshot_rows(report: CheckReport | RebuildReport) -> int | None:
    """The snapshot's rows: the rebuild's, else the sum of the entries' (None: none known)."""
    if isinstance(report, RebuildReport):
        return report.rows
    return sum(e.rows or 0 for e in report.partitions.values()) or None


def topic_facet(operator_kind: str, plan: Plan, result: Mapping[str, Any] | None) -> dict[str, Any]:
    """Return the ``kstate`` facet fields of the topic of a safe increase.

    :param operator_kind: ``plan``, ``increase``, ``seed``, ``window`` or ``verify``.
    :param plan: the run's plan (read from the plan task's XCom).
    :param result: the task's own XCom (None before it ran).
    """
    result = result or {}
    counted = result.get("partitions")
    out: dict[str, Any] = {
        "step": operator_kind,
        "mode": plan.mode.value,
        "originalPartitions": plan.original_partitions,
        "partitions": counted if isinstance(counted, int) else plan.target_partitions,
        "groups": {g: str(e.cls) for g, e in list(plan.groups.items())[:GROUPS_CAP]} or None,
        "groupsTotal": len(plan.groups) or None,
        "reportUri": result.get("report_uri"),
        "reportRows": result.get("report_rows"),
    }
    if operator_kind == "verify" and result:
        out.update(ok=result.get("ok"), problems=result.get("problems"), lagTotal=result.get("lag_total"))
    if operator_kind in ("seed", "window") and result:
        out["created"] = result.get("created")
        out["seeded"] = result.get("seeded")
    return {k: v for k, v in out.items() if v is not None}


#: The fields of the ``kstate`` facet (each optional; absent ones are left out of the event).
FACET_FIELDS = (
    "step",
    "mode",
    "check",
    "ok",
    "partitions",
    "originalPartitions",
    "offsets",
    "offsetsTotal",
    "rows",
    "recordsRead",
    "version",
    "previousVersion",
    "failedPartitions",
    "groups",
    "groupsTotal",
    "created",
    "seeded",
    "problems",
    "lagTotal",
    "reportUri",
    "reportRows",
)


@functools.cache
def _facet_class() -> Any:
    """Return the ``kstate`` dataset facet class (an attrs class built on first use: the OpenLineage client
    is optional)."""
    import attr
    from openlineage.client.facet_v2 import DatasetFacet

    cls = attr.make_class(
        "KStateDatasetFacet",
        {name: attr.ib(default=None, kw_only=True) for name in FACET_FIELDS},
        bases=(DatasetFacet,),
    )
    cls._get_schema = staticmethod(lambda: FACET_SCHEMA_URL)  # type: ignore[attr-defined]
    cls.__doc__ = (
        "kstate's view of a topic or a snapshot: partitions, offsets, rows, version, groups, verdicts."
    )
    return cls


def _kstate_facet(fields: Mapping[str, Any]) -> Any:
    unknown = set(fields) - set(FACET_FIELDS)
    if unknown:
        raise ValueError(f"not kstate facet fields: {sorted(unknown)}")
    return _facet_class()(**dict(fields))


def _schema_facet() -> Any:
    from openlineage.client.facet_v2 import schema_dataset

    return schema_dataset.SchemaDatasetFacet(
        fields=[schema_dataset.SchemaDatasetFacetFields(name=n, type=t) for n, t in SNAPSHOT_COLUMNS]
    )


def _dataset(
    kind: str, name: tuple[str, str], facets: Mapping[str, Any], io_facets: Mapping[str, Any] | None = None
) -> Any:
    from openlineage.client.event_v2 import InputDataset, OutputDataset

    if kind == "input":
        return InputDataset(
            namespace=name[0], name=name[1], facets=dict(facets), inputFacets=dict(io_facets or {})
        )
    return OutputDataset(
        namespace=name[0], name=name[1], facets=dict(facets), outputFacets=dict(io_facets or {})
    )


def _lineage(inputs: list[Any], outputs: list[Any]) -> Any:
    from airflow.providers.openlineage.extractors import OperatorLineage

    return OperatorLineage(inputs=inputs, outputs=outputs)


def available() -> bool:
    """Whether the OpenLineage provider (and so the client) is installed."""
    try:
        import airflow.providers.openlineage.extractors  # noqa: F401
        import openlineage.client.event_v2  # noqa: F401
    except ImportError:
        return False
    return True


# ----------------------------------------------------------------------------------- operator glue


def bootstrap_servers(kafka_config_id: str) -> str:
    """Return ``bootstrap.servers`` of a ``kafka`` connection (only that key: the extras hold secrets)."""
    from airflow_provider_kstate.hooks.admin import KStateAdminHook

    return str(
        KStateAdminHook(kafka_config_id=kafka_config_id).client_config().get("bootstrap.servers") or ""
    )


def task_result(task_instance: Any) -> dict[str, Any] | None:
    """Return the task's return value (its XCom), or None when there is none (a failed or running task)."""
    if task_instance is None:
        return None
    try:
        value = task_instance.xcom_pull(task_ids=task_instance.task_id, key="return_value")
    except Exception as exc:  # noqa: BLE001 - lineage never fails a task
        log.debug("kstate lineage: no XCom of %s: %s", getattr(task_instance, "task_id", "?"), exc)
        return None
    return value if isinstance(value, dict) else None


def _guarded(build: Any) -> Any:
    """Run a lineage builder; lineage must never fail a task, so errors are logged and give None."""

    @functools.wraps(build)
    def run(*args: Any, **kwargs: Any) -> Any:
        if not available():
            return None
        try:
            return build(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - lineage never fails a task
            log.warning("kstate lineage: %s failed: %s", build.__name__, exc)
            return None

    return run


def step_kind(operator: Any) -> str | None:
    """Return the lineage kind an operator declares (``lineage_kind``: ``plan``, ``increase``, ``seed``,
    ``window``, ``verify``; None for the steps that neither read nor change the topic's data)."""
    kind = getattr(operator, "lineage_kind", None)
    return str(kind) if kind else None


@_guarded
def increase_lineage(operator: Any, task_instance: Any = None, complete: bool = False) -> Any:
    """Return the OperatorLineage of a safe-increase operator: the topic it reads (plan, verify) or
    changes (increase, seed, pause window).

    :param operator: the operator (its plan, or ``topic`` for the plan operator, is rendered).
    :param task_instance: the running task instance (its XCom holds the result on completion).
    :param complete: add what the run found (the task's XCom).
    """
    kind = step_kind(operator)
    if kind is None:
        return None
    result = task_result(task_instance) if complete else None
    plan = operator.typed_plan if kind != "plan" else (Plan.from_dict(dict(result)) if result else None)
    servers = bootstrap_servers(operator.kafka_config_id)
    datasets: list[tuple[tuple[str, str], dict[str, Any]]]
    if plan is None:  # the plan step before it ran: the topic it was given (or the first of its topics)
        more = getattr(operator, "topics", None)
        first = str(operator.topic or "") or (
            str(more[0]) if isinstance(more, (list, tuple)) and more else ""
        )
        datasets = [(topic_dataset(servers, first), {})]
    else:  # a plan of several co-partitioned topics: one dataset per topic, each with its own facet
        datasets = [
            (topic_dataset(servers, view.topic), {FACET_KEY: _kstate_facet(topic_facet(kind, view, each))})
            for view, each in _per_topic(plan, kind, result)
        ]
    if kind in ("plan", "verify"):
        return _lineage([_dataset("input", name, facets) for name, facets in datasets], [])
    return _lineage([], [_dataset("output", name, facets) for name, facets in datasets])


def _per_topic(plan: Plan, kind: str, result: Any) -> list[tuple[Plan, Any]]:
    """Each topic's plan and what the step said of it (``topics`` of its XCom; the plan step: the plan)."""
    from airflow_provider_kstate.increase.run import topic_entry

    if kind == "plan":
        return [(view, result) for view in plan.views()]
    return [(view, topic_entry(result, view.topic) or None) for view in plan.views()]


@_guarded
def store_lineage(operator: Any, task_instance: Any = None, complete: bool = False) -> Any:
    """Return the OperatorLineage of a fast check, a deep check (changelog and snapshot in) or a rebuild
    (changelog in, snapshot out).

    :param operator: the operator (``topic``, ``snapshot_uri`` and ``kafka_config_id`` rendered).
    :param task_instance: the running task instance (its XCom holds the report on completion).
    :param complete: add what the run found (the report).
    """
    result = task_result(task_instance) if complete else None
    report = store_report(result) if result else None
    changelog = topic_dataset(bootstrap_servers(operator.kafka_config_id), str(operator.topic))
    snapshot = snapshot_dataset(str(operator.snapshot_uri))
    log_facets: dict[str, Any] = {}
    snap_facets: dict[str, Any] = {"schema": _schema_facet()}
    log_io: dict[str, Any] = {}
    snap_io: dict[str, Any] = {}
    if report is not None:
        log_facets[FACET_KEY] = _kstate_facet(store_facet(report, "changelog"))
        snap_facets[FACET_KEY] = _kstate_facet(store_facet(report, "snapshot"))
        _standard_facets(report, snap_facets, log_io, snap_io)
    if getattr(operator, "writes_snapshot", False):
        return _lineage(
            [_dataset("input", changelog, log_facets, log_io)],
            [_dataset("output", snapshot, snap_facets, snap_io)],
        )
    return _lineage(
        [_dataset("input", changelog, log_facets, log_io), _dataset("input", snapshot, snap_facets, snap_io)],
        [],
    )


def _standard_facets(
    report: CheckReport | RebuildReport,
    snap_facets: dict[str, Any],
    log_io: dict[str, Any],
    snap_io: dict[str, Any],
) -> None:
    from openlineage.client.facet_v2 import (
        data_quality_assertions_dataset,
        dataset_version_dataset,
        input_statistics_input_dataset,
        output_statistics_output_dataset,
    )

    if report.snapshot_version:
        snap_facets["version"] = dataset_version_dataset.DatasetVersionDatasetFacet(
            datasetVersion=str(report.snapshot_version)
        )
    if report.records_read is not None:
        log_io["inputStatistics"] = input_statistics_input_dataset.InputStatisticsInputDatasetFacet(
            rowCount=int(report.records_read)
        )
    if isinstance(report, CheckReport) and report.check:
        failed = report.failed_partitions
        snap_io["dataQualityAssertions"] = data_quality_assertions_dataset.DataQualityAssertionsDatasetFacet(
            assertions=[
                data_quality_assertions_dataset.Assertion(
                    assertion=f"kstate_{report.check}_check",
                    success=report.ok,
                    actual=f"failed partitions {failed}" if failed else None,
                )
            ]
        )
    elif isinstance(report, RebuildReport):
        snap_io["outputStatistics"] = output_statistics_output_dataset.OutputStatisticsOutputDatasetFacet(
            rowCount=report.rows
        )
