"""How items are graded, beyond the judge and the rubric.

`triage: "default"` stands for the reference judge's packaged thresholds (read as data from the
package: `framejudge.schema.triage.packaged_thresholds`).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from .numbers import Flag, Number, Whole
from .sampling import MAX_CLIP_FPS, SamplerParams, VideoInput
from .triage import PACKAGED_THRESHOLDS, Thresholds, packaged_thresholds


class GradeOptions(BaseModel):
    """How items are graded, beyond the judge and the rubric: the same for `framejudge grade`,
    `POST /v1/grade`, jobs and workers."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    sampler: SamplerParams = Field(default_factory=lambda: SamplerParams(n=8),
                                   description="which frames the judge sees (multi-turn windows end at each question)")
    swap: Flag | None = Field(None, description="also grade B/A; null: on for judges that are not deterministic")
    samples: Whole = Field(1, ge=1, le=32, description="k samples with a majority vote")
    sample_temperature: Number = Field(
        0.7, gt=0, le=2, allow_inf_nan=False,
        description="the temperature of each of k > 1 samples, sample i drawn with seed i (one sample is "
                    "drawn at temperature 0)")
    blind: Flag = Field(False, description="blind control: grade again without frames")
    cache: Flag = Field(True, description="use the verdict cache of model judges")
    video_input: VideoInput | None = Field(
        None, description="what of the video a model judge is shown: frames (the sampled frames, as images) or clip "
                          "(the turn's window cut as an MP4, for judges that take video: Gemini, vLLM); null: the "
                          "judge's own default from the judges file, else frames")
    clip_fps: Number = Field(1.0, gt=0, le=MAX_CLIP_FPS, allow_inf_nan=False,
                             description="with video_input clip: frames per second the judge samples the clip at "
                                         "(a re-encoded clip has this rate)")
    jpeg_quality: Whole = Field(85, ge=1, le=100, description="quality of the frames sent to a model")
    triage: Thresholds | None = Field(None, description="a thresholds file (`framejudge triage`), or \"default\": the "
                                                        "thresholds shipped for the reference judge (refused for "
                                                        "other judges); every verdict is marked auto or to_review "
                                                        "by it; it changes the marks, not the grading")

    @field_validator("triage", mode="before")
    @classmethod
    def _default_thresholds(cls, value: Any) -> Any:
        """"default": the reference judge's packaged thresholds (framejudge/judge/data)."""
        if value == "default":
            found = packaged_thresholds()
            if found is None:
                raise ValueError(f"this installation has no default thresholds ({PACKAGED_THRESHOLDS} is absent)")
            return found
        return value

    def video_input_for(self, judge: Any) -> VideoInput:
        """What of the video this judge is shown: this option, else the judge's default (its judges
        file entry's), else frames."""
        return self.video_input or getattr(judge, "video_input", None) or VideoInput.frames

    def swap_for(self, judge: Any) -> bool:
        """Whether pairs are graded in both orders by this judge."""
        return (not judge.deterministic) if self.swap is None else self.swap
