"""The foreign Java services (issue 30): a consumer-group member (``group.protocol`` classic or consumer,
KIP-848), a share-group member (``KafkaShareConsumer``, KIP-932) and a keyed producer on the reference
client, ``org.apache.kafka:kafka-clients``, driven only through their command pair (``support/java/svc.sh``).

:func:`build` compiles ``support/java`` with Maven once into the git-ignored ``.kstate/java-build`` (classes
and the runtime jars in ``libs``) and rebuilds only when the pom or a source changed (a stamp of their
hash). :class:`JavaFleet` is a :class:`~kstate_support.fleet.Fleet` of these services: the same run
directory files (``NAME.pid``, ``.ready``, ``.jsonl``, ``.events.jsonl``, ``.log``), the same command pairs
and the same :func:`~kstate_support.fleet.judge`, so a Java group is judged as a KafkaJS one is.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from kstate_support import ROOT, maven
from kstate_support.fleet import TEST_CONSUMER, CommandPair, Fleet, FleetError

#: The Maven project of the services.
JAVA_DIR = Path(__file__).resolve().parent.parent / "java"
#: Their command pair: ``svc.sh [--run-dir DIR] define|start|stop|ready|status NAME...``.
SVC = JAVA_DIR / "svc.sh"
#: Where :func:`build` puts the classes and ``libs`` (what ``svc.sh`` runs unless ``KSTATE_JAVA_BUILD``).
BUILD_DIR = ROOT / ".kstate" / "java-build"

#: Group protocols of the consumer service: the classic one and KIP-848's.
PROTOCOLS = ("classic", "consumer")


def build(build_dir: Path = BUILD_DIR) -> Path:
    """Build the services into ``build_dir`` unless it holds a build of the current sources; return it
    (:func:`kstate_support.maven.package_once`: one build at a time, so two sessions starting together build once).

    :param build_dir: the output folder (``classes``, ``libs``).
    """
    return maven.package_once(JAVA_DIR, build_dir, "build the Java services")


class JavaFleet(Fleet):
    """The Java services of one run directory, and their command pairs (see :class:`Fleet`).

    :param run_dir: where the services keep their pidfiles, markers, output and logs.
    :param brokers: the bootstrap address every service gets.
    :param build_dir: the build the command pairs run (built here when missing or stale); the command strings
        name it in ``KSTATE_JAVA_BUILD`` only when it is not the default.
    """

    def __init__(self, run_dir: Path, brokers: str, build_dir: Path = BUILD_DIR) -> None:
        if shutil.which(os.environ.get("KSTATE_FLEET_JAVA", "java")) is None:
            raise FleetError("java (Java 17+) is not on PATH")
        self.build_dir = build(build_dir)
        super().__init__(run_dir, brokers, svc=SVC)

    def _command(self, action: str, *words: str) -> str:
        command = super()._command(action, *words)
        if self.build_dir != BUILD_DIR:
            return f"KSTATE_JAVA_BUILD={self.build_dir} {command}"
        return command

    def consumer(  # type: ignore[override]
        self,
        name: str,
        topic: str,
        group: str,
        delay_ms: float = 0,
        group_protocol: str = "classic",
        auto_offset_reset: str = "latest",
        auto_commit: bool = False,
        **options: Any,
    ) -> CommandPair:
        """Define a consumer-group member (not started); return its own command pair.

        :param group_protocol: ``classic`` or ``consumer`` (KIP-848: the classic session, heartbeat and
            assignor settings are not passed to the client, which refuses them under this protocol).
        :param auto_offset_reset: where a partition without a committed offset starts.
        :param auto_commit: leave the commits to the client (``enable.auto.commit=true``, every
            ``commit_interval_ms``, 200 ms by default): it commits the position of every partition it is
            assigned, one without a record too (issue 41's ``committing_groups`` evidence). Off: the service
            commits what it processed itself (and nothing on a partition it never read).
        :param options: more ``Consumer`` flags, ``metadata_max_age_ms=5000`` for ``--metadata-max-age-ms``.
        """
        if group_protocol not in PROTOCOLS:
            raise ValueError(f"group_protocol is one of {PROTOCOLS}, not {group_protocol!r}")
        flags = {
            "topic": topic,
            "group": group,
            "delay-ms": delay_ms,
            "group-protocol": group_protocol,
            "auto-offset-reset": auto_offset_reset,
            "auto-commit": "true" if auto_commit else "false",
            **TEST_CONSUMER,
            **{k.replace("_", "-"): v for k, v in options.items()},
        }
        self._define(name, "consumer", flags)
        self.groups.setdefault(group, []).append(name)
        return self.commands(name)

    def share_consumer(
        self, name: str, topic: str, group: str, delay_ms: float = 0, **options: Any
    ) -> CommandPair:
        """Define a share-group member (``KafkaShareConsumer``, not started); return its command pair.

        :param options: more ``ShareConsumer`` flags: ``share_auto_offset_reset="earliest"`` sets the group's
            ``share.auto.offset.reset`` before subscribing, ``ack_mode="explicit"``, ``commit_interval_ms``.
        """
        flags = {"topic": topic, "group": group, "delay-ms": delay_ms}
        self._define(
            name, "share-consumer", {**flags, **{k.replace("_", "-"): v for k, v in options.items()}}
        )
        self.groups.setdefault(group, []).append(name)
        return self.commands(name)
