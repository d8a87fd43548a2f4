"""graphrt's own scalar functions: exact-mode transcendentals (exactmath) and fast-mode
vectorisable ones (vecmath)."""
