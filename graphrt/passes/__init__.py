"""Graph passes (docs/contract.md section 6): rewrites of a compiled graph before any plan."""
