"""int8 models on this CPU: a PT2E-quantized model (torchao's X86 Inductor quantizer) run by polytri, against
the same model in eager fp32, eager quantized (its quantize/dequantize ops and fp32 contractions), and
polytri fp32, side by side per call.  Needs the quant extra (torchao).

    .venv/bin/python benchmarks/quant.py                      # the CNN and the MLP, one thread
    .venv/bin/python benchmarks/quant.py --only mlp --repeat 30

Measure on a quiet machine and quote the load average.
"""

from __future__ import annotations

import argparse
import os
import warnings

import torch

import polytri as pt
from polytri.tools.bench_models import median_ms


class CNN(torch.nn.Module):
    """Conv-BN-ReLU blocks and a linear head."""

    def __init__(self) -> None:
        super().__init__()
        layers: list[torch.nn.Module] = []
        for cin, cout, stride in ((3, 32, 2), (32, 64, 1), (64, 64, 2), (64, 128, 1)):
            layers += [torch.nn.Conv2d(cin, cout, 3, stride, 1), torch.nn.BatchNorm2d(cout), torch.nn.ReLU()]
        self.body = torch.nn.Sequential(*layers)
        self.head = torch.nn.Linear(128, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x).mean((2, 3)))


def models() -> dict[str, tuple[torch.nn.Module, torch.Tensor]]:
    torch.manual_seed(0)
    mlp = torch.nn.Sequential(torch.nn.Linear(1024, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 1024),
                              torch.nn.ReLU(), torch.nn.Linear(1024, 256))
    return {"cnn": (CNN().eval(), torch.randn(1, 3, 64, 64)), "mlp": (mlp.eval(), torch.randn(8, 1024))}


def quantized(model: torch.nn.Module, x: torch.Tensor) -> torch.nn.Module:
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
    from torchao.quantization.pt2e.quantizer import x86_inductor_quantizer as xiq
    quantizer = xiq.X86InductorQuantizer()
    quantizer.set_global(xiq.get_default_x86_inductor_quantization_config())
    prepared = prepare_pt2e(torch.export.export(model, (x,)).module(), quantizer)
    prepared(x)
    return convert_pt2e(prepared)


def row(name: str, model: torch.nn.Module, x: torch.Tensor, repeat: int) -> str:
    q = quantized(model, x)
    with torch.no_grad():
        report = pt.explain(q, x, compile_options={"threads": 1})
        integer = sum("accumulated in int32" in r for k in report.kernels for r in k.rewrites)
        pt_q, pt_f = pt.jit(q, compile_options={"threads": 1}), pt.jit(model, compile_options={"threads": 1})
        step = float((q(x) - model(x)).abs().max())
        err = float((pt_q(x) - q(x)).abs().max())
        eager, eager_q, poly_f, poly_q = median_ms([model, q, pt_f, pt_q], (x,), repeat)
    return (f"| {name} | {tuple(x.shape)} | {eager:.3f} | {eager_q:.3f} | {poly_f:.3f} | {poly_q:.3f} | "
            f"{eager / poly_q:.2f}x | {integer} | {err:.1e} (quantization error {step:.1e}) |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="*", default=["cnn", "mlp"], choices=["cnn", "mlp"])
    parser.add_argument("--repeat", type=int, default=10)
    args = parser.parse_args()
    torch.set_num_threads(1)
    warnings.simplefilter("ignore")
    print(f"load average {os.getloadavg()[0]:.2f}; 1 thread")
    print("| model | input | eager fp32 ms | eager int8 ms | polytri fp32 ms | polytri int8 ms | eager fp32 / "
          "polytri int8 | int32 sums | polytri int8 vs eager int8 |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, (model, x) in models().items():
        if name in args.only:
            print(row(name, model, x, args.repeat), flush=True)
    print(f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
