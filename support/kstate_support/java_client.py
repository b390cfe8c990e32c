"""The Java client piece of ``clients/java`` (issue 41): build it once, run its test apps.

:func:`build` packages ``clients/java`` with Maven (the unit tests run in that build, by Surefire) into the
git-ignored ``.kstate/java-client-build`` and rebuilds only when its pom or a source changed
(:func:`kstate_support.maven.package_once`). :class:`JavaApp` runs one of its test apps
(``clients/java/src/test/java/io/kstate/control/apps``: ``Produce``, ``Consume``) and follows its JSON-line
events through :class:`kstate_support.node.JsonLinesApp`, as the Node.js apps are followed.
"""

from __future__ import annotations

import json
import os
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from kstate_support import ROOT, maven
from kstate_support.node import JsonLinesApp

#: The Maven project of the Java client piece.
CLIENT_DIR = ROOT / "clients" / "java"
#: Where :func:`build` puts ``classes``, ``test-classes``, ``libs`` and ``surefire-reports``.
BUILD_DIR = ROOT / ".kstate" / "java-client-build"
#: The test apps' package.
APPS = "io.kstate.control.apps"


def java_ready() -> str:
    """Return why the Java client cannot be built or run here ("" when it can)."""
    if shutil.which(os.environ.get("KSTATE_FLEET_JAVA", "java")) is None:
        return "java (Java 17+) is not on PATH"
    if shutil.which("mvn") is None:
        return "Maven (mvn) is not on PATH: apt-get install -y maven"
    return ""


def build(build_dir: Path = BUILD_DIR) -> Path:
    """Build (and unit-test) the client into ``build_dir`` unless it holds a build of the current sources."""
    return maven.package_once(CLIENT_DIR, build_dir, "build and unit-test the Java client (clients/java)")


def unit_test_results(build_dir: Path = BUILD_DIR) -> dict[str, int]:
    """The totals of the Surefire reports of the build: ``tests``, ``failures``, ``errors``, ``skipped``."""
    totals = dict.fromkeys(("tests", "failures", "errors", "skipped"), 0)
    for report in sorted((build_dir / "surefire-reports").glob("TEST-*.xml")):
        suite = ET.parse(report).getroot()
        for name in totals:
            totals[name] += int(suite.get(name, "0"))
    return totals


class JavaApp(JsonLinesApp):
    """One Java test app process (``Produce`` or ``Consume``): its events, waits on them, a bounded stop.

    :param main: the app's class name in :data:`APPS`.
    :param config: its JSON argument.
    """

    def __init__(
        self, main: str, config: dict[str, Any], name: str = "", build_dir: Path = BUILD_DIR
    ) -> None:
        classpath = os.pathsep.join(
            [str(build_dir / "classes"), str(build_dir / "test-classes"), str(build_dir / "libs" / "*")]
        )
        command = [
            os.environ.get("KSTATE_FLEET_JAVA", "java"),
            "-Xss512k",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
            "-Dorg.slf4j.simpleLogger.log.io.kstate=info",
            "-cp",
            classpath,
            f"{APPS}.{main}",
            json.dumps(config),
        ]
        super().__init__(command, CLIENT_DIR, name or main)


def consumers(config: dict[str, Any], name: str = "consume") -> JavaApp:
    """``Consume``: members of one group, ControlledConsumers unless ``"controlled": false``."""
    return JavaApp("Consume", config, name)


def producer(config: dict[str, Any], name: str = "produce") -> JavaApp:
    """``Produce``: a keyed producer with the ControlledPartitioner unless ``"controlled": false``."""
    return JavaApp("Produce", config, name)
