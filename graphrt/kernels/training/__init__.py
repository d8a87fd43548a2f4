"""The ai.onnx.preview.training operators: optimisers and Gradient."""
