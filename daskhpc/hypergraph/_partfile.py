"""Partition files: one part id per line (PaToH / KaHyPar / ours), and the SSGD pair format
(row parts, a ``-`` line, column parts; docs/cli.md, "Partition files")."""

from __future__ import annotations

import numpy as np


def _error(path, line, problem):
    from daskhpc.io import ReadError

    return ReadError(str(path), line, problem)


def _parse_ids(path, lines, first_line: int, nparts: int | None) -> np.ndarray:
    try:
        ids = np.array([int(t) for t in lines], dtype=np.int64)
    except ValueError:
        for k, t in enumerate(lines):
            try:
                int(t)
            except ValueError:
                raise _error(path, first_line + k, f"bad part id {t.strip()!r}") from None
        raise
    bad = np.flatnonzero((ids < 0) | ((ids >= nparts) if nparts else False))
    if bad.size:
        k = int(bad[0])
        limit = f"[0, {nparts})" if nparts else ">= 0"
        raise _error(path, first_line + k, f"part id {ids[k]} out of range {limit}")
    return ids


def _read_lines(path) -> list[str]:
    with open(path, encoding="utf-8") as f:
        lines = [s.strip() for s in f.read().splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    if not lines:
        raise _error(path, None, "empty partition file")
    return lines


def read_part_file(path, num_vertices: int | None = None, nparts: int | None = None) -> np.ndarray:
    """Part ids, one per line; checks the count against ``num_vertices`` and ids against K."""
    lines = _read_lines(path)
    ids = _parse_ids(path, lines, 1, nparts)
    if num_vertices is not None and ids.size != num_vertices:
        raise _error(path, len(lines), f"{ids.size} part ids for {num_vertices} vertices")
    return ids


def read_pair_file(path, num_rows: int | None = None, num_cols: int | None = None,
                   nparts: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Row parts, a ``-`` line, column parts (SSGD): returns (row_parts, col_parts)."""
    lines = _read_lines(path)
    try:
        sep = lines.index("-")
    except ValueError:
        raise _error(path, None, "no '-' line separating row parts from column parts") from None
    rows = _parse_ids(path, lines[:sep], 1, nparts)
    cols = _parse_ids(path, lines[sep + 1 :], sep + 2, nparts)
    if num_rows is not None and rows.size != num_rows:
        raise _error(path, sep, f"{rows.size} row part ids for {num_rows} rows")
    if num_cols is not None and cols.size != num_cols:
        raise _error(path, len(lines), f"{cols.size} column part ids for {num_cols} columns")
    return rows, cols


def write_pair_file(path, row_parts, col_parts) -> None:
    """Write the SSGD pair format."""
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(map(str, np.asarray(row_parts).tolist())))
        f.write("\n-\n")
        f.write("\n".join(map(str, np.asarray(col_parts).tolist())))
        f.write("\n")
