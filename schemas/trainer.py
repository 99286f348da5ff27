"""Configuration of what a snapshot hands the trainer: tool-use samples and per-stage configs."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from schemas.samples import Localized


class ToolSamplesConfig(BaseModel):
    """Tool-use samples: the user reports, the assistant looks the code(s) up, then advises."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    system_prompt: Localized = Localized(
        zh=(
            "你是一名经验丰富的数控机床维修工程师。"
            "先用 lookup_fault_code 查询用户给出的每个报警代码，"
            "再根据查询结果和故障现象给出故障诊断、处理措施和预防建议。"
        ),
        en=(
            "You are an experienced CNC machine-tool maintenance engineer. First look up every "
            "alarm code the user gives with lookup_fault_code, then state the diagnosis, the "
            "corrective action and how to prevent the fault from what the lookup returns and "
            "the symptom."
        ),
    )


class TrainerConfig(BaseModel):
    """Per-stage trainer configs written into each snapshot's `trainer/` folder."""

    model_config = ConfigDict(extra="forbid")

    # GPU target (a name from the plan's GPU list) the configs are written for; None: the first
    # GPU of each stage's list that fits (the plan lists the smallest cards first).
    gpu: str | None = None
    # Plan model name -> Hugging Face id or local path; Qwen2.5 presets map to their Instruct
    # checkpoints unless overridden here.
    model_paths: dict[str, str] = Field(default_factory=dict)
    output_root: str = "saves"  # where the trainer writes checkpoints, one folder per stage
