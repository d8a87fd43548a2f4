"""Reductions: the Reduce family, ArgMax/ArgMin, TopK, CumSum/CumProd."""
