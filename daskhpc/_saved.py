"""A result kept on disk: ``result.save(DIR)`` and ``daskhpc.load(DIR)``, in the open format
of docs/cli.md, "Saved results" (no pickle): ``arrays.npz``, ``manifest.json`` (arrays
replaced by ``{"array", "shape", "dtype", "sha256"}``, a ``checksum`` of it all) and, in
format version 2, sparse attributes as ``save_npz`` *pieces* whose sum is the value. Every
file is renamed into place, the manifest last: a directory with a manifest is complete.
Loading checks every digest; a damaged or foreign directory is one line naming the file."""

from __future__ import annotations

import hashlib
import importlib
import io
import json
import os
import platform

import numpy as np

from daskhpc.errors import InputError

FORMAT = "daskhpc-result"
FORMAT_VERSION = 2            # 2: attributes kept as save_npz pieces
MANIFEST = "manifest.json"
ARRAYS = "arrays.npz"


def save(result, directory, report: dict, history: list, pieces: dict | None = None) -> str:
    """Write ``result`` (its ``SAVED`` attributes) with its ``report`` and ``history`` to
    ``directory``; ``pieces``: ``{attribute: descriptor}`` of attributes already written there
    as save_npz pieces (read by no one here)."""
    os.makedirs(directory, exist_ok=True)
    arrays: dict = {}
    pieces = pieces or {}
    model = {name: {"pieces": pieces[name]} if name in pieces else
             _flatten(getattr(result, name), name, arrays) for name in result.SAVED}
    from daskhpc._version import __version__

    manifest = {
        "format": FORMAT, "format_version": 2 if pieces else 1,
        "workflow": result.workflow,
        "result": f"{type(result).__module__}:{type(result).__qualname__}",
        "model": model,
        "report": report,
        "history": history,
        "versions": {"daskhpc": __version__, "numpy": np.__version__,
                     "python": platform.python_version()},
    }
    manifest["checksum"] = _checksum(manifest)
    _atomic(os.path.join(directory, ARRAYS), lambda f: np.savez(f, **arrays))
    _atomic(os.path.join(directory, MANIFEST),
            lambda f: f.write(json.dumps(manifest, indent=1).encode()))
    return str(directory)


def load(directory, workflow: str | None = None, *, classes: dict | None = None):
    """The result saved in ``directory``, of its own class (``classes``: ``{name: class}`` for
    ones outside daskhpc); InputError naming the file for a missing, damaged, edited, newer
    or (``workflow``) another workflow's result."""
    path = os.path.join(directory, MANIFEST)
    if not os.path.isfile(path):
        raise InputError(f"{path}: no saved result here (a directory written by "
                         f"--save DIR or result.save(DIR) has one)")
    try:
        with open(path, "rb") as f:
            manifest = json.loads(f.read())
    except (OSError, ValueError) as e:
        raise InputError(f"{path}: not a readable manifest ({e})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise InputError(f"{path}: not a daskhpc result manifest")
    if manifest.get("checksum") != _checksum(manifest):
        raise InputError(f"{path}: the manifest was edited or damaged (its checksum does not "
                         "match its content)")
    if manifest["format_version"] > FORMAT_VERSION:
        raise InputError(f"{path}: format version {manifest['format_version']} is newer than "
                         f"this daskhpc reads ({FORMAT_VERSION}): upgrade daskhpc")
    if workflow is not None and manifest["workflow"] != workflow:
        raise InputError(f"{path}: a {manifest['workflow']} result, not {workflow}")
    arrays = _read_arrays(os.path.join(directory, ARRAYS))
    cls = _result_class(manifest["result"], classes or {}, path)
    model, read = {}, {}
    for k, v in manifest["model"].items():
        if "pieces" in v:        # two attributes with the same pieces (C twice): read once
            key = json.dumps(v["pieces"], sort_keys=True)
            model[k] = read[key] if key in read else read.setdefault(
                key, read_pieces(directory, v["pieces"]))
        else:
            model[k] = _unflatten(v, arrays, os.path.join(directory, ARRAYS))
    report = dict(manifest["report"])
    for key in ("workflow", "version"):
        report.pop(key, None)
    result = cls.__new__(cls)           # what WorkflowResult.__init__ sets, then the model
    result.info, result.history = report, list(manifest["history"])
    for name, value in model.items():
        setattr(result, name, value)
    return result


def _flatten(value, name: str, arrays: dict):
    import scipy.sparse as sp

    if sp.issparse(value):
        c = sp.csr_array(value)
        kind = "csr_matrix" if isinstance(value, sp.spmatrix) else "csr_array"
        return {"sparse": kind, "shape": list(c.shape),
                **{k: _flatten(getattr(c, k), f"{name}.{k}", arrays)
                   for k in ("data", "indices", "indptr")}}
    if isinstance(value, np.ndarray):
        if value.dtype == object:
            raise TypeError(f"{name}: an object array cannot be saved without pickle")
        arrays[name] = value
        return {"array": name, "shape": list(value.shape), "dtype": value.dtype.str,
                "sha256": _digest(value)}
    if isinstance(value, (list, tuple)):
        return {"list" if isinstance(value, list) else "tuple":
                [_flatten(v, f"{name}.{i}", arrays) for i, v in enumerate(value)]}
    if isinstance(value, dict):
        return {"dict": {str(k): _flatten(v, f"{name}.{k}", arrays) for k, v in value.items()}}
    if isinstance(value, np.generic):
        return {"value": value.item()}
    if value is None or isinstance(value, (bool, int, float, str)):
        return {"value": value}
    raise TypeError(f"{name}: a {type(value).__name__} cannot be saved")


def _unflatten(node, arrays, where):
    if "array" in node:
        a = arrays.get(node["array"])
        if a is None or list(a.shape) != node["shape"] or a.dtype.str != node["dtype"] \
                or _digest(a) != node["sha256"]:
            raise InputError(f"{where}: array {node['array']!r} is missing or does not match "
                             "the manifest (damaged or replaced)")
        return a
    if "sparse" in node:
        import scipy.sparse as sp

        parts = [_unflatten(node[k], arrays, where) for k in ("data", "indices", "indptr")]
        kind = sp.csr_matrix if node["sparse"] == "csr_matrix" else sp.csr_array
        return kind(tuple(parts), shape=tuple(node["shape"]))
    if "list" in node:
        return [_unflatten(v, arrays, where) for v in node["list"]]
    if "tuple" in node:
        return tuple(_unflatten(v, arrays, where) for v in node["tuple"])
    if "dict" in node:
        return {k: _unflatten(v, arrays, where) for k, v in node["dict"].items()}
    return node["value"]


# -- sparse pieces: save_npz files whose sum is the value ----------------------------------

def write_npz(path: str, matrix) -> dict:
    """``matrix`` as a scipy ``save_npz`` file at ``path`` (uncompressed, atomically);
    returns its entry of a pieces descriptor (``shape``, ``nnz``, ``bytes``, ``sha256``;
    ``file`` is the caller's, relative to the saved directory)."""
    import scipy.sparse as sp

    if matrix.format == "coo" and max(matrix.shape, default=0) < 2**31:
        # int32 ids where they fit (scipy keeps int64 ones): 16 bytes a nonzero, not 24
        matrix = sp.coo_array((matrix.data, (matrix.row.astype(np.int32),
                                             matrix.col.astype(np.int32))), shape=matrix.shape)
    _atomic(path, lambda f: sp.save_npz(f, matrix, compressed=False))
    return {"shape": [int(x) for x in matrix.shape], "nnz": int(matrix.nnz),
            "bytes": os.path.getsize(path), "sha256": file_digest(path)}


def file_digest(path: str) -> str:
    """SHA-256 of a file's bytes, read in 4 MiB blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()


def read_pieces(directory, desc: dict):
    """The sum of the save_npz pieces ``desc`` names (a ``csr_array``), every file checked
    against its size and SHA-256 first (InputError naming the file)."""
    import scipy.sparse as sp

    shape = tuple(int(x) for x in desc["shape"])
    rows, cols, vals = [], [], []
    for entry in desc["files"]:
        name = str(entry["file"])
        path = os.path.join(directory, name)
        if os.path.isabs(name) or os.path.normpath(name).startswith(".."):
            raise InputError(f"{path}: a piece outside the saved directory")
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as e:
            raise InputError(f"{path}: missing or unreadable ({e.strerror}), a piece the "
                             "manifest names") from None
        if len(data) != entry["bytes"]:
            raise InputError(f"{path}: {len(data):,} bytes, the manifest says "
                             f"{entry['bytes']:,} (truncated or replaced)")
        if hashlib.sha256(data).hexdigest() != entry["sha256"]:
            raise InputError(f"{path}: does not match the manifest's SHA-256 (edited or "
                             "damaged)")
        try:
            m = sp.load_npz(io.BytesIO(data)).tocoo()
        except Exception as e:  # noqa: BLE001 - zipfile, ValueError, KeyError: damaged
            raise InputError(f"{path}: not a readable scipy save_npz file "
                             f"({type(e).__name__}: {e})") from None
        if m.shape != shape or m.nnz != entry["nnz"]:
            raise InputError(f"{path}: shape {m.shape} with {m.nnz} nonzeros, the manifest "
                             f"says {shape} with {entry['nnz']}")
        rows.append(m.row)
        cols.append(m.col)
        vals.append(m.data)
    if not vals:
        return sp.csr_array(shape, dtype=np.float64)
    out = sp.csr_array(sp.coo_array((np.concatenate(vals), (np.concatenate(rows),
                                                            np.concatenate(cols))),
                                    shape=shape))
    out.sum_duplicates()              # the pieces' sum (disjoint pieces: a concatenation)
    return out


def _read_arrays(path: str) -> dict:
    try:        # our own handle: numpy leaves its file open when a damaged zip fails
        with open(path, "rb") as fh, np.load(fh, allow_pickle=False) as f:
            return {k: f[k] for k in f.files}
    except FileNotFoundError:
        raise InputError(f"{path}: missing (the model's arrays)") from None
    except Exception as e:  # noqa: BLE001 - zipfile, ValueError, EOFError: damaged
        raise InputError(f"{path}: damaged or truncated ({type(e).__name__}: {e})") from None


def _result_class(name: str, classes: dict, where: str):
    module, _, qual = str(name).partition(":")
    if qual in classes:
        return classes[qual]
    if not module.startswith("daskhpc."):
        raise InputError(f"{where}: result class {name!r} is not daskhpc's")
    try:
        cls = getattr(importlib.import_module(module), qual)
    except (ImportError, AttributeError):
        raise InputError(f"{where}: unknown result class {name!r}") from None
    if not (isinstance(cls, type) and isinstance(getattr(cls, "SAVED", None), tuple)
            and callable(getattr(cls, "report", None))):
        raise InputError(f"{where}: {name!r} is not a result class")
    return cls


def _digest(a: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()


def _checksum(manifest: dict) -> str:
    body = {k: v for k, v in manifest.items() if k != "checksum"}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def _atomic(path: str, write) -> None:
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "wb") as f:
        write(f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def write_csv(path, columns: dict, rows: int | None = None) -> str:
    """``columns`` (name -> equally long array) as CSV with a header line: written
    atomically to ``path``, or returned as text (its first ``rows`` rows) for None."""
    names = list(columns)
    cols = [np.asarray(columns[k])[:rows].astype(str) for k in names]
    lines = cols[0]
    for c in cols[1:]:                   # vectorised: one string operation per column
        lines = np.char.add(np.char.add(lines, ","), c)
    text = ",".join(names) + "\n" + "".join(np.char.add(lines, "\n").tolist())
    if path is None:
        return text
    _atomic(os.fspath(path), lambda f: f.write(text.encode()))
    return str(path)
