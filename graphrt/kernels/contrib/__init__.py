"""The com.microsoft operators that onnxruntime's transformer optimizer and quantizer write
(semantics from onnxruntime's contrib operator documentation)."""
