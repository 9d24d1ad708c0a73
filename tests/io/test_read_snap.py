"""SNAP edge list reader: real graphs, header detection both ways, malformations."""

import gzip
import time

import numpy as np
import pytest

from daskhpc.io import ReadError, read, read_snap


def write(tmp_path, text, name="g.txt", gz=False):
    path = tmp_path / name
    raw = text.encode() if isinstance(text, str) else text
    path.write_bytes(gzip.compress(raw) if gz else raw)
    return path


def independent_edges(path):
    """Edges parsed with plain Python, comment lines dropped."""
    text = gzip.decompress(path.read_bytes()).decode()
    body = "\n".join(ln for ln in text.splitlines() if not ln.startswith("#"))
    return np.array(body.split(), dtype=np.int64).reshape(-1, 2)


def edge_set(s):
    coo = s.matrix.tocoo()
    m = s.index_maps[0]
    r, c = (coo.row, coo.col) if m is None else (m[coo.row], m[coo.col])
    return set(zip(r.tolist(), c.tolist()))


# -- real files ---------------------------------------------------------------

@pytest.mark.slow             # CI budget (20 min on 2 cores): default run keeps a lighter test of the same path
def test_slashdot_directed_no_duplicates(shared_data):
    path = shared_data / "graphs" / "soc-Slashdot0902.txt.gz"
    t = time.perf_counter()
    s = read(path)
    elapsed = time.perf_counter() - t
    assert elapsed < 10, f"reading 948k edges took {elapsed:.1f}s"
    assert s.format == "snap" and s.shape == (82168, 82168)
    assert s.nnz == 948464 and s.meta["duplicate_edges"] == 0
    assert s.meta == {"header_detected": False, "directed": True, "edge_lines": 948464,
                      "duplicate_edges": 0, "columns": 2}
    assert s.index_maps == (None, None)   # ids are 0..82167 already
    assert s.matrix.diagonal().sum() == 78303   # self loops kept
    assert set(np.unique(s.matrix.data)) == {1.0}
    edges = independent_edges(path)
    assert len(edges) == 948464
    assert edge_set(s) == set(map(tuple, edges.tolist()))


def test_enron_count_line_is_a_header(shared_data):
    path = shared_data / "graphs" / "email-Enron.txt.gz"
    s = read(path)
    assert s.meta["header_detected"] is True
    assert s.shape == (36692, 36692) and s.nnz == 367662
    assert s.index_maps == (None, None)
    edges = independent_edges(path)
    assert edges[0].tolist() == [36692, 367662]
    assert edge_set(s) == set(map(tuple, edges[1:].tolist()))


# -- variants -------------------------------------------------------------------

def test_comments_tabs_spaces_crlf(tmp_path):
    text = "# c1\r\n% c2\r\n0\t1\r\n  1  2 \r\n\r\n2\t 0\r\n# end\r\n"
    s = read_snap(write(tmp_path, text))
    assert s.shape == (3, 3)
    assert s.matrix.toarray().tolist() == [[0, 1, 0], [0, 0, 1], [1, 0, 0]]
    assert s.meta["header_detected"] is False


def test_sparse_ids_reindexed_with_one_map(tmp_path):
    s = read_snap(write(tmp_path, "10 20\n20 5\n5 10\n10 10\n"))
    ids, same = s.index_maps
    assert ids.tolist() == [5, 10, 20] and same is ids and ids.dtype == np.int64
    assert s.shape == (3, 3)
    assert edge_set(s) == {(10, 20), (20, 5), (5, 10), (10, 10)}


def test_duplicate_edges_stay_one(tmp_path):
    s = read_snap(write(tmp_path, "0 1\n0 1\n1 0\n0 1\n"))
    assert s.matrix.toarray().tolist() == [[0, 1], [1, 0]]
    assert s.meta["duplicate_edges"] == 2


@pytest.mark.parametrize("kw", [{"directed": False}, {"symmetrize": True}])
def test_undirected(tmp_path, kw):
    s = read_snap(write(tmp_path, "0 1\n1 2\n2 1\n3 3\n"), **kw)
    assert s.matrix.toarray().tolist() == [[0, 1, 0, 0], [1, 0, 1, 0], [0, 1, 0, 0],
                                           [0, 0, 0, 1]]
    assert s.meta["directed"] is False


def test_header_detected_gives_isolated_nodes(tmp_path):
    s = read_snap(write(tmp_path, "# comment\n6 3\n0 1\n1 2\n2 0\n"))
    assert s.meta["header_detected"] is True
    assert s.shape == (6, 6) and s.nnz == 3 and s.index_maps == (None, None)


@pytest.mark.parametrize("text, why", [
    ("3 2\n0 1\n1 2\n2 0\n", "three edges follow, not two"),
    ("3 2\n0 1\n1 5\n", "id 5 is not below 3"),
    ("0 2\n0 1\n1 0\n", "zero nodes"),
])
def test_two_int_first_line_that_is_not_a_header_stays_an_edge(tmp_path, text, why):
    s = read_snap(write(tmp_path, text))
    first = tuple(int(v) for v in text.split()[:2])
    assert s.meta["header_detected"] is False, why
    assert first in edge_set(s)


def test_header_can_be_forced_either_way(tmp_path):
    path = write(tmp_path, "3 2\n0 1\n1 2\n")
    assert read_snap(path).meta["header_detected"] is True
    s = read_snap(path, header=False)
    assert s.meta["header_detected"] is False and (3, 2) in edge_set(s)
    forced = read_snap(write(tmp_path, "4 1\n0 1\n", name="h.txt"), header=True)
    assert forced.shape == (4, 4)


@pytest.mark.parametrize("text, line, problem", [
    ("3 5\n0 1\n", 1, "header announces 5 edges, the file holds 1"),
    ("3 2\n0 1\n1 3\n", 3, "node id 3 is not below the header's node count 3"),
])
def test_forced_header_that_does_not_fit(tmp_path, text, line, problem):
    path = write(tmp_path, text)
    with pytest.raises(ReadError) as info:
        read_snap(path, header=True)
    assert info.value.line == line and problem in info.value.problem


def test_gzip(tmp_path):
    s = read(write(tmp_path, "# x\n1 2\n2 3\n", name="g.txt.gz", gz=True))
    assert s.shape == (3, 3) and s.index_maps[0].tolist() == [1, 2, 3]


# -- malformed input --------------------------------------------------------------

MALFORMED = {
    "bad token": ("0 1\n1 two\n", 2, "bad token 'two'"),
    "three then two": ("# h\n0 1 5\n1 2 3\n2 3\n", 4, "expected 3 columns like line 3, found 2"),
    "two then three": ("0 1\n1 2\n1 2 3\n", 3, "expected 2 columns like line 2, found 3"),
    "two, not a header, then three": ("# h\n0 1\n1 2 3\n", 2,
                                      "expected 3 columns like line 3, found 2"),
    "four columns": ("0 1 2 3\n", 1, "expected 2 or 3 columns (source target [weight or "
                                     "timestamp]), found 4"),
    "one column": ("0 1\n\n7\n", 3, "expected 2 or 3 columns"),
    "nan weight": ("0 1 1.5\n1 2 nan\n", 2, "edge weight is nan"),
    "negative id": ("0 1\n-1 2\n", 2, "non-negative"),
    "non-integer id": ("0 1\n1 2.5\n", 2, "node id 2.5 is not an integer"),
    "nan id": ("0 1\nnan 2\n", 2, "node id nan is not an integer"),
    "inf id": ("0 1\n1 inf\n", 2, "node id inf is not an integer"),
    "huge id": ("0 1\n1 18014398509481984\n", 2, "node id 18014398509481984 is too large"),
    "comma separated": ("0,1\n", 1, "expected 2 or 3 columns"),
}


@pytest.mark.parametrize("text, line, problem", MALFORMED.values(), ids=MALFORMED.keys())
def test_malformed(tmp_path, text, line, problem):
    path = write(tmp_path, text)
    with pytest.raises(ReadError) as info:
        read_snap(path, values="weights" if "weight" in problem else "ignore")
    e = info.value
    assert (e.path, e.line) == (str(path), line)
    assert problem in e.problem, e.problem


def test_bad_token_deep_in_a_large_file_is_located(tmp_path):
    lines = [f"{i} {i + 1}" for i in range(20000)]
    lines[15321] = "15321 1x"
    path = write(tmp_path, "# big\n" + "\n".join(lines) + "\n")
    with pytest.raises(ReadError, match="bad token '1x'") as info:
        read_snap(path)
    assert info.value.line == 15323


@pytest.mark.parametrize("text", ["", "# only\n% comments\n", "\r\n\r\n"])
def test_empty_file(tmp_path, text):
    path = write(tmp_path, text)
    with pytest.raises(ReadError, match="empty file") as info:
        read_snap(path)
    assert info.value.path == str(path) and info.value.line is None


def test_truncated_gzip(tmp_path):
    whole = gzip.compress("".join(f"{i} {i + 1}\n" for i in range(5000)).encode())
    path = write(tmp_path, whole[:-20], name="g.txt.gz")
    with pytest.raises(ReadError, match="truncated gzip") as info:
        read(path)
    assert info.value.path == str(path) and info.value.line is None


# -- a third column (weights or timestamps, SNAP CollegeMsg) ---------

COLLEGE_MSG = "1 2 1082008561\n3 4 1082155839\n5 2 1082414391\n1 2 1082426521\n"


def test_collegemsg_timestamps_are_ignored_by_default(tmp_path):
    s = read_snap(write(tmp_path, COLLEGE_MSG))
    assert s.shape == (5, 5) and s.nnz == 3 and set(s.matrix.data.tolist()) == {1.0}
    assert s.meta["columns"] == 3 and s.meta["values"] == "ignore"
    assert s.meta["third_column"].tolist() == [1082008561, 1082155839, 1082414391, 1082426521]
    assert s.meta["duplicate_edges"] == 1


def test_a_third_column_read_as_weights_sums_repeated_edges(tmp_path):
    path = write(tmp_path, "# w\n10 20 0.5\n20 30 2\n10 20 1.25\n")
    s = read_snap(path, values="weights")
    a = s.matrix.toarray()
    assert s.index_maps[0].tolist() == [10, 20, 30]
    assert a[0, 1] == 1.75 and a[1, 2] == 2.0 and s.nnz == 2
    u = read_snap(path, values="weights", directed=False).matrix.toarray()
    assert u[1, 0] == 1.75 and u[0, 1] == 1.75
    # the same through read() and the CLI's spelling of the option
    assert read(path, format="snap:weights").matrix.toarray()[0, 1] == 1.75
    with pytest.raises(ReadError, match="options: snap:ignore, snap:weights"):
        read(path, format="snap:wait")


def test_a_count_line_before_three_columns_is_a_header(tmp_path):
    s = read_snap(write(tmp_path, "6 2\n0 1 7\n4 5 9\n"))
    assert s.meta["header_detected"] and s.shape == (6, 6)
    assert s.meta["third_column"].tolist() == [7, 9]


@pytest.mark.parametrize("text, hint", [
    # SNAP's "# Undirected graph" header, each edge once in either order
    ("# Undirected graph: g.txt\n0\t1\n2\t1\n2\t3\n", "its header says undirected, and every "
     "edge is listed in one direction only"),
    # no header, every edge from the lower id to the higher (facebook_combined.txt)
    ("0 1\n0 2\n1 2\n3 3\n", "every edge goes from the lower node id to the higher, none "
     "reversed"),
    ("# Undirected graph: g.txt\n0\t1\n1\t0\n1\t2\n2\t1\n", None),     # both ways already
    ("# Directed graph\n0\t1\n1\t2\n", None),                         # said directed
    ("0 1\n2 1\n2 0\n", None),                  # one way, unordered, nothing said: directed
])
def test_an_undirected_looking_list_read_as_directed_is_noted(tmp_path, text, hint):
    path = write(tmp_path, text)
    assert read_snap(path).meta.get("looks_undirected") == hint
    assert "looks_undirected" not in read_snap(path, symmetrize=True).meta


def test_slashdot_saved_once_per_pair_but_said_directed(shared_data):
    """'Directed graph (each unordered pair of nodes is saved once)': no hint."""
    g = read_snap(shared_data / "graphs" / "soc-Slashdot0902.txt.gz")
    assert "looks_undirected" not in g.meta
