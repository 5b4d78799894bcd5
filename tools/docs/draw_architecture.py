#!/usr/bin/python3
"""Draws docs/architecture.png, the picture at the top of README.md.

Actors at the edge WRITE transitions into the buffer node's replay memory;
the learner, across the long link, READs batches the buffer node sampled and
WRITEs back priorities and parameters. Edit this script, not the image, and
run it again:

    /usr/bin/python3 tools/docs/draw_architecture.py            # docs/architecture.png
    /usr/bin/python3 tools/docs/draw_architecture.py --out x.png
"""

import argparse
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

EDGE = "#e8f1fb"      # the actors' side
BUFFER = "#fdf3e1"    # the buffer node
REGION = "#ffffff"
CLOUD = "#eaf6ea"     # the learner's side
WRITE = "#c0392b"     # one-sided WRITEs
READ = "#1f5fa8"      # one-sided READs
INK = "#222222"


def box(ax, x, y, w, h, face, text=None, size=10, weight="normal", edge=INK, lw=1.2,
        va="center", dy=0.0):
    ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.02,rounding_size=0.08",
                                facecolor=face, edgecolor=edge, linewidth=lw))
    if text:
        ty = y + h / 2 + dy if va == "center" else y + h - 0.12 + dy
        ax.text(x + w / 2, ty, text, ha="center", va=va, fontsize=size, weight=weight,
                color=INK)


def arrow(ax, start, end, color, label=None, label_at=None, rad=0.0, size=8.5):
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=14,
                                 color=color, linewidth=1.6,
                                 connectionstyle="arc3,rad=%s" % rad))
    if label:
        lx, ly = label_at
        ax.text(lx, ly, label, ha="center", va="center", fontsize=size, color=color,
                bbox=dict(facecolor="white", edgecolor="none", pad=1.0))


def draw(out):
    fig, ax = plt.subplots(figsize=(12, 5.6), dpi=130)
    ax.set_xlim(0, 12)
    ax.set_ylim(0, 5.6)
    ax.axis("off")

    # The three places.
    box(ax, 0.15, 0.35, 2.3, 4.6, EDGE, "edge: actors", size=11, weight="bold", va="top")
    box(ax, 2.85, 0.35, 4.3, 4.6, BUFFER, "buffer node (replay_server)", size=11,
        weight="bold", va="top")
    box(ax, 9.45, 0.35, 2.4, 4.6, CLOUD, "cloud: learner", size=11, weight="bold", va="top")

    # Actors.
    for i, y in enumerate((3.55, 2.55, 1.55)):
        box(ax, 0.4, y, 1.8, 0.7, REGION,
            "actor %d\nenv steps, n-step" % i if i < 2 else "actor N\n...", size=8.5)
    ax.text(1.3, 0.75, "ExperienceWriter\nParamFetcher", ha="center", va="center",
            fontsize=8, style="italic", color=INK)

    # Regions of the buffer node, and what its core thread does between them.
    box(ax, 3.1, 3.35, 1.9, 0.95, REGION,
        "slot ring, commit words\n(one lease per actor)", size=8.5)
    box(ax, 5.2, 3.35, 1.75, 0.95, REGION, "staging ring\npre-sampled batches", size=8.5)
    box(ax, 3.1, 2.0, 3.85, 0.8, REGION,
        "replay memory: sum tree, IS weights, rate limiter", size=8.5)
    box(ax, 3.1, 0.75, 1.9, 0.8, REGION, "params region\n(double buffer)", size=8.5)
    box(ax, 5.2, 0.75, 1.75, 0.8, REGION, "priority mailbox", size=8.5)
    arrow(ax, (4.05, 3.35), (4.05, 2.8), INK, "ingest", (4.05, 3.07))
    arrow(ax, (6.07, 2.8), (6.07, 3.35), INK, "sampler", (6.07, 3.07))
    arrow(ax, (6.07, 1.55), (6.07, 2.0), INK, "priority updates", (6.07, 1.77))

    # The long link.
    ax.plot([7.35, 9.25], [4.55, 4.55], color=INK, linewidth=3, solid_capstyle="round")
    ax.text(8.3, 4.78, "long link: 25 GbE + 10 km fibre\n(about 100 us round trip)",
            ha="center", va="bottom", fontsize=8.5, color=INK)

    # Actors' traffic: short, local.
    arrow(ax, (2.2, 3.9), (3.1, 3.85), WRITE, "WRITE\nslots, commits", (2.62, 4.45))
    arrow(ax, (3.1, 1.15), (2.2, 1.85), READ, "READ\nparams", (2.62, 1.15), rad=-0.2)

    # Learner.
    box(ax, 9.7, 2.2, 1.9, 1.5, REGION,
        "learner\nBatchReader\nPriorityWriter\nParamPublisher\ntrain step (DQN)", size=8.5)
    arrow(ax, (6.95, 3.85), (9.7, 3.45), READ, "READ pre-sampled batches", (8.3, 3.85))
    arrow(ax, (9.7, 2.6), (6.95, 1.15), WRITE, "WRITE new priorities", (8.3, 2.05))
    # Parameters: under the mailbox, into the params region from below.
    ax.plot([9.7, 9.2, 9.2, 4.05], [2.35, 2.35, 0.55, 0.55], color=WRITE, linewidth=1.6)
    arrow(ax, (4.05, 0.55), (4.05, 0.75), WRITE)
    ax.text(8.3, 0.55, "WRITE parameters", ha="center", va="center", fontsize=8.5,
            color=WRITE, bbox=dict(facecolor="white", edgecolor="none", pad=1.0))

    ax.text(6.0, 0.08,
            "Only the batches the learner samples cross the long link. "
            "Learner placement: the buffer node only forwards, the learner keeps the "
            "replay memory.",
            ha="center", va="bottom", fontsize=8.5, color=INK)
    ax.text(11.85, 5.5, "red: RDMA WRITE   blue: RDMA READ", ha="right", va="top",
            fontsize=8, color=INK)

    fig.savefig(out, bbox_inches="tight", facecolor="white")
    plt.close(fig)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=os.path.join(ROOT, "docs", "architecture.png"),
                   help="where to write the PNG")
    args = p.parse_args()
    draw(args.out)
    print("wrote", args.out)


if __name__ == "__main__":
    main()
