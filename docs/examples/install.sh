# Installing the provider. tests/docs/test_examples.py checks each extra named here is one of setup.cfg's.

# [START install]
pip install .                         # from a checkout: Airflow 3.1+, the Kafka and Spark providers, confluent-kafka
pip install '.[spark-local]'          # ... plus a local Spark (pyspark and pyspark-client 4.2.0): spark-submit here
python -m build --wheel               # or build dist/airflow_provider_kstate-<version>-py3-none-any.whl ...
pip install dist/airflow_provider_kstate-*.whl   # ... and install that wherever Airflow runs
# [END install]

# [START example_dags]
python -m airflow_provider_kstate.example_dags --copy-to "$AIRFLOW_HOME/dags"   # copy (prints each file)
export AIRFLOW__CORE__DAGS_FOLDER="$(python -m airflow_provider_kstate.example_dags)"  # or use them in place
# [END example_dags]
