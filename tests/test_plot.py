"""graphrt.plot on the Agg backend: bars by operator, a timeline, a PNG written."""
import numpy as np
import pytest

import graphrt

from . import models

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg", force=True)

from graphrt.plot import plot_operators, plot_profile, plot_timeline  # noqa: E402


@pytest.fixture(scope="module")
def profile():
    sess = graphrt.Session(models.transformer_block(), graphrt.SessionOptions(optimization_level="none"))
    prof = graphrt.Profile()
    x = np.ones((2, 5, 32), np.float32)
    for _ in range(3):
        sess.run(None, {"x": x}, profile=prof)
    return prof


def test_operator_bars_match_the_profile(profile):
    import matplotlib.pyplot as plt
    ax = plot_operators(profile)
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels == [op for op, _, _ in profile.by_operator()][::-1]      # slowest on top
    widths = [p.get_width() for p in ax.patches]
    assert widths == pytest.approx([t * 1e3 for _, _, t in profile.by_operator()][::-1])
    assert "3 run(s)" in ax.get_title()
    assert [t.get_text().strip() for t in ax.texts] == [f"{n}x" for _, n, _ in profile.by_operator()][::-1]
    assert dict((op, n) for op, n, _ in profile.by_operator())["Add"] == 8 * 3     # 8 Adds a run
    plt.close(ax.figure)


def test_timeline_lanes_follow_first_use(profile):
    import matplotlib.pyplot as plt
    ax = plot_timeline(profile, run=0)
    lanes = [t.get_text() for t in ax.get_yticklabels()]
    first = sorted((s for s in profile.steps if s.run == 0), key=lambda s: s.start)
    assert lanes == list(dict.fromkeys(s.op_type for s in first))
    assert len(ax.collections) == len(lanes)
    with pytest.raises(ValueError, match="no run 9"):
        plot_timeline(profile, run=9)
    plt.close("all")


def test_profile_figure_written_as_png(profile, tmp_path):
    import matplotlib.pyplot as plt
    path = tmp_path / "profile.png"
    fig = plot_profile(profile, path)
    assert len(fig.axes) == 2
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
    plt.close(fig)


def test_an_empty_profile_is_refused():
    with pytest.raises(ValueError, match="no steps"):
        plot_operators(graphrt.Profile())
