"""Readers: sparse input files -> scipy.sparse / sparse.COO / numpy.

Every reader detects gzip content whatever the name, and raises :class:`ReadError` naming
the file and line of what is malformed. No dask here: reading a file must not need a
cluster (the Dask-collection helpers import dask only when called). A bad collection is a
one-line InputError naming the column or partition, from the metadata where it tells.

Examples
--------
>>> from daskhpc.io import read
>>> s = read("ratings.csv")                     # doctest: +SKIP
>>> s.shape, s.nnz                              # doctest: +SKIP
((610, 9724), 100836)
"""

from ._collections import (Nonzeros, check_array, gathered, is_collection, labels_route,
                           read_nonzeros, rereading, route)
from ._collections_edges import (Edges, Rows, check_rows, join_rows, read_edge_list,
                                 read_rows, rows_route)
from ._collections_ratings import (ratings_files, read_ratings_frame, repeat_error,
                                   repeated_pair)
from ._common import FORMATS, SparseInput
from ._detect import detect_format, formats_of, read
from ._edgecsv import read_edge_csv
from ._errors import ReadError
from ._libsvm import read_libsvm
from ._mtx import read_matrix_market
from ._nodes import read_node_features, read_node_labels
from ._paths import expand_patterns
from ._ratings import read_ratings
from ._snap import read_snap
from ._tns import read_tns, read_tns_arrays

__all__ = ["read", "detect_format", "formats_of", "read_matrix_market", "read_snap", "read_tns",
           "read_tns_arrays",
           "read_libsvm", "read_ratings", "read_edge_csv", "read_node_features",
           "read_node_labels", "ReadError", "SparseInput", "FORMATS", "expand_patterns",
           # Dask collections (daskhpc.io._collections; dask imported only when used)
           "is_collection", "read_nonzeros", "route", "labels_route", "Nonzeros", "gathered",
           "rereading", "check_array"]
# edge lists and dense row collections (gcn, linear)
__all__ += ["read_edge_list", "Edges", "read_rows", "Rows", "rows_route", "join_rows",
            "check_rows"]
# ratings with original ids (ssgd)
__all__ += ["read_ratings_frame", "ratings_files", "repeated_pair", "repeat_error"]
