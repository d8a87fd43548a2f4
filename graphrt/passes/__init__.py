"""Graph passes (contract section 6): rewrites of a compiled graph before any plan."""
