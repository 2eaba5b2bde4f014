"""The layering of docs/architecture.md, enforced with import-linter."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_imports_point_down_and_the_core_stays_free_of_transports():
    lint = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    assert lint, "import-linter is part of the test extra"
    proc = subprocess.run([lint], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "broken" not in proc.stdout.lower() or "0 broken" in proc.stdout.lower()


def test_a_missing_extra_is_named_with_its_install_command():
    """``asyos.Lasso`` without scikit-learn says which extra to install."""
    code = ("import sys; sys.modules['sklearn'] = None; import asyos\n"
            "try:\n    asyos.Lasso\nexcept ImportError as exc:\n    print(exc)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert "asyos.Lasso needs sklearn: pip install 'asyos[sklearn]'" in out.stdout, out


def test_the_layer_diagram_names_only_modules_that_exist():
    """Every ``asyos.pkg (a, b, ...)`` of docs/architecture.md's diagram is a module,
    so the map a reader starts from cannot drift from the code."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    diagram = text.split("```", 2)[1]
    named = re.findall(r"asyos\.(\w+) \(([^)]*)\)", diagram.replace("\n", " "))
    assert len(named) >= 4, named
    missing = [f"asyos.{package}.{name}"
               for package, names in named
               for name in re.split(r"[\s,·]+", names.strip())
               if name and not (ROOT / "asyos" / package / f"{name}.py").exists()
               and not (ROOT / "asyos" / package / name).is_dir()]
    assert not missing, f"docs/architecture.md names modules that do not exist: {missing}"


def test_no_import_circle_among_the_modules():
    """No module of asyos imports (directly or through others) a module that imports
    it, deferred imports inside functions included: each part can be read, tested
    and replaced on its own.  grimp is import-linter's graph."""
    import grimp

    graph = grimp.build_graph("asyos")
    modules = [m for m in graph.modules if m.startswith("asyos")]
    assert len(modules) > 50
    circles = sorted({tuple(sorted((module, imported)))
                      for module in modules
                      for imported in graph.find_modules_directly_imported_by(module)
                      if imported.startswith("asyos") and
                      graph.find_shortest_chain(importer=imported, imported=module)})
    assert not circles, f"import circles: {circles}"
