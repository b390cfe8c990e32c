"""``airflow_provider_kstate.example_dags``: where the example DAGs are, and the copy into a DAGs folder."""

from __future__ import annotations

from pathlib import Path

from airflow_provider_kstate import example_dags


def test_path_holds_every_example_dag() -> None:
    folder = example_dags.path()
    text = "".join(p.read_text() for p in folder.glob("kstate_*.py"))
    for dag_id in example_dags.DAG_IDS:
        assert dag_id in text, dag_id
    assert (folder / "pipelines" / "running_totals.py").is_file()


def test_copy_to_keeps_an_existing_airflowignore(tmp_path: Path) -> None:
    (tmp_path / ".airflowignore").write_text("mine/\n")
    written = {p.name for p in example_dags.copy_to(tmp_path)}
    assert {"kstate_partition_increase.py", "kstate_state_maintenance.py", "pipelines"} <= written
    assert "__init__.py" not in written and "__main__.py" not in written
    example_dags.copy_to(tmp_path)  # twice: nothing doubles
    assert (tmp_path / ".airflowignore").read_text().splitlines() == ["mine/", "pipelines/"]
    assert (tmp_path / "pipelines" / "running_totals.py").is_file()
