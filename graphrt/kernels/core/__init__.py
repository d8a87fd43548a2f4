"""The kernel layer's infrastructure: the operator contract (base), kernel variants (jit),
broadcast walks, the element-wise template layer (pointwise), narrow floats, word moves,
runs of copies and large fills. No operator lives here."""
