"""Issue 40, item 3: a Kafka Streams application's topics are what the broker says, never a name prefix.

Two ``count`` applications of ``support/streams`` run at once on Apache Kafka: ``counts`` (its id made
unique per run) and its neighbour ``counts-v2``, whose id ``counts`` prefixes, each on its own input and
under its own keyed traffic. The neighbour's changelog ``counts-v2-KSTREAM-AGGREGATE-...-changelog`` is named
``counts-...-changelog``: the rule the plan used before (every ``{application.id}-...-changelog`` is the
application's) takes it as ``counts``'s, and the test first shows that it does. Then the plan of ``counts``
(the one planner, as the Streams resize operator calls it) lists only its own changelog (the streams group's
described topology on the streams protocol; the classic group's members' subscriptions and the longest
listed group id that prefixes a changelog on the classic one), and the resize of ``counts`` 2 -> 4 runs
(drain, stop, grow, re-place, seed, start) while the neighbour keeps running and writing. Afterwards the
neighbour's changelog still has its 2 partitions, the neighbour ran through it without an error and its
counts are exact, and it starts again (a fresh instance, its state restored from its changelog): before the
fix it could not (``StreamsException: Existing internal topic counts-v2-...-changelog has invalid
partitions: expected: 2; actual: 4``).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from kstate_support import streams
from kstate_support.streams import KeyedTraffic, StreamsApp

from airflow_provider_kstate.cluster.admin import ClusterAdmin
from airflow_provider_kstate.cluster.streams_resize import StreamsResize, local_replacer
from airflow_provider_kstate.increase.drivers import CommandPairs
from airflow_provider_kstate.increase.plan import describe
from airflow_provider_kstate.increase.planner import plan_increase
from airflow_provider_kstate.increase.request import PlanRequest
from tests.integration.test_streams_resize import (
    KEYS,
    RATE,
    HeldTraffic,
    _app_driver,
    _Log,
    _results,
    _settle,
    _skip_unless_plain,
    topics,  # noqa: F401 - the fixture
)

pytestmark = [pytest.mark.integration]

STORE = "KSTREAM-AGGREGATE-STATE-STORE-0000000001-changelog"


def _count_app(
    kafka_config: dict[str, Any], app_id: str, source: str, output: str, run_dir: Path, protocol: str
) -> StreamsApp:
    return StreamsApp(
        "count", kafka_config["bootstrap.servers"], app_id, [source], output, run_dir, protocol=protocol
    )


def _partitions(admin: ClusterAdmin, topic: str) -> int:
    return admin.partition_count(topic)


# make chaos (85 s of Kafka Streams on 2 cores): make test keeps the ownership rule's unit tests
# (tests/unit/increase/test_streams_owners.py), this proof runs both protocols in chaos
@pytest.mark.chaos
@pytest.mark.parametrize("protocol", ["classic", "streams"])
def test_resizing_an_app_leaves_the_app_its_id_prefixes_untouched(
    protocol: str,
    kafka_config: dict[str, Any],
    topics: Any,  # noqa: F811 - the fixture imported above
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> None:
    _skip_unless_plain(kafka_config)
    make = topics["make"]
    app_id = topics["app_id"]("counts")
    neighbour_id = f"{app_id}-v2"  # deleted with the app's internal topics: the fixture matches the prefix
    source, output = make("nb-in", partitions=2), make("nb-out", partitions=2)
    n_source, n_output = make("nb-v2-in", partitions=2), make("nb-v2-out", partitions=2)
    app = _count_app(kafka_config, app_id, source, output, tmp_path / "app", protocol)
    neighbour = _count_app(kafka_config, neighbour_id, n_source, n_output, tmp_path / "v2", protocol)
    log = _Log()
    pairs = CommandPairs(source, log)
    driver = _app_driver(app, tmp_path / "driver")
    traffic = HeldTraffic(kafka_config, [source], tmp_path / "traffic", rate=RATE, keys=KEYS)
    n_traffic = KeyedTraffic(kafka_config, [n_source], rate=RATE, keys=KEYS)
    admin = ClusterAdmin(kafka_config)
    changelog, n_changelog = f"{app_id}-{STORE}", f"{neighbour_id}-{STORE}"
    request.addfinalizer(lambda: pairs.stop({app_id: driver}, "group"))  # both stopped whatever fails
    request.addfinalizer(neighbour.stop)
    assert not pairs.start({app_id: driver}, "group"), log.lines[-3:]
    neighbour.start()
    try:
        neighbour.wait_running(120)
        traffic.start()
        n_traffic.start()
        time.sleep(8)  # both count and commit: both changelogs exist, both groups have offsets
        names = admin.list_topics()
        assert {changelog, n_changelog} <= set(names), names
        # The scenario: the rule of before takes the neighbour's changelog as the application's.
        by_prefix = [t for t in names if t.startswith(f"{app_id}-") and t.endswith("-changelog")]
        assert n_changelog in by_prefix, by_prefix
        plan = plan_increase(
            admin,
            PlanRequest(
                topics=(source,),
                partitions=4,
                acknowledge_streams_groups=(app_id,),
                resize_streams_groups=(app_id,),  # as the resize asks (increase.streams_plan)
                group_drivers={app_id: driver},
                producer_drivers={"traffic": traffic.driver()},
            ),
            dict,
        )
        lines = describe(plan)
        print("\n".join(lines))
        entry = plan.streams_apps[app_id]
        assert [c.topic for c in entry.changelogs] == [changelog], entry.changelogs
        assert entry.sources == [source] and entry.repartitions == [], entry
        assert n_changelog not in entry.grown and neighbour_id not in plan.streams_apps
        assert entry.protocol == protocol
        group_line = next(line for line in lines if line.startswith(f"  group {app_id}:"))
        assert "1 members" in group_line and "driver: command" in group_line, group_line
        assert "pause" not in group_line.split(";")[0], group_line
        assert "Spark" not in " ".join(entry.actions), entry.actions
        result = StreamsResize(
            app=entry,
            admin=admin,
            kafka_config=kafka_config,
            driver=driver,
            replacer=local_replacer(kafka_config),
            producers={"traffic": traffic.driver()},
            log=log,
            pairs=pairs,
        ).run()
        time.sleep(8)  # traffic on the new layout; the neighbour counted all along
    finally:
        traffic.stop()
        n_traffic.stop()
    records, out = _results(traffic, app, kafka_config, output, lambda: pairs.stop({app_id: driver}, "group"))
    assert result["resized"] and not result["start_failures"], result
    assert n_changelog not in result["grown"] and changelog in result["grown"], result["grown"]
    assert (_partitions(admin, changelog), _partitions(admin, source)) == (4, 4)
    verdict = streams.count_verdict(records, out)
    assert verdict["keys_wrong"] == 0, verdict
    # The neighbour: its changelog as it was, it ran through the resize without an error, its counts exact.
    assert (_partitions(admin, n_changelog), _partitions(admin, n_source)) == (2, 2)
    try:
        assert neighbour.alive() and neighbour.errors() == [], neighbour.log_tail()
        n_records = n_traffic.records()

        def n_read() -> list[tuple[str, bytes, int]]:
            return streams.read_topic(kafka_config, n_output, timeout=60)

        _settle(n_read)
        n_verdict = streams.count_verdict(n_records, n_read())
        assert n_verdict["records_written"] > 0 and n_verdict["keys_wrong"] == 0, n_verdict
    finally:
        neighbour.stop()
    # ... and it starts again, a fresh instance restoring its state from its changelog.
    again = neighbour.again(tmp_path / "v2-again")
    again.start()
    try:
        again.wait_running(120)
        assert again.errors() == [], again.errors()
    finally:
        again.stop()
