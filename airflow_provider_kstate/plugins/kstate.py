"""The kstate Airflow plugin: the page's FastAPI app at ``/kstate`` and its entry in the UI's navigation.

Registered through the provider's ``plugins`` metadata and the ``airflow.plugins`` entry point; Airflow's
API server mounts the app and the UI shows the page (in an iframe) under Browse -> kstate.

Every Airflow process loads plugins (a task process for their listeners and macros), so this module stays
light: the app, which imports Airflow's API security and models, is built the first time the API server
reads ``fastapi_apps``, never in a task process.
"""

from __future__ import annotations

from typing import Any

from airflow.providers.common.compat.sdk import AirflowPlugin

#: Where the app is mounted (kept equal to :data:`airflow_provider_kstate.plugins.app.URL_PREFIX`).
URL_PREFIX = "/kstate"

#: The external view: the page, listed in the UI's navigation (``/plugin/kstate`` shows it).
EXTERNAL_VIEW = {
    "name": "kstate",
    "href": f"{URL_PREFIX}/",
    "destination": "nav",
    "category": "browse",
    "url_route": "kstate",
}


class LazyApps(list):  # type: ignore[type-arg]
    """``fastapi_apps`` built on first use (iteration, length, indexing): only the API server uses them."""

    def _fill(self) -> None:
        if not list.__len__(self):
            from airflow_provider_kstate.plugins.app import create_app

            list.append(self, {"app": create_app(), "url_prefix": URL_PREFIX, "name": "kstate"})

    def __iter__(self) -> Any:
        self._fill()
        return list.__iter__(self)

    def __len__(self) -> int:
        self._fill()
        return list.__len__(self)

    def __getitem__(self, index: Any) -> Any:
        self._fill()
        return list.__getitem__(self, index)


class KStatePlugin(AirflowPlugin):
    """The kstate page: topics (the live plan), increase runs (their proof) and snapshots."""

    name = "kstate"
    fastapi_apps: list[Any] = LazyApps()
    external_views: list[Any] = [EXTERNAL_VIEW]
