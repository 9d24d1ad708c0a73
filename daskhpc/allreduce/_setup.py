"""Everything an allreduce call is made of, built once: inputs, algorithm, plan, choice."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

import numpy as np

from daskhpc._workflows import checked_options, option
from daskhpc.errors import InputError

from ._algorithms import Algorithm
from ._cost import CANDIDATES, choose, cost_model
from ._plan import call_plan
from ._registry import ALGORITHMS, DEFAULT_GROUP, make
from ._stream import Format, Stream, canon

MAX_N = 2 ** 32          # uint32 indices (section 4.1.1)


@dataclass
class Options:
    """Call options (the CLI flags of the same names)."""

    algorithm: str = option("auto", "auto: the least Table 3.1 time with the cost model, or "
                                    "an algorithm", choices=("auto", *sorted(ALGORITHMS)))
    group: int = option(DEFAULT_GROUP, "ranks per sparse group of dsar_early_switch",
                        bounds=(1, None))
    alpha: float | None = option(None, "seconds per message for auto (default: calibrated "
                                       "or the built-in cost model)", type=float,
                                 bounds=(0, None))
    beta: float | None = option(None, "seconds per byte for auto (default: calibrated or "
                                      "the built-in cost model)", type=float, bounds=(0, None))
    floor: float | None = option(None, "seconds every step costs for auto (default: "
                                       "calibrated, else 0)", type=float, bounds=(0, None))
    repeat: int = option(1, "calls to time, each a history row", modes=("run",),
                         bounds=(1, None))

    def check(self) -> None:
        if self.group & (self.group - 1):
            raise InputError(f"--group must be a power of two, not {self.group}")


@dataclass
class CommandOptions(Options):
    """The call options and the uniform model's (N, density, seed, dtype)."""

    N: int | None = option(None, "vector length (uniform model)", type=int)
    density: float | None = option(None, "items per rank / N (uniform model)", type=float)
    dtype: str = option("float64", "value type")
    seed: int = option(0, "seed of the uniform model's vectors")


@dataclass(eq=False)
class Setup:
    """The prepared call."""

    options: Options
    nparts: int
    N: int
    fmt: Format
    streams: list            # per rank, the canonical input Stream (with values)
    algo: Algorithm
    plan: object             # daskhpc.comm.Plan of one call
    choice: dict | None      # the auto decision (None for a fixed algorithm)
    source: dict = field(default_factory=dict)
    timing: dict = field(default_factory=dict)

    @property
    def k(self) -> int:
        """max_i |H_i| (the thesis's k)."""
        return max((s.nitems if not s.dense else self.N) for s in self.streams)


def one_vector(v, N, r):
    """(idx, val) of one rank's vector, validated."""
    import scipy.sparse as sp

    if sp.issparse(v):
        c = sp.coo_array(v)
        if c.ndim == 2 and 1 not in c.shape:
            raise InputError(f"vector {r}: a sparse matrix of shape {c.shape}, not a vector")
        flat = c.coords[-1] if c.ndim == 1 or c.shape[0] == 1 else c.coords[0]
        idx, val, n = np.asarray(flat, np.int64), np.asarray(c.data), max(c.shape)
    elif isinstance(v, tuple):
        if len(v) != 2:
            raise InputError(f"vector {r}: a sparse vector is a pair (indices, values)")
        idx, val, n = np.asarray(v[0]), np.asarray(v[1]), N
        if idx.ndim != 1 or val.shape != idx.shape:
            raise InputError(f"vector {r}: {idx.size} indices but values of shape {val.shape}")
        if idx.size and idx.dtype.kind not in "iu":
            raise InputError(f"vector {r}: indices must be integers, got {idx.dtype}")
    else:
        a = np.asarray(v)
        if a.ndim != 1:
            raise InputError(f"vector {r}: expected a 1-D array, got shape {a.shape}")
        idx = np.flatnonzero(a)
        val, n = a[idx], a.size
    if N is not None and n is not None and n != N:
        raise InputError(f"vector {r} has length {n}, the others {N}")
    return idx.astype(np.int64, copy=False), val, n


def check_vector(idx, val, N: int, r: int, dtype) -> None:
    """The per-vector checks: indices in range and unique, finite float values."""
    if idx.size and (idx.min() < 0 or idx.max() >= N):
        raise InputError(f"vector {r}: index {int(idx.max() if idx.max() >= N else idx.min())}"
                         f" outside [0, {N})")
    if np.dtype(dtype).kind == "f" and not np.all(np.isfinite(val)):
        raise InputError(f"vector {r}: NaN or infinite value at index "
                         f"{int(idx[np.flatnonzero(~np.isfinite(val))[0]])}")
    srt = np.sort(idx)
    dup = srt[1:][np.diff(srt) == 0]
    if dup.size:
        raise InputError(f"vector {r}: index {int(dup[0])} given twice")


def as_vectors(vectors, N: int | None = None):
    """Validate per-rank vectors; returns (N, dtype, [(idx int64, val)])."""
    vectors = list(vectors)                 # a 2-D array: its rows
    if not vectors:
        raise InputError("an allreduce needs at least one vector")
    out = []
    for r, v in enumerate(vectors):
        idx, val, n = one_vector(v, N, r)
        N = n if N is None else N
        out.append((idx, val))
    if N is None:
        raise InputError("sparse (indices, values) vectors need N, the vector length")
    N = int(N)
    if not 1 <= N <= MAX_N:
        raise InputError(f"vector length N must lie in [1, 2^32] (uint32 indices), got {N}")
    kinds = {val.dtype.kind for _, val in out if val.size}
    if kinds - set("iuf"):
        raise InputError(f"values must be integers or floats, got {sorted(kinds)} kinds")
    dtype = np.result_type(*[val.dtype for _, val in out]) if out else np.float64
    if dtype.kind not in "iuf":
        dtype = np.dtype(np.float64)
    for r, (idx, val) in enumerate(out):
        check_vector(idx, val, N, r, dtype)
    return N, np.dtype(dtype), out


def read_vector(path: str):
    """One rank's vector file: ``(array, None)`` (``.npy``) or ``((idx, val), N)`` (``.npz``)."""
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path}: no such file")
    try:
        data = np.load(path, allow_pickle=False)
    except (ValueError, OSError) as e:
        raise InputError(f"{path}: not a .npy or .npz file ({str(e).split('.')[0]})") from None
    if isinstance(data, np.ndarray):
        return data, None
    with data:
        if "idx" not in data or "val" not in data:
            raise InputError(f"{path}: a .npz vector needs arrays 'idx' and 'val'")
        N = int(data["N"]) if "N" in data else None
        return (data["idx"], data["val"]), N


def read_vectors(paths, N: int | None = None):
    """The vectors of ``paths`` (one per rank) and their common length N (or None)."""
    vecs, Ns = zip(*[read_vector(p) for p in paths])
    Ns = {n for n in Ns if n is not None} | ({N} if N else set())
    if len(Ns) > 1:
        raise InputError(f"the vector files disagree on N: {sorted(Ns)}")
    return list(vecs), (Ns.pop() if Ns else None)


def validate_input(paths, N: int | None = None):
    """Read and check the vector files before a cluster starts; ``(vectors, N)`` or None."""
    if not paths:
        return None               # the uniform model: its options are checked by argparse
    vecs, N = read_vectors(paths, N)
    try:
        as_vectors(vecs, N)
    except InputError as e:
        raise InputError(f"{' '.join(paths)}: {e}") from None
    return vecs, N


def stream_of(idx, val, N: int, fmt: Format) -> Stream:
    """A rank's canonical input stream: sorted uint32 indices, the call's value type."""
    order = np.argsort(idx, kind="stable")
    return canon(Stream(0, N, np.asarray(idx)[order].astype(np.uint32),
                        np.asarray(val, fmt.dtype)[order]), fmt)


def prepare(vectors, nparts: int | None = None, *, N: int | None = None, source=None,
            **options) -> Setup:
    """Validate the vectors (as :func:`allreduce_local` takes them) and options; build the call."""
    opts = options_of(options)
    t0 = time.perf_counter()
    N, dtype, pairs = as_vectors(vectors, N)
    if nparts is not None and int(nparts) != len(pairs):
        raise InputError(f"--parts {nparts} but {len(pairs)} vectors")
    fmt = Format(dtype)
    streams = [stream_of(idx, val, N, fmt) for idx, val in pairs]
    return finish(opts, streams, N, fmt, source, t0)


def options_of(options: dict) -> Options:
    """Checked :class:`Options` from keyword arguments."""
    return checked_options(Options, options, "allreduce")


def finish(opts: Options, streams: list, N: int, fmt: Format, source, t0: float) -> Setup:
    """The call of these canonical streams: the ``auto`` choice (Table 3.1), algorithm, plan."""
    P = len(streams)
    choice = None
    name = opts.algorithm
    # a fixed algorithm on a given network is priced too (the report's prediction)
    priced = opts.alpha is not None and opts.beta is not None and name in CANDIDATES
    if name == "auto" or priced:
        k = max(s.nitems for s in streams)
        choice = choose(P, N, k, fmt.isize, cost_model(opts.alpha, opts.beta, opts.floor),
                        group=opts.group, candidates=CANDIDATES)
        if name == "auto":
            name = choice["algorithm"]
        else:          # priced, not chosen
            choice = {**choice, "algorithm": name, "predicted_s": choice["candidates"][name],
                      "fixed": True}
    algo = make(name, P, N, fmt, opts.group)
    t1 = time.perf_counter()
    plan = call_plan(algo, streams)
    t2 = time.perf_counter()
    src = dict(source or {"vectors": P})
    return Setup(opts, P, N, fmt, streams, algo, plan, choice, src,
                 {"prepare_s": t1 - t0, "plan_s": t2 - t1})
