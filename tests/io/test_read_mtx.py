"""MatrixMarket reader: real SuiteSparse files, every variant, every malformation."""

import gzip

import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp

from daskhpc.io import ReadError, read, read_matrix_market


def write(tmp_path, text, name="m.mtx", gz=False):
    path = tmp_path / name
    raw = text.encode() if isinstance(text, str) else text
    path.write_bytes(gzip.compress(raw) if gz else raw)
    return path


def reference(path):
    """scipy's reader, as an independent check."""
    return sp.csr_array(scipy.io.mmread(path))


# -- real files ---------------------------------------------------------------

def test_bcsstk13_symmetric_real(shared_data):
    path = shared_data / "matrices" / "bcsstk13.mtx"
    s = read(path)
    assert s.format == "mtx" and s.shape == (2003, 2003)
    # The size line stores 42,943 entries (one triangle); the README's 83,883
    # is the expanded count: 2 * 42943 - 2003 diagonal entries.
    assert s.meta["stored_entries"] == 42943
    assert s.nnz == 2 * 42943 - 2003 == 83883
    assert s.meta == {"field": "real", "symmetry": "symmetric", "stored_entries": 42943}
    assert s.index_maps == (None, None)
    m = s.matrix
    assert isinstance(m, sp.csr_array) and m.dtype == np.float64 and m.has_canonical_format
    assert abs(m - m.T).max() == 0
    assert abs(m - reference(path)).max() == 0


def test_astro_ph_gz_symmetric_pattern(shared_data):
    path = shared_data / "matrices" / "astro-ph.mtx.gz"
    s = read(path)
    assert s.shape == (16706, 16706) and s.nnz == 242502
    assert s.meta["field"] == "pattern" and s.meta["stored_entries"] == 121251
    assert set(np.unique(s.matrix.data)) == {1.0}
    assert abs(s.matrix - reference(path)).max() == 0


# -- variants -------------------------------------------------------------------

GENERAL = """%%MatrixMarket matrix coordinate real general
% a comment
3 4 5
1 1 1.5
3 4 -2e3
2 2 0
1 1 0.25
3 1 7
"""


def test_general_real_sums_duplicates_keeps_zeros(tmp_path):
    path = write(tmp_path, GENERAL)
    s = read_matrix_market(path)
    assert s.shape == (3, 4)
    assert s.matrix.toarray().tolist() == [[1.75, 0, 0, 0], [0, 0, 0, 0], [7, 0, 0, -2000]]
    assert s.nnz == 4   # (1,1) summed, the explicit zero at (2,2) kept
    assert abs(s.matrix - reference(path)).max() == 0


def test_symmetric_expands_both_triangles_diagonal_once(tmp_path):
    path = write(tmp_path, "%%MatrixMarket matrix coordinate real symmetric\n"
                           "3 3 4\n1 1 2\n2 1 3\n3 2 4\n3 3 5\n")
    s = read_matrix_market(path)
    assert s.matrix.toarray().tolist() == [[2, 3, 0], [3, 0, 4], [0, 4, 5]]
    assert s.nnz == 6
    assert abs(s.matrix - reference(path)).max() == 0


def test_symmetric_upper_triangle_is_mirrored(tmp_path):
    path = write(tmp_path, "%%MatrixMarket matrix coordinate real symmetric\n"
                           "2 2 2\n1 2 3\n2 2 1\n")
    assert read_matrix_market(path).matrix.toarray().tolist() == [[0, 3], [3, 1]]


def test_skew_symmetric_negates_mirror(tmp_path):
    path = write(tmp_path, "%%MatrixMarket matrix coordinate real skew-symmetric\n"
                           "3 3 2\n2 1 3\n3 1 -1\n")
    s = read_matrix_market(path)
    assert s.matrix.toarray().tolist() == [[0, -3, 1], [3, 0, 0], [-1, 0, 0]]
    assert abs(s.matrix - reference(path)).max() == 0


def test_pattern_values_are_one_even_when_repeated(tmp_path):
    path = write(tmp_path, "%%MatrixMarket matrix coordinate pattern general\n"
                           "2 3 3\n1 3\n2 1\n1 3\n")
    s = read_matrix_market(path)
    assert s.matrix.toarray().tolist() == [[0, 0, 1], [1, 0, 0]]
    assert s.meta["field"] == "pattern"


def test_pattern_symmetric(tmp_path):
    path = write(tmp_path, "%%MatrixMarket matrix coordinate pattern symmetric\n"
                           "3 3 3\n2 1\n3 1\n2 2\n")
    s = read_matrix_market(path)
    assert s.matrix.toarray().tolist() == [[0, 1, 1], [1, 1, 0], [1, 0, 0]]
    assert abs(s.matrix - reference(path)).max() == 0


@pytest.mark.parametrize("field", ["integer", "double", "real"])
def test_integer_and_double_fields(tmp_path, field):
    path = write(tmp_path, f"%%MatrixMarket matrix coordinate {field} general\n"
                           "2 2 2\n1 2 -7\n2 1 12\n")
    s = read_matrix_market(path)
    assert s.matrix.toarray().tolist() == [[0, -7], [12, 0]]
    assert s.matrix.dtype == np.float64
    assert s.meta["field"] == ("real" if field == "double" else field)


def test_crlf_tabs_blank_lines_and_case_insensitive_banner(tmp_path):
    text = ("%%MatrixMarket MATRIX Coordinate Real General\r\n%c\r\n\r\n"
            "2\t2  2\r\n 1\t1\t1.0\r\n\r\n2 2   2.0\r\n")
    s = read_matrix_market(write(tmp_path, text))
    assert s.matrix.toarray().tolist() == [[1, 0], [0, 2]]


def test_gzip_and_no_trailing_newline(tmp_path):
    path = write(tmp_path, GENERAL.rstrip("\n"), name="m.mtx.gz", gz=True)
    s = read(path)
    assert s.nnz == 4 and s.matrix[2, 3] == -2000


def test_zero_entries(tmp_path):
    s = read_matrix_market(write(tmp_path, "%%MatrixMarket matrix coordinate real general\n"
                                           "3 2 0\n"))
    assert s.shape == (3, 2) and s.nnz == 0


# -- malformed input --------------------------------------------------------------

BANNER = "%%MatrixMarket matrix coordinate real general\n"

MALFORMED = {
    "missing banner": ("3 3 1\n1 1 1\n", 1, "missing MatrixMarket banner"),
    "banner words": ("%%MatrixMarket matrix coordinate real\n1 1 1\n1 1 1\n", 1,
                     "banner must read"),
    "array format": ("%%MatrixMarket matrix array real general\n2 1\n1\n2\n", 1,
                     "'array' MatrixMarket files are not supported"),
    "complex": ("%%MatrixMarket matrix coordinate complex general\n1 1 1\n1 1 1 0\n", 1,
                "field 'complex' is not supported"),
    "hermitian": ("%%MatrixMarket matrix coordinate real hermitian\n1 1 1\n1 1 1\n", 1,
                  "symmetry 'hermitian' is not supported"),
    "vector": ("%%MatrixMarket vector coordinate real general\n1 1 1\n1 1 1\n", 1,
               "object 'vector' is not supported"),
    "size line columns": (BANNER + "3 3\n1 1 1\n", 2, "size line must hold 3 integers"),
    "size line token": (BANNER + "3 x 1\n1 1 1\n", 2, "bad token 'x'"),
    "negative size": (BANNER + "3 -3 1\n1 1 1\n", 2, "negative"),
    "bad token": (BANNER + "2 2 2\n1 1 1.0\n2 2 1.0e\n", 4, "bad token '1.0e'"),
    "row out of range": (BANNER + "2 2 2\n1 1 1\n3 1 1\n", 4, "row index 3 out of range 1..2"),
    "row zero": (BANNER + "2 2 2\n0 1 1\n1 1 1\n", 3, "row index 0 out of range 1..2"),
    "column out of range": (BANNER + "2 2 2\n1 1 1\n1 5 1\n", 4,
                            "column index 5 out of range 1..2"),
    "non-integer index": (BANNER + "2 2 1\n1.5 1 1\n", 3, "row index 1.5 is not an integer"),
    "too few columns": (BANNER + "2 2 2\n1 1 1\n2 2\n", 4,
                        "expected 3 columns (row col value), found 2"),
    "too many columns": (BANNER + "2 2 1\n1 1 1 9\n", 3, "expected 3 columns"),
    "pattern with values": ("%%MatrixMarket matrix coordinate pattern general\n2 2 1\n1 1 1\n",
                            3, "expected 2 columns (row col), found 3"),
    "nan": (BANNER + "2 2 2\n1 1 1\n2 2 nan\n", 4, "value is nan (NaN/inf not allowed)"),
    "inf": (BANNER + "2 2 2\n1 1 -inf\n2 2 1\n", 3, "value is -inf (NaN/inf not allowed)"),
    "integer field with fraction": ("%%MatrixMarket matrix coordinate integer general\n"
                                    "2 2 1\n1 1 2.5\n", 3, "value 2.5 is not an integer"),
    "fewer entries": (BANNER + "% note\n3 3 4\n1 1 1\n2 2 1\n3 3 1\n\n", 6,
                      "file ends after 3 of the 4 entries"),
    "no entries": (BANNER + "3 3 4\n", 2, "file ends after 0 of the 4 entries"),
    "more entries": (BANNER + "3 3 1\n1 1 1\n2 2 1\n", 4, "more entries than the 1"),
    "symmetric not square": ("%%MatrixMarket matrix coordinate real symmetric\n2 3 1\n1 1 1\n",
                             2, "must be square"),
    "both triangles": ("%%MatrixMarket matrix coordinate real symmetric\n3 3 3\n2 1 1\n"
                       "3 3 1\n1 2 1\n", 5, "entry (1, 2) and its mirror are both stored"),
    "skew diagonal": ("%%MatrixMarket matrix coordinate real skew-symmetric\n2 2 1\n1 1 4\n",
                      3, "nonzero diagonal"),
}


@pytest.mark.parametrize("text, line, problem", MALFORMED.values(), ids=MALFORMED.keys())
def test_malformed(tmp_path, text, line, problem):
    path = write(tmp_path, text)
    with pytest.raises(ReadError) as info:
        read_matrix_market(path)
    e = info.value
    assert (e.path, e.line) == (str(path), line)
    assert problem in e.problem, e.problem
    assert str(e).startswith(f"{path}:{line}: ")


@pytest.mark.parametrize("text", ["", "\n\n  \n", BANNER, BANNER + "% only comments\n\n"])
def test_empty_file(tmp_path, text):
    path = write(tmp_path, text)
    with pytest.raises(ReadError, match="empty file") as info:
        read_matrix_market(path)
    assert info.value.path == str(path) and info.value.line is None


def test_truncated_gzip(tmp_path):
    whole = gzip.compress(GENERAL.encode() * 50)
    path = write(tmp_path, whole[: len(whole) // 2], name="m.mtx.gz")
    with pytest.raises(ReadError, match="truncated gzip") as info:
        read(path)
    assert info.value.path == str(path) and info.value.line is None


def test_truncated_gzip_last_line_error_names_file(tmp_path):
    # A file cut mid-entry (not compressed) reports its last line.
    path = write(tmp_path, BANNER + "2 2 2\n1 1 1\n2 2")
    with pytest.raises(ReadError) as info:
        read_matrix_market(path)
    assert info.value.line == 4 and "expected 3 columns" in info.value.problem
