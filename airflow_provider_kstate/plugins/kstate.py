"""The kstate Airflow plugin: the page's FastAPI app at ``/kstate`` and its entry in the UI's navigation.

Registered through the provider's ``plugins`` metadata and the ``airflow.plugins`` entry point; Airflow's
API server mounts the app and the UI shows the page (in an iframe) under Browse -> kstate.
"""

from __future__ import annotations

from typing import Any

from airflow.plugins_manager import AirflowPlugin

from airflow_provider_kstate.plugins.app import URL_PREFIX, create_app

#: The external view: the page, listed in the UI's navigation (``/plugin/kstate`` shows it).
EXTERNAL_VIEW = {
    "name": "kstate",
    "href": f"{URL_PREFIX}/",
    "destination": "nav",
    "category": "browse",
    "url_route": "kstate",
}


class KStatePlugin(AirflowPlugin):
    """The kstate page: topics (the live plan), increase runs (their proof) and snapshots."""

    name = "kstate"
    fastapi_apps: list[Any] = [{"app": create_app(), "url_prefix": URL_PREFIX, "name": "kstate"}]
    external_views: list[Any] = [EXTERNAL_VIEW]
