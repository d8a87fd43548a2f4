"""Linear quantization and the integer products."""
