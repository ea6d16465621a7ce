"""The three trained learners on top of Longformer-P: MTL, ProtoNet and LEOPARD.

- **MTL** (§5.2): one linear head per movie over the shared encoder.
- **ProtoNet** (§5.1, B.2): a class's prototype is the mean embedding of its support
  examples; a query's logits are its cosine similarities to the prototypes.
- **LEOPARD** (B.3, Bansal et al. 2020): a generator ``g_psi`` (two layers, tanh) turns
  each support embedding into a linear classifier row ``(w, b)``; a class's row is the
  mean over its support examples. A second MLP ``h_phi`` maps instance embeddings into
  the generator's ``l``-dimensional space. An inner loop adapts ``(W, b)`` on the
  support set by gradient descent (MAML); the query loss after it trains the encoder,
  ``g_psi`` and ``h_phi``.

The math is in plain functions so tests check it on given tensors.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

# A class with no support example cannot be chosen: its logit is this, not -inf, so
# a softmax over only such classes stays finite.
ABSENT = -1e4


def prototypes(
    embeddings: torch.Tensor, labels: torch.Tensor, n_classes: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean embedding per class (C, D) and which classes have any example (C,) bool."""
    sums = embeddings.new_zeros(n_classes, embeddings.shape[1])
    sums.index_add_(0, labels, embeddings)
    counts = torch.bincount(labels, minlength=n_classes).to(embeddings.dtype)
    present = counts > 0
    return sums / counts.clamp(min=1).unsqueeze(1), present


def cosine_logits(
    queries: torch.Tensor, protos: torch.Tensor, present: torch.Tensor, *, scale: float
) -> torch.Tensor:
    """(M, C) scaled cosine similarities; classes without a prototype get ``ABSENT``."""
    similarity = F.normalize(queries.float(), dim=-1) @ F.normalize(protos.float(), dim=-1).T
    return (similarity * scale).masked_fill(~present.unsqueeze(0), ABSENT)


def restrict(logits: torch.Tensor, candidates: list[list[int]]) -> torch.Tensor:
    """Logits with every class outside each row's candidate list set to ``ABSENT``."""
    allowed = torch.zeros_like(logits, dtype=torch.bool)
    for row, classes in enumerate(candidates):
        allowed[row, classes] = True
    return logits.masked_fill(~allowed, ABSENT)


class MultiTaskHeads(nn.Module):
    """One linear head per work (``str(work_id)``), each over that work's classes."""

    def __init__(self, dim: int, classes_per_task: dict[int, int]) -> None:
        super().__init__()
        self.heads = nn.ModuleDict(
            {str(work): nn.Linear(dim, n) for work, n in sorted(classes_per_task.items())}
        )

    def forward(self, embeddings: torch.Tensor, work_id: int) -> torch.Tensor:
        return self.heads[str(work_id)](embeddings)


def _mlp(dim_in: int, hidden: int, dim_out: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(dim_in, hidden), nn.Tanh(), nn.Linear(hidden, dim_out))


class LeopardHead(nn.Module):
    """``g_psi`` (embedding -> l weights + 1 bias) and ``h_phi`` (embedding -> l)."""

    def __init__(self, dim: int, *, hidden: int, out_dim: int) -> None:
        super().__init__()
        self.out_dim = out_dim
        self.generator = _mlp(dim, hidden, out_dim + 1)
        self.mapper = _mlp(dim, hidden, out_dim)

    def generate(
        self, support: torch.Tensor, labels: torch.Tensor, n_classes: int
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Per class the mean generated row: W (C, l), b (C,), and which classes had support."""
        rows, present = prototypes(self.generator(support.float()), labels, n_classes)
        return rows[:, :-1], rows[:, -1], present

    def logits(
        self,
        features: torch.Tensor,
        weight: torch.Tensor,
        bias: torch.Tensor,
        present: torch.Tensor,
    ) -> torch.Tensor:
        """``W h_phi(e) + b`` with absent classes masked; ``features`` are ``h_phi`` outputs."""
        return (features @ weight.T + bias).masked_fill(~present.unsqueeze(0), ABSENT)

    def adapt(
        self,
        support: torch.Tensor,
        labels: torch.Tensor,
        n_classes: int,
        *,
        steps: int,
        lr: float,
        first_order: bool,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Generate (W, b) from the support set, then ``steps`` of gradient descent on it.

        With ``first_order`` the inner gradients are not differentiated through (cheaper);
        otherwise the outer update sees how adaptation depends on the generated layer.
        """
        weight, bias, present = self.generate(support, labels, n_classes)
        features = self.mapper(support.float())
        if not torch.is_grad_enabled():
            # Evaluation: adapt (W, b) with their own graph, encoder features fixed.
            weight, bias, features = weight.detach(), bias.detach(), features.detach()
            with torch.enable_grad():
                weight.requires_grad_(True)
                bias.requires_grad_(True)
                for _ in range(steps):
                    loss = F.cross_entropy(self.logits(features, weight, bias, present), labels)
                    gw, gb = torch.autograd.grad(loss, (weight, bias))
                    weight = (weight - lr * gw).detach().requires_grad_(True)
                    bias = (bias - lr * gb).detach().requires_grad_(True)
            return weight.detach(), bias.detach(), present
        for _ in range(steps):
            loss = F.cross_entropy(self.logits(features, weight, bias, present), labels)
            gw, gb = torch.autograd.grad(loss, (weight, bias), create_graph=not first_order)
            weight, bias = weight - lr * gw, bias - lr * gb
        return weight, bias, present
