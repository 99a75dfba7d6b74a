"""The live map's deck sends pydeck's own JSON object, without its indentation."""

import json

import pandas as pd
from pydeck.bindings.json_tools import serialize

from mdpsim.dashboard.mapview import deck, trace_layers


def test_the_compact_json_is_pydecks_object_in_fewer_bytes():
    roads = [[[24.90, 60.16], [24.91, 60.17]], [[24.91, 60.17], [24.93, 60.17], [24.94, 60.18]]]
    points = pd.DataFrame({"lon": [24.92], "lat": [60.17], "user": [0]})
    extra = tuple(trace_layers([[24.90, 60.16], [24.92, 60.17]], [[24.91, 60.16], [24.92, 60.18]]))
    shown = deck(roads, {"reported": points}, extra=extra)
    compact = shown.to_json()
    assert json.loads(compact) == json.loads(serialize(shown))
    assert "\n" not in compact and len(compact) < len(serialize(shown))
