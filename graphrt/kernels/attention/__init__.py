"""Attention and RotaryEmbedding, and the newer attention-like operators (preview)."""
