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


def test_provider_info_lists_every_public_module_of_the_airflow_folders() -> None:
    """Every module of ``hooks/``, ``operators/``, ``sensors/`` and ``triggers/`` (not ``__init__``, not
    ``_private``) is in its section, and each section names only modules of its own folder."""
    from pathlib import Path

    import airflow_provider_kstate

    package = Path(airflow_provider_kstate.__file__).parent
    info = get_provider_info()
    for section in ("hooks", "operators", "sensors", "triggers"):
        listed = [m for entry in info[section] for m in entry["python-modules"]]
        present = sorted(
            f"airflow_provider_kstate.{section}.{path.stem}"
            for path in (package / section).glob("*.py")
            if not path.stem.startswith("_")
        )
        assert sorted(listed) == present, (section, sorted(set(present) ^ set(listed)))
        assert len(listed) == len(set(listed)), section
