"""The ai.onnx.ml domain."""
