"""Unit tests of get_provider_info.py: every module it names imports."""

from __future__ import annotations

import importlib

from airflow_provider_kstate.get_provider_info import get_provider_info


def test_provider_info_points_at_real_modules() -> None:
    info = get_provider_info()
    assert info["package-name"] == "airflow-provider-kstate"
    for section in ("hooks", "operators", "sensors", "triggers"):
        for entry in info[section]:
            for module in entry["python-modules"]:
                importlib.import_module(module)
    assert "connection-types" not in info, "the kafka connection type is the Kafka provider's"
    from airflow_provider_kstate.hooks.admin import KStateAdminHook

    assert KStateAdminHook.conn_type == "kafka" and KStateAdminHook.default_conn_name == "kafka_default"
