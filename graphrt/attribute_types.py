"""The element type each ONNX operator's schema declares for its attributes, by domain,
operator and the opset version from which it holds; the importer refuses a node whose
attribute has another type (a bad model).

A table here rather than onnx's schema registry: the registry's first use builds every
schema onnx knows and keeps them, 7 MiB of a process that needs a few hundred names and
type codes. The table is onnx's own, generated from the installed onnx by
``python -m graphrt.attribute_types --write``; tests/test_attribute_types.py checks it
against the installed onnx. Type codes are onnx.AttributeProto's (FLOAT 1, INT 2, STRING 3,
TENSOR 4, GRAPH 5, FLOATS 6, INTS 7, STRINGS 8, TENSORS 9, GRAPHS 10, SPARSE_TENSOR 11,
TYPE_PROTO 13, TYPE_PROTOS 14). An operator the table lacks (a custom or newer one) is not
checked here; its kernel checks what it reads.
"""
from __future__ import annotations

import sys
from functools import lru_cache


def declared(domain: str, op_type: str, version: int) -> dict[str, int] | None:
    """{attribute: type code} of the operator's schema in force at opset ``version`` of
    ``domain`` (the latest whose since-version is at most it), or None without one."""
    entries = _TABLE.get(domain, {}).get(op_type)
    if entries is None:
        return None
    found = None
    for since, attrs in entries:
        if since > version:
            break
        found = since, attrs
    return None if found is None else _parse(found[1])


@lru_cache(maxsize=None)
def _parse(attrs: str) -> dict[str, int]:
    return {name: int(code) for name, _, code in (a.partition("=") for a in attrs.split())}


def table_source() -> str:
    """The _TABLE literal from the installed onnx: each operator's schema versions, the
    consecutive ones with the same attribute types merged."""
    import onnx
    by_op: dict = {}
    for schema in onnx.defs.get_all_schemas_with_history():
        attrs = " ".join(f"{a}={int(s.type)}" for a, s in sorted(schema.attributes.items()))
        by_op.setdefault(schema.domain, {}).setdefault(schema.name, []).append(
            (schema.since_version, attrs))
    lines = [f"ONNX_VERSION = {onnx.__version__!r}", "_TABLE = {"]
    for domain in sorted(by_op):
        lines.append(f"    {domain!r}: {{")
        for op in sorted(by_op[domain]):
            merged: list = []
            for since, attrs in sorted(by_op[domain][op]):
                if not merged or merged[-1][1] != attrs:
                    merged.append((since, attrs))
            one = f"        {op!r}: (" + ", ".join(f"({s}, {a!r})" for s, a in merged) + ",),"
            if len(one) <= 99:
                lines.append(one)
            else:
                lines += [f"        {op!r}: ("] + [f"            ({s}, {a!r}),"
                                                  for s, a in merged] + ["        ),"]
        lines.append("    },")
    return "\n".join(lines + ["}"])


_BEGIN, _END = "# -- generated: python -m graphrt.attribute_types --write\n", "# -- end\n"


def _write() -> None:
    with open(__file__, encoding="utf-8") as f:
        text = f.read()
    head, _, rest = text.partition(_BEGIN)
    _, _, tail = rest.partition(_END)
    with open(__file__, "w", encoding="utf-8") as f:
        f.write(head + _BEGIN + table_source() + "\n" + _END + tail)


# -- generated: python -m graphrt.attribute_types --write
ONNX_VERSION = '1.23.2'
_TABLE = {
    '': {
        'Abs': ((1, 'consumed_inputs=7'), (6, ''),),
        'Acos': ((7, ''),),
        'Acosh': ((9, ''),),
        'Add': ((1, 'axis=2 broadcast=2 consumed_inputs=7'), (6, 'axis=2 broadcast=2'), (7, ''),),
        'AffineGrid': ((20, 'align_corners=2'),),
        'And': ((1, 'axis=2 broadcast=2'), (7, ''),),
        'ArgMax': ((1, 'axis=2 keepdims=2'), (12, 'axis=2 keepdims=2 select_last_index=2'),),
        'ArgMin': ((1, 'axis=2 keepdims=2'), (12, 'axis=2 keepdims=2 select_last_index=2'),),
        'Asin': ((7, ''),),
        'Asinh': ((9, ''),),
        'Atan': ((7, ''),),
        'Atanh': ((9, ''),),
        'Attention': (
            (23, 'is_causal=2 kv_num_heads=2 q_num_heads=2 qk_matmul_output_mode=2 scale=1 softcap=1 softmax_precision=2'),
            (25, 'is_causal=2 kv_num_heads=2 left_window_size=2 q_num_heads=2 qk_matmul_output_mode=2 right_window_size=2 scale=1 softcap=1 softmax_precision=2'),
        ),
        'AveragePool': (
            (1, 'auto_pad=3 kernel_shape=7 pads=7 strides=7'),
            (7, 'auto_pad=3 count_include_pad=2 kernel_shape=7 pads=7 strides=7'),
            (10, 'auto_pad=3 ceil_mode=2 count_include_pad=2 kernel_shape=7 pads=7 strides=7'),
            (19, 'auto_pad=3 ceil_mode=2 count_include_pad=2 dilations=7 kernel_shape=7 pads=7 strides=7'),
        ),
        'BatchNormalization': (
            (1, 'consumed_inputs=7 epsilon=1 is_test=2 momentum=1 spatial=2'),
            (6, 'epsilon=1 is_test=2 momentum=1 spatial=2'),
            (7, 'epsilon=1 momentum=1 spatial=2'),
            (9, 'epsilon=1 momentum=1'),
            (14, 'epsilon=1 momentum=1 training_mode=2'),
        ),
        'Bernoulli': ((15, 'dtype=2 seed=1'),),
        'BitCast': ((26, 'to=2'),),
        'BitShift': ((11, 'direction=3'),),
        'BitwiseAnd': ((18, ''),),
        'BitwiseNot': ((18, ''),),
        'BitwiseOr': ((18, ''),),
        'BitwiseXor': ((18, ''),),
        'BlackmanWindow': ((17, 'output_datatype=2 periodic=2'),),
        'Cast': (
            (1, 'to=3'),
            (6, 'to=2'),
            (19, 'saturate=2 to=2'),
            (24, 'round_mode=3 saturate=2 to=2'),
        ),
        'CastLike': ((15, ''), (19, 'saturate=2'), (24, 'round_mode=3 saturate=2'),),
        'CausalConvWithState': ((27, 'activation=3'),),
        'Ceil': ((1, 'consumed_inputs=7'), (6, ''),),
        'Celu': ((12, 'alpha=1'),),
        'CenterCropPad': ((18, 'axes=7'),),
        'Clip': ((1, 'consumed_inputs=7 max=1 min=1'), (6, 'max=1 min=1'), (11, ''),),
        'Col2Im': ((18, 'dilations=7 pads=7 strides=7'),),
        'Compress': ((9, 'axis=2'),),
        'Concat': ((1, 'axis=2'),),
        'ConcatFromSequence': ((11, 'axis=2 new_axis=2'),),
        'Constant': (
            (1, 'value=4'),
            (11, 'sparse_value=11 value=4'),
            (12, 'sparse_value=11 value=4 value_float=1 value_floats=6 value_int=2 value_ints=7 value_string=3 value_strings=8'),
        ),
        'ConstantOfShape': ((9, 'value=4'),),
        'Conv': ((1, 'auto_pad=3 dilations=7 group=2 kernel_shape=7 pads=7 strides=7'),),
        'ConvInteger': ((10, 'auto_pad=3 dilations=7 group=2 kernel_shape=7 pads=7 strides=7'),),
        'ConvTranspose': (
            (1, 'auto_pad=3 dilations=7 group=2 kernel_shape=7 output_padding=7 output_shape=7 pads=7 strides=7'),
        ),
        'Cos': ((7, ''),),
        'Cosh': ((9, ''),),
        'CumProd': ((26, 'exclusive=2 reverse=2'),),
        'CumSum': ((11, 'exclusive=2 reverse=2'),),
        'DFT': ((17, 'axis=2 inverse=2 onesided=2'), (20, 'inverse=2 onesided=2'),),
        'DeformConv': (
            (19, 'dilations=7 group=2 kernel_shape=7 offset_group=2 pads=7 strides=7'),
        ),
        'DepthToSpace': ((1, 'blocksize=2'), (11, 'blocksize=2 mode=3'),),
        'DequantizeLinear': (
            (10, ''),
            (13, 'axis=2'),
            (21, 'axis=2 block_size=2'),
            (23, 'axis=2 block_size=2 output_dtype=2'),
        ),
        'Det': ((11, ''),),
        'Div': ((1, 'axis=2 broadcast=2 consumed_inputs=7'), (6, 'axis=2 broadcast=2'), (7, ''),),
        'Dropout': (
            (1, 'consumed_inputs=7 is_test=2 ratio=1'),
            (6, 'is_test=2 ratio=1'),
            (7, 'ratio=1'),
            (12, 'seed=2'),
        ),
        'DynamicQuantizeLinear': ((11, ''),),
        'Einsum': ((12, 'equation=3'),),
        'Elu': ((1, 'alpha=1 consumed_inputs=7'), (6, 'alpha=1'),),
        'Equal': ((1, 'axis=2 broadcast=2'), (7, ''),),
        'Erf': ((9, ''),),
        'Exp': ((1, 'consumed_inputs=7'), (6, ''),),
        'Expand': ((8, ''),),
        'EyeLike': ((9, 'dtype=2 k=2'),),
        'Flatten': ((1, 'axis=2'),),
        'Floor': ((1, 'consumed_inputs=7'), (6, ''),),
        'GRU': (
            (1, 'activation_alpha=6 activation_beta=6 activations=8 clip=1 direction=3 hidden_size=2 output_sequence=2'),
            (3, 'activation_alpha=6 activation_beta=6 activations=8 clip=1 direction=3 hidden_size=2 linear_before_reset=2 output_sequence=2'),
            (7, 'activation_alpha=6 activation_beta=6 activations=8 clip=1 direction=3 hidden_size=2 linear_before_reset=2'),
            (14, 'activation_alpha=6 activation_beta=6 activations=8 clip=1 direction=3 hidden_size=2 layout=2 linear_before_reset=2'),
        ),
        'Gather': ((1, 'axis=2'),),
        'GatherElements': ((11, 'axis=2'),),
        'GatherND': ((11, ''), (12, 'batch_dims=2'),),
        'Gelu': ((20, 'approximate=3'),),
        'Gemm': (
            (1, 'alpha=1 beta=1 broadcast=2 transA=2 transB=2'),
            (7, 'alpha=1 beta=1 transA=2 transB=2'),
        ),
        'GlobalAveragePool': ((1, ''),),
        'GlobalLpPool': ((1, 'p=1'), (2, 'p=2'),),
        'GlobalMaxPool': ((1, ''),),
        'Greater': ((1, 'axis=2 broadcast=2'), (7, ''),),
        'GreaterOrEqual': ((12, ''),),
        'GridSample': ((16, 'align_corners=2 mode=3 padding_mode=3'),),
        'GroupNormalization': (
            (18, 'epsilon=1 num_groups=2'),
            (21, 'epsilon=1 num_groups=2 stash_type=2'),
        ),
        'HammingWindow': ((17, 'output_datatype=2 periodic=2'),),
        'HannWindow': ((17, 'output_datatype=2 periodic=2'),),
        'HardSigmoid': ((1, 'alpha=1 beta=1 consumed_inputs=7'), (6, 'alpha=1 beta=1'),),
        'HardSwish': ((14, ''),),
        'Hardmax': ((1, 'axis=2'),),
        'Identity': ((1, ''),),
        'If': ((1, 'else_branch=5 then_branch=5'),),
        'ImageDecoder': ((20, 'pixel_format=3'),),
        'InstanceNormalization': ((1, 'consumed_inputs=7 epsilon=1'), (6, 'epsilon=1'),),
        'IsInf': ((10, 'detect_negative=2 detect_positive=2'),),
        'IsNaN': ((9, ''),),
        'LRN': ((1, 'alpha=1 beta=1 bias=1 size=2'),),
        'LSTM': (
            (1, 'activation_alpha=6 activation_beta=6 activations=8 clip=1 direction=3 hidden_size=2 input_forget=2 output_sequence=2'),
            (7, 'activation_alpha=6 activation_beta=6 activations=8 clip=1 direction=3 hidden_size=2 input_forget=2'),
            (14, 'activation_alpha=6 activation_beta=6 activations=8 clip=1 direction=3 hidden_size=2 input_forget=2 layout=2'),
        ),
        'LayerNormalization': ((17, 'axis=2 epsilon=1 stash_type=2'),),
        'LeakyRelu': ((1, 'alpha=1 consumed_inputs=7'), (6, 'alpha=1'),),
        'Less': ((1, 'axis=2 broadcast=2'), (7, ''),),
        'LessOrEqual': ((12, ''),),
        'LinearAttention': (
            (27, 'chunk_size=2 kv_num_heads=2 q_num_heads=2 scale=1 update_rule=3'),
        ),
        'Log': ((1, 'consumed_inputs=7'), (6, ''),),
        'LogSoftmax': ((1, 'axis=2'),),
        'Loop': ((1, 'body=5'),),
        'LpNormalization': ((1, 'axis=2 p=2'),),
        'LpPool': (
            (1, 'auto_pad=3 kernel_shape=7 p=1 pads=7 strides=7'),
            (2, 'auto_pad=3 kernel_shape=7 p=2 pads=7 strides=7'),
            (18, 'auto_pad=3 ceil_mode=2 dilations=7 kernel_shape=7 p=2 pads=7 strides=7'),
        ),
        'MatMul': ((1, ''),),
        'MatMulInteger': ((10, ''),),
        'Max': ((1, 'consumed_inputs=7'), (6, ''),),
        'MaxPool': (
            (1, 'auto_pad=3 kernel_shape=7 pads=7 strides=7'),
            (8, 'auto_pad=3 kernel_shape=7 pads=7 storage_order=2 strides=7'),
            (10, 'auto_pad=3 ceil_mode=2 dilations=7 kernel_shape=7 pads=7 storage_order=2 strides=7'),
        ),
        'MaxRoiPool': ((1, 'pooled_shape=7 spatial_scale=1'),),
        'MaxUnpool': ((9, 'kernel_shape=7 pads=7 strides=7'),),
        'Mean': ((1, 'consumed_inputs=7'), (6, ''),),
        'MeanVarianceNormalization': ((9, 'axes=7'),),
        'MelWeightMatrix': ((17, 'output_datatype=2'),),
        'Min': ((1, 'consumed_inputs=7'), (6, ''),),
        'Mish': ((18, ''),),
        'Mod': ((10, 'fmod=2'),),
        'Mul': ((1, 'axis=2 broadcast=2 consumed_inputs=7'), (6, 'axis=2 broadcast=2'), (7, ''),),
        'Multinomial': ((7, 'dtype=2 sample_size=2 seed=1'),),
        'Neg': ((1, 'consumed_inputs=7'), (6, ''),),
        'NegativeLogLikelihoodLoss': ((12, 'ignore_index=2 reduction=3'),),
        'NonMaxSuppression': ((10, 'center_point_box=2'),),
        'NonZero': ((9, ''),),
        'Not': ((1, ''),),
        'OneHot': ((9, 'axis=2'),),
        'Optional': ((15, 'type=13'),),
        'OptionalGetElement': ((15, ''),),
        'OptionalHasElement': ((15, ''),),
        'Or': ((1, 'axis=2 broadcast=2'), (7, ''),),
        'PRelu': ((1, 'consumed_inputs=7'), (6, ''),),
        'Pad': ((1, 'mode=3 paddings=7 value=1'), (2, 'mode=3 pads=7 value=1'), (11, 'mode=3'),),
        'Pow': ((1, 'axis=2 broadcast=2'), (7, ''),),
        'QLinearConv': ((10, 'auto_pad=3 dilations=7 group=2 kernel_shape=7 pads=7 strides=7'),),
        'QLinearMatMul': ((10, ''),),
        'QuantizeLinear': (
            (10, ''),
            (13, 'axis=2'),
            (19, 'axis=2 saturate=2'),
            (21, 'axis=2 block_size=2 output_dtype=2 saturate=2'),
            (23, 'axis=2 block_size=2 output_dtype=2 precision=2 saturate=2'),
        ),
        'RMSNormalization': ((23, 'axis=2 epsilon=1 stash_type=2'),),
        'RNN': (
            (1, 'activation_alpha=6 activation_beta=6 activations=8 clip=1 direction=3 hidden_size=2 output_sequence=2'),
            (7, 'activation_alpha=6 activation_beta=6 activations=8 clip=1 direction=3 hidden_size=2'),
            (14, 'activation_alpha=6 activation_beta=6 activations=8 clip=1 direction=3 hidden_size=2 layout=2'),
        ),
        'RandomNormal': ((1, 'dtype=2 mean=1 scale=1 seed=1 shape=7'),),
        'RandomNormalLike': ((1, 'dtype=2 mean=1 scale=1 seed=1'),),
        'RandomUniform': ((1, 'dtype=2 high=1 low=1 seed=1 shape=7'),),
        'RandomUniformLike': ((1, 'dtype=2 high=1 low=1 seed=1'),),
        'Range': ((11, ''), (27, 'stash_type=2'),),
        'Reciprocal': ((1, 'consumed_inputs=7'), (6, ''),),
        'ReduceL1': ((1, 'axes=7 keepdims=2'), (18, 'keepdims=2 noop_with_empty_axes=2'),),
        'ReduceL2': ((1, 'axes=7 keepdims=2'), (18, 'keepdims=2 noop_with_empty_axes=2'),),
        'ReduceLogSum': ((1, 'axes=7 keepdims=2'), (18, 'keepdims=2 noop_with_empty_axes=2'),),
        'ReduceLogSumExp': ((1, 'axes=7 keepdims=2'), (18, 'keepdims=2 noop_with_empty_axes=2'),),
        'ReduceMax': ((1, 'axes=7 keepdims=2'), (18, 'keepdims=2 noop_with_empty_axes=2'),),
        'ReduceMean': ((1, 'axes=7 keepdims=2'), (18, 'keepdims=2 noop_with_empty_axes=2'),),
        'ReduceMin': ((1, 'axes=7 keepdims=2'), (18, 'keepdims=2 noop_with_empty_axes=2'),),
        'ReduceProd': ((1, 'axes=7 keepdims=2'), (18, 'keepdims=2 noop_with_empty_axes=2'),),
        'ReduceSum': ((1, 'axes=7 keepdims=2'), (13, 'keepdims=2 noop_with_empty_axes=2'),),
        'ReduceSumSquare': ((1, 'axes=7 keepdims=2'), (18, 'keepdims=2 noop_with_empty_axes=2'),),
        'RegexFullMatch': ((20, 'pattern=3'),),
        'Relu': ((1, 'consumed_inputs=7'), (6, ''),),
        'Reshape': ((1, 'consumed_inputs=7 shape=7'), (5, ''), (14, 'allowzero=2'),),
        'Resize': (
            (10, 'mode=3'),
            (11, 'coordinate_transformation_mode=3 cubic_coeff_a=1 exclude_outside=2 extrapolation_value=1 mode=3 nearest_mode=3'),
            (18, 'antialias=2 axes=7 coordinate_transformation_mode=3 cubic_coeff_a=1 exclude_outside=2 extrapolation_value=1 keep_aspect_ratio_policy=3 mode=3 nearest_mode=3'),
        ),
        'ReverseSequence': ((10, 'batch_axis=2 time_axis=2'),),
        'RoiAlign': (
            (10, 'mode=3 output_height=2 output_width=2 sampling_ratio=2 spatial_scale=1'),
            (16, 'coordinate_transformation_mode=3 mode=3 output_height=2 output_width=2 sampling_ratio=2 spatial_scale=1'),
        ),
        'RotaryEmbedding': ((23, 'interleaved=2 num_heads=2 rotary_embedding_dim=2'),),
        'Round': ((11, ''),),
        'STFT': ((17, 'onesided=2'),),
        'Scan': (
            (8, 'body=5 directions=7 num_scan_inputs=2'),
            (9, 'body=5 num_scan_inputs=2 scan_input_axes=7 scan_input_directions=7 scan_output_axes=7 scan_output_directions=7'),
        ),
        'Scatter': ((9, 'axis=2'),),
        'ScatterElements': ((11, 'axis=2'), (16, 'axis=2 reduction=3'),),
        'ScatterND': ((11, ''), (16, 'reduction=3'),),
        'Selu': ((1, 'alpha=1 consumed_inputs=7 gamma=1'), (6, 'alpha=1 gamma=1'),),
        'SequenceAt': ((11, ''),),
        'SequenceConstruct': ((11, ''),),
        'SequenceEmpty': ((11, 'dtype=2'),),
        'SequenceErase': ((11, ''),),
        'SequenceInsert': ((11, ''),),
        'SequenceLength': ((11, ''),),
        'SequenceMap': ((17, 'body=5'),),
        'Shape': ((1, ''), (15, 'end=2 start=2'),),
        'Shrink': ((9, 'bias=1 lambd=1'),),
        'Sigmoid': ((1, 'consumed_inputs=7'), (6, ''),),
        'Sign': ((9, ''),),
        'Sin': ((7, ''),),
        'Sinh': ((9, ''),),
        'Size': ((1, ''),),
        'Slice': ((1, 'axes=7 ends=7 starts=7'), (10, ''),),
        'Softmax': ((1, 'axis=2'),),
        'SoftmaxCrossEntropyLoss': ((12, 'ignore_index=2 reduction=3'),),
        'Softplus': ((1, ''),),
        'Softsign': ((1, ''),),
        'SpaceToDepth': ((1, 'blocksize=2'), (28, 'blocksize=2 mode=3'),),
        'Split': ((1, 'axis=2 split=7'), (13, 'axis=2'), (18, 'axis=2 num_outputs=2'),),
        'SplitToSequence': ((11, 'axis=2 keepdims=2'),),
        'Sqrt': ((1, 'consumed_inputs=7'), (6, ''),),
        'Squeeze': ((1, 'axes=7'), (13, ''),),
        'StringConcat': ((20, ''),),
        'StringNormalizer': (
            (10, 'case_change_action=3 is_case_sensitive=2 locale=3 stopwords=8'),
        ),
        'StringSplit': ((20, 'delimiter=3 maxsplit=2'),),
        'Sub': ((1, 'axis=2 broadcast=2 consumed_inputs=7'), (6, 'axis=2 broadcast=2'), (7, ''),),
        'Sum': ((1, 'consumed_inputs=7'), (6, ''),),
        'SwiGLU': ((28, 'alpha=1'),),
        'Swish': ((24, 'alpha=1'),),
        'Tan': ((7, ''),),
        'Tanh': ((1, 'consumed_inputs=7'), (6, ''),),
        'TensorScatter': ((24, 'axis=2 mode=3'),),
        'TfIdfVectorizer': (
            (9, 'max_gram_length=2 max_skip_count=2 min_gram_length=2 mode=3 ngram_counts=7 ngram_indexes=7 pool_int64s=7 pool_strings=8 weights=6'),
        ),
        'ThresholdedRelu': ((10, 'alpha=1'),),
        'Tile': ((1, ''),),
        'TopK': ((1, 'axis=2 k=2'), (10, 'axis=2'), (11, 'axis=2 largest=2 sorted=2'),),
        'Transpose': ((1, 'perm=7'),),
        'Trilu': ((14, 'upper=2'),),
        'Unique': ((11, 'axis=2 sorted=2'),),
        'Unsqueeze': ((1, 'axes=7'), (13, ''),),
        'Upsample': (
            (1, 'height_scale=1 mode=3 width_scale=1'),
            (7, 'mode=3 scales=6'),
            (9, 'mode=3'),
        ),
        'Where': ((9, ''),),
        'Xor': ((1, 'axis=2 broadcast=2'), (7, ''),),
    },
    'ai.onnx.ml': {
        'ArrayFeatureExtractor': ((1, ''),),
        'Binarizer': ((1, 'threshold=1'),),
        'CastMap': ((1, 'cast_to=3 map_form=3 max_map=2'),),
        'CategoryMapper': ((1, 'cats_int64s=7 cats_strings=8 default_int64=2 default_string=3'),),
        'DictVectorizer': ((1, 'int64_vocabulary=7 string_vocabulary=8'),),
        'FeatureVectorizer': ((1, 'inputdimensions=7'),),
        'Imputer': (
            (1, 'imputed_value_floats=6 imputed_value_int64s=7 replaced_value_float=1 replaced_value_int64=2'),
        ),
        'LabelEncoder': (
            (1, 'classes_strings=8 default_int64=2 default_string=3'),
            (2, 'default_float=1 default_int64=2 default_string=3 keys_floats=6 keys_int64s=7 keys_strings=8 values_floats=6 values_int64s=7 values_strings=8'),
            (4, 'default_float=1 default_int64=2 default_string=3 default_tensor=4 keys_floats=6 keys_int64s=7 keys_strings=8 keys_tensor=4 values_floats=6 values_int64s=7 values_strings=8 values_tensor=4'),
        ),
        'LinearClassifier': (
            (1, 'classlabels_ints=7 classlabels_strings=8 coefficients=6 intercepts=6 multi_class=2 post_transform=3'),
        ),
        'LinearRegressor': ((1, 'coefficients=6 intercepts=6 post_transform=3 targets=2'),),
        'Normalizer': ((1, 'norm=3'),),
        'OneHotEncoder': ((1, 'cats_int64s=7 cats_strings=8 zeros=2'),),
        'SVMClassifier': (
            (1, 'classlabels_ints=7 classlabels_strings=8 coefficients=6 kernel_params=6 kernel_type=3 post_transform=3 prob_a=6 prob_b=6 rho=6 support_vectors=6 vectors_per_class=7'),
        ),
        'SVMRegressor': (
            (1, 'coefficients=6 kernel_params=6 kernel_type=3 n_supports=2 one_class=2 post_transform=3 rho=6 support_vectors=6'),
        ),
        'Scaler': ((1, 'offset=6 scale=6'),),
        'TreeEnsemble': (
            (5, 'aggregate_function=2 leaf_targetids=7 leaf_weights=4 membership_values=4 n_targets=2 nodes_falseleafs=7 nodes_falsenodeids=7 nodes_featureids=7 nodes_hitrates=4 nodes_missing_value_tracks_true=7 nodes_modes=4 nodes_splits=4 nodes_trueleafs=7 nodes_truenodeids=7 post_transform=2 tree_roots=7'),
        ),
        'TreeEnsembleClassifier': (
            (1, 'base_values=6 class_ids=7 class_nodeids=7 class_treeids=7 class_weights=6 classlabels_int64s=7 classlabels_strings=8 nodes_falsenodeids=7 nodes_featureids=7 nodes_hitrates=6 nodes_missing_value_tracks_true=7 nodes_modes=8 nodes_nodeids=7 nodes_treeids=7 nodes_truenodeids=7 nodes_values=6 post_transform=3'),
            (3, 'base_values=6 base_values_as_tensor=4 class_ids=7 class_nodeids=7 class_treeids=7 class_weights=6 class_weights_as_tensor=4 classlabels_int64s=7 classlabels_strings=8 nodes_falsenodeids=7 nodes_featureids=7 nodes_hitrates=6 nodes_hitrates_as_tensor=4 nodes_missing_value_tracks_true=7 nodes_modes=8 nodes_nodeids=7 nodes_treeids=7 nodes_truenodeids=7 nodes_values=6 nodes_values_as_tensor=4 post_transform=3'),
        ),
        'TreeEnsembleRegressor': (
            (1, 'aggregate_function=3 base_values=6 n_targets=2 nodes_falsenodeids=7 nodes_featureids=7 nodes_hitrates=6 nodes_missing_value_tracks_true=7 nodes_modes=8 nodes_nodeids=7 nodes_treeids=7 nodes_truenodeids=7 nodes_values=6 post_transform=3 target_ids=7 target_nodeids=7 target_treeids=7 target_weights=6'),
            (3, 'aggregate_function=3 base_values=6 base_values_as_tensor=4 n_targets=2 nodes_falsenodeids=7 nodes_featureids=7 nodes_hitrates=6 nodes_hitrates_as_tensor=4 nodes_missing_value_tracks_true=7 nodes_modes=8 nodes_nodeids=7 nodes_treeids=7 nodes_truenodeids=7 nodes_values=6 nodes_values_as_tensor=4 post_transform=3 target_ids=7 target_nodeids=7 target_treeids=7 target_weights=6 target_weights_as_tensor=4'),
        ),
        'ZipMap': ((1, 'classlabels_int64s=7 classlabels_strings=8'),),
    },
    'ai.onnx.preview': {
        'FlexAttention': ((1, 'prob_mod=5 scale=1 score_mod=5 softmax_precision=2'),),
    },
    'ai.onnx.preview.training': {
        'Adagrad': ((1, 'decay_factor=1 epsilon=1 norm_coefficient=1'),),
        'Adam': ((1, 'alpha=1 beta=1 epsilon=1 norm_coefficient=1 norm_coefficient_post=1'),),
        'Gradient': ((1, 'xs=8 y=3 zs=8'),),
        'Momentum': ((1, 'alpha=1 beta=1 mode=3 norm_coefficient=1'),),
    },
}
# -- end


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        _write()
    else:
        print(table_source())
