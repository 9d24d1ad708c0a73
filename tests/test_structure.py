"""The package's import structure: no cycles, nothing imports a higher layer, and no
module imports another package's private module (every import counted, also those
inside functions)."""

from __future__ import annotations

import ast
import pathlib

import daskhpc
from daskhpc._workflows import available, package_of

ROOT = pathlib.Path(daskhpc.__file__).parent

#: Layers from the bottom (docs/architecture.md): a module may import its own layer and
#: the ones below. Keys are the first name under ``daskhpc``.
LAYERS = [
    {"__init__", "_version", "arrays", "errors", "report", "_config", "_workflows", "_numba",
     "_saved", "_notebook", "_ticker", "_clock", "_dask_internals", "_narrow"},
    {"io"},
    {"datasets", "hypergraph"},
    {"comm"},
    {"dashboard"},
    {"runtime"},
    # the workflows: every registered one (the entry points name them)
    {package_of(n).split(".", 1)[1] for n in available()
     if package_of(n).startswith("daskhpc.")},
    {"testing", "cli", "mpi", "slurm", "_launch", "_mpi_options", "_mpi_watch",
     "_mpi_security", "_info", "_partition_cmd", "_terminal"},
]
RANK = {name: i for i, layer in enumerate(LAYERS) for name in layer}


def modules() -> dict[str, pathlib.Path]:
    out = {}
    for path in ROOT.rglob("*.py"):
        rel = path.relative_to(ROOT).with_suffix("")
        parts = ["daskhpc", *rel.parts]
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def imports(name: str, path: pathlib.Path, known: set) -> set[str]:
    """daskhpc modules ``name`` imports (resolving relative imports and ``from x import y``
    where y is a module)."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")
                up = up[:len(up) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            targets = [base] + [f"{base}.{a.name}" for a in node.names]
        else:
            continue
        for t in targets:
            while t and t not in known:
                t = t.rsplit(".", 1)[0] if "." in t else ""
            if t and t != name:
                found.add(t)
    return found


def graph() -> dict[str, set[str]]:
    mods = modules()
    known = set(mods)
    return {m: imports(m, p, known) for m, p in mods.items()}


def top(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def test_every_module_has_a_layer():
    missing = sorted({top(m) for m in modules()} - set(RANK))
    assert not missing, f"modules of no layer (add them to LAYERS): {missing}"


def test_no_import_cycles():
    g = graph()
    index, low, stack, on, cycles = {}, {}, [], set(), []

    def visit(v):        # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(g[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in sorted(g):
        if v not in index:
            visit(v)
    # a package's __init__ re-exports its modules: the package itself is not a cycle
    cycles = [c for c in cycles if not all(m.startswith(c[0]) for m in c)]
    assert not cycles, f"import cycles: {cycles}"


def test_nothing_imports_a_higher_layer():
    bad = [(m, t) for m, ts in graph().items() for t in ts if RANK[top(t)] > RANK[top(m)]]
    assert not bad, f"imports that run back up: {bad}"


def test_no_private_module_of_another_package():
    bad = []
    for m, ts in graph().items():
        for t in ts:
            mine, theirs = top(m), top(t)
            private = [p for p in t.split(".")[2:] if p.startswith("_")]
            # the root package's own internals (_config, _workflows) are shared
            if theirs != mine and private and theirs not in LAYERS[0]:
                bad.append((m, t))
    assert not bad, f"private modules of other packages imported: {bad}"


#: docs/architecture.md "The skeleton": the same file for the same role in every workflow
#: package; the steps are a Program (_program.py) or an attempt graph (_graph.py, _tasks.py).
SKELETON = ("__init__", "_cli", "_setup", "_plan", "_kernels", "_serial", "_job", "_result",
            "_api")
STEPS = (("_program",), ("_graph", "_tasks"))


def test_every_workflow_package_has_the_skeleton():
    missing = {}
    for n in available():
        pkg = package_of(n)
        if not pkg.startswith("daskhpc."):
            continue
        here = ROOT / pkg.split(".", 1)[1]
        gone = [f for f in SKELETON if not (here / f"{f}.py").exists()]
        if not any(all((here / f"{f}.py").exists() for f in way) for way in STEPS):
            gone.append("_program (or _graph and _tasks)")
        if gone:
            missing[n] = gone
    assert not missing, f"workflow packages without the skeleton's files: {missing}"


#: The roles a workflow package may have a module for, by their one name, and the other
#: names the same role must not take (docs/architecture.md, "The skeleton").
ROLES = {"_data": ("_problem", "_tensor", "_prep"), "_assign": ("_partition",),
         "_parts": ("_partdata", "_statics")}


def _workflow_dirs():
    for n in available():
        pkg = package_of(n)
        if pkg.startswith("daskhpc."):
            yield n, ROOT / pkg.split(".", 1)[1]


def test_the_same_role_has_the_same_file_name_in_every_workflow_package():
    wrong = {f"{n}/{old}.py": f"{role}.py" for n, here in _workflow_dirs()
             for role, others in ROLES.items() for old in others
             if (here / f"{old}.py").exists()}
    assert not wrong, f"rename (old -> the role's name): {wrong}"
    # and the names are used: every role by at least two packages
    for role in ROLES:
        assert sum((here / f"{role}.py").exists() for _, here in _workflow_dirs()) >= 2, role


def test_every_workflow_has_its_options_in_setup():
    """One place for a workflow's flags: its ``Options`` (and a ``CommandOptions``
    subclass for what the command line adds) live in ``_setup.py``."""
    import importlib

    from daskhpc._workflows import load

    bad = {n: load(n).Options.__module__ for n, _ in _workflow_dirs()
           if not load(n).Options.__module__.endswith("._setup")}
    assert not bad, f"Options defined outside _setup.py: {bad}"
    assert importlib.import_module("daskhpc.spgemm._setup").Options is load("spgemm").Options
