"""com.microsoft quantized operators as onnxruntime's quantizer writes them, compositions of
standard operators (core/lowering.py):

  MatMulIntegerToFloat(A, B, a_scale, b_scale[, a_zp[, b_zp[, bias]]]):
      Y = float((A - a_zp) @ (B - b_zp)) * (a_scale * b_scale) + bias
      (the int32 product exact, then one conversion, one multiply, one add: onnxruntime's
      order, so its bits)
  DynamicQuantizeMatMul(A, B, b_scale[, b_zp[, bias]]):
      A quantized as DynamicQuantizeLinear does (uint8, its scale and zero point), then
      MatMulIntegerToFloat
  QLinear<op>(X, X_scale, X_zp, ..., Y_scale, Y_zp):
      Y = QuantizeLinear(op(DequantizeLinear(X, X_scale, X_zp), ...), Y_scale, Y_zp), Y of
      X's element type. onnxruntime's QLinearAdd scales each operand by its ratio to
      Y_scale before adding: another rounding order, so its results can differ by one
      quantization step where a sum falls next to a rounding boundary.
"""
from __future__ import annotations

from ..core.lowering import Builder, Lowered, trimmed


def scaled_product(b: Builder, a, bm, a_scale, b_scale, a_zp, b_zp, bias, out) -> None:
    acc = b.op("MatMulInteger", [a, bm] + trimmed([a_zp, b_zp]))
    wide = b.op("CastLike", [acc, a_scale])
    scale = b.op("Mul", [a_scale, b_scale])
    if bias:
        b.op("Add", [b.op("Mul", [wide, scale]), bias], outputs=[out])
    else:
        b.op("Mul", [wide, scale], outputs=[out])


class MatMulIntegerToFloat(Lowered):
    def expand(self, b: Builder) -> None:
        b.require(0, 1, 2, 3)
        scaled_product(b, *(b.input(i) for i in range(7)), b.output(0))


class DynamicQuantizeMatMul(Lowered):
    def expand(self, b: Builder) -> None:
        b.require(0, 1, 2)
        q, scale, zp = b.temp(), b.temp(), b.temp()
        b.op("DynamicQuantizeLinear", [b.input(0)], outputs=[q, scale, zp])
        scaled_product(b, q, b.input(1), scale, b.input(2), zp, b.input(3), b.input(4),
                       b.output(0))


def _zero_point(b: Builder, zp: str, like: str) -> str:
    """``zp``, or a zero of ``like``'s element type when absent (Y keeps X's type)."""
    return zp or b.op("CastLike", [b.const(0, "int32"), like])


def dequantized(b: Builder, x: int) -> str:
    """DequantizeLinear of the (value, scale, zero point) at inputs x, x+1, x+2."""
    return b.op("DequantizeLinear", trimmed([b.input(x), b.input(x + 1), b.input(x + 2)]))


def quantized(b: Builder, value: str, scale: int, like: str) -> None:
    """Output 0 = QuantizeLinear(value, input scale, input scale+1 or a zero like ``like``)."""
    b.op("QuantizeLinear", [value, b.input(scale), _zero_point(b, b.input(scale + 1), like)],
         outputs=[b.output(0)])


class _QLinearBinary(Lowered):
    OP = ""

    def expand(self, b: Builder) -> None:
        b.require(0, 1, 3, 4, 6)
        v = b.op(self.OP, [dequantized(b, 0), dequantized(b, 3)])
        quantized(b, v, 6, b.input(0))


class QLinearAdd(_QLinearBinary):
    OP = "Add"


class QLinearMul(_QLinearBinary):
    OP = "Mul"


class _QLinearUnary(Lowered):
    """X, X_scale, X_zp, Y_scale, Y_zp -> op(X) (attributes: ``attrs``)."""

    def attrs(self) -> dict:
        return {}

    OP = ""

    def expand(self, b: Builder) -> None:
        b.require(0, 1, 3)
        quantized(b, b.op(self.OP, [dequantized(b, 0)], **self.attrs()), 3, b.input(0))


class QLinearSigmoid(_QLinearUnary):
    OP = "Sigmoid"


class QLinearLeakyRelu(_QLinearUnary):
    OP = "LeakyRelu"

    def attrs(self) -> dict:
        return {"alpha": float(self.node.attr("alpha", 0.01))}


class QLinearSoftmax(_QLinearUnary):
    """Softmax along ``axis`` with the axis semantics of ONNX opset ``opset`` (before 13 the
    input is seen as 2-D from the axis on)."""

    OP = "Softmax"

    def attrs(self) -> dict:
        return {"axis": int(self.node.attr("axis", -1))}

    def expand(self, b: Builder) -> None:
        b.require(0, 1, 3)
        opset = int(self.node.attr("opset", 13))
        v = b.op("Softmax", [dequantized(b, 0)], opset=opset, **self.attrs())
        quantized(b, v, 3, b.input(0))


class _ChannelsFirst(_QLinearUnary):
    def expand(self, b: Builder) -> None:
        if int(self.node.attr("channels_last", 0)):
            b.refuse("channels_last=1 is not supported")
        super().expand(b)


class QLinearGlobalAveragePool(_ChannelsFirst):
    OP = "GlobalAveragePool"


class QLinearAveragePool(_ChannelsFirst):
    OP = "AveragePool"

    def attrs(self) -> dict:
        return {k: v for k, v in self.node.attrs.items() if k != "channels_last"}


class QLinearConcat(Lowered):
    """Y_scale, Y_zp, then (X, X_scale, X_zp) per input -> Concat along ``axis``."""

    def expand(self, b: Builder) -> None:
        n = len(b.inputs) - 2
        if n < 3 or n % 3:
            b.refuse(f"inputs must be Y_scale, Y_zp and triples (X, scale, zero point), got "
                     f"{len(b.inputs)}")
        axis = self.node.attr("axis")
        if axis is None:
            self.node.fail("attribute axis is required")
        parts = [dequantized(b, i) for i in range(2, len(b.inputs), 3)]
        v = b.op("Concat", parts, axis=int(axis))
        quantized(b, v, 0, b.input(2))


class QGemm(Lowered):
    """(A, a_scale, a_zp, B, b_scale, b_zp[, C[, y_scale[, y_zp]]]), alpha, transA, transB:

        acc = (A' - a_zp) @ (B' - b_zp) + C       int32 (C: int32, the accumulator's scale)
        Y   = float(acc) * (a_scale * b_scale * alpha), quantized by y_scale and y_zp when
              y_scale is given (onnxruntime requantizes acc with one multiplier: the two may
              be one step apart where a value falls next to a rounding boundary; the tests
              found none)
    """

    def expand(self, b: Builder) -> None:
        b.require(0, 1, 3, 4)
        a, bm = b.input(0), b.input(3)
        if int(self.node.attr("transA", 0)):
            a = b.op("Transpose", [a], perm=[1, 0])
        if int(self.node.attr("transB", 0)):
            bm = b.op("Transpose", [bm], perm=[1, 0])
        acc = b.op("MatMulInteger", [a, bm] + trimmed([b.input(2), b.input(5)]))
        if b.input(6):
            acc = b.op("Add", [acc, b.input(6)])
        scale = b.op("Mul", [b.input(1), b.input(4)])
        alpha = float(self.node.attr("alpha", 1.0))
        if alpha != 1.0:
            scale = b.op("Mul", [scale, b.op("CastLike", [b.const(alpha, "float32"), scale])])
        wide = b.op("CastLike", [acc, b.input(1)])
        if b.input(7):
            y = b.op("Mul", [wide, scale])
            quantized(b, y, 7, b.input(0))
        else:
            b.op("Mul", [wide, scale], outputs=[b.output(0)])


class DynamicQuantizeLSTM(Lowered):
    """(X, W, R[, B, sequence_lens, initial_h, initial_c, P], W_scale, W_zp, R_scale, R_zp):
    an LSTM whose weights onnxruntime's quantizer stored as int8, transposed to
    W (directions, input, 4 hidden) and R (directions, hidden, 4 hidden), with scales and
    zero points per direction (directions) or per direction and gate column
    (directions, 4 hidden). Run as the LSTM of the dequantized weights,

        W' = transpose((W - W_zp) * W_scale, (0, 2, 1)),  R' likewise,

    folded into float constants when the weights are. onnxruntime quantizes X and the hidden
    state to uint8 at every step besides; graphrt keeps them float, so the two differ by that
    rounding of the activations (the tests bound it)."""

    def expand(self, b: Builder) -> None:
        b.require(0, 1, 2, 8, 10)
        attrs = dict(self.node.attrs)
        w = self._weights(b, 1, 8)
        r = self._weights(b, 2, 10)
        b.op("LSTM", trimmed([b.input(0), w, r] + [b.input(i) for i in range(3, 8)]),
             outputs=trimmed([b.output(i) for i in range(3)]), **attrs)

    @staticmethod
    def _weights(b: Builder, x: int, scale: int) -> str:
        """Dequantized (directions, 4 hidden, width) float weights from input x and its
        scale and zero point at inputs scale, scale + 1."""
        per_column = b.const([0, 1, -1], "int64")       # (D) -> (D, 1, 1); (D, 4H) -> (D, 1, 4H)
        s = b.op("Reshape", [b.input(scale), per_column])
        v = b.op("CastLike", [b.input(x), s])
        if b.input(scale + 1):
            z = b.op("CastLike", [b.op("Reshape", [b.input(scale + 1), per_column]), s])
            v = b.op("Sub", [v, z])
        return b.op("Transpose", [b.op("Mul", [v, s])], perm=[0, 2, 1])
