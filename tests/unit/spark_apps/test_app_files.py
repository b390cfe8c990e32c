"""Where the package's Spark applications live (:mod:`airflow_provider_kstate.spark_apps`)."""

from __future__ import annotations

import pytest

from airflow_provider_kstate import spark_apps
from airflow_provider_kstate.errors import KStateConfigError


def test_the_packages_applications() -> None:
    rebuild = spark_apps.app_file("rebuild.py")
    assert spark_apps.package_app(rebuild, "rebuild.py") == spark_apps.spark_app_path("rebuild.py") == rebuild
    assert spark_apps.package_app("/mine.py", "rebuild.py") == "/mine.py"
    with pytest.raises(KStateConfigError, match="'nope.py' is missing"):
        spark_apps.package_app(spark_apps.app_file("nope.py"), "nope.py")
