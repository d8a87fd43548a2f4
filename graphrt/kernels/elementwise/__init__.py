"""Element-wise operators: arithmetic, unary maths, activations, comparisons and logic,
variadic Max/Min/Sum/Mean, Where, Cast/CastLike, BitCast, SwiGLU, and the fused
primary-plus-epilogue node the graph passes build."""
