"""Subgraph operators (If, Loop, Scan, SequenceMap) and the sequence and optional operators."""
