"""Structure metrics of a dualtrace checkout (issue 10's report): files and lines per
package, functions over 80 lines, and where host and memory-type knowledge lives.

    python bench/house_metrics.py [CHECKOUT ...]     # default: this checkout

Import arrows that run back up are counted by the import-layer contract itself
(``.ci/static``: import-linter on the package tree); for an older checkout without
it, copy .importlinter and .ci/static there and run it.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

PACKAGES = ("dualtrace", "hooks", "encoder", "memfs", "prompts", "tests")
HOSTS = ("letta", "codex")  # names that only a host module should have to spell
# A memory type's folder or alias spelled out as a string literal.
TYPE_WORDS = re.compile(r"""["'](incidents?|decisions?|conventions?|preferences?|patterns?|learnings?)["'/]""")


def python_files(root: Path, package: str) -> list[Path]:
    return sorted(p for p in (root / package).rglob("*.py") if "__pycache__" not in p.parts)


def long_functions(path: Path, limit: int = 80) -> list[tuple[str, int]]:
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except SyntaxError:
        return []
    out = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            if length > limit:
                out.append((f"{path.name}:{node.name}", length))
    return out


def report(root: Path) -> None:
    print(f"== {root}")
    print(f"{'package':<10} {'files':>5} {'lines':>7}")
    for package in PACKAGES:
        files = python_files(root, package)
        lines = sum(len(p.read_text(encoding='utf-8').splitlines()) for p in files)
        print(f"{package:<10} {len(files):>5} {lines:>7}")
    code = [p for pkg in PACKAGES[:-1] for p in python_files(root, pkg)]
    longs = sorted((f for p in code for f in long_functions(p)), key=lambda x: -x[1])
    print(f"functions over 80 lines: {len(longs)}"
          + (" (" + ", ".join(f"{n} {k}" for n, k in longs) + ")" if longs else ""))
    for host in HOSTS:
        where = sorted(str(p.relative_to(root)) for p in code
                       if re.search(rf"""["']{host}["']""", p.read_text(encoding="utf-8")))
        print(f"files spelling the host {host!r}: {len(where)} {where}")
    where = sorted(str(p.relative_to(root)) for p in code
                   if TYPE_WORDS.search(p.read_text(encoding="utf-8")))
    print(f"files spelling a memory type's folder/name: {len(where)} {where}")
    # Places outside config.py that resolve the project or read the settings themselves
    # (the target: the CLI's workspace_for, the worker's per-job settings, the hook).
    resolving = re.compile(r"\b(?:config\.)?(?:project_root|load_settings)\(")
    places = sorted(f"{p.relative_to(root)}:{n}" for p in code if p.name != "config.py"
                    for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
                    if resolving.search(line) and not line.lstrip().startswith(("def ", "#")))
    print(f"places resolving the project/settings outside config.py: {len(places)} {places}")
    writers = sorted(str(p.relative_to(root)) for p in code
                     if "os.replace(" in p.read_text(encoding="utf-8"))
    print(f"files calling os.replace (own temp+replace writers): {len(writers)} {writers}")
    dups = _duplicate_pairs(root)
    if dups is not None:
        print(f"duplicate pairs (`duplicates --most 200`, 6+ shared lines): {dups}")


def _duplicate_pairs(root: Path) -> str | None:
    """The first line of the `duplicates` tool's report, when that tool is installed."""
    import shutil
    import subprocess

    if shutil.which("duplicates") is None:
        return None
    out = subprocess.run(["duplicates", "--most", "200", "--seconds", "120"], cwd=root,
                         capture_output=True, text=True).stdout
    return out.splitlines()[0] if out else None


def main(argv: list[str]) -> None:
    roots = [Path(a) for a in argv] or [Path(__file__).resolve().parent.parent]
    for root in roots:
        report(root)


if __name__ == "__main__":
    main(sys.argv[1:])
