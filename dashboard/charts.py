"""Vega-Lite specs of the dashboard's charts, as plain dicts.

Handing Streamlit a dict (``st.vega_lite_chart(data, spec)``) skips Altair's schema validation,
which costs most of a rerun when a page has ten charts.
"""

from __future__ import annotations

import pandas as pd


def long_form(frame: pd.DataFrame, *, index: str = "tick") -> pd.DataFrame:
    """Wide columns (one per series, indexed by ``index``) to rows of (index, series, value)."""
    return frame.reset_index().melt(id_vars=index, var_name="series", value_name="value")


def lines(*, x: str = "tick") -> dict:
    """One line per ``series`` over ``x`` (data from :func:`long_form`); titled by the page."""
    return {
        "mark": {"type": "line", "point": True},
        "encoding": {
            "x": {"field": x, "type": "quantitative", "axis": {"tickMinStep": 1}},
            # "~r": a flat line of zeros reads 0, not 0.000000 (Vega's default on a zero domain)
            "y": {
                "field": "value",
                "type": "quantitative",
                "title": None,
                "axis": {"format": "~r"},
            },
            "color": {
                "field": "series",
                "type": "nominal",
                "legend": {"orient": "bottom", "title": None, "columns": 2, "labelLimit": 260},
            },
            "tooltip": [{"field": x}, {"field": "series"}, {"field": "value", "format": ".4g"}],
        },
    }


def histogram(*, field: str, title: str, color: str) -> dict:
    """Counts of ``field`` in up to 20 bins, stacked by ``color``."""
    return {
        "mark": "bar",
        "encoding": {
            "x": {"field": field, "type": "quantitative", "bin": {"maxbins": 20}, "title": title},
            "y": {"aggregate": "count", "type": "quantitative", "title": "users"},
            "color": {"field": color, "type": "nominal"},
        },
    }


def scatter_log_y(*, x: str, y: str, x_title: str, y_title: str) -> dict:
    """Points with a log-scale y axis."""
    return {
        "mark": {"type": "circle", "size": 25},
        "encoding": {
            "x": {"field": x, "type": "quantitative", "title": x_title},
            "y": {"field": y, "type": "quantitative", "scale": {"type": "log"}, "title": y_title},
            "tooltip": [{"field": x}, {"field": y, "format": ".3g"}],
        },
    }


def heatmap(*, x: str, y: str, value: str) -> dict:
    """A grid of rectangles coloured by ``value`` (viridis)."""
    return {
        "mark": "rect",
        "encoding": {
            "x": {"field": x, "type": "ordinal", "title": "output y"},
            "y": {"field": y, "type": "ordinal", "title": "secret x (matrix row)"},
            "color": {"field": value, "type": "quantitative", "scale": {"scheme": "viridis"}},
            "tooltip": [{"field": y}, {"field": x}, {"field": value, "format": ".3g"}],
        },
    }


def errorbars(*, x: str, y_title: str, series_title: str) -> dict:
    """Mean per (series, x) as lines with points, and ``lo``..``hi`` as error bars."""
    base = {
        "x": {"field": _field(x), "type": "quantitative", "title": x},
        "color": {"field": "series", "type": "nominal", "title": series_title},
    }
    return {
        "layer": [
            {
                "mark": {"type": "line", "point": True},
                "encoding": {
                    **base,
                    "y": {"field": "mean", "type": "quantitative", "title": y_title},
                    "tooltip": [
                        {"field": "series"},
                        {"field": _field(x), "title": x},
                        {"field": "mean", "format": ".4g"},
                        {"field": "lo", "format": ".4g"},
                        {"field": "hi", "format": ".4g"},
                        {"field": "n"},
                    ],
                },
            },
            {
                "mark": {"type": "errorbar", "ticks": True},
                "encoding": {
                    **base,
                    "y": {"field": "lo", "type": "quantitative"},
                    "y2": {"field": "hi"},
                },
            },
        ],
    }


def _field(name: str) -> str:
    """A column name as a Vega-Lite field (a dot would mean a nested field: escape it)."""
    return name.replace(".", "\\.")


def success_heatmap(*, value: str = "hit") -> dict:
    """Attack (rows) x mechanism@eps (columns) coloured by ``value`` in [0, 1] (a frame with
    columns ``attack``, ``setting`` and ``value``, e.g. from ``mdpsim attack``'s table)."""
    return {
        "mark": "rect",
        "encoding": {
            "x": {"field": "setting", "type": "nominal", "title": "mechanism @ eps (1/km)"},
            "y": {"field": "attack", "type": "nominal", "title": None},
            "color": {
                "field": value,
                "type": "quantitative",
                "scale": {"scheme": "viridis", "domain": [0, 1]},
                "title": "success",
            },
            "tooltip": [
                {"field": "attack"},
                {"field": "setting"},
                {"field": value, "format": ".3f"},
            ],
        },
    }


def frontier(*, kind: str) -> dict:
    """The privacy-quality plane (a frame from ``model_view.frontier_plane``): the frontier as
    a line (``kind``: "lp" optimum or "bound"), each eps level's mechanism as a labelled point."""
    x = {"field": "quality_km", "type": "quantitative", "title": "expected quality loss (km)"}
    y = {"field": "adversary_error_km", "type": "quantitative",
         "title": "Bayes-optimal adversary's expected error (km)"}  # fmt: skip
    title = "frontier (LP optimum)" if kind == "lp" else "frontier bound min(Q, cap)"
    color = {"field": "series", "type": "nominal", "title": None,
             "scale": {"domain": [title, "running mechanism", "other levels"]}}  # fmt: skip
    return {
        "transform": [
            {"calculate": f"datum.series == 'frontier' ? '{title}' : datum.series", "as": "series"}
        ],  # fmt: skip
        "layer": [
            {
                "transform": [{"filter": f"datum.series == '{title}'"}],
                "mark": {"type": "line", "point": True},
                "encoding": {"x": x, "y": y, "color": color},
            },
            {
                "transform": [{"filter": f"datum.series != '{title}'"}],
                "mark": {"type": "point", "filled": True, "size": 90},
                "encoding": {
                    "x": x,
                    "y": y,
                    "color": color,
                    "tooltip": [
                        {"field": "label"},
                        {"field": "quality_km", "format": ".4f"},
                        {"field": "adversary_error_km", "format": ".4f"},
                    ],
                },
            },
            {
                "transform": [{"filter": f"datum.series != '{title}'"}],
                "mark": {"type": "text", "dx": 8, "align": "left"},
                "encoding": {"x": x, "y": y, "text": {"field": "label"}},
            },
        ],
    }
