"""Shared set-up of the nn tests: a plain-PyTorch Llama-style decoder (RMSNorm, causal attention through
F.scaled_dot_product_attention, SwiGLU MLP) whose every projection is a torch.nn.Linear, so ``theodolite.patch``
reaches all of them."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402
from torch import Tensor, nn  # noqa: E402


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: Tensor) -> Tensor:
        x32 = x.float()
        return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype) * self.weight


class Block(nn.Module):
    """One decoder layer: fused qkv and gate_up projections as in the GPU benchmark's shapes."""

    def __init__(self, hidden: int, heads: int, ffn: int) -> None:
        super().__init__()
        self.heads = heads
        self.attn_norm = RMSNorm(hidden)
        self.qkv = nn.Linear(hidden, 3 * hidden, bias=False)
        self.o = nn.Linear(hidden, hidden, bias=False)
        self.mlp_norm = RMSNorm(hidden)
        self.gate_up = nn.Linear(hidden, 2 * ffn, bias=False)
        self.down = nn.Linear(ffn, hidden, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        b, s, h = x.shape
        q, k, v = self.qkv(self.attn_norm(x)).split(h, dim=-1)
        q, k, v = (t.reshape(b, s, self.heads, h // self.heads).transpose(1, 2) for t in (q, k, v))
        attn = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.o(attn.transpose(1, 2).reshape(b, s, h))
        gate, up = self.gate_up(self.mlp_norm(x)).chunk(2, dim=-1)
        return x + self.down(F.silu(gate) * up)


class Decoder(nn.Module):
    """Embedding, layers, final norm and an untied LM head (an nn.Linear with a bias, so patch covers a bias too)."""

    def __init__(self, vocab: int = 97, hidden: int = 32, heads: int = 2, ffn: int = 48, layers: int = 2) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        self.layers = nn.ModuleList(Block(hidden, heads, ffn) for _ in range(layers))
        self.norm = RMSNorm(hidden)
        self.head = nn.Linear(hidden, vocab)

    def forward(self, tokens: Tensor) -> Tensor:
        x = self.embed(tokens)
        for layer in self.layers:
            x = layer(x)
        return self.head(self.norm(x))

    @torch.no_grad()
    def greedy(self, prompt: Tensor, steps: int) -> Tensor:
        """Greedy decoding without a KV cache (the whole sequence each step: M grows by one)."""
        tokens = prompt
        for _ in range(steps):
            nxt = self(tokens)[:, -1].argmax(-1, keepdim=True)
            tokens = torch.cat([tokens, nxt], dim=1)
        return tokens


@pytest.fixture
def decoder() -> type[Decoder]:
    """The tiny decoder class (a fixture: test modules are imported without their folder on sys.path)."""
    return Decoder
