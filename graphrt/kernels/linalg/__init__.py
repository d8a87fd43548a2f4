"""Einsum and Det."""
