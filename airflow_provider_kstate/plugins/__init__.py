"""The kstate page in the Airflow UI: a provider plugin (FastAPI app + a nav entry). See :mod:`.kstate`."""
