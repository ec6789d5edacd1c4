"""What torch.optim offers to make an optimizer step cheaper, by optimizer class: the fix that
analyzers give for host time in optimizer steps (the GPU diagnosis and the CPU report)."""

from __future__ import annotations

import re

#: torch.optim's optimizers with a foreach (multi-tensor) implementation, lower-case.
FOREACH_OPTIMIZERS = frozenset({"adadelta", "adafactor", "adagrad", "adam", "adamw", "adamax",
                                "asgd", "nadam", "radam", "rmsprop", "rprop", "sgd"})
#: Those of them with fused kernels (on CUDA, and on the CPU since PyTorch 2.4).
FUSED_OPTIMIZERS = frozenset({"adam", "adamw", "sgd", "adagrad"})
#: Host ranges of an optimizer step: PyTorch names them after the class (Optimizer.step#AdamW.step).
OPTIMIZER_STEP_RANGE = r"^Optimizer\.step#"
_OPTIMIZER_CLASS = re.compile(r"Optimizer\.(?:step|zero_grad)#(\w+)\.")


def optimizer_fix(where: str, cpu: bool = False) -> str:
    """The fix for host time in an optimizer, by its class where the range ``where`` names
    it: a fused or foreach implementation for torch.optim's own (on the CPU, ``cpu``, fused
    only: its foreach ops loop over the tensors); for another optimizer its own knobs
    (Shampoo inverts preconditioners: less often, or split over the ranks).

    >>> optimizer_fix("Optimizer.step#AdamW.step", cpu=True)[:52]
    'use a fused optimizer (torch.optim.AdamW(..., fused='
    """
    found = _OPTIMIZER_CLASS.search(where)
    name = found.group(1) if found else None
    if cpu and (name is None or name.lower() in FUSED_OPTIMIZERS):
        return (f"use a fused optimizer (torch.optim.{name or 'AdamW'}(..., fused=True), on the "
                "CPU since PyTorch 2.4) so the step is one pass over all parameters, not a few "
                "ops per parameter; foreach=True helps little on the CPU, where it still loops "
                "over the tensors")
    if name is None or name.lower() in FOREACH_OPTIMIZERS:
        use = (f"torch.optim.{name}(..., "
               f"{'fused' if name.lower() in FUSED_OPTIMIZERS else 'foreach'}=True)" if name
               else "torch.optim.AdamW(..., fused=True)")
        return (f"use a fused or foreach optimizer (e.g. {use}) so the step is a few kernels, "
                "not one per parameter")
    if "shampoo" in name.lower():
        return (f"{name}'s step updates and inverts its preconditioners: invert them less "
                "often (Distributed Shampoo's precondition_frequency, "
                "start_preconditioning_step) or split the work over the ranks (its "
                "distributed_config)")
    return (f"{name} is not one of torch.optim's foreach or fused optimizers: shorten its host "
            "work per step (a multi-tensor implementation, its costly updates less often)")
