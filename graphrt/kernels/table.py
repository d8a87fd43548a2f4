"""The operator table: every OpDef graphrt has, as one literal list (no scanning)."""
from __future__ import annotations

from .attention.attention import Attention, RotaryEmbedding
from .attention.preview import CausalConvWithState, FlexAttention, LinearAttention
from .contrib.activations import (BiasGelu, BiasRows, BiasSoftmax, FastGelu, FusedConv, MsGelu,
                                  QuickGelu)
from .contrib.attention import (CacheLengths, GroupQueryAttention, MaskBias, MsAttention,
                                MsRotaryEmbedding, MultiHeadAttention, QAttention,
                                RotaryPositions)
from .contrib.normalization import (EmbedLayerNormalization, SimplifiedLayerNormalization,
                                    SkipLayerNormalization, SkipSimplifiedLayerNormalization)
from .contrib.quantized import (DynamicQuantizeLSTM, DynamicQuantizeMatMul, MatMulIntegerToFloat,
                                QGemm, QLinearAdd, QLinearAveragePool, QLinearConcat,
                                QLinearGlobalAveragePool, QLinearLeakyRelu, QLinearMul,
                                QLinearSigmoid, QLinearSoftmax)
from .control.sequence import (ConcatFromSequence, Optional, OptionalGetElement,
                               OptionalHasElement, SequenceAt, SequenceConstruct, SequenceEmpty,
                               SequenceErase, SequenceInsert, SequenceLength, SplitToSequence)
from .control.subgraph import If, Loop, Scan, SequenceMap
from .core.base import OpDef
from .elementwise.activations import (Celu, Elu, Gelu, HardSigmoid, HardSwish, LeakyRelu, Mish,
                                      Relu, Selu, Shrink, Sigmoid, Softplus, Softsign, Swish,
                                      ThresholdedRelu)
from .elementwise.arithmetic import Add, BitShift, Div, Mod, Mul, Pow, PRelu, Sub
from .elementwise.bitcast import BitCast
from .elementwise.cast import Cast, CastLike
from .elementwise.compare import (And, BitwiseAnd, BitwiseNot, BitwiseOr, BitwiseXor, Equal,
                                  Greater, GreaterOrEqual, Less, LessOrEqual, Not, Or, Xor)
from .elementwise.glu import SwiGLU
from .elementwise.select import Where
from .elementwise.unary_math import (Abs, Acos, Acosh, Asin, Asinh, Atan, Atanh, Ceil, Clip, Cos,
                                     Cosh, Erf, Exp, Floor, IsInf, IsNaN, Log, Neg, Reciprocal,
                                     Round, Sign, Sin, Sinh, Sqrt, Tan, Tanh)
from .elementwise.variadic import Max, Mean, Min, Sum
from .gemm.matmul import FusedMatMul, Gemm, MatMul
from .image.decoder import ImageDecoder
from .linalg.det import Det
from .linalg.einsum import Einsum
from .ml.encoders import CategoryMapper, LabelEncoder, OneHotEncoder
from .ml.features import (ArrayFeatureExtractor, Binarizer, FeatureVectorizer, Imputer, Normalizer,
                          Scaler)
from .ml.linear import LinearClassifier, LinearRegressor
from .ml.maps import CastMap, DictVectorizer, ZipMap
from .ml.svm import SVMClassifier, SVMRegressor
from .ml.trees import TreeEnsemble, TreeEnsembleClassifier, TreeEnsembleRegressor
from .nn.col2im import Col2Im
from .nn.conv import Conv
from .nn.conv_transpose import ConvTranspose
from .nn.deform_conv import DeformConv
from .nn.dropout import Dropout
from .nn.grid import AffineGrid, GridSample
from .nn.losses import NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss
from .nn.lrn import LRN
from .nn.nms import NonMaxSuppression
from .nn.normalization import (BatchNormalization, GroupNormalization, InstanceNormalization,
                               LayerNormalization, LpNormalization, MeanVarianceNormalization,
                               RMSNormalization)
from .nn.pool import (AveragePool, GlobalAveragePool, GlobalLpPool, GlobalMaxPool, LpPool, MaxPool,
                      MaxUnpool)
from .nn.resize import Resize, Upsample
from .nn.roi import RoiAlign
from .nn.softmax import Hardmax, LogSoftmax, Softmax
from .quant.nbits import MatMulNBits
from .quant.convolution import ConvInteger, QLinearConv
from .quant.quantize import (DequantizeLinear, DynamicQuantizeLinear, MatMulInteger,
                             QLinearMatMul, QuantizeLinear)
from .random.sampling import (Bernoulli, Multinomial, RandomNormal, RandomNormalLike,
                              RandomUniform, RandomUniformLike)
from .reduce.argreduce import ArgMax, ArgMin
from .reduce.cumulative import CumProd, CumSum
from .reduce.reduce import (ReduceL1, ReduceL2, ReduceLogSum, ReduceLogSumExp, ReduceMax,
                            ReduceMean, ReduceMin, ReduceProd, ReduceSum, ReduceSumSquare)
from .reduce.topk import TopK
from .rnn.recurrent import GRU, LSTM, RNN
from .signal.spectral import DFT, STFT, BlackmanWindow, HammingWindow, HannWindow, MelWeightMatrix
from .tensor.constants import Constant, Shape, Size
from .tensor.creation import ConstantOfShape, EyeLike, OneHot, Range
from .tensor.expand import Expand, Pad, Tile
from .tensor.gather import Gather, GatherElements, GatherND
from .tensor.indices import NonZero, Unique
from .tensor.layout import Concat, Transpose
from .tensor.scatter import ScatterElements, ScatterND, TensorScatter
from .tensor.slicing import CenterCropPad, Compress, ReverseSequence, Slice, Split, Trilu
from .tensor.space_depth import DepthToSpace, SpaceToDepth
from .tensor.views import Flatten, Identity, Reshape, Squeeze, Unsqueeze
from .text.strings import RegexFullMatch, StringConcat, StringNormalizer, StringSplit
from .text.tfidf import TfIdfVectorizer
from .text.tokenizer import Tokenizer
from .training.gradient import Gradient
from .training.optimizers import Adagrad, Adam, Momentum

ALL: tuple[OpDef, ...] = (
    OpDef("", "Add", 1, None, Add),
    OpDef("", "Sub", 1, None, Sub),
    OpDef("", "Mul", 1, None, Mul),
    OpDef("", "Div", 1, None, Div),
    OpDef("", "Relu", 6, None, Relu),
    # element-wise (unary_math, activations, compare, arithmetic, variadic, select)
    OpDef("", "Abs", 6, None, Abs),
    OpDef("", "Neg", 6, None, Neg),
    OpDef("", "Exp", 6, None, Exp),
    OpDef("", "Log", 6, None, Log),
    OpDef("", "Sqrt", 6, None, Sqrt),
    OpDef("", "Reciprocal", 6, None, Reciprocal),
    OpDef("", "Floor", 6, None, Floor),
    OpDef("", "Ceil", 6, None, Ceil),
    OpDef("", "Round", 11, None, Round),
    OpDef("", "Sign", 9, None, Sign),
    OpDef("", "Sin", 7, None, Sin),
    OpDef("", "Cos", 7, None, Cos),
    OpDef("", "Tan", 7, None, Tan),
    OpDef("", "Asin", 7, None, Asin),
    OpDef("", "Acos", 7, None, Acos),
    OpDef("", "Atan", 7, None, Atan),
    OpDef("", "Sinh", 9, None, Sinh),
    OpDef("", "Cosh", 9, None, Cosh),
    OpDef("", "Asinh", 9, None, Asinh),
    OpDef("", "Acosh", 9, None, Acosh),
    OpDef("", "Atanh", 9, None, Atanh),
    OpDef("", "Tanh", 6, None, Tanh),
    OpDef("", "Erf", 9, None, Erf),
    OpDef("", "IsNaN", 9, None, IsNaN),
    OpDef("", "IsInf", 10, None, IsInf),
    OpDef("", "Clip", 6, None, Clip),
    OpDef("", "Sigmoid", 6, None, Sigmoid),
    OpDef("", "Softplus", 1, None, Softplus),
    OpDef("", "Softsign", 1, None, Softsign),
    OpDef("", "Elu", 6, None, Elu),
    OpDef("", "Selu", 6, None, Selu),
    OpDef("", "Celu", 12, None, Celu),
    OpDef("", "LeakyRelu", 6, None, LeakyRelu),
    OpDef("", "ThresholdedRelu", 10, None, ThresholdedRelu),
    OpDef("", "HardSigmoid", 6, None, HardSigmoid),
    OpDef("", "HardSwish", 14, None, HardSwish),
    OpDef("", "Mish", 18, None, Mish),
    OpDef("", "Swish", 24, None, Swish),
    OpDef("", "Gelu", 20, None, Gelu),
    OpDef("", "Shrink", 9, None, Shrink),
    OpDef("", "Pow", 1, None, Pow),
    OpDef("", "Mod", 10, None, Mod),
    OpDef("", "PRelu", 1, None, PRelu),
    OpDef("", "BitShift", 11, None, BitShift),
    OpDef("", "And", 1, None, And),
    OpDef("", "Or", 1, None, Or),
    OpDef("", "Xor", 1, None, Xor),
    OpDef("", "Not", 1, None, Not),
    OpDef("", "Equal", 1, None, Equal),
    OpDef("", "Less", 1, None, Less),
    OpDef("", "Greater", 1, None, Greater),
    OpDef("", "LessOrEqual", 12, None, LessOrEqual),
    OpDef("", "GreaterOrEqual", 12, None, GreaterOrEqual),
    OpDef("", "BitwiseAnd", 18, None, BitwiseAnd),
    OpDef("", "BitwiseOr", 18, None, BitwiseOr),
    OpDef("", "BitwiseXor", 18, None, BitwiseXor),
    OpDef("", "BitwiseNot", 18, None, BitwiseNot),
    OpDef("", "Max", 6, None, Max),
    OpDef("", "Min", 6, None, Min),
    OpDef("", "Sum", 6, None, Sum),
    OpDef("", "Mean", 6, None, Mean),
    OpDef("", "Where", 9, None, Where),
    OpDef("", "MatMul", 1, None, MatMul),
    OpDef("", "Gemm", 1, None, Gemm),
    OpDef("", "Einsum", 12, None, Einsum),
    OpDef("", "Attention", 23, None, Attention),
    OpDef("", "RotaryEmbedding", 23, None, RotaryEmbedding),
    OpDef("", "LinearAttention", 27, None, LinearAttention),
    OpDef("", "CausalConvWithState", 27, None, CausalConvWithState),
    OpDef("ai.onnx.preview", "FlexAttention", 1, None, FlexAttention),
    OpDef("", "SwiGLU", 28, None, SwiGLU),
    OpDef("", "Col2Im", 18, None, Col2Im),
    OpDef("", "NegativeLogLikelihoodLoss", 12, None, NegativeLogLikelihoodLoss),
    OpDef("", "SoftmaxCrossEntropyLoss", 12, None, SoftmaxCrossEntropyLoss),
    OpDef("", "Det", 11, None, Det),
    OpDef("", "QuantizeLinear", 10, None, QuantizeLinear),
    OpDef("", "DequantizeLinear", 10, None, DequantizeLinear),
    OpDef("", "DynamicQuantizeLinear", 11, None, DynamicQuantizeLinear),
    OpDef("", "MatMulInteger", 10, None, MatMulInteger),
    OpDef("", "QLinearMatMul", 10, None, QLinearMatMul),
    OpDef("", "ConvInteger", 10, None, ConvInteger),
    OpDef("", "QLinearConv", 10, None, QLinearConv),
    OpDef("", "RNN", 7, None, RNN),
    OpDef("", "GRU", 7, None, GRU),
    OpDef("", "LSTM", 7, None, LSTM),
    OpDef("", "Reshape", 5, None, Reshape),
    OpDef("", "Identity", 1, None, Identity),
    OpDef("", "Flatten", 1, None, Flatten),
    OpDef("", "Squeeze", 1, None, Squeeze),
    OpDef("", "Unsqueeze", 1, None, Unsqueeze),
    OpDef("", "Constant", 1, None, Constant),
    OpDef("", "Shape", 1, None, Shape),
    OpDef("", "Transpose", 1, None, Transpose),
    OpDef("", "Concat", 4, None, Concat),
    # indexing, slicing and shape-building (gather, scatter, slicing, expand, generators)
    OpDef("", "Gather", 1, None, Gather),
    OpDef("", "GatherElements", 11, None, GatherElements),
    OpDef("", "GatherND", 11, None, GatherND),
    OpDef("", "Scatter", 9, None, ScatterElements),
    OpDef("", "ScatterElements", 11, None, ScatterElements),
    OpDef("", "ScatterND", 11, None, ScatterND),
    OpDef("", "TensorScatter", 24, None, TensorScatter),
    OpDef("", "Slice", 1, None, Slice),
    OpDef("", "Split", 1, None, Split),
    OpDef("", "Compress", 9, None, Compress),
    OpDef("", "ReverseSequence", 10, None, ReverseSequence),
    OpDef("", "Trilu", 14, None, Trilu),
    OpDef("", "CenterCropPad", 18, None, CenterCropPad),
    OpDef("", "Expand", 8, None, Expand),
    OpDef("", "Tile", 6, None, Tile),
    OpDef("", "Pad", 1, None, Pad),
    OpDef("", "ConstantOfShape", 9, None, ConstantOfShape),
    OpDef("", "Range", 11, None, Range),
    OpDef("", "EyeLike", 9, None, EyeLike),
    OpDef("", "OneHot", 9, None, OneHot),
    OpDef("", "Size", 1, None, Size),
    OpDef("", "CastLike", 15, None, CastLike),
    OpDef("", "Dropout", 7, None, Dropout),
    OpDef("", "NonZero", 9, None, NonZero),
    OpDef("", "Unique", 11, None, Unique),
    OpDef("", "DepthToSpace", 1, None, DepthToSpace),
    OpDef("", "SpaceToDepth", 1, None, SpaceToDepth),
    OpDef("", "If", 1, None, If),
    OpDef("", "Loop", 1, None, Loop),
    OpDef("", "Scan", 8, None, Scan),
    OpDef("", "SequenceMap", 17, None, SequenceMap),
    OpDef("ai.onnx.preview.training", "Gradient", 1, None, Gradient),
    OpDef("", "SequenceEmpty", 11, None, SequenceEmpty),
    OpDef("", "SequenceConstruct", 11, None, SequenceConstruct),
    OpDef("", "SequenceInsert", 11, None, SequenceInsert),
    OpDef("", "SequenceErase", 11, None, SequenceErase),
    OpDef("", "SequenceAt", 11, None, SequenceAt),
    OpDef("", "SequenceLength", 11, None, SequenceLength),
    OpDef("", "ConcatFromSequence", 11, None, ConcatFromSequence),
    OpDef("", "SplitToSequence", 11, None, SplitToSequence),
    OpDef("", "Optional", 15, None, Optional),
    OpDef("", "OptionalHasElement", 15, None, OptionalHasElement),
    OpDef("", "OptionalGetElement", 15, None, OptionalGetElement),
    OpDef("", "Cast", 6, None, Cast),
    OpDef("", "Softmax", 1, None, Softmax),
    OpDef("", "ReduceSum", 1, None, ReduceSum),
    OpDef("", "ReduceMean", 1, None, ReduceMean),
    OpDef("", "ReduceMax", 1, None, ReduceMax),
    OpDef("", "ReduceMin", 1, None, ReduceMin),
    OpDef("", "ReduceProd", 1, None, ReduceProd),
    OpDef("", "ReduceL1", 1, None, ReduceL1),
    OpDef("", "ReduceL2", 1, None, ReduceL2),
    OpDef("", "ReduceLogSum", 1, None, ReduceLogSum),
    OpDef("", "ReduceLogSumExp", 1, None, ReduceLogSumExp),
    OpDef("", "ReduceSumSquare", 1, None, ReduceSumSquare),
    OpDef("", "ArgMax", 1, None, ArgMax),
    OpDef("", "ArgMin", 1, None, ArgMin),
    OpDef("", "CumSum", 11, None, CumSum),
    OpDef("", "CumProd", 26, None, CumProd),
    OpDef("", "LogSoftmax", 1, None, LogSoftmax),
    OpDef("", "Hardmax", 1, None, Hardmax),
    OpDef("", "TopK", 1, None, TopK),
    OpDef("", "LayerNormalization", 17, None, LayerNormalization),
    # before opset 17, onnxruntime's own (same definition), which its optimizer writes
    OpDef("", "LayerNormalization", 1, 16, LayerNormalization),
    OpDef("", "RMSNormalization", 23, None, RMSNormalization),
    OpDef("", "BatchNormalization", 6, None, BatchNormalization),
    OpDef("", "InstanceNormalization", 1, None, InstanceNormalization),
    OpDef("", "GroupNormalization", 18, None, GroupNormalization),
    OpDef("", "LpNormalization", 1, None, LpNormalization),
    OpDef("", "MeanVarianceNormalization", 9, None, MeanVarianceNormalization),
    OpDef("", "Conv", 1, None, Conv),
    OpDef("", "ConvTranspose", 1, None, ConvTranspose),
    OpDef("", "DeformConv", 19, None, DeformConv),
    OpDef("", "MaxPool", 1, None, MaxPool),
    OpDef("", "AveragePool", 1, None, AveragePool),
    OpDef("", "LpPool", 2, None, LpPool),
    OpDef("", "GlobalMaxPool", 1, None, GlobalMaxPool),
    OpDef("", "GlobalAveragePool", 1, None, GlobalAveragePool),
    OpDef("", "GlobalLpPool", 2, None, GlobalLpPool),
    OpDef("", "MaxUnpool", 9, None, MaxUnpool),
    OpDef("", "LRN", 1, None, LRN),
    OpDef("", "Resize", 10, None, Resize),
    OpDef("", "Upsample", 7, 9, Upsample),
    OpDef("", "GridSample", 16, None, GridSample),
    OpDef("", "AffineGrid", 20, None, AffineGrid),
    OpDef("", "RoiAlign", 10, None, RoiAlign),
    # signal processing, boxes, bits, random draws, training (signal, nms, bitcast, random,
    # training)
    OpDef("", "DFT", 17, None, DFT),
    OpDef("", "STFT", 17, None, STFT),
    OpDef("", "HannWindow", 17, None, HannWindow),
    OpDef("", "HammingWindow", 17, None, HammingWindow),
    OpDef("", "BlackmanWindow", 17, None, BlackmanWindow),
    OpDef("", "MelWeightMatrix", 17, None, MelWeightMatrix),
    OpDef("", "NonMaxSuppression", 10, None, NonMaxSuppression),
    OpDef("", "BitCast", 26, None, BitCast),
    OpDef("", "RandomUniform", 1, None, RandomUniform),
    OpDef("", "RandomNormal", 1, None, RandomNormal),
    OpDef("", "RandomUniformLike", 1, None, RandomUniformLike),
    OpDef("", "RandomNormalLike", 1, None, RandomNormalLike),
    OpDef("", "Bernoulli", 15, None, Bernoulli),
    OpDef("", "Multinomial", 7, None, Multinomial),
    OpDef("ai.onnx.preview.training", "Momentum", 1, None, Momentum),
    OpDef("ai.onnx.preview.training", "Adagrad", 1, None, Adagrad),
    OpDef("ai.onnx.preview.training", "Adam", 1, None, Adam),
    # strings (strings, tfidf)
    OpDef("", "StringConcat", 20, None, StringConcat),
    OpDef("", "StringSplit", 20, None, StringSplit),
    OpDef("", "StringNormalizer", 10, None, StringNormalizer),
    OpDef("", "RegexFullMatch", 20, None, RegexFullMatch),
    OpDef("", "TfIdfVectorizer", 9, None, TfIdfVectorizer),
    OpDef("", "ImageDecoder", 20, None, ImageDecoder),
    # the ai.onnx.ml domain (ml)
    OpDef("ai.onnx.ml", "LabelEncoder", 1, None, LabelEncoder),
    OpDef("ai.onnx.ml", "TreeEnsemble", 5, None, TreeEnsemble),
    OpDef("ai.onnx.ml", "TreeEnsembleClassifier", 1, None, TreeEnsembleClassifier),
    OpDef("ai.onnx.ml", "TreeEnsembleRegressor", 1, None, TreeEnsembleRegressor),
    OpDef("ai.onnx.ml", "Binarizer", 1, None, Binarizer),
    OpDef("ai.onnx.ml", "ArrayFeatureExtractor", 1, None, ArrayFeatureExtractor),
    OpDef("ai.onnx.ml", "CastMap", 1, None, CastMap),
    OpDef("ai.onnx.ml", "CategoryMapper", 1, None, CategoryMapper),
    OpDef("ai.onnx.ml", "DictVectorizer", 1, None, DictVectorizer),
    OpDef("ai.onnx.ml", "FeatureVectorizer", 1, None, FeatureVectorizer),
    OpDef("ai.onnx.ml", "Imputer", 1, None, Imputer),
    OpDef("ai.onnx.ml", "LinearClassifier", 1, None, LinearClassifier),
    OpDef("ai.onnx.ml", "LinearRegressor", 1, None, LinearRegressor),
    OpDef("ai.onnx.ml", "Normalizer", 1, None, Normalizer),
    OpDef("ai.onnx.ml", "OneHotEncoder", 1, None, OneHotEncoder),
    OpDef("ai.onnx.ml", "Scaler", 1, None, Scaler),
    OpDef("ai.onnx.ml", "SVMClassifier", 1, None, SVMClassifier),
    OpDef("ai.onnx.ml", "SVMRegressor", 1, None, SVMRegressor),
    OpDef("ai.onnx.ml", "ZipMap", 1, None, ZipMap),
    OpDef("com.microsoft", "Tokenizer", 1, None, Tokenizer),
    OpDef("com.microsoft", "Gelu", 1, None, MsGelu),
    OpDef("com.microsoft", "BiasGelu", 1, None, BiasGelu),
    OpDef("com.microsoft", "FastGelu", 1, None, FastGelu),
    OpDef("com.microsoft", "QuickGelu", 1, None, QuickGelu),
    OpDef("com.microsoft", "BiasSoftmax", 1, None, BiasSoftmax),
    OpDef("graphrt", "BiasRows", 1, None, BiasRows),      # written by BiasSoftmax's expansion
    OpDef("com.microsoft", "FusedConv", 1, None, FusedConv),
    OpDef("com.microsoft", "Attention", 1, None, MsAttention),
    OpDef("com.microsoft", "FusedMatMul", 1, None, FusedMatMul),
    OpDef("com.microsoft", "QAttention", 1, None, QAttention),
    OpDef("com.microsoft", "MultiHeadAttention", 1, None, MultiHeadAttention),
    OpDef("com.microsoft", "RotaryEmbedding", 1, None, MsRotaryEmbedding),
    OpDef("graphrt", "MaskBias", 1, None, MaskBias),      # written by Attention's expansion
    OpDef("graphrt", "RotaryPositions", 1, None, RotaryPositions),  # by RotaryEmbedding's
    OpDef("com.microsoft", "GroupQueryAttention", 1, None, GroupQueryAttention),
    OpDef("graphrt", "CacheLengths", 1, None, CacheLengths),  # by GroupQueryAttention's
    OpDef("com.microsoft", "SkipLayerNormalization", 1, None, SkipLayerNormalization),
    OpDef("com.microsoft", "EmbedLayerNormalization", 1, None, EmbedLayerNormalization),
    OpDef("com.microsoft", "SkipSimplifiedLayerNormalization", 1, None,
          SkipSimplifiedLayerNormalization),
    # onnxruntime registers it in the default domain
    OpDef("", "SimplifiedLayerNormalization", 1, None, SimplifiedLayerNormalization),
    OpDef("com.microsoft", "MatMulIntegerToFloat", 1, None, MatMulIntegerToFloat),
    OpDef("com.microsoft", "DynamicQuantizeMatMul", 1, None, DynamicQuantizeMatMul),
    OpDef("com.microsoft", "DynamicQuantizeLSTM", 1, None, DynamicQuantizeLSTM),
    OpDef("com.microsoft", "MatMulNBits", 1, None, MatMulNBits),
    OpDef("com.microsoft", "QGemm", 1, None, QGemm),
    OpDef("com.microsoft", "QLinearAdd", 1, None, QLinearAdd),
    OpDef("com.microsoft", "QLinearMul", 1, None, QLinearMul),
    OpDef("com.microsoft", "QLinearSigmoid", 1, None, QLinearSigmoid),
    OpDef("com.microsoft", "QLinearLeakyRelu", 1, None, QLinearLeakyRelu),
    OpDef("com.microsoft", "QLinearGlobalAveragePool", 1, None, QLinearGlobalAveragePool),
    OpDef("com.microsoft", "QLinearAveragePool", 1, None, QLinearAveragePool),
    OpDef("com.microsoft", "QLinearConcat", 1, None, QLinearConcat),
    OpDef("com.microsoft", "QLinearSoftmax", 1, None, QLinearSoftmax),
)


class OperatorTable:
    """Lookup of OpDefs by (domain, op type, opset)."""

    def __init__(self, defs=ALL):
        self._by_key: dict[tuple[str, str], list[OpDef]] = {}
        for d in defs:
            self._by_key.setdefault((d.domain, d.op_type), []).append(d)

    def extended(self, defs) -> "OperatorTable":
        """A new table with ``defs`` added (user registries; graphrt's table is untouched)."""
        return OperatorTable(self.defs() + list(defs))

    def defs(self) -> list[OpDef]:
        return [d for ds in self._by_key.values() for d in ds]

    def resolve(self, domain: str, op_type: str, opset: int) -> OpDef | None:
        for d in self._by_key.get((domain, op_type), ()):
            if d.serves(opset):
                return d
        return None


DEFAULT = OperatorTable()
