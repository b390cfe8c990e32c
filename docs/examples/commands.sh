# Commands the guides show. tests/docs/test_examples.py checks each against the code: a DAG run's conf names
# only params of its DAG, the kstate_drivers Variable parses into drivers, the REST calls are routes of
# Airflow's API. (The quickstart's commands run for real: README.md, tests/e2e/test_wheel_install.py.)

# [START dags_test_groups]
airflow dags test kstate_partition_increase -c '{"topic": "orders", "partitions": 12, "consumer_groups": ["billing"]}'
# [END dags_test_groups]

# [START dags_test_topics]
airflow dags test kstate_partition_increase -c '{"topic": "orders", "topics": ["payments"], "partitions": 12}'
# [END dags_test_topics]

# [START dags_test_dry_run]
airflow dags test kstate_partition_increase -c '{"topic": "orders", "partitions": 12, "dry_run": true}'
# [END dags_test_dry_run]

# [START approval_api]
curl -H "Authorization: Bearer $TOKEN" "$AIRFLOW/api/v2/dags/kstate_partition_increase/dagRuns/$RUN/hitlDetails"
curl -X PATCH -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' -d '{"chosen_options": ["Approve"]}' \
  "$AIRFLOW/api/v2/dags/kstate_partition_increase/dagRuns/$RUN/taskInstances/safe_partition_increase.approve_plan/-1/hitlDetails"
# [END approval_api]

# [START kstate_drivers]
airflow variables set kstate_drivers '{
  "billing-k8s": {"kind": "command", "stop": "kubectl -n shop scale deploy/billing --replicas=0", "start": "kubectl -n shop scale deploy/billing --replicas=3", "ready": "kubectl -n shop rollout status deploy/billing --timeout=10s", "timeout": 180},
  "feeder": {"kind": "command", "stop": "systemctl stop feeder", "start": "systemctl start feeder"}
}'
# [END kstate_drivers]
