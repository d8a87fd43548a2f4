"""Matrix products: the register-blocked micro-kernel, the BLAS path, the product API every
multiplying kernel plans and calls (product), and the MatMul and Gemm operators."""
