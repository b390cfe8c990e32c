"""The Spark operators on a cluster: YARN and Kubernetes (docs: Spark clusters).

Not run on a cluster here (no YARN or Kubernetes on this machine: docs/compatibility.md); tests/docs/
test_docs_examples.py builds both tasks and checks the arguments reach the operators.
"""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG

from airflow_provider_kstate.operators.deep_check import KStateDeepCheckOperator
from airflow_provider_kstate.operators.rebuild import KStateRebuildOperator

with DAG("stores_on_a_cluster", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC")) as dag:
    # [START yarn]
    KStateRebuildOperator(
        task_id="rebuild",
        topic="orders-totals-changelog",
        snapshot_uri="hdfs:///stores/orders-totals",
        spark_conn_id="spark_yarn",  # {"conn_type": "spark", "host": "yarn", "extra": {"deploy-mode": "cluster"}}
        deploy_mode="cluster",  # or "client": the driver then runs on the Airflow worker
        ship_provider=True,
        python_env_archive="hdfs:///apps/kstate/kstate-env.tar.gz",
        report_dir="hdfs:///tmp/kstate-reports",
        yarn_queue="state",
        num_executors=8,
        executor_cores=4,
        executor_memory="4g",
        driver_memory="2g",
        conf={"spark.yarn.appMasterEnv.PYSPARK_PYTHON": "./env/bin/python"},
        keytab="/etc/security/keytabs/airflow.keytab",
        principal="airflow@EXAMPLE.COM",
    )
    # [END yarn]

    # [START kubernetes]
    KStateDeepCheckOperator(
        task_id="deep_check",
        topic="orders-totals-changelog",
        snapshot_uri="s3a://stores/orders-totals",
        spark_conn_id="spark_k8s",  # {"conn_type": "spark", "host": "k8s://https://kubernetes.default.svc", "extra": {"namespace": "spark"}}
        deploy_mode="cluster",
        ship_provider=True,
        python_env_archive="s3a://apps/kstate/kstate-env.tar.gz",
        report_dir="s3a://tmp/kstate-reports",
        storage_conn_id="aws_default",
        conf={
            "spark.kubernetes.container.image": "apache/spark:4.0.1-python3",
            "spark.kubernetes.authenticate.driver.serviceAccountName": "spark",
            "spark.kubernetes.file.upload.path": "s3a://tmp/spark-uploads",
            "spark.executor.instances": "8",
        },
    )
    # [END kubernetes]
