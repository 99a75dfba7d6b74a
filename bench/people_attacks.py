"""The attacks on people, two mobility models side by side (docs/results/people_attacks.md).

``python bench/people_attacks.py WAYPOINTS_DIR PEOPLE_DIR [--png PATH]`` reads two
``mdpsim attack`` output folders (scenarios/people_attack_waypoints.toml and
scenarios/people_attack.toml), prints one Markdown table per model of the home / work,
uniqueness and places scores by mechanism and eps, and draws them as one heatmap per model.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

#: (attack, metric, column title) of the heatmap and the tables
COLUMNS = [
    ("places", "hit", "places: home"),
    ("home_work", "hit", "home"),
    ("home_work", "work_hit", "work"),
    ("home_work", "pair_hit", "home+work"),
    ("home_work", "unique", "pair unique"),
    ("uniqueness", "linked_k1", "k=1"),
    ("uniqueness", "linked_k2", "k=2"),
    ("uniqueness", "linked_k3", "k=3"),
    ("uniqueness", "linked_k4", "k=4"),
]
EXTRA = [("home_work", "error_km", "home error km"), ("home_work", "anonymity_set", "anon. set"),
         ("uniqueness", "chance", "chance")]  # fmt: skip


def scores(folder: Path, columns=COLUMNS) -> pd.DataFrame:
    """Rows (mechanism, eps), one column per (attack, metric): means over repetitions."""
    table = pd.read_parquet(folder / "attacks.parquet")
    out = {}
    for attack, metric, title in columns:
        part = table[table["attack"] == attack]
        if metric in part:
            out[title] = part.groupby(["mechanism", "epsilon_per_km"], sort=False)[metric].mean()
    return pd.DataFrame(out)


def markdown(frame: pd.DataFrame) -> str:
    """The frame as a Markdown table (3 significant digits)."""
    head = ["mechanism", "eps /km", *frame.columns]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for (mech, eps), row in frame.iterrows():
        cells = ["—" if not np.isfinite(v) else f"{v:.3g}" for v in row]
        lines.append(f"| {mech} | {eps:g} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def heatmap(frames: dict[str, pd.DataFrame], path: Path) -> None:
    """One panel per model: rows (mechanism, eps), columns the shares of :data:`COLUMNS`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(frames), figsize=(6.5 * len(frames), 5.5), sharey=True)
    for ax, (name, frame) in zip(np.atleast_1d(axes), frames.items(), strict=True):
        values = frame[[t for _, _, t in COLUMNS if t in frame]]
        image = ax.imshow(values.to_numpy(float), vmin=0, vmax=1, cmap="viridis", aspect="auto")
        for (i, j), v in np.ndenumerate(values.to_numpy(float)):
            ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=7,
                    color="white" if v < 0.6 else "black")  # fmt: skip
        ax.set_xticks(range(values.shape[1]), values.columns, rotation=45, ha="right")
        ax.set_yticks(range(len(values)), [f"{m} {e:g}/km" for m, e in values.index])
        ax.set_title(name)
    fig.colorbar(image, ax=axes, shrink=0.8, label="share of users")
    fig.savefig(path, dpi=110, bbox_inches="tight")


def main(argv: list[str] | None = None) -> int:
    """Print the tables; draw the heatmap when ``--png`` is given."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("waypoints", type=Path)
    parser.add_argument("people", type=Path)
    parser.add_argument("--png", type=Path)
    args = parser.parse_args(argv)
    frames = {}
    for name, folder in (("waypoints", args.waypoints), ("people (epr)", args.people)):
        if not (folder / "attacks.parquet").is_file():
            print(f"error: {folder}: no attacks.parquet; run mdpsim attack first", file=sys.stderr)
            return 2
        frames[name] = scores(folder)
        print(f"\n### {name}\n")
        print(markdown(frames[name].join(scores(folder, EXTRA))))
    if args.png is not None:
        heatmap(frames, args.png)
        print(f"\nheatmap          {args.png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
