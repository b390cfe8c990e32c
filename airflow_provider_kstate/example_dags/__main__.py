"""``python -m airflow_provider_kstate.example_dags [--copy-to DIR]``."""

from __future__ import annotations

from airflow_provider_kstate.example_dags import main

if __name__ == "__main__":  # Airflow may import this file while it parses the folder: do nothing then
    raise SystemExit(main())
