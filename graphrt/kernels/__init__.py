"""Operator kernels: one package per concern (core and gemm are infrastructure, the others
operator families) and table.py, the one literal list of every OpDef."""
