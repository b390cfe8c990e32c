"""Spark's own Kafka source (``spark-sql-kafka-0-10``) from Maven Central, for the example pipeline's query and
the ``spark`` changelog reader of the Spark applications.

:func:`jars` copies the connector and the three jars it needs beside PySpark's own (``kafka-clients``,
``commons-pool2``, the token provider; named by ``support/spark-kafka/pom.xml``) into the git-ignored
``.kstate/spark-kafka/<spark version>/jars`` once, with ``mvn dependency:copy-dependencies``; later calls
find them there. ``spark-submit --jars`` then ships them with no resolution at submit time (measured here:
``--packages`` through Ivy re-resolves on every submit, about 4 s on this machine even with a warm cache).

    python -m kstate_support.spark_kafka          # prints the comma-separated jars (fetched on first use)
"""

from __future__ import annotations

import os
import sys
from importlib.metadata import version as dist_version

from kstate_support import ROOT, maven

POM = ROOT / "support" / "spark-kafka" / "pom.xml"
DIST_DIR = ROOT / ".kstate" / "spark-kafka"
#: The artifacts PySpark's own ``jars/`` lacks (the rest of the connector's tree is already there).
ARTIFACTS = (
    "spark-sql-kafka-0-10_2.13",
    "spark-token-provider-kafka-0-10_2.13",
    "kafka-clients",
    "commons-pool2",
)
#: Read by the example pipeline's DAG: the jars to ship with ``--jars`` (else it uses ``--packages``).
ENV = "KSTATE_SPARK_KAFKA_JARS"


def spark_version() -> str:
    """The PySpark release of this environment (the connector must match it)."""
    return dist_version("pyspark")


def package() -> str:
    """The connector's Maven coordinate for ``--packages``."""
    return f"org.apache.spark:spark-sql-kafka-0-10_2.13:{spark_version()}"


def jars(release: str | None = None) -> list[str]:
    """The connector's jars for Spark ``release`` (default: PySpark's), fetched from Maven Central once."""
    release = release or spark_version()
    folder = maven.copy_dependencies(
        POM,
        DIST_DIR / release / "jars",
        f"-Dspark.version={release}",
        f"-DincludeArtifactIds={','.join(ARTIFACTS)}",
        what=f"fetch spark-sql-kafka {release} from Maven Central",
        expect=f"spark-sql-kafka-0-10_2.13-{release}.jar",
    )
    return sorted(str(p) for p in folder.glob("*.jar"))


def submit_args() -> list[str]:
    """``spark-submit`` arguments that put the connector on the classpath: ``--jars a,b,c,d``."""
    return ["--jars", ",".join(jars())]


def export() -> None:
    """Set :data:`ENV` for this process and its children (the tests' ``dag.test()`` runs), once."""
    os.environ.setdefault(ENV, ",".join(jars()))


if __name__ == "__main__":
    try:
        print(",".join(jars(sys.argv[1] if len(sys.argv) > 1 else None)))
    except maven.MavenError as exc:
        sys.exit(str(exc))
