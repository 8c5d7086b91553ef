"""The import contract of docs/architecture.md, as pyproject.toml states it for import-linter:
the layers cli > sim | cluster > explain > scheduler > plugins > actions > framework > model > rules,
sim/ and cluster/ independent of each other, and no import circle between the modules of any
package. No exception may be listed: a new import that breaks the layout fails here."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_contract_lists_no_exceptions() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    assert {c["id"] for c in config["contracts"]} == {"layers", "acyclic"}
    for contract in config["contracts"]:
        assert not contract.get("ignore_imports"), contract["id"]
        assert not contract.get("skip_descendants"), contract["id"]
        assert not contract.get("exhaustive_ignores"), contract["id"]


def test_import_contract_holds() -> None:
    code = ("from importlinter.cli import lint_imports; "
            "raise SystemExit(lint_imports(config_filename='pyproject.toml', no_cache=True, no_logo=True))")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_long_modules_say_why_at_their_top() -> None:
    """A module over 700 lines is either split along its seams or says at its top why it is one."""
    src = ROOT / "src" / "tidesched"
    unexplained = []
    for path in sorted(src.rglob("*.py")):
        text = path.read_text()
        if text.count("\n") > 700:
            head = text.split('"""', 2)[1] if text.startswith('"""') else ""
            if "Why one module" not in head:
                unexplained.append(f"{path.relative_to(ROOT)} ({text.count(chr(10))} lines)")
    assert not unexplained, unexplained
