"""What a level's achieved mean lengths are held against (the "mean ISL ... (asked N)" notice)."""

from __future__ import annotations

from tui.engine.config import DatasetConfig, LengthDist, Scenario, WorkloadConfig
from tui.engine.control.checks import asked_isl, asked_osl


def test_a_shared_prefix_adds_to_the_isl_asked() -> None:
    assert asked_isl(WorkloadConfig(isl=32)) == 32
    assert asked_isl(WorkloadConfig(isl=32, shared_prefix=256)) == 288
    assert asked_osl(WorkloadConfig(osl=4)) == 4


def test_no_one_target_is_not_checked() -> None:
    dataset = DatasetConfig(path="prompts.txt", format="text")
    assert asked_isl(WorkloadConfig(turns=3)) is None  # grows with the history
    assert (
        asked_isl(WorkloadConfig(dataset=dataset)) is None
        and asked_osl(WorkloadConfig(dataset=dataset)) is None
    )
    assert asked_isl(WorkloadConfig(isl_dist=LengthDist("uniform", 10, 20))) is None
    assert asked_osl(WorkloadConfig(osl_dist=LengthDist("uniform", 10, 20))) is None
    assert asked_osl(WorkloadConfig(scenarios=(Scenario(64, 8, 1.0),))) is None
    assert asked_osl(WorkloadConfig(fixed_osl=False)) is None  # left to the model
