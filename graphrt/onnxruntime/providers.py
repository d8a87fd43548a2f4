"""Execution providers and the process-wide functions of onnxruntime's module.

graphrt runs on the CPU: asking for another provider warns and runs on the CPU, as
onnxruntime does when a provider is not available.
"""
from __future__ import annotations

import warnings

CPU = "CPUExecutionProvider"
# the provider names onnxruntime knows (get_all_providers); any of them may be asked for
KNOWN = ("TensorrtExecutionProvider", "CUDAExecutionProvider", "MIGraphXExecutionProvider",
         "ROCMExecutionProvider", "OpenVINOExecutionProvider", "DnnlExecutionProvider",
         "VitisAIExecutionProvider", "QNNExecutionProvider", "NnapiExecutionProvider",
         "VSINPUExecutionProvider", "JsExecutionProvider", "CoreMLExecutionProvider",
         "ArmNNExecutionProvider", "ACLExecutionProvider", "DmlExecutionProvider",
         "RknpuExecutionProvider", "WebNNExecutionProvider", "WebGpuExecutionProvider",
         "XnnpackExecutionProvider", "CANNExecutionProvider", "AzureExecutionProvider", CPU)

_logger_severity = [2]


def get_available_providers() -> list[str]:
    return [CPU]


def get_all_providers() -> list[str]:
    return list(KNOWN)


def get_device() -> str:
    return "CPU"


def resolve(providers, provider_options, strict: bool = False) -> dict[str, dict[str, str]]:
    """onnxruntime's ``providers`` / ``provider_options`` arguments -> the options of the CPU
    provider, the one graphrt runs on. Names as strings or (name, options) tuples. A name
    onnxruntime does not know raises RuntimeError when ``strict`` (set_providers), else
    warns like the others (a new session)."""
    if providers is None:
        return {CPU: {}}
    if isinstance(providers, str):
        raise ValueError("providers must be a list of provider names or (name, options) tuples")
    providers = list(providers)
    if provider_options is not None and len(provider_options) != len(providers):
        raise ValueError("'providers' and 'provider_options' should be the same length if both are given.")
    chosen: dict[str, dict] = {}
    for i, p in enumerate(providers):
        if isinstance(p, tuple):
            if len(p) != 2 or not isinstance(p[0], str) or not isinstance(p[1], dict):
                raise ValueError("a provider tuple must be (name, options dict)")
            name, opts = p
        elif isinstance(p, str):
            name, opts = p, (provider_options[i] if provider_options is not None else {})
        else:
            raise ValueError("Only string values for a provider name or (string, dict) tuples are supported.")
        chosen[name] = {str(k): str(v) for k, v in dict(opts).items()}
    unknown = [n for n in chosen if n not in KNOWN]
    if unknown and strict:
        raise RuntimeError(f"Unknown Provider Type: {unknown[0]}")
    others = [n for n in chosen if n != CPU]
    if others:
        warnings.warn(f"graphrt runs on the CPU only: {others} not available, running on {CPU}",
                      stacklevel=3)
    return {CPU: chosen.get(CPU, {})}


def set_default_logger_severity(severity: int) -> None:
    """Kept for code that sets it; graphrt logs through Python's logging module."""
    if not 0 <= int(severity) <= 4:
        raise ValueError("severity must be 0 (verbose) to 4 (fatal)")
    _logger_severity[0] = int(severity)


def set_default_logger_verbosity(verbosity: int) -> None:
    int(verbosity)


def disable_telemetry_events() -> None:
    """graphrt sends no telemetry."""


def enable_telemetry_events() -> None:
    """graphrt sends no telemetry."""


def set_global_thread_pool_sizes(intra_op_num_threads: int = 0, inter_op_num_threads: int = 0) -> None:
    """Accepted; graphrt sizes its threads per session (SessionOptions.intra_op_num_threads)."""


def preload_dlls(*args, **kwargs) -> None:
    """Nothing to preload: graphrt needs no GPU libraries."""
