"""Batch size, learning rate, epochs, warmup and scheduler of a stage, each with its reason.

Tokens per optimizer step follow the stage's size (the rule of `batch_rule`), so a small stage
still takes many optimizer steps per epoch and a large one is capped at `max_tokens_per_step`.

Defaults and where they come from (each overridable in the stage's configuration):
- learning rate by method: full fine-tuning 1e-5 (LLaMA-Factory examples/train_full/
  llama3_full_sft.yaml; LIMA, Zhou et al. 2023, arXiv:2305.11206: 1e-5; TRL's trl/scripts/sft.py
  full example 2e-5); LoRA 1e-4 (LLaMA-Factory examples/train_lora/llama3_lora_sft.yaml; LoRA,
  Hu et al. 2021, arXiv:2106.09685, used 1e-4..2e-4 on GPT-3); QLoRA 2e-4 (QLoRA, Dettmers et
  al. 2023, arXiv:2305.14314, Table 9: 2e-4 for 7B/13B; TRL's LoRA example 2e-4).
- epochs by corpus: manuals (domain adaptation) 1 pass, as continued pre-training does
  (Gururangan et al. 2020, arXiv:2004.10964); expert SFT samples 3 (Alpaca, Taori et al. 2023,
  and both LLaMA-Factory examples: 3.0); broad and tool-use samples 2; the alignment share 1.
- warmup 3 % of the steps (Alpaca's train.py `--warmup_ratio 0.03`; QLoRA 0.03) and at least
  `min_warmup_steps` where that is at most a tenth of the steps; cosine decay after it (Alpaca,
  LLaMA-Factory examples `lr_scheduler_type: cosine`).
"""

from __future__ import annotations

import math

from schemas.memory import Method
from schemas.plan import BatchRule, Schedule, StageConfig

LEARNING_RATES: dict[Method, float] = {"full": 1e-5, "lora": 1e-4, "qlora": 2e-4, "inference": 0}
_LR_WHY = {
    "full": "full fine-tuning moves every weight: 1e-5 (LLaMA-Factory full-SFT example, LIMA)",
    "lora": "LoRA adapters start at zero and need a larger step: 1e-4 (LLaMA-Factory LoRA "
    "example; LoRA paper 1e-4..2e-4)",
    "qlora": "QLoRA over 4-bit weights: 2e-4 (QLoRA paper, 7B/13B)",
    "inference": "no training",
}
EPOCHS: dict[str, tuple[int, str]] = {
    "pretrain": (1, "domain adaptation on manual text: one pass, as continued pre-training"),
    "tier_A": (3, "expert samples, few and exact: 3 epochs (Alpaca, LLaMA-Factory examples)"),
    "tier_B": (2, "broad samples, more and noisier: 2 epochs"),
    "sft_tools": (2, "tool-use samples of one fixed pattern: 2 epochs"),
    "tier_C": (1, "alignment share of the weakest tier: one pass, to keep its weight small"),
}


def batch_rule(sequences: int, seq_len: int, stage: StageConfig) -> BatchRule:
    """Tokens per optimizer step: clamp(sequences / min_steps_per_epoch, 1, max_tokens_per_step
    / seq_len) whole sequences of `seq_len` tokens."""
    cap = max(1, stage.max_tokens_per_step // seq_len)
    per_step = min(max(1, sequences // stage.min_steps_per_epoch), cap)
    target = per_step * seq_len
    if per_step == cap and cap > 1:
        why = f"capped at max_tokens_per_step {stage.max_tokens_per_step:,}"
    elif per_step == 1:
        why = "one sequence per step: the stage has fewer sequences than that many steps"
    else:
        why = f"floor({sequences} / {stage.min_steps_per_epoch}) sequences"
    reason = (
        f"{sequences} sequences of {seq_len} tokens per epoch; tokens per step = clamp(floor("
        f"sequences / min_steps_per_epoch {stage.min_steps_per_epoch}), 1, floor("
        f"max_tokens_per_step / {seq_len})) x {seq_len} = {per_step} x {seq_len} = {target:,} "
        f"({why}); at least one sequence per device; micro-batch = min(largest that fits, "
        "ceil(target / (seq x devices))), grad accumulation = ceil(target / (micro-batch x seq x"
        " devices))"
    )
    return BatchRule(
        min_steps_per_epoch=stage.min_steps_per_epoch,
        max_tokens_per_step=stage.max_tokens_per_step,
        target_tokens_per_step=target,
        reason=reason,
    )


def schedule(stage: StageConfig) -> Schedule:
    """The stage's learning rate, epochs, warmup and scheduler, configured or by default."""
    lr = stage.learning_rate or LEARNING_RATES[stage.method]
    lr_why = "configured" if stage.learning_rate else _LR_WHY[stage.method]
    epochs, epochs_why = EPOCHS.get(stage.corpus, (1, "unknown corpus: one pass"))
    if stage.epochs:
        epochs, epochs_why = stage.epochs, "configured"
    warmup_why = (
        f"max(ceil({stage.warmup_ratio:g} x steps), {stage.min_warmup_steps} where that is at "
        "most a tenth of the steps), at least 1 (Alpaca and QLoRA warm up over 3 %)"
    )
    return Schedule(
        learning_rate=lr,
        epochs=epochs,
        warmup_ratio=stage.warmup_ratio,
        min_warmup_steps=stage.min_warmup_steps,
        scheduler=stage.scheduler,
        reasons={
            "learning_rate": lr_why,
            "epochs": epochs_why,
            "warmup": warmup_why,
            "scheduler": f"{stage.scheduler} decay after warmup (Alpaca, LLaMA-Factory examples)"
            if stage.scheduler == "cosine"
            else "configured",
        },
    )


def warmup_steps(total_steps: int, sched: Schedule) -> int:
    """max(ceil(ratio x steps), min_warmup_steps where <= steps / 10), 1 <= warmup <= steps."""
    by_ratio = math.ceil(sched.warmup_ratio * total_steps)
    floor = sched.min_warmup_steps if sched.min_warmup_steps <= total_steps // 10 else 0
    return min(total_steps, max(1, by_ratio, floor))  # 0 for a stage of no steps
