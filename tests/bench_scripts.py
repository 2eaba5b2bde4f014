"""The scripts of benchmarks/ as modules, for the tests that keep them from rotting."""

import importlib.util
import sys
from pathlib import Path


def load(name: str):
    """A script of benchmarks/ as a module, loaded from its file: putting benchmarks/
    on sys.path made its interrupts.py shadow the tests' own helper of that name."""
    path = Path(__file__).resolve().parents[1] / "benchmarks" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"benchmarks_{name}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module   # dataclasses look their module up
    spec.loader.exec_module(module)
    return module
