"""CSV edge lists, node features (JSON) and node labels (CSV): values and file:line errors."""

from __future__ import annotations

import gzip

import numpy as np
import pytest

from daskhpc.io import (ReadError, detect_format, read, read_edge_csv, read_node_features,
                        read_node_labels)


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_edge_csv_with_header_and_symmetrize(tmp_path):
    p = write(tmp_path, "edges.csv", "id_1,id_2\n0,1\n1,2\n2,2\n0,1\n")
    g = read_edge_csv(p)
    assert g.matrix.toarray().tolist() == [[0, 1, 0], [0, 0, 1], [0, 0, 1]]
    assert g.meta["header"] == ["id_1", "id_2"] and g.meta["duplicate_edges"] == 1
    assert g.meta["self_loops"] == 1 and g.meta["directed"]
    u = read_edge_csv(p, symmetrize=True, num_nodes=4)
    assert u.shape == (4, 4) and (u.matrix != u.matrix.T).nnz == 0
    assert detect_format(p) == "edges" and read(p).nnz == 3
    gz = tmp_path / "e.csv.gz"
    gz.write_bytes(gzip.compress(b"0,3\n3,1\n"))
    assert read(gz).shape == (4, 4) and read(gz).meta["header"] is None


@pytest.mark.parametrize("text, line, msg", [
    ("a,b\n0,1\n1,2,3\n", 3, "expected 2 fields"),
    ("0,1\n1,x\n", 2, "bad token 'x'"),
    ("0,1\n-1,2\n", 2, "node ids must be non-negative"),
    ("0,1\n1.5,2\n", 2, "node id 1.5 is not an integer"),
    ('0,1\n"1",2\n', 2, "quoted field"),
    ("id_1,id_2\n", None, "empty file: a header but no edges"),
    ("0,1\n7,2\n", 2, "node id 7 is not below the node count 5"),
])
def test_edge_csv_errors_name_the_line(tmp_path, text, line, msg):
    p = write(tmp_path, "e.csv", text)
    with pytest.raises(ReadError) as e:
        read_edge_csv(p, num_nodes=5)
    where = f"{p}:{line}: " if line else f"{p}: "
    assert str(e.value).startswith(where + msg)


def test_node_features(tmp_path):
    p = write(tmp_path, "f.json", '{"0": [2, 0], "2": [1],\n "1": []}')
    X = read_node_features(p)
    assert X.toarray().tolist() == [[1, 0, 1], [0, 0, 0], [0, 1, 0]]
    assert read_node_features(p, num_nodes=4, num_features=5).shape == (4, 5)


@pytest.mark.parametrize("text, line, msg", [
    ('{"0": [1],\n "1": [2, -3]}', 2, "feature ids must be non-negative"),
    ('{"0": [1],\n "x": [2]}', 2, "node id 'x'"),
    ('{"0": [1],\n "1": [2,]}', 2, "not valid JSON"),
    ('{"0": [1],\n "1": 4}', 2, "expected a list"),
    ('{"0": [1],\n "9": [2]}', 2, "not below the node count 3"),
])
def test_node_feature_errors(tmp_path, text, line, msg):
    p = write(tmp_path, "f.json", text)
    with pytest.raises(ReadError, match=msg) as e:
        read_node_features(p, num_nodes=3)
    assert e.value.line == line


def test_node_labels_with_quoted_commas(tmp_path):
    p = write(tmp_path, "t.csv", 'id,name,kind\n1,"a, b",tv\n0,c,gov\n2,"d",tv\n')
    y, classes = read_node_labels(p)
    assert classes == ["gov", "tv"] and y.tolist() == [0, 1, 1]


@pytest.mark.parametrize("text, line, msg", [
    ("id,kind\n0,a\n0,b\n", 3, "node 0 has a second row"),
    ("id,kind\n0,a\n1,b,c\n", 3, "expected 2 fields"),
    ("id,kind\n0,a\nx,b\n", 3, "node id 'x'"),
    ("id,kind\n0,a\n2,b\n", None, "node 1 has no row"),
    ("node,kind\n0,a\n", 1, "no column 'id'"),
])
def test_node_label_errors(tmp_path, text, line, msg):
    p = write(tmp_path, "t.csv", text)
    with pytest.raises(ReadError, match=msg) as e:
        read_node_labels(p)
    assert e.value.line == line


def test_facebook_page_page(shared_data):
    from daskhpc.datasets import facebook

    g = facebook(shared_data / "graphs" / "facebook_page_page")
    assert g.adjacency.shape == (22470, 22470)
    assert g.adjacency.nnz == 2 * 170823 + 179          # mutual links both ways + self loops
    assert g.features.shape == (22470, 4714) and g.features.nnz == 314583
    assert np.bincount(g.labels[g.idx_train]).tolist() == [20, 20, 20, 20]
    assert (g.idx_val.size, g.idx_test.size) == (500, 1000)
    assert not (set(g.idx_train) & set(g.idx_val) or set(g.idx_val) & set(g.idx_test))
