"""Unit tests of increase/report.py: a seed report, its evidence index and verify reading it."""

from __future__ import annotations

from typing import Any

import pytest


def test_a_seed_report_carries_an_index_of_what_was_seeded_and_verify_reads_it(tmp_path: Any) -> None:
    from airflow_provider_kstate.errors import ReportError
    from airflow_provider_kstate.increase.report import (
        evidence_uri,
        expand,
        read_evidence,
        read_report,
        write_report,
    )
    from airflow_provider_kstate.increase.verification import SeedEvidence

    assert list(expand("0-2,5,7-8")) == [0, 1, 2, 5, 7, 8] and list(expand("none")) == []
    uri = str(tmp_path / "t" / "seed.jsonl.gz")
    assert evidence_uri(uri).endswith("/seed.evidence.json") and read_evidence(uri) is None
    with write_report(uri, evidence=True) as report:
        report.write_lines(
            ['{"group":"g","partition":0,"committed":3,"seeded":false,"log_start_at_seed":null}\n']
        )
        report.write_lines(
            [
                f'{{"group":"g","partition":{p},"committed":0,"seeded":true,"log_start_at_seed":0}}\n'
                for p in (1, 2, 3, 9)
            ]
        )
        report.note_seeded("g", [1, 2, 3, 9])
    index = read_evidence(uri)
    assert index is not None and index["seeded"] == {"g": "1-3,9"} and index["rows"] == 5
    # the index says what the rows say
    from_rows, from_index = SeedEvidence(10), SeedEvidence(10)
    from_rows.read(read_report(uri))
    from_index.read_index(index)
    assert from_rows.seeded == from_index.seeded and from_index.rows == from_rows.rows == 5
    # a new seed report removes the old index first: a crash before the new one is written leaves none
    with pytest.raises(RuntimeError), write_report(uri, evidence=True):
        raise RuntimeError("killed mid-seed")
    assert read_evidence(uri) is None
    (tmp_path / "t" / "seed.evidence.json").write_text('{"format": "other"}')
    with pytest.raises(ReportError, match="not kstate-seed-evidence/1"):
        read_evidence(uri)


def test_a_run_s_seed_reports_open_one_per_topic_each_with_its_index(tmp_path: Any) -> None:
    """The seed step's reports (increase.report.seed_reports): one per topic of the run, each complete with
    its index (the topic's ids) once the body ends."""
    import json

    from airflow_provider_kstate.increase.key_order import drain_hold
    from airflow_provider_kstate.increase.report import (
        evidence_uri,
        read_report,
        report_location,
        seed_reports,
    )

    uris = {t: report_location(str(tmp_path), t, "dag/run", "seed") for t in ("orders", "payments")}
    ids = {"orders": {"orders": "id-o"}, "payments": {}}
    with seed_reports(uris, ids.__getitem__) as (opened, writers):
        assert opened == uris and list(writers) == ["orders", "payments"]
        writers["orders"].write({"group": "g", "partition": 0, "offset": 3})
    assert list(read_report(uris["orders"])) == [{"group": "g", "partition": 0, "offset": 3}]
    index = json.loads((tmp_path / "orders" / "dag_run" / "seed.evidence.json").read_text())
    assert index["rows"] == 1 and index["topic_ids"] == {"orders": "id-o"}
    assert evidence_uri(uris["payments"]).endswith("payments/dag_run/seed.evidence.json")
    assert drain_hold(600.0, 300.0) == 960.0, "the pause's wait, the drain's deadline and a minute more"
