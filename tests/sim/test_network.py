"""Offline road networks: bundled extracts, files, cache, and clear errors."""

from __future__ import annotations

import bz2

import networkx as nx
import numpy as np
import pytest

from mdpsim.errors import InputError
from mdpsim.geo.network import load_network, summarize


def test_bundled_helsinki_loads_offline_projected_and_strongly_connected(helsinki_walk):
    G = helsinki_walk
    assert G.number_of_nodes() > 2000
    assert nx.is_strongly_connected(G)
    assert str(G.graph["crs"]).startswith("EPSG:326")  # UTM north
    lengths = np.array([d["length"] for _, _, d in G.edges(data=True)])
    assert np.all(np.isfinite(lengths)) and np.all(lengths >= 0)
    xs = np.array([d["x"] for _, d in G.nodes(data=True)])
    assert xs.min() > 1e4  # metres in UTM, not degrees


def test_summary_reports_length_and_extent_in_km(helsinki_walk):
    s = summarize(helsinki_walk)
    assert 50 < s.total_length_km < 200
    assert 0.5 < s.width_km < 3 and 0.5 < s.height_km < 3
    assert s.n_edges == helsinki_walk.number_of_edges()


def test_test_extract_loads_for_walk_and_drive(helsinki_test_walk):
    assert nx.is_strongly_connected(helsinki_test_walk)
    drive = load_network("helsinki-test", network_type="drive")
    assert 0 < drive.number_of_nodes() < helsinki_test_walk.number_of_nodes()


def test_second_load_comes_from_the_graphml_cache(helsinki_walk, monkeypatch):
    import mdpsim.geo.network as network

    assert load_network("helsinki") is helsinki_walk  # memoised in this process
    monkeypatch.setattr(network, "_MEMO", {})
    monkeypatch.setattr(network, "_read_pbf", lambda *a: pytest.fail("parsed the PBF again"))
    again = load_network("helsinki")
    assert again.number_of_nodes() == helsinki_walk.number_of_nodes()
    assert again.graph.get("mdpsim_processed") is True
    assert list((network.cache_dir() / "graphs").glob("Helsinki-walk-*.graphml"))


def test_graphml_file_round_trips(helsinki_test_walk, tmp_path):
    import osmnx as ox

    path = tmp_path / "net.graphml"
    ox.save_graphml(helsinki_test_walk, path)
    G = load_network(str(path))
    assert G.number_of_edges() == helsinki_test_walk.number_of_edges()


_OSM_XML = """<?xml version='1.0' encoding='UTF-8'?>
<osm version="0.6">
  <node id="1" lat="60.1700" lon="24.9400"/>
  <node id="2" lat="60.1710" lon="24.9400"/>
  <node id="3" lat="60.1710" lon="24.9420"/>
  <node id="4" lat="60.1700" lon="24.9420"/>
  <way id="10"><nd ref="1"/><nd ref="2"/><nd ref="3"/><tag k="highway" v="residential"/></way>
  <way id="11"><nd ref="3"/><nd ref="4"/><nd ref="1"/><tag k="highway" v="footway"/></way>
  <way id="12"><nd ref="4"/><nd ref="999"/><tag k="highway" v="residential"/></way>
  <way id="13"><nd ref="2"/><nd ref="4"/><tag k="highway" v="residential"/></way>
  <way id="14"><nd ref="1"/><nd ref="3"/><tag k="highway" v="motorway"/></way>
</osm>
"""


@pytest.mark.parametrize("suffix", [".osm", ".osm.bz2"])
def test_osm_xml_clipped_at_the_border_loads_and_filters_by_type(tmp_path, suffix):
    path = tmp_path / f"tiny{suffix}"
    data = _OSM_XML.encode()
    path.write_bytes(bz2.compress(data) if suffix.endswith("bz2") else data)
    walk = load_network(str(path), network_type="walk")
    assert walk.number_of_nodes() >= 2  # node 999 is outside the file: no crash
    assert "motorway" not in _highways(walk)
    drive = load_network(str(path), network_type="drive")
    assert _highways(drive) == {"residential"}


def _highways(G) -> set[str]:
    out: set[str] = set()
    for _, _, value in G.edges(data="highway"):
        out.update(value if isinstance(value, list) else [value])
    return out


def test_unknown_network_type_is_named():
    with pytest.raises(InputError, match="network_type='bike'"):
        load_network("helsinki", network_type="bike")


def test_missing_file_names_offline_alternatives(tmp_path):
    with pytest.raises(InputError, match="file not found.*helsinki"):
        load_network(str(tmp_path / "nowhere.osm.pbf"))


def test_empty_file_is_refused(tmp_path):
    path = tmp_path / "empty.osm"
    path.write_bytes(b"")
    with pytest.raises(InputError, match="empty"):
        load_network(str(path))


def test_garbage_pbf_is_refused(tmp_path):
    path = tmp_path / "bad.osm.pbf"
    path.write_bytes(b"this is not a protocol buffer" * 10)
    with pytest.raises(InputError, match="bad.osm.pbf"):
        load_network(str(path))


def test_file_without_edges_of_the_type_is_refused(tmp_path):
    path = tmp_path / "foot.osm"
    path.write_text(_OSM_XML.replace('v="residential"', 'v="footway"').replace("motorway", "path"))
    with pytest.raises(InputError, match="no drive edges"):
        load_network(str(path), network_type="drive")


def test_place_name_offline_fails_with_offline_alternatives(monkeypatch):
    import osmnx as ox

    def offline(*args, **kwargs):
        raise ConnectionError("network is unreachable")

    monkeypatch.setattr(ox, "graph_from_place", offline)
    with pytest.raises(InputError, match="offline alternatives"):
        load_network("Nowhere Town, Atlantis")
