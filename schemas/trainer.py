"""Configuration of what a snapshot hands the trainer: tool-use samples and per-stage configs."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from schemas.samples import Localized


class ToolSamplesConfig(BaseModel):
    """Tool-use samples: the user reports, the assistant looks the code(s) up, then advises."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = Field(
        True,
        description=(
            "write tool-use samples (sft_tools/); off: the table is published empty and "
            "manifest.sources.sft_tools counts nothing read"
        ),
    )
    system_prompt: Localized = Field(
        Localized(
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
        ),
        description="system turn of every tool-use sample, in the record's language",
    )


class TrainerConfig(BaseModel):
    """Per-stage trainer configs written into each snapshot's `trainer/` folder."""

    model_config = ConfigDict(extra="forbid")

    gpu: str | None = Field(
        None,
        description=(
            "GPU target (a name from the stages' `gpus`) the trainer configs are written for, "
            "where it fits the stage; otherwise, and when None, the first target of the stage's "
            "list that fits (with the default list, the smallest card); a stage no target fits "
            "gets no configs"
        ),
    )
    model_paths: dict[str, str] = Field(
        default_factory=dict,
        description=(
            "plan model name -> Hugging Face id or local path written into the trainer configs; "
            "Qwen2.5 presets map to their Instruct checkpoints unless overridden here"
        ),
    )
    output_root: str = Field(
        "saves",
        description=(
            "where the trainer writes checkpoints, one folder per stage (`<output_root>/<stage>`),"
            " as written into the configs"
        ),
    )
