"""How QLinearConv/ConvInteger's integer tiles cut an image into blocks of output rows
(convolution.rows_per_block): each block's positions are rounded up to whole tile columns,
so the cut is chosen to waste the fewest."""
from __future__ import annotations

from graphrt.kernels.quant.convolution import BLOCK_BYTES, NR, rows_per_block


def columns(rows, ow, pb):
    full, rest = divmod(rows, pb)
    return full * -(-pb * ow // NR) * NR + (-(-rest * ow // NR) * NR if rest else 0)


def test_blocks_waste_the_fewest_columns_within_the_budget():
    for rows, ow, kp in ((7, 7, 4608), (14, 14, 2304), (28, 28, 1152), (56, 56, 576),
                         (112, 112, 148), (1, 1, 10), (3, 5, 100), (9, 3, 20000)):
        pb = rows_per_block(rows, ow, 2 * kp)
        assert 1 <= pb <= rows
        assert pb == 1 or 2 * kp * -(-pb * ow // NR) * NR <= 4 * BLOCK_BYTES
        assert rows < 2 or -(-rows // pb) >= 2          # two blocks for two threads
        allowed = [q for q in range(1, rows + 1) if q == 1 or (
            2 * kp * -(-q * ow // NR) * NR <= 4 * BLOCK_BYTES and -(-rows // q) >= min(rows, 2))]
        assert columns(rows, ow, pb) == min(columns(rows, ow, q) for q in allowed)
    # the case that asked for it: ResNet's last stage, 7 x 7 positions, K = 4608
    assert columns(7, 7, rows_per_block(7, 7, 2 * 4608)) == 64      # (blocks of two rows: 128)
