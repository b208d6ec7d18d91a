"""Batch mode: a ledger batch's pending requests as one OpenAI batch file, its results read back
into `llm.calls` exactly as live answers are.

Tens of thousands of calls per model are what provider batch APIs are for (OpenAI's costs half the
live price), and the same file format is how a GPU cluster runs a model without a server (vLLM's
`run_batch` reads a batch input file and writes the output file). A model's `batch:` section in
the configuration chooses the mode (`configuration.BatchConfig`):

- `api`: the requests are uploaded (`POST /files`, purpose `batch`), one batch is created for them
  (`POST /batches`, endpoint `/v1/chat/completions`), its status is polled with a doubling wait, and
  its output and error files are read. The batch is recorded in `llm.batches` before the first
  poll, so a run killed while it waits resumes by polling the same provider batch, never creating
  it twice.
- `files`: the requests are written to `<dir>/<batch id>.jsonl` and the step stops with
  `BatchPending`, saying what to run next. `import_file` (`materialize_all --import-batch FILE`)
  reads an output file back, streaming, refusing the file if a line's `custom_id` is not a request
  of this configuration (nothing is written, each such line named); a line that is no result at
  all (not UTF-8, not JSON) is named and skipped, its request left for the next export.

Output files are split at newlines only: a JSON string may hold U+2028, U+0085 and the other Unicode
line breaks raw, and `str.splitlines` would cut a paid answer in two. One unreadable line never
discards the readable ones, in either mode; a provider batch that has gone (HTTP 404) is recorded as
failed with that reason, and its requests are asked again, in a new batch, by the next run.

One line per request: `custom_id` is the ledger key, `method` POST, `url` /v1/chat/completions, and
`body` what a live call would send (the served model, the messages, the sampling parameters with
the per-key seed, under the endpoint's names). A multi-turn protocol proceeds turn by turn: every
`Ledger.complete` of a step is one batch, and the next turn's batch is made once the previous one's
answers are stored. The model probe (`models.probe`) always asks live.

Results are stored as the ledger stores live ones: usage, finish reason, the reasoning fields, an
answer without choices or content as a failure; an error line (a non-200 status, an `error`
field) is a failure with its message; a request the batch has no line for (it expired or failed
first) is a failure that says so, and is asked again by the next run. `latency_s` is NULL (a batch
has no per-request latency) and `endpoint_host` names the batch.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import re
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from configuration import BatchConfig, Config
from configuration.files import write_whole
from llm_calls.endpoints import Endpoint, ModelRegistry, chat_body, redact
from llm_calls.records import Answer, CallStore, sent_params
from llm_calls.transport import tls_context
from warehouse import OnConflict

if TYPE_CHECKING:  # `openai` is imported where a batch is sent or read: the run command reads
    import openai  # `exported` and `EXPORT_ENV` without it (runner/command.py)

URL = "/v1/chat/completions"
# `materialize_all --export-batch DIR` sets this: every model of the run writes batch files under DIR
EXPORT_ENV = "BENCHSMITH_BATCH_EXPORT"
LIVE_PURPOSES = ("models.",)  # asked live whatever the mode: the probe says whether the endpoint answers
_TERMINAL = {"completed", "failed", "expired", "cancelled"}


class BatchPending(RuntimeError):
    """Requests wait in batch input files: the step stops until their results are imported. One
    file, or (`combined`) every file the independent parts of a step wrote in one round."""

    def __init__(self, model: str, path: Path, n: int, served_model: str,
                 files: list[tuple[str, Path, int, str]] | None = None):
        self.files = files or [(model, path, n, served_model)]
        self.model, self.path, self.n = model, path, sum(f[2] for f in self.files)
        if len(self.files) == 1:
            text = (f"{model}: {n} requests wait in {path} (batch files); run them where the model is served, e.g. "
                    f"`python -m vllm.entrypoints.openai.run_batch -i {path} -o {path.with_suffix('.out.jsonl')} "
                    f"--model {served_model}`, then `python -m assets.materialize_all --import-batch "
                    f"{path.with_suffix('.out.jsonl')}` and run this command again for the next turn")
        else:
            text = (f"{self.n} requests wait in {len(self.files)} batch files ("
                    + ", ".join(f"{p.name}: {k}" for _, p, k, _ in self.files)
                    + "); run each where its model is served, --import-batch each output, and run this command "
                    "again for the next turn")
        super().__init__(text)

    @classmethod
    def combined(cls, pending: Sequence[BatchPending]) -> BatchPending:
        files = list(dict.fromkeys(f for p in pending for f in p.files))
        first = files[0]
        return cls(first[0], first[1], first[2], first[3], files)


class Waiting:
    """Lets the independent parts of a step (IB's settings, MuSoBench's paradigm x variant x
    temperature runs) each write their batch files in one round, instead of the step stopping at
    the first: `with waiting.part(): ...` per part, then `waiting.done()` raises them together."""

    def __init__(self) -> None:
        self.pending: list[BatchPending] = []

    @contextlib.contextmanager
    def part(self) -> Iterator[None]:
        try:
            yield
        except BatchPending as exc:
            self.pending.append(exc)

    def done(self) -> None:
        if self.pending:
            raise BatchPending.combined(self.pending)


class BatchImportError(ValueError):
    """A batch output file was refused; the message names the file and each bad line."""


def mode(config: Config, model: str, purpose: str) -> BatchConfig | None:
    """How `model`'s calls of `purpose` are made: None = live; else its batch configuration
    (`--export-batch DIR` puts every model into files mode under DIR)."""
    if purpose.startswith(LIVE_PURPOSES):
        return None
    export = os.environ.get(EXPORT_ENV)
    if export:
        return BatchConfig(mode="files", dir=export)
    return config.model(model).batch


def keys_digest(keys: Iterable[str]) -> str:
    return hashlib.sha256("\n".join(sorted(keys)).encode()).hexdigest()


def batch_id(model: str, purpose: str, keys: Iterable[str]) -> str:
    """`<model>.<purpose>.<digest of its keys>`: the same pending requests make the same id."""
    return re.sub(r"[^\w.-]", "_", f"{model}.{purpose or 'call'}.{keys_digest(keys)[:16]}")


def input_line(key: str, served_model: str, messages: Sequence[Mapping[str, str]], sent: Mapping[str, Any]) -> dict[str, Any]:
    """One line of a batch input file: the body a live call sends (`chat_body`)."""
    return {"custom_id": key, "method": "POST", "url": URL, "body": chat_body(served_model, messages, sent)}


@dataclass(frozen=True)
class Prepared:
    """A pending request as it goes into a batch file."""

    key: str
    messages: list[dict[str, str]]
    sent: dict[str, Any]
    sample_index: int


def prepare(ep: Endpoint, todo: Mapping[str, tuple[Any, Mapping[str, Any]]]) -> list[Prepared]:

    return [Prepared(key, [{"role": m["role"], "content": m["content"]} for m in req.messages],
                     sent_params(ep, key, params), req.sample_index) for key, (req, params) in todo.items()]


def file_text(ep: Endpoint, lines: Sequence[Prepared]) -> str:
    return "".join(json.dumps(input_line(p.key, ep.served_model, p.messages, p.sent), ensure_ascii=False) + "\n"
                   for p in lines)


def answer_of_line(line: Mapping[str, Any], secrets: Sequence[str] = ()):
    """The `Answer` of one output or error line (OpenAI's layout and vLLM's `run_batch`'s)."""

    response = line.get("response") or None
    status = response.get("status_code") if isinstance(response, Mapping) else None
    body = response.get("body") if isinstance(response, Mapping) else None
    if status == 200 and isinstance(body, Mapping) and not line.get("error"):
        return Answer.of(body, secrets)  # a body that is no chat completion: a failure saying why
    error = line.get("error")
    if isinstance(error, Mapping):
        why = f"{error.get('code') or 'error'}: {error.get('message') or ''}".strip()
    elif error:
        why = str(error)
    elif isinstance(body, Mapping) and isinstance(body.get("error"), Mapping):
        why = str(body["error"].get("message") or body["error"])
    else:
        why = "no response body"
    # an error line may echo the request's key (a 401): masked like every error the ledger stores
    return Answer(False, error=redact(f"batch line: HTTP {status} {why}" if status else f"batch line: {why}", secrets))


def parse_line(raw: str | bytes) -> tuple[dict[str, Any] | None, str | None]:
    """One line of a JSONL batch file: (object, None), or (None, why it is unreadable). A JSON string
    may hold U+2028, U+0085 and the other Unicode line breaks raw (pydantic writes them so): only a
    newline ends a line, so they stay inside it."""
    if isinstance(raw, bytes):
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            return None, f"not UTF-8 text (byte {exc.start} of the line)"
    raw = raw.rstrip("\r\n")
    if not raw.strip():
        return None, None
    try:
        obj = json.loads(raw)
    except json.JSONDecodeError as exc:
        return None, f"not JSON: {exc.msg} (column {exc.colno})"
    if not isinstance(obj, dict) or not isinstance(obj.get("custom_id"), str):
        return None, "expected an object with a string `custom_id`"
    return obj, None


def read_lines(text: str, source: str) -> tuple[list[tuple[int, dict[str, Any]]], list[str]]:
    """(line number, object) of every readable line of a JSONL text, and each unreadable line named by
    its number. Lines end at a newline only (`parse_line`), never at another Unicode line break."""
    out, bad = [], []
    for n, raw in enumerate(text.split("\n"), 1):
        obj, why = parse_line(raw)
        if obj is not None:
            out.append((n, obj))
        elif why:
            bad.append(f"{source}: line {n}: {why}")
    return out, bad


def stream_lines(path: Path) -> Iterator[tuple[int, dict[str, Any] | None, str | None]]:
    """(line number, object or None, why not) of each line of a JSONL file, read one line at a time
    (a batch output file may be gigabytes): split at newlines only, each line decoded on its own."""
    with open(path, "rb") as f:
        for n, raw in enumerate(f, 1):
            obj, why = parse_line(raw)
            if obj is not None or why:
                yield n, obj, why


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def _record(writer: Any, bid: str, ep: Endpoint, identity: str, purpose: str, how: str, lines: Sequence[Prepared],
            **fields: Any) -> None:
    """The batch and its requests in `llm.batches` / `llm.batch_requests` (kept if already there)."""
    writer.upsert("llm.batches", [{
        "batch_id": bid, "model": ep.name, "model_identity": identity, "purpose": purpose, "mode": how,
        "n_requests": len(lines), "status": "exported", "created_at": _now(), "input_file": None,
        "provider_batch_id": None, "output_file": None, "error_file": None, "n_ok": None, "n_failed": None,
        "error": None, "finished_at": None, **fields}], OnConflict(("batch_id",)))
    writer.upsert("llm.batch_requests", [{
        "batch_id": bid, "line": n, "key": p.key, "model": ep.name, "model_identity": identity, "purpose": purpose,
        "sample_index": p.sample_index,
        "request": json.dumps({"messages": p.messages, "params": p.sent}, ensure_ascii=False)}
        for n, p in enumerate(lines, 1)], OnConflict(("batch_id", "key")))


def _update(writer: Any, bid: str, **fields: Any) -> None:
    sets = ", ".join(f"{k} = ?" for k in fields)
    writer.query(f"UPDATE llm.batches SET {sets} WHERE batch_id = ?", [*fields.values(), bid])


# -- files mode ---------------------------------------------------------------------------------

def write_if_changed(path: Path, text: str) -> None:
    """Write a batch file unless it holds `text` already, whole (`write_whole`): a reader (the
    provider's upload, a person) finds it whole, and two runs exporting the same requests at once
    (so the same text) both succeed."""
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        write_whole(path, text)


def export(ep: Endpoint, identity: str, purpose: str, todo: Mapping[str, tuple[Any, Mapping[str, Any]]],
           writer: Any, directory: Path) -> BatchPending:
    """Write the pending requests to `<directory>/<batch id>.jsonl` (atomically; the same requests
    rewrite the same file) and record them; the `BatchPending` to raise."""
    # a request another step's file already holds (IB's vanilla request is multi-turn's first) waits there
    waiting_elsewhere = {key: path for key, path in writer.query(
        """SELECT br.key, b.input_file FROM llm.batch_requests br JOIN llm.batches b USING (batch_id)
           WHERE b.mode = 'files' AND b.status = 'exported' AND b.purpose IS DISTINCT FROM ?
             AND b.model = ? AND br.key IN (SELECT unnest(?::VARCHAR[]))""",
        [purpose, ep.name, list(todo)])}
    lines = [p for p in prepare(ep, todo) if p.key not in waiting_elsewhere]
    if not lines:  # every one already waits in another step's file: one file per request
        path = Path(next(iter(waiting_elsewhere.values())))
        return BatchPending(ep.name, path, len(todo), ep.served_model)
    bid = batch_id(ep.name, purpose, (p.key for p in lines))
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{bid}.jsonl"
    text = file_text(ep, lines)
    write_if_changed(path, text)
    _record(writer, bid, ep, identity, purpose, "files", lines, input_file=str(path))
    _update(writer, bid, status="exported", finished_at=None)  # written again: waiting again
    return BatchPending(ep.name, path, len(lines), ep.served_model)


@dataclass
class ImportReport:
    path: Path
    answered: int
    failed: int
    batches: list[str]
    still_pending: int  # requests of those batches the file has no line for
    run_id: str  # what the rows it wrote carry in llm.calls.run_id
    unreadable: list[str] = field(default_factory=list)  # lines that are no result, each named
    already: int = 0  # lines whose request llm.calls already holds answered: kept as stored
    other_model: dict[str, str] = field(default_factory=dict)  # served model asked -> the one that answered

    def line(self) -> str:
        left = f"; {self.still_pending} requests of these batches have no line in it and stay pending" \
            if self.still_pending else ""
        skipped = f"; {self.already} already answered, kept as stored" if self.already else ""
        bad = (f"; {len(self.unreadable)} unreadable line(s) skipped, their requests stay pending"
               if self.unreadable else "")
        other = ("; answered by another model than the one asked: "
                 + ", ".join(f"{b!r} for {a!r}" for a, b in sorted(self.other_model.items()))
                 if self.other_model else "")
        return (f"{self.path}: {self.answered + self.failed} results read into llm.calls ({self.answered} answered, "
                f"{self.failed} failed) for {len(self.batches)} batch file(s){left}{skipped}{bad}{other}")


IMPORT_CHUNK = 1_000  # rows written per commit while an output file is read


def import_file(warehouse: Any, registry: ModelRegistry, path: Path, run_id: str | None = None,
                chunk: int = IMPORT_CHUNK) -> ImportReport:
    """Read a batch output file (OpenAI's layout or vLLM's `run_batch`'s) into `llm.calls`, streaming:
    the file is read twice, a line at a time, so memory holds its keys and one chunk of rows, never
    the file. The first pass checks it: every line's `custom_id` must be a request this
    configuration exported, once; otherwise the whole file is refused, each bad line named, and
    nothing is written. A line that is no result at all (not UTF-8, not JSON, no `custom_id`) is
    named in the report and skipped, its request left pending for the next export: one bad line
    never discards the good ones. A request already answered in `llm.calls` keeps its stored answer
    (the file may be imported again). The second pass stores the results, `chunk` rows a commit;
    each row is a whole call, so a run stopped midway leaves stored rows and pending ones, and
    importing the file again completes it."""

    path = Path(path)
    run_id = run_id or f"batch-import-{uuid.uuid4().hex[:12]}"
    first, unreadable, bad = _file_lines(path)
    identities = {registry.identity(name): name for name in registry.config.models}
    writer = warehouse.writer()
    try:
        pending = _pending_requests(writer, list(first))
        for key, n in first.items():
            got = pending.get(key)
            if got is None:
                bad.append(f"{path}: line {n}: custom_id {key} is not a request any batch file of this warehouse holds")
            elif got[3] not in identities:
                bad.append(f"{path}: line {n}: custom_id {key} is a request of {got[2]} ({got[3]}), which this "
                           f"configuration does not have (configured: {sorted(registry.config.models)})")
        if bad:
            bad.sort(key=lambda b: int(re.search(r": line (\d+):", b).group(1)))
            more = f"\n... and {len(bad) - 20} more" if len(bad) > 20 else ""
            raise BatchImportError(f"{path}: refused, nothing written:\n" + "\n".join(bad[:20]) + more)
        answered, failed, already, other_model = _store_results(writer, registry, path, pending, identities,
                                                                run_id, chunk)
        batches = sorted({pending[k][1] for k in first})
        left = 0
        for bid in batches:
            n_ok, n_failed, n_none = writer.query(
                """SELECT count(*) FILTER (c.status = 'ok'), count(*) FILTER (c.status = 'failed'),
                          count(*) FILTER (c.key IS NULL)
                   FROM llm.batch_requests br LEFT JOIN llm.calls c USING (key) WHERE br.batch_id = ?""", [bid])[0]
            left += n_none
            _update(writer, bid, status="imported" if n_none == 0 else "exported", output_file=str(path),
                    n_ok=n_ok, n_failed=n_failed, finished_at=_now() if n_none == 0 else None)
    finally:
        writer.close()
    return ImportReport(path, answered, failed, batches, left, run_id, unreadable, already, other_model)


def _file_lines(path: Path) -> tuple[dict[str, int], list[str], list[str]]:
    """`import_file`'s first pass: each result's `custom_id` and its line; the lines that are no
    result (named, to skip); the lines that refuse the file (a `custom_id` twice). A batch input
    file (requests, no responses) is refused at once, as is a file that cannot be read."""
    first: dict[str, int] = {}  # custom_id -> its line
    unreadable: list[str] = []
    bad: list[str] = []
    try:
        for n, obj, why in stream_lines(path):
            if obj is None:
                unreadable.append(f"{path}: line {n}: {why}")
            elif "body" in obj and "response" not in obj and "error" not in obj:
                raise BatchImportError(f"{path}: line {n} is a request (it has a body and no response): this is a "
                                       "batch input file; import the output file its run wrote, nothing written")
            elif obj["custom_id"] in first:
                bad.append(f"{path}: line {n}: custom_id {obj['custom_id']} appears twice in the file "
                           f"(first on line {first[obj['custom_id']]})")
            else:
                first[obj["custom_id"]] = n
    except OSError as exc:
        raise BatchImportError(f"{path}: cannot be read ({exc.strerror or exc})") from exc
    return first, unreadable, bad


def _store_results(writer: Any, registry: ModelRegistry, path: Path, pending: Mapping[str, tuple[Any, ...]],
                   identities: Mapping[str, str], run_id: str, chunk: int) -> tuple[int, int, int, dict[str, str]]:
    """`import_file`'s second pass: each result stored as its call's row, `chunk` rows a commit; a
    request answered already keeps its stored answer. (answered, failed, kept as stored, the served
    models a result named where another was asked)."""
    secrets = registry.secrets()
    answered = failed = already = 0
    other_model: dict[str, str] = {}
    rows: list[dict[str, Any]] = []
    for _, obj, _why in stream_lines(path):
        if obj is None:
            continue
        key, _bid, _model, identity, purpose, sample_index, request, status = pending[obj["custom_id"]]
        if status == "ok":
            already += 1
            continue
        request = json.loads(request)
        answer = answer_of_line(obj, secrets)
        ep = offline_endpoint(registry, identities[identity], f"batch file {path.name}")
        response = obj.get("response")
        body = response.get("body") if isinstance(response, Mapping) else None
        said = body.get("model") if isinstance(body, Mapping) else None
        if answer.ok and isinstance(said, str) and not _same_model(said, ep.served_model):
            other_model[ep.served_model] = said
        _, row = answer.stored(key=key, ep=ep, identity=identity, purpose=purpose or "",
                               messages=request["messages"], sent=request["params"], sample_index=sample_index,
                               latency=None, attempts=1, run_id=run_id, created=_now())
        rows.append(row)
        answered += answer.ok
        failed += not answer.ok
        if len(rows) >= chunk:
            CallStore(writer).save(rows)
            rows = []
    if rows:
        CallStore(writer).save(rows)
    return answered, failed, already, other_model


def _pending_requests(writer: Any, keys: list[str], per_query: int = 5_000) -> dict[str, tuple[Any, ...]]:
    """The exported requests among `keys` (the latest batch each was exported in), with their stored
    call's status: asked in slices, so a file of a million lines is no million-item parameter."""
    out: dict[str, tuple[Any, ...]] = {}
    for k in range(0, len(keys), per_query):
        for row in writer.query(
                """SELECT br.key, br.batch_id, br.model, br.model_identity, br.purpose, br.sample_index, br.request,
                          c.status
                   FROM llm.batch_requests br JOIN llm.batches b USING (batch_id)
                   LEFT JOIN llm.calls c ON c.key = br.key
                   WHERE b.mode = 'files' AND br.key IN (SELECT unnest(?::VARCHAR[]))
                   ORDER BY b.created_at""", [keys[k:k + per_query]]):
            out[row[0]] = tuple(row)  # the latest batch a key was exported in
    return out


def _same_model(said: str, asked: str) -> bool:
    """Whether a result's `model` is the served model asked: the same name, a path to it
    (`org/name`), or a dated snapshot of it (`gpt-4o-mini-2024-07-18` for `gpt-4o-mini`)."""
    said, asked = said.rsplit("/", 1)[-1].lower(), asked.rsplit("/", 1)[-1].lower()
    return said == asked or said.startswith(asked + "-") or asked.startswith(said + "-")


def offline_endpoint(registry: ModelRegistry, name: str, host: str = "batch file") -> Endpoint:
    """The model's endpoint as a batch file stands for it: what its requests are sent with, but no
    URL is called, no server started, no key read."""
    from llm_calls.endpoints import default_sampling

    m = registry.config.model(name)
    return Endpoint(name=name, base_url="", served_model=m.served_model, identity=registry.identity(name),
                    host=host, concurrency=1, sampling=default_sampling(m), send_seed=m.send_seed,
                    token_param=m.sent_token_param, refused=m.refused_params)


# -- api mode -----------------------------------------------------------------------------------

async def run_api(ledger: Any, ep: Endpoint, identity: str, purpose: str,
                  todo: Mapping[str, tuple[Any, Mapping[str, Any]]], writer: Any, cfg: BatchConfig) -> dict[str, Any]:
    """Send the pending requests as one provider batch, wait for it, store its results; the
    `CallResult`s by key. A batch of the same requests already submitted (a killed run) is polled,
    not created again."""
    lines = prepare(ep, todo)
    created = _now()
    bid, provider_id, status, texts, error = await _submitted(ledger, ep, identity, purpose, lines, writer, cfg)
    secrets = ledger.registry.secrets()
    answers: dict[str, Any] = {}
    unreadable: list[str] = []
    for fid, text in texts:
        good, bad = read_lines(text, f"{provider_id} file {fid}")
        unreadable += bad
        for _, obj in good:
            if obj["custom_id"] in todo:
                answers[obj["custom_id"]] = answer_of_line(obj, secrets)
    if unreadable:  # every readable answer is stored; the requests of these lines are asked again
        ledger.log.warning(f"llm batch [{ep.name}]: {len(unreadable)} unreadable output line(s), their requests "
                           "asked again next run: " + "; ".join(unreadable[:5]))
    why = error or ("it has no readable result for this request (" + "; ".join(unreadable[:3]) + ")" if unreadable
                    else "it has no result for this request")
    missing = Answer(False, error=ep.redact(f"batch {provider_id or bid} {status}: {why}; asked again next run"))
    out, rows = {}, []
    for p in lines:
        result, row = answers.get(p.key, missing).stored(
            key=p.key, ep=ep, identity=identity, purpose=purpose, messages=p.messages, sent=p.sent,
            sample_index=p.sample_index, latency=None, attempts=1, run_id=ledger.run_id, created=created)
        row["endpoint_host"] = f"{ep.host} batch {provider_id or bid}"
        out[p.key] = result
        rows.append(row)
    await asyncio.to_thread(CallStore(writer).save, rows)
    n_ok = sum(r.ok for r in out.values())
    await asyncio.to_thread(_update, writer, bid, status="read", output_file=",".join(f for f, _ in texts) or None,
                            n_ok=n_ok, n_failed=len(out) - n_ok, error=error, finished_at=_now())
    return out


async def _submitted(ledger: Any, ep: Endpoint, identity: str, purpose: str, lines: Sequence[Any], writer: Any,
                     cfg: BatchConfig) -> tuple[str, str | None, str, list[tuple[str, str]], str | None]:
    """`run_api`'s provider batch of `lines`: found again (a run that stopped while it was created or
    worked on) or recorded, then created; waited for; its output and error files read. (our batch id,
    the provider's, its final status, (file id, text) of each file, the error that stopped it)."""
    import openai

    prefix = batch_id(ep.name, purpose, (p.key for p in lines))
    client = openai.AsyncOpenAI(
        base_url=ep.base_url, api_key=ep.api_key or "not-needed", max_retries=max(0, ledger.config.max_attempts - 1),
        timeout=ledger.config.timeout_s, http_client=openai.DefaultAsyncHttpxClient(verify=tls_context()))
    texts: list[tuple[str, str]] = []
    status = "failed"
    try:
        earlier = await asyncio.to_thread(writer.query,
                                          "SELECT batch_id, provider_batch_id, status FROM llm.batches "
                                          "WHERE batch_id LIKE ? || '%' AND mode = 'api' ORDER BY created_at", [prefix])
        live = [r for r in earlier if r[2] not in _TERMINAL | {"read"}]
        error, provider_id = None, None
        if live:  # a run that stopped while this batch was being created or worked on
            bid, provider_id = live[-1][0], live[-1][1] or await _created_as(client, live[-1][0])
            if provider_id:
                ledger.log.info(f"llm batch [{ep.name}]: resuming {provider_id} ({len(lines)} requests, {purpose})")
        else:
            bid = prefix if not earlier else f"{prefix}-{len(earlier) + 1}"
            # recorded before it is created: a run killed in between finds it by its metadata
            await asyncio.to_thread(_record, writer, bid, ep, identity, purpose, "api", lines, status="creating")
        if provider_id is None:
            try:
                upload = await client.files.create(file=(f"{bid}.jsonl", file_text(ep, lines).encode()), purpose="batch")
                batch = await client.batches.create(input_file_id=upload.id, endpoint=URL,
                                                    completion_window=cfg.completion_window,
                                                    metadata={"benchsmith_batch": bid[:512]})
                provider_id = batch.id
                ledger.log.info(f"llm batch [{ep.name}]: created {provider_id} ({len(lines)} requests, {purpose})")
                await asyncio.to_thread(_update, writer, bid, input_file=upload.id, provider_batch_id=provider_id,
                                        status="submitted")
            except openai.OpenAIError as exc:
                error = ep.redact(f"batch API: {type(exc).__name__}: {str(exc)[:300]}")
                await asyncio.to_thread(_update, writer, bid, status="failed", error=error)
        await asyncio.to_thread(writer.close)  # nothing is held while the provider works
        if error is None:
            try:
                batch, status = await _wait(client, provider_id, cfg, ledger.log, ep.name)
                for name in ("output_file_id", "error_file_id"):
                    fid = getattr(batch, name, None)
                    if fid:
                        texts.append((fid, (await client.files.content(fid)).text))
            except openai.NotFoundError:  # the provider no longer knows it (deleted, or another account's)
                error = f"the provider no longer knows batch {provider_id} (HTTP 404)"
            except openai.OpenAIError as exc:
                error = ep.redact(f"batch API while waiting: {type(exc).__name__}: {str(exc)[:300]}")
            if status == "failed" and not texts and error is None:
                errors = getattr(getattr(batch, "errors", None), "data", None) or []
                error = "; ".join(f"{e.code}: {e.message}" for e in errors[:3]) or "the provider failed the batch"
    finally:
        await client.close()
    return bid, provider_id, status, texts, error


async def _created_as(client: openai.AsyncOpenAI, bid: str) -> str | None:
    """The provider's id of the batch created as `bid` (its metadata names it), if it was created:
    a run killed between creating a batch and recording its id finds it here."""
    import openai

    try:
        async for b in client.batches.list(limit=100):
            if (getattr(b, "metadata", None) or {}).get("benchsmith_batch") == bid[:512]:
                return b.id
    except openai.OpenAIError:
        return None
    return None


async def _wait(client: openai.AsyncOpenAI, provider_id: str, cfg: BatchConfig, log: Any, model: str) -> tuple[Any, str]:
    """Poll until the batch ends: the wait starts at `poll_s` and doubles up to `poll_max_s`."""
    delay, t0, said = cfg.poll_s, time.monotonic(), ""
    while True:
        batch = await client.batches.retrieve(provider_id)
        if batch.status in _TERMINAL:
            return batch, batch.status
        counts = getattr(batch, "request_counts", None)
        line = f"{batch.status}" + (f", {counts.completed}/{counts.total} done" if counts and counts.total else "")
        if line != said:
            log.info(f"llm batch [{model}]: {provider_id} {line} after {time.monotonic() - t0:.0f} s")
            said = line
        await asyncio.sleep(delay)
        delay = min(delay * 2, cfg.poll_max_s)


def exported(warehouse: Any) -> list[dict[str, Any]]:
    """Batch files written and not yet (fully) imported: what a files-mode run waits on."""
    return warehouse.rows("""SELECT batch_id, model, purpose, n_requests, input_file, created_at FROM llm.batches
                             WHERE mode = 'files' AND status = 'exported' ORDER BY created_at, batch_id""")


def round_files(waiting: Sequence[Mapping[str, Any]]) -> list[tuple[str, Path, int]]:
    """One input file per model for a round of files mode: every pending request of every step's
    file (`exported`), each once, in `round-<digest>-<model>.jsonl` beside them (the digest names
    the requests, so the same round writes the same file). Importing its output stores the answers
    of every step's batch at once (`import_file` finds each line's batch by its key). Returns
    (model, file, requests) per model."""
    by_model: dict[str, list[Path]] = {}
    for w in waiting:
        by_model.setdefault(w["model"], []).append(Path(w["input_file"]))
    out = []
    for model, paths in sorted(by_model.items()):
        seen: dict[str, str] = {}
        for path in paths:
            if not path.is_file():
                continue
            for line in path.read_text(encoding="utf-8").split("\n"):
                obj, _ = parse_line(line)
                if obj is not None:
                    seen.setdefault(obj["custom_id"], line)
        if not seen:
            continue
        digest = keys_digest(seen)[:12]
        safe = re.sub(r"[^A-Za-z0-9_.-]", "_", model)
        target = paths[0].parent / f"round-{digest}-{safe}.jsonl"
        text = "".join(line + "\n" for line in seen.values())
        write_if_changed(target, text)
        out.append((model, target, len(seen)))
    return out
