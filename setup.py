"""Package discovery for setuptools (everything else is in pyproject.toml).

The repository folders curate/, train/ and pipelines/ install as cotforge.curate, cotforge.train and
cotforge.pipelines (`package-dir` in pyproject.toml). Every folder below them with an `__init__.py` is found
here and every other file in them ships as package data, so a new subpackage or data file cannot be left out of
the wheel by a hand-kept list; `tests/test_packaging.py` checks the built wheel against the folders."""

from pathlib import Path

from setuptools import find_packages, setup

ROOTS = ("curate", "train", "pipelines")
HERE = Path(__file__).parent


def _data_files(package: str) -> list[str]:
    """Non-Python files of a package folder and of its plain (non-package) subfolders."""
    folder = HERE / package.replace(".", "/")
    out = []
    for f in sorted(folder.rglob("*")):
        rel = f.relative_to(folder)
        inner = [folder.joinpath(*rel.parts[:i]) for i in range(1, len(rel.parts))]
        if (f.is_file() and f.suffix not in (".py", ".pyc") and "__pycache__" not in rel.parts
                and not any(p.startswith(".") for p in rel.parts)
                and not any((d / "__init__.py").exists() for d in inner)):
            out.append(str(rel))
    return out


PACKAGES = [p for root in ROOTS for p in find_packages(str(HERE), include=[root, f"{root}.*"])]
setup(packages=[f"cotforge.{p}" for p in PACKAGES],
      package_data={f"cotforge.{p}": _data_files(p) for p in PACKAGES if _data_files(p)})
