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
source_suffix = {".rst": "restructuredtext", ".md": "myst-nb", ".ipynb": "myst-nb"}

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
# an executed bokeh cell carries bokeh's own mime types beside application/javascript;
# myst-nb renders every type of a bundle before it picks the javascript, and warns for
# the ones it has no renderer for
suppress_warnings = ["mystnb.unknown_mime_type"]
myst_heading_anchors = 3                # [text](cli.md#the-json-report) links resolve

html_theme = "alabaster"
html_title = f"daskhpc {version}"
html_static_path: list[str] = []
html_copy_source = False


# ---- the names automodule leaves out -------------------------------------------------
# ``automodule`` documents a module's ``__all__`` but skips three kinds of name: data
# (autodoc documents a module attribute only where a ``#:`` comment stands beside it in
# that module's own source, never a re-exported constant), dunder names (``__version__``)
# and names a module provides lazily through ``__getattr__`` (``dh.ssgd.StratumOrderPlugin``).
# ``.. public-rest:: MODULE`` documents exactly those, so a page of ``automodule`` plus
# ``public-rest`` covers the whole ``__all__`` (tests/test_docs_build.py checks it).

import importlib  # noqa: E402
import inspect  # noqa: E402
import types  # noqa: E402

from docutils import nodes  # noqa: E402
from docutils.parsers.rst import directives  # noqa: E402
from docutils.statemachine import StringList  # noqa: E402
from sphinx.util.docutils import SphinxDirective  # noqa: E402
from sphinx.util.nodes import nested_parse_with_titles  # noqa: E402


def _is_data(obj) -> bool:
    return not (isinstance(obj, types.ModuleType) or inspect.isclass(obj) or callable(obj))


def _left_out(mod) -> list[tuple[str, object]]:
    out = []
    for name in getattr(mod, "__all__", ()):
        obj = getattr(mod, name)
        if isinstance(obj, types.ModuleType):
            continue                                   # a sub-package: its own page
        if _is_data(obj) or name.startswith("__") or name not in vars(mod):
            out.append((name, obj))
    return out


class PublicRest(SphinxDirective):
    required_arguments = 1
    option_spec = {"exclude": directives.unchanged}     # names documented elsewhere

    def run(self):
        mod = importlib.import_module(self.arguments[0])
        exclude = {n.strip() for n in self.options.get("exclude", "").split(",")}
        lines = []
        for name, obj in _left_out(mod):
            if name in exclude:
                continue
            kind = ("autodata" if _is_data(obj) else
                    "autoclass" if inspect.isclass(obj) else "autofunction")
            lines.append(f".. {kind}:: {mod.__name__}.{name}")
            if kind == "autodata" and len(repr(obj)) > 120:
                lines.append("   :no-value:")          # a long dict says nothing inline
            lines.append("")
        node = nodes.section()
        node.document = self.state.document
        nested_parse_with_titles(self.state, StringList(lines, source=self.arguments[0]), node)
        return node.children


def _skip_data(app, what, name, obj, skip, options):
    # automodule's own data (the ones with a ``#:`` comment) go to public-rest, so that
    # every constant is documented once, the same way
    if what == "module" and _is_data(obj):
        return True
    return None


def setup(app):
    app.add_directive("public-rest", PublicRest)
    app.connect("autodoc-skip-member", _skip_data)
    return {"parallel_read_safe": True}
