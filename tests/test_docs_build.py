"""The documentation site builds, offline, with warnings as errors (the ``docs`` extra).

``python -m sphinx -W -b html docs DIR`` builds the guides (MyST Markdown), the notebook
gallery (myst-nb, as committed: not executed) and the API reference (autodoc + numpydoc
over each public module's ``__all__``). A broken link between guides, a docstring that
is not valid reStructuredText, or a guide left out of the table of contents fails the
build. The reference must cover every public name, and no page loads BokehJS from a CDN.

``pytest -m slow tests/test_docs_build.py`` also builds with the quickstart notebook
executed (``DASKHPC_DOCS_EXECUTE=quickstart``): its page must draw its plots offline.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def build(out: Path, **env) -> subprocess.CompletedProcess:
    # a fresh process, as a user builds: this tree's daskhpc, nothing fetched
    return subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html",
         "-d", str(out / "doctrees"), str(DOCS), str(out / "html")],
        capture_output=True, text=True, timeout=900, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(
            filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])), **env})


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("docs")
    done = build(out)
    assert done.returncode == 0, f"sphinx-build -W failed:\n{done.stderr[-4000:]}"
    return out / "html"


def public_modules() -> list[str]:
    """daskhpc and every module under it whose dotted name has no underscore part."""
    import daskhpc

    names = [m.name for m in pkgutil.walk_packages(daskhpc.__path__, "daskhpc.")]
    return ["daskhpc", *sorted(n for n in names
                               if not any(p.startswith("_") for p in n.split(".")))]


def documented(site: Path) -> set[str]:
    """Every Python object the site documents (its ``objects.inv``)."""
    from sphinx.util.inventory import InventoryFile

    with open(site / "objects.inv", "rb") as f:
        inv = InventoryFile.load(f, "", lambda a, b: b)
    by_role = getattr(inv, "data", inv)     # an Inventory in newer Sphinx, a dict before
    return {name for role, items in by_role.items() if role.startswith("py:")
            for name in items}


def test_the_site_builds_without_warnings(site):
    pages = {p.relative_to(site).with_suffix("").as_posix() for p in site.rglob("*.html")}
    wanted = {p.relative_to(DOCS).with_suffix("").as_posix()
              for p in [*DOCS.glob("*.md"), *DOCS.glob("notebooks/*.ipynb")]}
    assert wanted <= pages, f"guides or notebooks without a page: {sorted(wanted - pages)}"


def test_the_api_reference_covers_every_public_name(site):
    names = documented(site)
    missing = []
    for modname in public_modules():
        mod = importlib.import_module(modname)
        if modname not in names:
            missing.append(modname)
        for name in getattr(mod, "__all__", ()):
            obj = getattr(mod, name)
            # a re-export counts where the same object is documented under another module
            # (dh.connect is daskhpc.runtime.connect); a sub-package, as its own module
            elsewhere = {f"{m}.{name}" for m in public_modules()
                         if getattr(sys.modules.get(m), name, None) is obj}
            if getattr(obj, "__name__", None) in names and type(obj).__name__ == "module":
                continue
            if not ({f"{modname}.{name}"} | elsewhere) & names:
                missing.append(f"{modname}.{name}")
    assert not missing, f"public names the API reference lacks: {missing}"


def test_no_page_loads_bokehjs_from_a_cdn(site, bokeh_cdn):
    hits = {str(p.relative_to(site)): bokeh_cdn.findall(p.read_text(encoding="utf-8"))
            for p in site.rglob("*.html")}
    assert not {k: v for k, v in hits.items() if v}


def test_the_coverage_check_sees_a_missing_name(site):
    names = documented(site)
    assert "daskhpc.ssgd.fit" in names and "daskhpc.runtime" in names
    assert "daskhpc.ssgd.no_such_name" not in names


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_an_executed_notebook_page_draws_its_plots_offline(tmp_path, offline_plots):
    done = build(tmp_path, DASKHPC_DOCS_EXECUTE="quickstart")
    assert done.returncode == 0, done.stderr[-4000:]
    page = (tmp_path / "html" / "notebooks" / "quickstart.html").read_text(encoding="utf-8")
    assert 'data-root-id="p' in page                      # a figure was drawn
    offline_plots(page, "notebooks/quickstart.html")
