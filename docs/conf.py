"""Sphinx configuration: the guides (MyST Markdown), the notebook gallery (myst-nb) and
the API reference (autodoc + numpydoc) in one site.

Build (the ``docs`` extra; ``tests/test_docs_build.py`` runs the same with ``-W``)::

    python -m sphinx -W -b html docs docs/_build/html

Nothing is fetched while building (no intersphinx; the notebooks are not executed unless
``DASKHPC_DOCS_EXECUTE`` names them, and then their BokehJS is inline), so it builds
offline.
"""

from __future__ import annotations

import os
from pathlib import Path

from daskhpc import __version__

project = "daskhpc"
author = "daskhpc contributors"
release = version = __version__

extensions = ["sphinx.ext.autodoc", "numpydoc", "myst_nb"]
root_doc = "index"
exclude_patterns = ["_build", "**.ipynb_checkpoints"]
source_suffix = {".md": "myst-nb", ".ipynb": "myst-nb"}

# the API reference: every name in a public module's __all__, in the module's order
autodoc_default_options = {"members": True, "undoc-members": True,
                           "member-order": "bysource"}
autodoc_member_order = "bysource"
autodoc_typehints = "none"              # the numpydoc Parameters sections say the types
autodoc_preserve_defaults = True        # signatures show `client=None`, not an object repr
# distributed's plugin docstrings cross-reference its own site: a method of ours without a
# docstring shows none rather than a broken link
autodoc_inherit_docstrings = False
numpydoc_show_class_members = False     # methods are documented on the class itself
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False

# the gallery renders as committed (no outputs): executing it starts clusters.
# DASKHPC_DOCS_EXECUTE=all (or a comma-separated list of notebook names) runs them, in a
# temporary directory, with their plots' BokehJS inline
_run = {n.strip() for n in os.environ.get("DASKHPC_DOCS_EXECUTE", "").split(",") if n.strip()}
nb_execution_mode = "force" if _run else "off"
nb_execution_excludepatterns = [] if "all" in _run else [
    f"notebooks/{p.stem}.ipynb" for p in Path(__file__).parent.glob("notebooks/*.ipynb")
    if p.stem not in _run]
nb_execution_in_temp = True
nb_execution_timeout = 900
nb_execution_raise_on_error = True
nb_ipywidgets_js = {}                   # no widget manager from a CDN
myst_heading_anchors = 3                # [text](cli.md#the-json-report) links resolve

html_theme = "alabaster"
html_title = f"daskhpc {version}"
html_static_path: list[str] = []
html_copy_source = False
