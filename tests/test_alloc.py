"""A warm run on one thread creates no tensor buffers (tracemalloc sees numpy's allocations)."""
import tracemalloc

import numpy as np

import graphrt

from . import models
from .helpers import wait_for_schedules


def peak_growth(fn) -> int:
    """Bytes by which traced memory rose above its starting level at any point during fn."""
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        fn()
        return tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()


def test_warm_run_allocates_no_tensor_buffers():
    model = graphrt.load(models.transformer_block(), intra_op_threads=1)
    sess = model.session
    x = np.random.default_rng(0).standard_normal((8, 32, 32)).astype(np.float32)
    smallest = x.nbytes                  # bytes of the smallest activation here
    out = np.empty(x.size, np.float32)
    model.run_into(x, out)
    model.run_into(x, out)               # warm: plan made, state pooled
    y = np.empty_like(x)
    sess.run(None, {"x": x}, out={"y": y})
    wait_for_schedules(sess)             # (the parallel kernels a provisional plan left)

    def runs():
        for _ in range(5):
            model.run_into(x, out)
            sess.run(None, {"x": x}, out={"y": y})
    assert peak_growth(runs) < smallest      # no buffer of tensor size was made


def test_allocating_form_is_visible_to_the_measure():
    """The measure can fail: a run that returns a new array shows up."""
    model = graphrt.load(models.transformer_block(), intra_op_threads=1)
    x = np.random.default_rng(0).standard_normal((4, 16, 32)).astype(np.float32)
    model(x)
    kept = []
    assert peak_growth(lambda: kept.append(model(x))) >= x.nbytes


def test_warm_parallel_run_allocates_no_tensor_buffers():
    """At 2 threads with tensors above the parallel threshold, the prange dispatch and the
    kernels allocate nothing of tensor size either (what Python's allocator sees)."""
    from .models import exact_model
    model = graphrt.load(exact_model(), intra_op_threads=2)
    x = np.random.default_rng(1).standard_normal((700, 96)).astype(np.float32)
    out = np.empty(x.size, np.float32)
    model.run_into(x, out)
    model.run_into(x, out)
    wait_for_schedules(model.session)

    def runs():
        for _ in range(5):
            model.run_into(x, out)
    assert peak_growth(runs) < 700 * 96 * 4 // 4
