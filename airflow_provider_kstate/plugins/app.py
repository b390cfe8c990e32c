"""The kstate page's FastAPI app, mounted by Airflow's API server at ``/kstate`` (see :mod:`.kstate`).

Every route sits behind Airflow's own auth dependencies (the UI's login: its JWT cookie, or a bearer
token): the page needs website access, the topic plan connection read access, the runs DAG-run read
access (a run's progress too) and the snapshots asset read access. Everything is read-only (GET only), and nothing returned
carries a connection's extras.
"""

from __future__ import annotations

from typing import Any

from fastapi import Depends, FastAPI, HTTPException, Query
from fastapi.responses import HTMLResponse

from airflow_provider_kstate.plugins import views, watch
from airflow_provider_kstate.plugins.page import PAGE

#: The prefix the app is mounted at (the external view's ``href``).
URL_PREFIX = "/kstate"


def _auth() -> dict[str, Any]:
    """Return the Airflow auth dependencies of each kind of route (imported when the app is built)."""
    from airflow.api_fastapi.auth.managers.models.resource_details import AccessView, DagAccessEntity
    from airflow.api_fastapi.core_api.security import (
        requires_access_asset,
        requires_access_connection,
        requires_access_dag,
        requires_access_view,
    )

    return {
        "page": [Depends(requires_access_view(AccessView.WEBSITE))],
        "topics": [
            Depends(requires_access_view(AccessView.WEBSITE)),
            Depends(requires_access_connection("GET")),
        ],
        "runs": [
            Depends(requires_access_view(AccessView.WEBSITE)),
            Depends(requires_access_dag("GET", DagAccessEntity.RUN)),
        ],
        "snapshots": [
            Depends(requires_access_view(AccessView.WEBSITE)),
            Depends(requires_access_asset("GET")),
        ],
    }


def _admin(conn_id: str) -> Any:
    from airflow_provider_kstate.hooks.admin import KStateAdminHook

    return KStateAdminHook(kafka_config_id=conn_id, request_timeout=10.0)


def _refuse(exc: Exception) -> HTTPException:
    """Turn a provider error into a 400/404 naming the problem (the provider's messages hold no secrets)."""
    from airflow_provider_kstate.errors import TopicNotFoundError

    return HTTPException(status_code=404 if isinstance(exc, TopicNotFoundError) else 400, detail=str(exc))


def create_app() -> FastAPI:
    """Build the kstate app (routes only; Airflow mounts it and holds the auth manager)."""
    auth = _auth()
    app = FastAPI(
        title="kstate", description="The kstate page: topics, increase runs, snapshots (read-only)."
    )

    @app.get("/", response_class=HTMLResponse, dependencies=auth["page"])
    def page() -> str:
        return PAGE

    _topic_routes(app, auth["topics"])
    _run_routes(app, auth["runs"])

    @app.get("/api/snapshots", dependencies=auth["snapshots"])
    def snapshots() -> dict[str, Any]:
        checks = list(views.recent_return_values(views.CHECK_TASKS))
        return {"snapshots": [views.snapshot_view(uri, checks) for uri in views.snapshot_uris()]}

    return app


def _topic_routes(app: FastAPI, dependencies: list[Any]) -> None:
    from airflow_provider_kstate.errors import KStateError

    @app.get("/api/topics", dependencies=dependencies)
    def topics(conn_id: str = Query("kafka_default")) -> dict[str, Any]:
        try:
            names = _admin(conn_id).list_topics()
        except (KStateError, ValueError) as exc:
            raise _refuse(exc) from exc
        hidden = ("__", "_kstate_", "_confluent")
        return {"conn_id": conn_id, "topics": [t for t in names if not t.startswith(hidden)]}

    @app.get("/api/plan", dependencies=dependencies)
    def plan(
        topic: str,
        conn_id: str = Query("kafka_default"),
        partitions: int | None = Query(None, ge=1),
        topics: str = Query("", description="co-partitioned topics grown with it, comma-separated"),
    ) -> dict[str, Any]:
        more = [t.strip() for t in topics.split(",") if t.strip()]
        try:
            return views.topic_view(_admin(conn_id), conn_id, topic, partitions, more)
        except (KStateError, ValueError) as exc:
            raise _refuse(exc) from exc


def _verdicts() -> dict[str, dict[str, Any]]:
    """Return the recent verify summaries by report folder."""
    keys = ("ok", "partitions", "groups", "problems", "lag_total")
    return {
        views.owner_folder(x["dag_id"], x["run_id"]): {k: x["value"].get(k) for k in keys}
        for x in views.recent_return_values(("verify",))
    }


def _run_routes(app: FastAPI, dependencies: list[Any]) -> None:
    from airflow_provider_kstate.errors import ReportError

    @app.get("/api/runs", dependencies=dependencies)
    def runs(topic: str | None = None, offset: int = 0, limit: int = 20) -> dict[str, Any]:
        base = views.report_base()
        topics = views.list_topics_with_runs(base)
        if not topic:
            return {"topics": topics, "runs": [], "total": 0}
        try:
            page = views.list_runs(base, topic, offset, limit)
        except ValueError as exc:
            raise HTTPException(status_code=400, detail=str(exc)) from exc
        by_folder, verdicts = views.dag_runs_by_folder(), _verdicts()
        for run in page["runs"]:
            run["airflow"] = by_folder.get(run["run"])
            run["verdict"] = verdicts.get(run["run"])
            run["progress"] = watch.run_status(base, topic, run["run"], (run["airflow"] or {}).get("state"))
        return {"topics": topics, **page}

    @app.get("/api/runs/{topic}/{run}", dependencies=dependencies)
    def run_proof(topic: str, run: str, offset: int = 0, limit: int = 50) -> dict[str, Any]:
        try:
            proof = views.run_proof(views.report_base(), topic, run, offset, limit)
        except (ValueError, ReportError) as exc:
            raise HTTPException(status_code=400, detail=str(exc)) from exc
        proof["airflow"] = views.dag_runs_by_folder().get(run)
        return proof

    @app.get("/api/runs/{topic}/{run}/progress", dependencies=dependencies)
    def run_progress(topic: str, run: str) -> dict[str, Any]:
        """The run's step, each group's state and downtime so far (the page polls it while it runs)."""
        try:
            return watch.progress_view(views.report_base(), topic, run, airflow=watch.dag_run)
        except ValueError as exc:
            raise HTTPException(status_code=400, detail=str(exc)) from exc
