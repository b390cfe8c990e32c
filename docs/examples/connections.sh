# The `kafka` connection (apache-airflow-providers-apache-kafka): its extra is the librdkafka configuration.
# tests/docs/test_examples.py parses each command and builds the provider's client settings from its extra.

# [START plaintext]
airflow connections add kafka_default --conn-type kafka \
  --conn-extra '{"bootstrap.servers": "broker1:9092,broker2:9092"}'
# [END plaintext]

# [START scram]
airflow connections add kafka_default --conn-type kafka --conn-extra '{
  "bootstrap.servers": "broker1:9093",
  "security.protocol": "SASL_SSL",
  "sasl.mechanism": "SCRAM-SHA-512",
  "sasl.username": "airflow",
  "sasl.password": "…",
  "ssl.ca.location": "/etc/ssl/certs/kafka-ca.pem"
}'
# [END scram]

# [START mtls]
airflow connections add kafka_default --conn-type kafka --conn-extra '{
  "bootstrap.servers": "broker1:9093", "security.protocol": "SSL",
  "ssl.ca.location": "/etc/kafka/ca.pem", "ssl.certificate.location": "/etc/kafka/client.pem",
  "ssl.key.location": "/etc/kafka/client.key"
}'
# [END mtls]

# [START oauth]
airflow connections add kafka_default --conn-type kafka --conn-extra '{
  "bootstrap.servers": "broker1:9094", "security.protocol": "SASL_PLAINTEXT",
  "sasl.mechanisms": "OAUTHBEARER", "enable.sasl.oauthbearer.unsecure.jwt": true,
  "sasl.oauthbearer.config": "principal=kstate"
}'
# [END oauth]
