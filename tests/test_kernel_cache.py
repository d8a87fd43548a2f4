"""graphrt's compiled-code cache (graphrt/cache.py, compiling.py, warmup.py): found by content
from a copied installation, left whole by processes filling it at once, filled ahead of time
by ``graphrt warmup``, shown and cleared by ``graphrt cache``; the compile notice."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np
import onnx
from onnx import TensorProto, helper

import graphrt
from graphrt import cache

from .helpers import RECORD_COMPILES, ROOT

# Runs a small element-wise model in the element type argv[2] ("float32", "float64" or
# both, comma-separated) and prints which graphrt it imported, the kernels it compiled
# (not loaded) and the results.
SCRIPT = r"""
import json, sys
import numpy as np
import graphrt
from graphrt.compiling import compiled
out = {"file": graphrt.__file__, "results": {}}
for name in sys.argv[2].split(","):
    sess = graphrt.Session(sys.argv[1].replace("DT", name))
    x = np.linspace(-2, 2, 24, dtype=name).reshape(4, 6)
    out["results"][name] = sess.run(None, {"x": x})[0].tolist()
out["compiled"] = compiled()
print(json.dumps(out))
"""


def _model(path, dtype):
    t = {"float32": TensorProto.FLOAT, "float64": TensorProto.DOUBLE}[dtype]
    nodes = [helper.make_node("Add", ["x", "x"], ["a"]), helper.make_node("Relu", ["a"], ["r"]),
             helper.make_node("Mul", ["r", "x"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", t, [4, 6])],
                          [helper.make_tensor_value_info("y", t, [4, 6])])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)


def _expected(dtype):
    x = np.linspace(-2, 2, 24, dtype=dtype).reshape(4, 6)
    return (np.maximum(x + x, 0) * x).tolist()


def _env(cache_dir, **extra):
    """A child's environment: this one with ``cache_dir`` as the kernel cache and the helper
    process on, as a user's process has it (tests/conftest.py turns it off for the suite)."""
    env = dict(os.environ, GRAPHRT_CACHE_DIR=str(cache_dir), GRAPHRT_COMPILE_HELPER="1")
    env.update(extra)
    env.pop("NUMBA_CACHE_DIR", None)
    return env


def _start(code_root, cache_dir, model, dtypes, **extra):
    env = _env(cache_dir, PYTHONPATH=str(code_root), **extra)
    return subprocess.Popen([sys.executable, "-c", SCRIPT, model, dtypes], env=env,
                            cwd=str(code_root), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _finish(proc) -> dict:
    out, err = proc.communicate(timeout=900)
    assert proc.returncode == 0, err[-3000:]
    return json.loads(out.strip().splitlines()[-1])


def _models(tmp_path) -> str:
    for dt in ("float32", "float64"):
        _model(str(tmp_path / f"m_{dt}.onnx"), dt)
    return str(tmp_path / "m_DT.onnx")


def test_a_copied_installation_loads_what_the_original_cached(tmp_path):
    """The cache key is the source's place inside the package and its content: a copy of
    graphrt in another folder, every file with a new mtime, compiles nothing."""
    model, kernels = _models(tmp_path), tmp_path / "cache"
    first = _finish(_start(ROOT, kernels, model, "float32"))
    assert first["compiled"] > 0 and first["file"].startswith(ROOT)
    copy = tmp_path / "copy"
    shutil.copytree(os.path.join(ROOT, "graphrt"), copy / "graphrt",
                    ignore=shutil.ignore_patterns("__pycache__"))
    second = _finish(_start(copy, kernels, model, "float32"))
    assert second["file"].startswith(str(copy))
    assert second["compiled"] == 0
    assert second["results"] == first["results"] == {"float32": _expected("float32")}


def test_processes_filling_one_cache_at_once_leave_it_whole(tmp_path):
    """Two processes compile the same functions for different element types into one empty
    folder at the same time; a third then loads every specialisation (compiling nothing)
    and gets the right values for both types."""
    model, kernels = _models(tmp_path), tmp_path / "cache"
    procs = [_start(ROOT, kernels, model, "float32,float64"),
             _start(ROOT, kernels, model, "float64,float32")]
    for p in procs:
        _finish(p)
    third = _finish(_start(ROOT, kernels, model, "float32,float64"))
    assert third["compiled"] == 0
    assert third["results"] == {dt: _expected(dt) for dt in ("float32", "float64")}
    assert not list(kernels.rglob("*.tmp.*"))


# Calls graphrt's window._deal_row, cached in graphrt's folders, whose work is done by
# runs.py's intrinsics (another module), and prints whether it was loaded and what it did.
CALLEE_SCRIPT = r"""
import json
import numpy as np
import graphrt
from graphrt.kernels.nn.window import _deal_row
x = np.arange(11, dtype=np.float32)
xp = np.zeros(11, np.float32)
_deal_row(xp, 0, 6, x, 0, 11)
print(json.dumps({"hits": sum(_deal_row.stats.cache_hits.values()), "xp": xp.tolist()}))
"""


def test_an_edit_of_a_callee_in_another_module_is_never_hidden_by_the_cache(tmp_path):
    """numba keys and validates a cached function by its own bytecode and file: once
    runs.py (the intrinsics window._deal_row's callee uses) changes, the old entry must not
    be loaded -- in a copy of graphrt, _deal_row is compiled, loaded, then compiled anew
    after an edit of runs.py alone, and loaded again after that."""
    copy, kernels = tmp_path / "copy", tmp_path / "cache"
    shutil.copytree(os.path.join(ROOT, "graphrt"), copy / "graphrt",
                    ignore=shutil.ignore_patterns("__pycache__"))

    def run():
        done = subprocess.run([sys.executable, "-c", CALLEE_SCRIPT], cwd=str(copy),
                              env=_env(kernels, PYTHONPATH=str(copy)), capture_output=True,
                              text=True, timeout=900)
        assert done.returncode == 0, done.stderr[-3000:]
        return json.loads(done.stdout.strip().splitlines()[-1])

    want = [float(v) for v in range(0, 11, 2)] + [float(v) for v in range(1, 11, 2)]
    hits = [run()["hits"], run()["hits"]]
    with open(copy / "graphrt" / "kernels" / "core" / "runs.py", "a") as f:
        f.write("\n# an edit: runs.py's content, and so its SOURCE_TAG, changes\n")
    edited = run()
    hits += [edited["hits"], run()["hits"]]
    assert hits == [0, 1, 0, 1]
    assert edited["xp"] == want


# Waits until the time argv[1], then compiles (or loads) graphrt's exp64 as a cached function
# of its own and prints how many specialisations it compiled and how many it loaded.
AT_ONCE_SCRIPT = r"""
import json, sys, time
import graphrt
from numba import njit
from graphrt.kernels.math.vecmath import exp64
f = njit(cache=True, nogil=True, error_model="numpy")(exp64.py_func)
time.sleep(max(0.0, float(sys.argv[1]) - time.time()))
f(0.3)
print(json.dumps({"hits": sum(f.stats.cache_hits.values()),
                  "misses": sum(f.stats.cache_misses.values())}))
"""


def test_processes_asking_for_one_kernel_at_once_compile_it_once(tmp_path):
    """Two processes asking for the same specialisation at the same moment: one compiles
    it, the other waits for that compile and loads it (graphrt/cache.py ``_compiling``),
    where each used to compile it beside the other."""
    start = str(time.time() + 6.0)
    procs = [subprocess.Popen([sys.executable, "-c", AT_ONCE_SCRIPT, start], cwd=ROOT,
                              env=_env(tmp_path / "cache"), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [_finish(p) for p in procs]
    assert sorted((o["misses"], o["hits"]) for o in outs) == [(0, 1), (1, 0)]


# Compiles graphrt's exp64 again with the fastmath flags argv[1] ("-" for none) and prints
# how many specialisations came from the cache and whether the code contracts a * b + c.
SETTINGS_SCRIPT = r"""
import json, sys
import graphrt
from numba import njit
from graphrt.kernels.math.vecmath import exp64
flags = False if sys.argv[1] == "-" else set(sys.argv[1].split(","))
f = njit(cache=True, nogil=True, fastmath=flags, error_model="numpy")(exp64.py_func)
f(0.3)
ir = "".join(f.inspect_llvm().values())
print(json.dumps({"hits": sum(f.stats.cache_hits.values()), "contract": "contract" in ir}))
"""


def _settings_run(cache_dir, flags, **env):
    proc = subprocess.run([sys.executable, "-c", SETTINGS_SCRIPT, flags], cwd=ROOT,
                          env=_env(cache_dir, **env), capture_output=True, text=True,
                          timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_a_cache_entry_made_under_other_code_settings_is_never_loaded(tmp_path):
    """numba keys a cached specialisation by source, signature and CPU only; graphrt's
    folders key it by the fastmath flags and numba's code-generation settings too. One
    function of graphrt's, compiled with contraction allowed, is loaded by a process asking
    the same, and compiled anew (never loaded) under no fastmath, another NUMBA_OPT or
    another CPU target."""
    kernels = tmp_path / "cache"
    first = _settings_run(kernels, "contract")
    assert first["hits"] == 0 and first["contract"]
    assert _settings_run(kernels, "contract")["hits"] == 1
    exact = _settings_run(kernels, "-")
    assert exact["hits"] == 0 and not exact["contract"]
    for env in ({"NUMBA_OPT": "1"}, {"NUMBA_CPU_NAME": "generic"}):
        assert _settings_run(kernels, "contract", **env)["hits"] == 0, env
    assert _settings_run(kernels, "-")["hits"] == 1, "each setting's entry is kept beside the others"


# Compiles (first process) or loads (later ones) one function of graphrt's, reports whether
# its library's linking bitcode was left unparsed, then compiles a caller that links it in.
LINK_SCRIPT = r"""
import json, math
import graphrt
from numba import njit
from graphrt.kernels.math.vecmath import exp64
f = njit(cache=True, nogil=True, error_model="numpy")(exp64.py_func)
f(0.3)
library = f.overloads[f.signatures[0]].library
deferred = hasattr(library, "graphrt_linking_bitcode")
value = njit(lambda x: f(x) + 1.0)(0.3)
print(json.dumps({"hits": sum(f.stats.cache_hits.values()), "deferred": deferred,
                  "parsed": not hasattr(library, "graphrt_linking_bitcode"),
                  "value": value, "direct": f(0.3), "exp": math.exp(0.3)}))
"""


def test_a_loaded_kernel_defers_its_linking_bitcode_until_something_links_it(tmp_path):
    """A kernel loaded from graphrt's folders keeps the bitcode numba stores for linking it
    as bytes (graphrt/loaded_code.py); a function compiled later in that process that calls
    it gets it parsed and linked in, with the same value."""
    kernels = tmp_path / "cache"
    runs = []
    for _ in range(2):
        done = subprocess.run([sys.executable, "-c", LINK_SCRIPT], env=_env(kernels), cwd=ROOT,
                              capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, done.stderr[-3000:]
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
    compiled, loaded = runs
    assert compiled["hits"] == 0 and not compiled["deferred"]
    assert loaded["hits"] == 1 and loaded["deferred"] and loaded["parsed"]
    for r in runs:
        assert r["value"] == r["direct"] + 1.0 and abs(r["direct"] - r["exp"]) < 2e-9 * r["exp"]


def test_the_symbols_read_from_object_code_are_those_its_module_defines():
    """loaded_code.defined_symbols reads an ELF object's symbol table: the external and
    weak definitions (functions and data), not declarations, not internal ones."""
    import llvmlite.binding as ll
    from numba.core.registry import cpu_target

    from graphrt import loaded_code
    text = """
    @shared = global i64 7
    @hidden = internal global i64 1
    @weakdata = linkonce_odr global i64 2
    declare i64 @elsewhere(i64)
    define internal i64 @inner(i64 %x) { %y = add i64 %x, 1  ret i64 %y }
    define linkonce_odr i64 @weakfn(i64 %x) { %y = call i64 @inner(i64 %x)  ret i64 %y }
    define i64 @entry(i64 %x) {
      %a = call i64 @elsewhere(i64 %x)
      %b = call i64 @weakfn(i64 %a)
      %c = load i64, ptr @hidden
      %d = add i64 %b, %c
      ret i64 %d
    }
    """
    triple = cpu_target.target_context.codegen().magic_tuple()[0]
    mod = ll.parse_assembly(text)
    mod.triple = triple
    obj = ll.Target.from_triple(triple).create_target_machine(opt=0).emit_object(mod)
    if obj[:4] != b"\x7fELF":
        assert loaded_code.defined_symbols(obj) is None
        return
    assert loaded_code.defined_symbols(obj) == {"shared", "weakdata", "weakfn", "entry"}
    assert loaded_code.defined_symbols(b"\xcf\xfa\xed\xfe" + obj[4:]) is None


def test_warmup_fills_the_cache_a_later_process_runs_from(tmp_path):
    model, kernels = _models(tmp_path), tmp_path / "cache"
    warm = subprocess.run([sys.executable, "-m", "graphrt", "warmup", model.replace("DT", "float64")],
                          env=_env(kernels), cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert warm.returncode == 0, warm.stderr[-3000:]
    assert "kernels compiled" in warm.stdout and "m_float64.onnx" in warm.stdout
    later = _finish(_start(ROOT, kernels, model, "float64"))
    assert later["compiled"] == 0 and later["results"] == {"float64": _expected("float64")}


# Runs the model argv[1] (float32) three times and prints the object-code modules (GEMM
# micro-kernels, trampolines, numba's runtime functions) this process compiled rather than
# loaded, and whether numba's runtime was initialised its own way (compiling its functions).
THREE_RUNS = r"""
import json, sys
import numpy as np
import graphrt
from graphrt.kernels.core import objcode
from numba.core.runtime import rtsys
sess = graphrt.Session(sys.argv[1])
x = np.linspace(-2, 2, 24, dtype=np.float32).reshape(4, 6)
for _ in range(3):
    y = sess.run(None, {"x": x})[0]
print(json.dumps({"built": objcode.BUILT, "y": y.tolist(), "numba_runtime": rtsys._init}))
"""


def test_a_later_process_loads_the_trampolines_it_needs(tmp_path):
    """The trampolines a plan's blocks call through (built at its second run) are kept in
    the cache: a second process running the same model builds none; nor does it compile
    numba's runtime functions (cache.runtime_ready loads them)."""
    model, kernels = _models(tmp_path).replace("DT", "float32"), tmp_path / "cache"
    runs = []
    for _ in range(2):
        done = subprocess.run([sys.executable, "-c", THREE_RUNS, model], env=_env(kernels),
                              cwd=ROOT, capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, done.stderr[-3000:]
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
    assert any(n.startswith("graphrt_trampoline_") for n in runs[0]["built"]), runs[0]
    assert runs[1]["built"] == [] and runs[1]["y"] == runs[0]["y"] == _expected("float32")
    assert runs[0]["numba_runtime"] and not runs[1]["numba_runtime"]


def test_warmup_reports_a_model_it_cannot_run(tmp_path):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not a model")
    (rec,) = graphrt.warmup([str(bad)])
    assert rec["error"] and rec["model"] == str(bad)


def test_the_compile_notice_shows_where_asked_and_only_there(tmp_path):
    """GRAPHRT_PROGRESS=1 shows the notice (a bar, then its close) even on a pipe; unset,
    with stderr a pipe, nothing is printed (both told to speak after 0 s of compiling)."""
    model = _models(tmp_path)
    shown = _start(ROOT, tmp_path / "a", model, "float32", GRAPHRT_PROGRESS="1",
                   GRAPHRT_PROGRESS_AFTER="0")
    quiet = _start(ROOT, tmp_path / "b", model, "float32", GRAPHRT_PROGRESS_AFTER="0")
    out_shown, err_shown = shown.communicate(timeout=900)
    out_quiet, err_quiet = quiet.communicate(timeout=900)
    assert shown.returncode == 0 and quiet.returncode == 0, err_shown[-2000:] + err_quiet[-2000:]
    assert "graphrt: compiling kernels" in err_shown
    assert "graphrt: compiling" not in err_quiet


def test_cache_info_and_clear(tmp_path, monkeypatch, capsys):
    from graphrt.cli import main
    monkeypatch.setenv("GRAPHRT_CACHE_DIR", str(tmp_path))
    (tmp_path / "kernels" / "graphrt").mkdir(parents=True)
    (tmp_path / "kernels" / "graphrt" / "f-1.py311.1.nbc").write_bytes(b"x" * 100)
    (tmp_path / "schedules").mkdir()
    assert cache.info()["kernels"] == {"folder": str(tmp_path / "kernels"), "files": 1,
                                       "bytes": 100, "compiled": 1}
    assert main(["cache", "info"]) == 0
    assert "1 compiled specialisations" in capsys.readouterr().out
    assert main(["cache", "clear"]) == 0
    assert not (tmp_path / "kernels").exists() and not (tmp_path / "schedules").exists()
    assert cache.info()["kernels"]["files"] == 0


# Runs a chain of element-wise steps and a softmax in mode argv[2] and prints the kernels
# this process compiled and the results' bytes.
SHARED = r"""
import json, sys
import numpy as np
import graphrt
from graphrt.compiling import compiled
sess = graphrt.Session(sys.argv[1], graphrt.SessionOptions(mode=sys.argv[2]))
x = np.linspace(-3, 3, 96, dtype=np.float32).reshape(8, 12)
y = sess.run(None, {"x": x})[0]
print(json.dumps({"compiled": compiled(), "bytes": y.tobytes().hex()}))
"""


def test_kernels_compiled_by_the_helper_process_give_the_same_bits(tmp_path):
    """A cold first run shares its missing kernels with the helper process
    (plan/compile_share.py): this process compiles fewer of them, and the results are the
    bits of a run that compiled every kernel itself, in both modes."""
    if graphrt.threads.available() < 2:
        import pytest
        pytest.skip("one core: nothing is shared")
    ops = ["Add", "Mul", "Sub", "Div", "Max", "Min"]
    nodes, cur = [], "x"
    for k, op in enumerate(ops):
        nodes.append(helper.make_node(op, [cur, "x"], [f"t{k}"]))
        cur = f"t{k}"
    nodes += [helper.make_node("Tanh", [cur], ["h"]), helper.make_node("Softmax", ["h"], ["y"])]
    info = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [8, 12]) for n in ("x", "y")]
    path = str(tmp_path / "chain.onnx")
    onnx.save(helper.make_model(helper.make_graph(nodes, "g", info[:1], info[1:]),
                                opset_imports=[helper.make_opsetid("", 17)]), path)
    for mode in ("fast", "exact"):
        got = {}
        for share in ("1", "0"):
            proc = subprocess.run([sys.executable, "-c", SHARED, path, mode], cwd=ROOT,
                                  env=_env(tmp_path / f"{mode}{share}", PYTHONPATH=ROOT,
                                           GRAPHRT_COMPILE_HELPER=share),
                                  capture_output=True, text=True, timeout=900)
            assert proc.returncode == 0, proc.stderr[-3000:]
            got[share] = json.loads(proc.stdout.strip().splitlines()[-1])
        assert got["1"]["bytes"] == got["0"]["bytes"]
        assert 0 < got["1"]["compiled"] < got["0"]["compiled"]


# A session over a Gemm, its first run; prints the graphrt functions this process compiled
# and the result's bytes.
TILES = RECORD_COMPILES + r"""
import json, sys
import numpy as np
import graphrt
from graphrt.kernels.gemm import microkernel
_fill = microkernel._fill
def fill(kt, *key):
    _fill(kt, *key)
    # the tile entry (LLVM IR: no compile event) built here or loaded from the cache
    from graphrt.kernels.core import objcode
    compiled.append("ENTRY:" + ("built" if "tile-float32" in objcode.BUILT else "loaded"))
    compiled.append("FILL")   # a table's entry and micro-kernels in place
microkernel._fill = fill
sess = graphrt.Session(sys.argv[1])
x = np.linspace(-1, 1, 6 * 40, dtype=np.float32).reshape(6, 40)
print(json.dumps({"names": compiled, "bytes": sess.run(None, {"x": x})[0].tobytes().hex()}))
"""


def test_the_helper_compiles_the_tile_entry_while_the_session_is_made(tmp_path):
    """A session with a matrix product asks the helper process for the GEMM tile entry
    (compile_share.prefetch_tiles): this process then loads it from the cache (builds no
    entry) and gets the bits of a process that built it itself. (Told
    to wait for the helper however soon the plan needs the entry: this model plans at once.)
    The plan takes the table unfilled: while the helper compiles the entry, the first run
    compiles the product's own kernel, and only then fills the table."""
    if graphrt.threads.available() < 2:
        import pytest
        pytest.skip("one core: nothing is shared")
    w = np.linspace(-2, 2, 40 * 24, dtype=np.float32).reshape(40, 24)
    g = helper.make_graph([helper.make_node("Gemm", ["x", "w"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [6, 40])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [6, 24])],
                          [helper.make_tensor("w", TensorProto.FLOAT, w.shape, w.ravel())])
    path = str(tmp_path / "gemm.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    got = {}
    for share in ("1", "0"):
        proc = subprocess.run([sys.executable, "-c", TILES, path], cwd=ROOT,
                              env=_env(tmp_path / share, PYTHONPATH=ROOT,
                                       GRAPHRT_COMPILE_HELPER=share,
                                       GRAPHRT_TILE_WAIT_AFTER="0"),
                              capture_output=True, text=True, timeout=900)
        assert proc.returncode == 0, proc.stderr[-3000:]
        got[share] = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["1"]["bytes"] == got["0"]["bytes"]
    assert "ENTRY:built" in got["0"]["names"]
    assert "ENTRY:loaded" in got["1"]["names"]
    names = got["1"]["names"]
    product = [i for i, n in enumerate(names) if n.startswith("gemm_tiles")]
    assert product and product[0] < names.index("FILL"), names


def test_a_first_run_waiting_for_the_helper_takes_the_micro_kernels_itself(monkeypatch):
    """compile_share.fill_tables: while the helper still compiles a table's blocked entry
    (it does the micro-kernels last), this process loads or compiles that table's
    micro-kernels (microkernel.micro_ahead), which leaves the table unfilled; once the
    helper is done it goes straight to filling the table."""
    import threading

    from graphrt.kernels.gemm import micro_ir, microkernel
    from graphrt.plan import compile_share
    key = (np.dtype(np.float32), False)
    for name in ("_ADDRESSES", "_UNFILLED", "_KERNELS", "PENDING"):
        monkeypatch.setattr(microkernel, name, {})
    monkeypatch.setattr(micro_ir, "_TABLES", {})
    done = threading.Event()
    microkernel.PENDING[key] = (done, time.monotonic())
    kt = microkernel.table(*key)
    assert microkernel.unfilled() == [(kt, done)]

    order = []
    ahead = microkernel.micro_ahead
    monkeypatch.setattr(microkernel, "micro_ahead", lambda t: (order.append("micro"), ahead(t)))
    monkeypatch.setattr(microkernel, "ready", lambda t: order.append("fill"))
    compile_share.fill_tables([], None)
    assert order == ["micro", "fill"]
    assert key in micro_ir._TABLES and not kt.any()     # loaded, the table still unfilled

    done.set()
    order.clear()
    compile_share.fill_tables([], None)
    assert order == ["fill"]
