"""The state store as a domain package: no Airflow, no Spark.

* :mod:`.uri` - snapshot URIs, their local paths and filesystems (the one place that maps URIs);
* :mod:`.manifest` - the snapshot manifest and the order-independent row digest;
* :mod:`.layout` - versions and the pointer;
* :mod:`.results` - the typed reports (:class:`~.results.CheckReport` with its
  :class:`~.results.PartitionEntry` per partition, :class:`~.results.RebuildReport`);
* :mod:`.contract` - the command line of the Spark applications, their failure report and its error codes;
* :mod:`.fast_check` - the O(partitions) check of a manifest against the changelog's offsets;
* :mod:`.pack` - building the archives Spark executors need (the provider zip, a packed environment).
* :mod:`.submission` - submitting the Spark applications: what a run adds to spark-submit, reading back
  their report, the task error of each failure code;
* :mod:`.tasks` - the state tasks' decisions: their inputs, the applications' arguments, the verdicts.

The Airflow side (``hooks/snapshot.py``, ``operators/fast_check.py``, ``deep_check.py``, ``rebuild.py``,
``maintenance.py``) and the Spark applications (``spark_apps/``) both build on it; neither imports the other.
Every document written here is a typed :class:`~airflow_provider_kstate.documents.Document` with a version
field and a JSON Schema under ``docs/schemas/store/``.
"""
