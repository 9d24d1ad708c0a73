"""Applications of batched SpGEMM (section V-B): A·Aᵀ, triangles, a Markov clustering step."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from daskhpc.errors import InputError
from daskhpc.spgemm._consumers import MaskedSum, Prune
from daskhpc.spgemm._api import as_given, multiply
from daskhpc.spgemm._data import like_input, matrix_of


def aat(a, **kwargs):
    """``A·Aᵀ`` (sequence overlap, Jaccard similarity; section V-G) with :func:`multiply`."""
    given = matrix_of(a)
    a = sp.csr_array(given)
    return as_given(multiply(a, a.T.tocsr(), **kwargs), given)


def triangle_count(adjacency, **kwargs) -> float:
    """Triangles of an undirected graph: ``sum((L·U) .* A) / 2`` (Azad et al. 2015).

    L and U are the strict triangles of the symmetrised pattern; the product is masked
    by A batch by batch (:class:`MaskedSum`), so only a count leaves the workers.

    Parameters
    ----------
    adjacency : scipy sparse, square
    **kwargs
        Passed to :func:`multiply` (``client``, ``grid``, ``memory_per_worker``, ...).

    Returns
    -------
    float
        The number of triangles (an integer value).

    Examples
    --------
    >>> from daskhpc import datasets
    >>> triangle_count(datasets.cora().adjacency, client=client)   # doctest: +SKIP
    1630.0
    """
    a = sp.csr_array(adjacency)
    if a.shape[0] != a.shape[1]:
        raise InputError(f"an adjacency matrix must be square, got {a.shape}")
    pattern = ((a + a.T) != 0).astype(np.float64)
    pattern.setdiag(0)
    pattern.eliminate_zeros()
    lower = sp.tril(pattern, k=-1, format="csr")
    upper = sp.triu(pattern, k=1, format="csr")
    res = multiply(lower, upper, consume=MaskedSum(), mask=pattern, **kwargs)
    return res.value / 2.0


def column_stochastic(a) -> sp.csr_array:
    """Add self loops and scale every column to sum 1 (the MCL start matrix)."""
    given = a
    a = sp.csr_array(a, dtype=np.float64)
    a = abs(a) + sp.eye_array(a.shape[0], format="csr")
    sums = np.asarray(a.sum(axis=0)).ravel()
    return like_input(sp.csr_array(a @ sp.diags_array(1.0 / sums)), given)


def mcl_step(a, *, inflation: float = 2.0, threshold: float = 1e-4, top_k: int = 100,
             **kwargs):
    """One Markov clustering iteration: expand (A·A) batch by batch, prune, inflate.

    Batches are pruned as they come (below ``threshold`` dropped, then the ``top_k``
    largest of each column kept, as HipMCL, section V-C); inflation raises entries to
    ``inflation`` and rescales columns to sum 1.

    Returns
    -------
    (scipy.sparse.csr_array, SpgemmResult)
        The next MCL matrix (``csr_matrix`` for a ``spmatrix`` input) and the run's result.
    """
    res = multiply(a, a, consume=Prune(k=top_k, threshold=threshold), **kwargs)
    pruned = sp.csr_array(res.matrix)
    pruned.data **= inflation
    sums = np.asarray(pruned.sum(axis=0)).ravel()
    sums[sums == 0] = 1.0
    return like_input(sp.csr_array(pruned @ sp.diags_array(1.0 / sums)), a), res
