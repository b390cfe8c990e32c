"""The README and the documentation site keep their promises: a short front door, every code example a copy
or an include of a file a test runs, every measurement JSON rendered, every error a page names real.

The site itself is built by ``make docs`` (Sphinx, warnings as errors), and in ``make test`` by
:mod:`tests.docs.test_docs_build`.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
EXAMPLES = DOCS / "examples"
#: The pages of the site (the schema and measurement folders' own notes are included, not pages).
PAGES = [
    p
    for p in DOCS.rglob("*.md")
    if "_build" not in p.parts and "schemas" not in p.relative_to(DOCS).parts[:1] and p.parent != EXAMPLES
]


def fenced(text: str) -> list[tuple[str, str]]:
    """The fenced blocks of a Markdown text: (info string, body)."""
    return [(m[1], m[2]) for m in re.finditer(r"^```([^\n]*)\n(.*?)^```$", text, re.M | re.S)]


def snippet(name: str, marker: str) -> str:
    text = (EXAMPLES / name).read_text()
    body = text.split(f"[START {marker}]", 1)[1].split(f"[END {marker}]", 1)[0]
    lines = body.split("\n")[1:-1]
    indent = min(len(ln) - len(ln.lstrip()) for ln in lines if ln.strip())
    return "\n".join(ln[indent:] for ln in lines) + "\n"


def test_the_readme_is_a_front_door() -> None:
    text = README.read_text()
    assert len(text.splitlines()) <= 300
    # the first real increase is on the first screen or two: the quickstart starts within 40 lines
    assert text.splitlines().index("## Your first increase") < 40


def test_the_readme_code_outside_the_quickstart_is_a_copy_of_a_tested_example() -> None:
    text = README.read_text()
    rest = text[: text.index("<!-- quickstart:")] + text[text.index("<!-- quickstart: end -->") :]
    rest = (
        rest.split("<!-- kstate-acls: the test parses this block -->")[0]
        + rest.split("<!-- kstate-acls: end -->")[1]
    )
    blocks = fenced(rest)
    assert blocks
    copies = {
        "python": [snippet("factory.py", "factory_minimal")],
        "bash": [snippet("connections.sh", m) for m in ("plaintext", "scram", "mtls", "oauth")],
    }
    for lang, body in blocks:
        assert body in copies.get(lang, []), f"README block not a copy of docs/examples:\n{body}"


def test_the_pages_include_their_code_never_type_it() -> None:
    """Python, YAML, JSON and the shell commands users copy come from docs/examples/ (or the README's
    tested blocks) through literalinclude; what stays typed is output (no language) and one sketch."""
    typed = []
    for page in PAGES:
        for info, _body in fenced(page.read_text()):
            if info.startswith("{") or info in ("", "text", "console"):
                continue
            if page.name == "control-protocol.md" and info == "java":
                continue  # section 9's sketch for implementers: pseudo-code with section 2's names, not a program
            typed.append(f"{page.relative_to(ROOT)}: ```{info}")
    assert typed == []


def test_every_literalinclude_names_an_existing_file_and_marker() -> None:
    for page in PAGES:
        text = page.read_text()
        for m in re.finditer(r"^```\{literalinclude\} (\S+)\n((?::[^\n]*\n)*)", text, re.M):
            path = (page.parent / m[1]).resolve()
            assert path.is_file(), (page, m[1])
            for marker in re.findall(r":(?:start-after|start-at|end-before|end-at): (.*)$", m[2], re.M):
                if marker[:1] in "\"'" and marker[-1:] == marker[:1]:
                    marker = marker[1:-1].replace('\\"', '"')
                assert marker in path.read_text(), (page, m[1], marker)


def test_every_error_the_troubleshooting_page_names_exists() -> None:
    from airflow_provider_kstate import errors

    text = (DOCS / "troubleshooting.md").read_text()
    named = set(re.findall(r"`([A-Z][A-Za-z]+(?:Error|Timeout|Failed))`", text))
    assert named and not {n for n in named if not hasattr(errors, n)}, named


def test_every_kept_measurement_json_is_rendered_by_a_page() -> None:
    """Every JSON of docs/measurements/ is rendered (kstate-json) on a measurement page, but the per-run
    copies a page renders one of (ab-runs, second rounds); bench/results/ has a catch-all page
    (kstate-json-rest) for a result no page renders yet."""
    tracked = subprocess.run(
        [
            "git",
            "ls-files",
            "bench/results/*.json",
            "docs/measurements/*.json",
            "docs/measurements/**/*.json",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    rendered = set()
    for page in PAGES:
        rendered |= set(re.findall(r"^```\{kstate-json\} (\S+)", page.read_text(), re.M))
    copies = re.compile(r"/ab-runs/|-2\.json$|issue31/parse-|window-1d120aa-1|window-1b1a8a7-1")
    missing = [
        f for f in tracked if f not in rendered and not copies.search(f) and not f.startswith("bench/")
    ]
    assert missing == []
    catch_all = (DOCS / "measurements" / "bench-results.md").read_text()
    assert "```{kstate-json-rest} bench/results/*.json" in catch_all
    assert all((ROOT / f).is_file() for f in rendered)


def test_every_measurement_page_says_what_it_was_measured_under() -> None:
    for page in (DOCS / "measurements").glob("*.md"):
        if page.name == "index.md":
            continue
        head = page.read_text()[:3000]
        assert "Measured under" in head or "measured on Apache Kafka" in head, page.name
        assert re.search(r"Apache Kafka \d\.\d|noida-db|no broker", head), page.name


def test_the_readme_links_resolve() -> None:
    text = README.read_text()
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text):
        if target.startswith("http"):
            continue
        assert (ROOT / target).exists(), target
