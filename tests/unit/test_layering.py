"""Every import between sdk_ext's packages is one docs/ARCHITECTURE.md's layering table allows.

The table ("What each part may import") is the rule: this test parses it from the document and checks every
``import``/``from ... import`` of every module of sdk_ext against it, lazy imports inside functions included.
A package's unit is its top-level package (``hooks``), or for the packages that have rooms, the room
(``trials.read``, ``local.jobs``, ``profiler.analysis``); a module directly in such a package belongs to it
(``trials/tensor.py`` is ``trials``). Every unit may import ``exceptions``, ``modes`` and the top-level
``sdk_ext`` (``__version__``).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "sdk_ext"
DOC = ROOT / "docs" / "ARCHITECTURE.md"
ALWAYS = {"exceptions", "modes", "sdk_ext"}
ROOMED = ("local", "trials", "profiler", "rules")


def unit_of(module: str) -> str | None:
    """``sdk_ext.trials.read.reader`` -> ``trials.read``; None for anything outside sdk_ext."""
    parts = module.split(".")
    if parts[0] != "sdk_ext":
        return None
    if len(parts) == 1:
        return "sdk_ext"
    top = parts[1]
    if top in ROOMED and len(parts) > 2 and (PACKAGE / top / parts[2]).is_dir():
        return f"{top}.{parts[2]}"
    return top


def allowed() -> dict[str, set[str]]:
    text = DOC.read_text(encoding="utf-8")
    table = text.split("<!-- layering table", 1)[1]
    rows: dict[str, set[str]] = {}
    for line in table.splitlines()[1:]:
        if not line.startswith("|"):
            if rows:
                break
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        if cells[0] in ("package", "---") or set(cells[0]) <= {"-"}:
            continue
        unit = cells[0].strip("`")
        rows[unit] = set(re.findall(r"`([\w.]+)`", cells[1]))
    return rows


def imports() -> list[tuple[str, int, str, str]]:
    """(file, line, importing unit, imported unit) for every import across units."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).with_suffix("")
        parts = [p for p in rel.parts if p != "__init__"]
        module = ".".join(["sdk_ext", *parts])
        source = unit_of(module) if parts else "sdk_ext"
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [node.module]
                # `from sdk_ext.local import jobs`: the imported name may be a room
                targets += [f"{node.module}.{a.name}" for a in node.names
                            if (PACKAGE / Path(*node.module.split(".")[1:]) / a.name).is_dir()]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            for target in targets:
                unit = unit_of(target)
                if unit is not None and unit != source:
                    found.append((str(path.relative_to(ROOT)), node.lineno, str(source), unit))
    return found


def test_the_table_names_every_package() -> None:
    rows = allowed()
    units = {unit_of(".".join(["sdk_ext", *[p for p in path.relative_to(PACKAGE).with_suffix("").parts
                                               if p != "__init__"]]))
             for path in PACKAGE.rglob("*.py") if path.relative_to(PACKAGE).parts[0] != "__init__.py"}
    units -= {"modes", "sdk_ext", None}
    assert units <= set(rows), f"packages missing from the table in {DOC.name}: {sorted(units - set(rows))}"
    assert set(rows) <= units, f"rows for packages that do not exist: {sorted(set(rows) - units)}"


def test_every_import_between_packages_is_allowed() -> None:
    rows = allowed()
    bad = [f"{path}:{line}: {source} imports {target}"
           for path, line, source, target in imports()
           if target not in ALWAYS and target not in rows.get(source, set())]
    assert not bad, "imports the layering table of docs/ARCHITECTURE.md does not allow:\n" + "\n".join(bad)
