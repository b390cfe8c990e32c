"""The state store as a domain package: no Airflow, no Spark.

* :mod:`.uri` - snapshot URIs, their local paths and filesystems (the one place that maps URIs);
* :mod:`.manifest` - the snapshot manifest and the order-independent row digest;
* :mod:`.results` - typed check results (:class:`~.results.CheckReport`, :class:`~.results.PartitionResult`);
* :mod:`.contract` - the command line and the report file of the Spark applications;
* :mod:`.fast_check` - the O(partitions) check of a manifest against the changelog's offsets;
* :mod:`.pack` - building the archives Spark executors need (the provider zip, a packed environment).

The Airflow side (``hooks/snapshot.py``, ``operators/snapshot.py``, ``operators/maintenance.py``) and the Spark applications
(``spark_apps/``) both build on it; neither imports the other.
"""
