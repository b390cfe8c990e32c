"""The package is ready to publish: one convention for the version and the CHANGELOG, complete metadata, and
the provider's own metadata (``get_provider_info``) agreeing with it. (``python -m build`` and
``twine check --strict`` run in ``tests/e2e/test_wheel_install.py``, on the artifacts it installs.)"""

from __future__ import annotations

import configparser
import re
from pathlib import Path

from packaging.version import Version

from airflow_provider_kstate import __version__
from airflow_provider_kstate.get_provider_info import DOCS_URL, PROJECT_URL, RELEASES, get_provider_info

ROOT = Path(__file__).resolve().parents[2]


def _setup_cfg() -> configparser.ConfigParser:
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    return cfg


def test_the_version_follows_the_changelog() -> None:
    """Keep a Changelog + PEP 440: the CHANGELOG's releases are RELEASES (newest first); with an
    ``[Unreleased]`` section the version is the next release's ``.devN``, without one the newest release."""
    text = (ROOT / "CHANGELOG.md").read_text()
    released = re.findall(r"^## \[(\d+\.\d+\.\d+)\] - \d{4}-\d{2}-\d{2}$", text, re.M)
    assert tuple(released) == RELEASES
    version = Version(__version__)
    if "## [Unreleased]" in text:
        assert version.is_devrelease and version > Version(released[0]), __version__
    else:
        assert __version__ == released[0]
    assert get_provider_info()["versions"] == list(dict.fromkeys([__version__, *RELEASES]))


def test_the_metadata_is_complete_and_agrees_with_the_provider_info() -> None:
    meta = _setup_cfg()["metadata"]
    info = get_provider_info()
    assert meta["long_description"].strip() == "file: README.md"
    assert meta["long_description_content_type"].strip() == "text/markdown"
    assert meta["license"].strip() == "Apache-2.0" and meta["url"].strip() == PROJECT_URL
    urls = dict(line.split(" = ", 1) for line in meta["project_urls"].strip().splitlines())
    assert urls["Documentation"] == DOCS_URL == info["documentation-url"]
    assert urls["Source Code"] == PROJECT_URL and urls["Bug Tracker"].startswith(PROJECT_URL)
    classifiers = set(meta["classifiers"].strip().splitlines())
    assert {"Framework :: Apache Airflow", "Framework :: Apache Airflow :: Provider"} <= classifiers
    assert "License :: OSI Approved :: Apache Software License" in classifiers
    floor = _setup_cfg()["options"]["python_requires"].strip().removeprefix(">=")
    versions = sorted(
        c.rsplit(" ", 1)[1]
        for c in classifiers
        if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)
    )
    assert versions and versions[0] == floor, versions
    assert info["package-name"] == meta["name"].strip()
