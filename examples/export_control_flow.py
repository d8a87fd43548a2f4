"""Writes tests/data/torch_control_flow.onnx: a scripted PyTorch module with a data-dependent
branch and a while loop, exported by PyTorch's TorchScript exporter (If + Loop). The file is
committed so the tests need no PyTorch; this script says how it was made
(torch 2.13.0: `pip install torch==2.13.0`)."""
import os

import torch


class BranchAndLoop(torch.nn.Module):
    def forward(self, x, n: int):
        if x.sum() > 0:
            y = x * 2
        else:
            y = x - 1
        i = 0
        while i < n:
            y = y + torch.relu(y) * 0.5
            i += 1
        return y


if __name__ == "__main__":
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data",
                        "torch_control_flow.onnx")
    torch.onnx.export(torch.jit.script(BranchAndLoop()), (torch.randn(3, 4), torch.tensor(2)), path,
                      input_names=["x", "n"], output_names=["y"], dynamic_axes={"x": {0: "batch"}},
                      opset_version=17, dynamo=False)
    print("wrote", os.path.normpath(path))
