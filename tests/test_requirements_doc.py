"""Every requirement id the code, the tests and the docs cite (``CARD-4``, ``DEC-8``, ...) is
explained in docs/requirements.md, so a reader of a comment can look it up in the repository."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ID = re.compile(r"\b(?:RUN|OBJ|CONF|SES|ACT|CAP|CARD|TIDE|EXT|REL|OBS|SIM|K8S|DEC)-\d+\b")


def test_every_cited_requirement_id_is_explained() -> None:
    doc = (ROOT / "docs" / "requirements.md").read_text()
    defined = set(re.findall(r"^- \*\*([A-Z0-9]+-\d+)\*\*", doc, re.M))
    cited: dict[str, str] = {}
    for top in ("src", "tests", "docs", "benchmarks", "tools", "deploy"):
        for path in sorted((ROOT / top).rglob("*")):
            if path.suffix not in (".py", ".md", ".yaml", ".yml", ".conf", ".js", ".html") or not path.is_file():
                continue
            for rid in ID.findall(path.read_text(errors="replace")):
                cited.setdefault(rid, str(path.relative_to(ROOT)))
    missing = {rid: where for rid, where in cited.items() if rid not in defined}
    assert not missing, f"cited but not in docs/requirements.md: {missing}"
