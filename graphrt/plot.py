"""Pictures of a Profile (``pip install graphrt[plot]``, matplotlib).

    prof = graphrt.Profile()
    sess.run(None, feeds, profile=prof)
    from graphrt.plot import plot_profile
    fig = plot_profile(prof)                 # time by operator, and one run's timeline
    fig.savefig("profile.png")

Each function draws into ``ax`` when given (else a new figure) and returns the Axes, or the
Figure for :func:`plot_profile`.
"""
from __future__ import annotations


def plot_operators(profile, ax=None, limit: int = 15):
    """Horizontal bars: total milliseconds per operator type over all runs, slowest on
    top, labelled with the number of calls."""
    rows = profile.by_operator()[:limit]
    if not rows:
        raise ValueError("the profile has no steps: pass it to Session.run(..., profile=prof) first")
    ax = ax if ax is not None else _new_axes((7, 0.9 + 0.35 * len(rows)))
    names = [op for op, _, _ in rows][::-1]
    ms = [t * 1e3 for _, _, t in rows][::-1]
    calls = [n for _, n, _ in rows][::-1]
    bars = ax.barh(names, ms, color="tab:blue")
    for bar, n in zip(bars, calls):
        ax.annotate(f" {n}x", (bar.get_width(), bar.get_y() + bar.get_height() / 2),
                    va="center", fontsize=8)
    ax.set_xlabel("milliseconds in kernels (all runs)")
    ax.set_title(f"time by operator, {len({s.run for s in profile.steps})} run(s)")
    ax.margins(x=0.15)
    return ax


def plot_timeline(profile, ax=None, run: int | None = None):
    """One run's steps on a time axis, one lane per operator type in order of first use,
    top down (default: the last run, which is usually warm)."""
    runs = sorted({s.run for s in profile.steps})
    if not runs:
        raise ValueError("the profile has no steps: pass it to Session.run(..., profile=prof) first")
    run = runs[-1] if run is None else run
    steps = [s for s in profile.steps if s.run == run]
    if not steps:
        raise ValueError(f"the profile has no run {run}; it has runs {runs[0]}..{runs[-1]}")
    ops = list(dict.fromkeys(s.op_type for s in sorted(steps, key=lambda s: s.start)))
    ax = ax if ax is not None else _new_axes((8, 0.9 + 0.35 * len(ops)))
    t0 = min(s.start for s in steps)
    colors = _colors(len(ops))
    for lane, op in enumerate(ops):
        spans = [((s.start - t0) * 1e3, max(s.seconds * 1e3, 1e-4)) for s in steps if s.op_type == op]
        ax.broken_barh(spans, (lane - 0.4, 0.8), color=colors[lane])
    ax.set_yticks(range(len(ops)), ops)
    ax.set_ylim(len(ops) - 0.5, -0.5)
    ax.set_xlabel("milliseconds since the run's first step")
    ax.set_title(f"timeline of run {run} ({len(steps)} steps)")
    return ax


def plot_profile(profile, path=None, run: int | None = None):
    """Both pictures side by side in one Figure; saved to ``path`` when given."""
    plt = _pyplot()
    lanes = max(len(profile.by_operator()), 1)
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 1.2 + 0.35 * min(lanes, 15)),
                                      layout="constrained")
    plot_operators(profile, left)
    plot_timeline(profile, right, run)
    if path is not None:
        fig.savefig(path, dpi=110)
    return fig


def _pyplot():
    try:
        import matplotlib.pyplot as plt
    except ImportError:
        raise ImportError("graphrt.plot needs matplotlib: pip install graphrt[plot]") from None
    return plt


def _new_axes(size):
    fig, ax = _pyplot().subplots(figsize=size, layout="constrained")
    return ax


def _colors(n: int):
    import matplotlib
    cmap = matplotlib.colormaps["tab20"]
    return [cmap(i % 20) for i in range(n)]
