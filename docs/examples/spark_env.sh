# The executors' environment archive and the provider zip (docs: Spark clusters). tests/docs/
# test_docs_examples.py runs the zip command and checks the env command's arguments.

# [START pack]
pip install venv-pack2        # the maintained venv-pack (the module is venv_pack)
python -m airflow_provider_kstate.store.pack env kstate-env.tar.gz --python python3.11
hdfs dfs -put kstate-env.tar.gz /apps/kstate/          # or: aws s3 cp ... s3://bucket/apps/kstate/
python -m airflow_provider_kstate.store.pack zip .     # the provider zip, if you ship it yourself
# [END pack]
