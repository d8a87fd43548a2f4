"""SessionOptions, RunOptions and the enums, as onnxruntime spells them, mapped onto graphrt.

What maps: intra_op_num_threads -> intra_op_threads; graph_optimization_level ->
optimization_level (DISABLE_ALL -> none, BASIC -> basic, the others -> all); the session
config entry ``graphrt.mode`` ("fast" or "exact") -> mode; enable_profiling -> a
graphrt.Profile of every run; optimized_model_filepath -> Session.save_optimized;
RunOptions.terminate -> a CancelToken. Options that change only speed or logging are kept
and ignored; those that would change results are refused when the session is made.
"""
from __future__ import annotations

import enum

import numpy as np

from ..options import CancelToken, SessionOptions as GraphrtOptions
from .errors import NotImplemented as _NotImplemented


class GraphOptimizationLevel(enum.IntEnum):
    ORT_DISABLE_ALL = 0
    ORT_ENABLE_BASIC = 1
    ORT_ENABLE_EXTENDED = 2
    ORT_ENABLE_LAYOUT = 3
    ORT_ENABLE_ALL = 99


class ExecutionMode(enum.IntEnum):
    ORT_SEQUENTIAL = 0
    ORT_PARALLEL = 1


class ExecutionOrder(enum.IntEnum):
    DEFAULT = 0
    PRIORITY_BASED = 1
    MEMORY_EFFICIENT = 2


_LEVELS = {GraphOptimizationLevel.ORT_DISABLE_ALL: "none",
           GraphOptimizationLevel.ORT_ENABLE_BASIC: "basic"}

# config entries whose value changes results: (key, value that does) -> why graphrt refuses
_REFUSED = {
    ("session.set_denormal_as_zero", "1"): "graphrt keeps subnormal numbers",
    ("mlas.enable_gemm_fastmath_arm64_bfloat16", "1"): "graphrt computes float32 products in float32",
    ("session.load_model_format", "ORT"): "graphrt reads ONNX models, not the ORT format",
    ("ep.context_enable", "1"): "graphrt writes no EP context models",
}
_MODES = ("fast", "exact")


class SessionOptions:
    """onnxruntime.SessionOptions: the same attributes and defaults."""

    def __init__(self):
        self.intra_op_num_threads = 0
        self.inter_op_num_threads = 0
        self.graph_optimization_level = GraphOptimizationLevel.ORT_ENABLE_ALL
        self.execution_mode = ExecutionMode.ORT_SEQUENTIAL
        self.execution_order = ExecutionOrder.DEFAULT
        self.enable_profiling = False
        self.profile_file_prefix = "onnxruntime_profile_"
        self.log_severity_level = -1
        self.log_verbosity_level = 0
        self.logid = ""
        self.enable_cpu_mem_arena = True
        self.enable_mem_pattern = True
        self.enable_mem_reuse = True
        self.optimized_model_filepath = ""
        self.use_deterministic_compute = False
        self.use_per_session_threads = True
        self._config: dict[str, str] = {}
        self._free_dims: dict[str, int] = {}
        self._free_denotations: dict[str, int] = {}
        self._initializers: dict[str, object] = {}
        self._load_cancel = CancelToken()

    def add_session_config_entry(self, key: str, value: str) -> None:
        self._config[str(key)] = str(value)

    def get_session_config_entry(self, key: str) -> str:
        return _entry(self, key)

    def add_free_dimension_override_by_name(self, dim_name: str, dim_value: int) -> None:
        """Inputs with the symbolic extent ``dim_name`` must have extent ``dim_value``."""
        self._free_dims[str(dim_name)] = int(dim_value)

    def add_free_dimension_override_by_denotation(self, dim_denotation: str, dim_value: int) -> None:
        """Input axes with the denotation ``dim_denotation`` must have extent ``dim_value``."""
        self._free_denotations[str(dim_denotation)] = int(dim_value)

    def register_custom_ops_library(self, library_path: str) -> None:
        raise _NotImplemented(f"graphrt cannot load onnxruntime custom operator libraries "
                              f"({library_path!r}): register Python kernels with "
                              "graphrt.custom_operators instead")

    def add_initializer(self, name: str, ort_value) -> None:
        """The session uses this value for the model's initializer ``name``."""
        self._initializers[str(name)] = _array_of(ort_value)

    def add_external_initializers(self, names, ort_values) -> None:
        """Values for initializers whose data is external: the files are then not read."""
        if len(names) != len(ort_values):
            raise ValueError("add_external_initializers needs as many values as names")
        for name, value in zip(names, ort_values):
            self.add_initializer(name, value)

    def set_load_cancellation_flag(self, value: bool) -> None:
        """True cancels a session being made with these options."""
        if value:
            self._load_cancel.cancel()
        else:
            self._load_cancel = CancelToken()

    def has_providers(self) -> bool:
        return False

    def graphrt_options(self) -> GraphrtOptions:
        """The graphrt SessionOptions these stand for; refuses what would change results."""
        for (key, value), why in _REFUSED.items():
            if self._config.get(key) == value:
                raise _NotImplemented(f"session config {key}={value} is not supported: {why}")
        mode = self._config.get("graphrt.mode", "fast").lower()
        if mode not in _MODES:
            raise _NotImplemented(f"session config graphrt.mode={mode!r}: use 'fast' or 'exact'")
        plans = self._config.get("graphrt.max_cached_plans")
        extra = {"max_cached_plans": int(plans)} if plans is not None else {}
        level = _LEVELS.get(GraphOptimizationLevel(int(self.graph_optimization_level)), "all")
        return GraphrtOptions(mode=mode, intra_op_threads=max(0, int(self.intra_op_num_threads)),
                              optimization_level=level, **extra)


def _entry(options, key: str) -> str:
    """A config entry of SessionOptions or RunOptions; RuntimeError (as onnxruntime's) when
    there is none."""
    if key not in options._config:
        raise RuntimeError(f"{type(options).__name__} does not have configuration with key: {key}")
    return options._config[key]


def _array_of(value) -> np.ndarray:
    return np.asarray(getattr(value, "value", value))      # an OrtValue, or an array


class RunOptions:
    """onnxruntime.RunOptions: ``terminate = True`` cancels the runs that use these options
    (those in progress stop between operators); setting it back to False lets new runs go."""

    def __init__(self):
        self.log_severity_level = -1
        self.log_verbosity_level = 0
        self.logid = ""
        self.only_execute_path_to_fetches = False
        self.training_mode = False
        self._config: dict[str, str] = {}
        self._token = CancelToken()

    @property
    def terminate(self) -> bool:
        return self._token.cancelled

    @terminate.setter
    def terminate(self, value: bool) -> None:
        if value:
            self._token.cancel()
        elif self._token.cancelled:
            self._token = CancelToken()

    def add_run_config_entry(self, key: str, value: str) -> None:
        self._config[str(key)] = str(value)

    def get_run_config_entry(self, key: str) -> str:
        return _entry(self, key)

    @property
    def cancel_token(self) -> CancelToken:
        return self._token
