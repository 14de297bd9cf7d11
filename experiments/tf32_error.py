"""tf32 accuracy: ours against torch.matmul (cuBLAS) in tf32, both against a float64 reference.

The GPU tests bound tf32 at 1e-3 (issue 4).  This prints, for three config/layout pairs of the tests and two shapes, six
fresh draws each: the largest element error over the largest reference element and the normwise (Frobenius) relative
error, ours and torch.matmul's with ``allow_tf32``.  Run on a GPU from the repository root::

    PYTHONPATH=$PWD python3 experiments/tf32_error.py
"""

import torch

from theodolite import kernels as k


def errors(out: torch.Tensor, ref: torch.Tensor) -> tuple[float, float]:
    """(largest element error / largest element, normwise relative error)."""
    diff = out.double() - ref
    return (diff.abs().max() / ref.abs().max()).item(), (torch.linalg.norm(diff) / torch.linalg.norm(ref)).item()


def main() -> None:
    torch.manual_seed(0)
    configs = {"persistent": k.GemmConfig("persistent", 128, 128, 64, 8, 8, 3),
               "tma": k.GemmConfig("tma", 128, 128, 64, 8, 8, 3)}  # fmt: skip
    for name, layout in (("persistent", "tn"), ("tma", "nt"), ("persistent", "nn")):
        for m, n, kk in ((17, 33, 1024), (1000, 1008, 520)):
            ours, theirs = [], []
            for _ in range(6):
                a = torch.randn((kk, m) if layout[0] == "t" else (m, kk), device="cuda")
                a = a.t() if layout[0] == "t" else a
                b = torch.randn((n, kk) if layout[1] == "t" else (kk, n), device="cuda")
                b = b.t() if layout[1] == "t" else b
                ref = a.double() @ b.double()
                ours.append(errors(k.gemm(a, b, configs[name]), ref))
                torch.backends.cuda.matmul.allow_tf32 = True
                theirs.append(errors(a @ b, ref))
                torch.backends.cuda.matmul.allow_tf32 = False
            show = lambda rows: " ".join(f"{x:.2e}/{y:.2e}" for x, y in rows)  # noqa: E731
            print(f"{name} {layout} {m}x{n}x{kk} element/normwise: ours {show(ours)}; torch.matmul {show(theirs)}")


if __name__ == "__main__":
    main()
