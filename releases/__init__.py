"""Benchmark releases: a built family's items as a folder others load, and that loads back as a source.

    python -m releases [--select FAMILY ...] [--out DIR]

writes, per family, `<out>/<key>-<version>/` (out: `release.dir` of the configuration; version: the
first 12 hex digits of the digest of the scale, the seed and the family's section, so the same
configuration names the same folder):

- `<config>/test.parquet`: one file per configuration the family has (its levels, datasets or
  languages; the Hugging Face sense of a configuration), one split, `test`: the items as stored,
  JSON columns as JSON text, rows in their id order. The same configuration and seed give
  byte-identical files (no time, no path, no process state goes in).
- `README.md`: the dataset card, with the YAML header the Hugging Face hub and `datasets` read
  (`configs` with their data files, `dataset_info` with features and counts, licence, size, task
  categories, languages) and a body with the construction (configuration digest, seed, scale, the
  sources and the versions of the code that built them, counts per configuration and label), the
  paper it follows and how to cite it, and its known limits.
- `croissant.json`: Croissant 1.0 metadata (a file object and a record set per configuration),
  validated with `mlcroissant` before the folder is moved into place.

The licence comes from the items' sources (`LICENSES`; data the project generates carries
`release.generated_license`): one licence all of them can be released under (CC BY data can go
into a CC BY-SA or CC BY-NC-SA release), or, where none exists (CC BY-SA with CC BY-NC-SA, or a
source whose licence is not known), the release is refused, saying which configurations conflict,
unless `release.allow_mixed_licenses` is set: the card then says the licences conflict and names
each configuration's own (`license: other`).

`release.json` records the sha256 and size of every file (each configuration's Parquet, the card,
the Croissant metadata) and each configuration's row count. A release folder is also a source:
`release.load: {<key>: <folder>}` in a configuration makes the family's items asset read each
configured partition from the folder instead of building it, so a benchmark built once is evaluated
anywhere without rebuilding it; it is read only whole, as written (`verify`: every file matches its
recorded hash and size, the Croissant's hashes are the files', the row counts hold, each row's digest
matches its content, no item twice), and refused otherwise, naming the file. Each family's part (what its
configurations are, their rows, sources, labels, paper, limits) is `releases/<key>.py`.
"""

from __future__ import annotations

import contextlib
import datetime
import errno
import hashlib
import json
import logging
import os
import shutil
import tempfile
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import yaml

from configuration import Config
from configuration.families import BY_KEY, FAMILIES, load
from configuration.licenses import LICENSE_URLS, LICENSES
from warehouse import Warehouse, open_warehouse

SPLIT = "test"
CARD, CROISSANT, MANIFEST = "README.md", "croissant.json", "release.json"
# what data under a licence may be released under (besides itself): attribution-only data may go
# into a release with more conditions; share-alike data only under its own licence
_INTO = {
    "cc0-1.0": set(LICENSE_URLS),
    "cc-by-4.0": {"cc-by-sa-4.0", "cc-by-nc-4.0", "cc-by-nc-sa-4.0"},
    "mit": {"cc-by-4.0", "cc-by-sa-4.0", "cc-by-nc-4.0", "cc-by-nc-sa-4.0", "apache-2.0"},
    "apache-2.0": {"cc-by-4.0", "cc-by-sa-4.0", "cc-by-nc-4.0", "cc-by-nc-sa-4.0"},
    "cc-by-nc-4.0": {"cc-by-nc-sa-4.0"},
}


class ReleaseError(ValueError):
    """A release cannot be written or read as asked; the message says why and what to do."""


@dataclass(frozen=True)
class Part:
    """One configuration of a release: its rows and where they came from."""

    name: str  # the configuration name: a level, dataset or language
    table: pa.Table  # the rows, typed, in their id order
    sources: tuple[str, ...]  # the sources its rows came from, in words (hub id, file, generator and version)
    license: str | None  # None: not known
    labels: Mapping[str, int] = field(default_factory=dict)  # rows per label (the card's counts)


@dataclass(frozen=True)
class Paper:
    title: str
    citation: str  # BibTeX
    where: str  # the part of the paper the items follow


@dataclass(frozen=True)
class Release:
    """What a family gives its release (`releases/<key>.py: RELEASE`, named by the registry)."""

    description: str  # the card's first paragraph
    task_categories: tuple[str, ...]  # the hub's task categories
    paper: Paper
    parts: Callable[[Config, Warehouse], list[Part]]  # its configurations, from the stored items
    tables_of: Callable[[list[dict[str, Any]]], dict[str, list[dict[str, Any]]]]  # released rows -> item tables
    languages: Callable[[Config, list[str]], tuple[str, ...]]  # the languages of the named configurations
    construction: Callable[[Config], str]  # how the items were built, for the card
    limits: Callable[[Config], list[str]]  # the card's known limits, one line each


@dataclass(frozen=True)
class Written:
    folder: Path
    license: str
    parts: tuple[str, ...]
    rows: int


def version(cfg: Config, key: str) -> str:
    """The release's version: a digest of what decides its items (scale, seed, the family's section)."""
    section = getattr(cfg, key).model_dump(mode="json")
    text = json.dumps({"scale": cfg.scale, "seed": cfg.seed, key: section}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def combined_license(parts: Sequence[Part]) -> str | None:
    """The one licence every part's data may be released under, or None (a conflict, or a part
    whose licence is unknown)."""
    found = {p.license for p in parts}
    if None in found:
        return None
    for candidate in sorted(found):
        if all(x == candidate or candidate in _INTO.get(x, set()) for x in found):
            return candidate
    return None


def spec(key: str) -> Release:
    """Family `key`'s release part (the registry's `Parts.release`, `releases/<key>.py: RELEASE`): a
    family without one is said to have no release, never a traceback."""
    family = BY_KEY.get(key)
    if family is None or family.parts.release is None:
        raise ReleaseError(f"{family.title if family else key}: no release is defined for this family (add "
                           f"releases/{key}.py with a RELEASE and name it in its registry entry to publish its items)")
    release = load(family.parts.release)
    if not isinstance(release, Release):
        raise TypeError(f"{key}: {family.parts.release} is a {type(release).__name__}, not a Release")
    return release


def table_of(wh: Warehouse, sql: str, params: Sequence[Any] = ()) -> pa.Table:
    """A query's rows as one Arrow table, one chunk (the Parquet layout then depends on the rows only)."""
    with wh.connect(read_only=True) as con:
        return con.sql(sql, params=list(params)).to_arrow_table().combine_chunks()


def write(cfg: Config, wh: Warehouse, key: str, out: Path | None = None) -> Written:
    """Write family `key`'s release (see the module docstring); the folder appears whole or not at all."""
    if key not in BY_KEY:
        raise ReleaseError(f"no family {key!r}; families: {sorted(BY_KEY)}")
    family = spec(key)
    if not wh.exists():
        raise ReleaseError(f"{BY_KEY[key].title}: no warehouse at {wh.where}; build the items first "
                           f"(python -m assets.materialize_all --select {key})")
    parts = [p for p in family.parts(cfg, wh) if p.table.num_rows]
    if not parts:
        raise ReleaseError(f"{BY_KEY[key].title}: no items stored in {wh.where}; build them first "
                           f"(python -m assets.materialize_all --select {key})")
    license = _license(cfg, key, parts)
    out = Path(out) if out is not None else cfg.beside(cfg.release.dir)
    folder = out / f"{key}-{version(cfg, key)}"
    out.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=out))
    try:
        files = {}
        for p in parts:
            (tmp / p.name).mkdir()
            path = tmp / p.name / f"{SPLIT}.parquet"
            pq.write_table(p.table, path, compression="zstd", write_statistics=True)
            files[p.name] = path
        (tmp / CARD).write_text(card(cfg, key, parts, license, files, asked(cfg, wh, key)), encoding="utf-8")
        (tmp / CROISSANT).write_text(croissant(cfg, key, parts, license, files), encoding="utf-8")
        (tmp / MANIFEST).write_text(json.dumps({
            "family": key, "version": version(cfg, key), "seed": cfg.seed, "scale": cfg.scale, "license": license,
            "configs": [p.name for p in parts], "rows": {p.name: p.table.num_rows for p in parts},
            "files": {rel: _file_record(tmp / rel)
                      for rel in [*(f"{p.name}/{SPLIT}.parquet" for p in parts), CARD, CROISSANT]}},
            indent=2) + "\n")
        check_croissant(tmp / CROISSANT)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o777 & ~umask)  # a temporary folder is private; a release is not
        move_into_place(tmp, folder)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return Written(folder, license, tuple(p.name for p in parts), sum(p.table.num_rows for p in parts))


def move_into_place(tmp: Path, folder: Path, tries: int = 100) -> None:
    """Rename the finished folder `tmp` to `folder`, replacing a release there. Each change is one
    rename, so `folder` is an old release or the new one, whole, never a mix. Several writers of one
    release at once (runs on several machines sharing `release.dir`, each scoring the family) all
    succeed, the last rename's folder staying: the old folder is renamed aside before it is removed,
    never removed in place, since another writer may rename its own into `folder` meanwhile (removing
    in place, one writer deleted the files another had just moved in, or found `folder` full again
    when it renamed). Between the aside and the rename a reader finds no folder, and is told so."""
    errors = (errno.ENOTEMPTY, errno.EEXIST)
    for _ in range(tries):
        try:
            tmp.rename(folder)
            return
        except OSError as exc:
            if exc.errno not in errors:
                raise
        aside = Path(tempfile.mkdtemp(prefix=f".{folder.name}.old.", dir=folder.parent))
        try:
            folder.rename(aside / folder.name)
        except FileNotFoundError:  # another writer moved it aside first; rename again
            pass
        shutil.rmtree(aside, ignore_errors=True)
    raise OSError(errno.EBUSY, f"{folder}: other writers replaced this release {tries} times while this one "
                               "tried to move its own into place")


def _license(cfg: Config, key: str, parts: Sequence[Part]) -> str:
    combined = combined_license(parts)
    if combined is not None:
        return combined
    listing = "; ".join(f"{p.name}: {p.license or 'unknown'} ({', '.join(p.sources)})" for p in parts)
    if not cfg.release.allow_mixed_licenses:
        raise ReleaseError(
            f"{BY_KEY[key].title}: the sources' licences do not allow one licence for the release ({listing}). "
            "Release the conflicting datasets in separate configurations of their own runs, give an unknown "
            "source's licence under release.source_licenses, or set release.allow_mixed_licenses: true "
            "(the card then names each configuration's licence and says they conflict)")
    return "other"


def source_license(cfg: Config, kind: str) -> str | None:
    """The licence of a source kind (`fld`, `folio`, ...): `LICENSES`, else the configuration's word
    (which may add a licence for a source not known here, never change a known one)."""
    return LICENSES.get(kind) or cfg.release.source_licenses.get(kind)


def provenance(cfg: Config, kind: str, source: Any, generated_by: str, versions: str) -> tuple[tuple[str, ...], str | None]:
    """A dataset's sources in words, and their licence: made by the project's `generated_by`, or read
    from `source` (a `SourceSpec`) of `kind`."""
    if source is None:
        return (f"generated by Benchsmith ({generated_by}, items {versions})",), cfg.release.generated_license
    config = f" ({source.config})" if source.config else ""
    return ((f"{kind}: {_shown(cfg, source.hub or source.path)}{config}, split {source.split}, items {versions}",),
            source_license(cfg, kind))


def _shown(cfg: Config, where: str) -> str:
    """A source as the card names it: a hub id as it is; a local path relative to the configuration's
    folder (the card is published: it names no folder of the machine that built it), or its last two
    parts when it lies elsewhere."""
    path = Path(where)
    if not path.is_absolute():
        return where
    base = Path(cfg.source).resolve().parent if not str(cfg.source).startswith("<") else None
    if base is not None and path.is_relative_to(base):
        return f"{path.relative_to(base).as_posix()} (a local copy)"
    return f"{'/'.join(path.parts[-2:])} (a local copy)"


def warm_up() -> None:
    """What a process's first release costs beyond the next ones, paid now: importing `datasets`
    (the card's features) and `mlcroissant` (the metadata and its check), 0.6-0.9 s of a paper
    run's end on 2 cores."""
    import mlcroissant  # noqa: F401
    from datasets import Features  # noqa: F401


def features(table: pa.Table) -> list[dict[str, Any]]:
    """The table's columns as the card's `dataset_info.features` (Hugging Face's YAML form)."""
    from datasets import Features

    return Features.from_arrow_schema(table.schema)._to_yaml_list()


def _size(n: int) -> str:
    for limit, name in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M")):
        if n < limit:
            return name
    return "1M<n<10M"


def asked(cfg: Config, wh: Warehouse, key: str, scopes: int = 3, chars: int = 1500) -> list[tuple[str, str, str]]:
    """(scope, model, prompt) for the card: the first stored reply of each of the family's first
    `scopes` headline scopes (its `WarehouseParts.samples`), with the messages its call sent, as the run asked
    them. Empty when no evaluated model has replies yet."""
    from warehouse.schema import FAMILY_PARTS

    sql = FAMILY_PARTS[key].samples
    out: list[tuple[str, str, str]] = []
    for model in cfg.evaluate if sql else ():
        seen: set[str] = set()
        for r in wh.rows(sql, [model]):
            keys = json.loads(r.get("call_keys") or "[]")
            if r["scope"] in seen or not keys:
                continue
            request = wh.scalar("SELECT request FROM llm.calls WHERE key = ?", [keys[-1]])
            if request is None:
                continue
            seen.add(r["scope"])
            text = "\n\n".join(f"[{m.get('role')}]\n{m.get('content')}" for m in json.loads(request).get("messages", []))
            out.append((str(r["scope"]), model, text if len(text) <= chars else text[:chars] + "\n[...]"))
            if len(seen) == scopes:
                break
        if out:
            return out
    return out


def card(cfg: Config, key: str, parts: Sequence[Part], license: str, files: Mapping[str, Path],
         prompts: Sequence[tuple[str, str, str]] = ()) -> str:
    """The dataset card: the YAML header the hub and `datasets` read, then the construction."""
    header = _card_header(cfg, key, parts, license, files)
    return ("---\n" + yaml.safe_dump(header, sort_keys=False, allow_unicode=True) + "---\n\n"
            + _card_body(cfg, key, parts, license, prompts))


def _card_header(cfg: Config, key: str, parts: Sequence[Part], license: str, files: Mapping[str, Path]
                 ) -> dict[str, Any]:
    """The card's YAML header: names, licence, languages, sizes and each configuration's files and features."""
    family, fam = spec(key), BY_KEY[key]
    total = sum(p.table.num_rows for p in parts)
    header: dict[str, Any] = {
        "pretty_name": f"{fam.title} (Benchsmith build {version(cfg, key)})",
        "license": license,
        **({"license_name": "mixed", "license_details": "; ".join(f"{p.name}: {p.license or 'unknown'}" for p in parts)}
           if license == "other" else {}),
        "language": list(family.languages(cfg, [p.name for p in parts])),
        "task_categories": list(family.task_categories),
        "size_categories": [_size(total)],
        "tags": ["benchsmith", "reasoning", "benchmark", key],
        "configs": [{"config_name": p.name, "data_files": [{"split": SPLIT, "path": f"{p.name}/{SPLIT}.parquet"}]}
                    for p in parts],
        "dataset_info": [{"config_name": p.name, "features": features(p.table),
                          "splits": [{"name": SPLIT, "num_bytes": files[p.name].stat().st_size,
                                      "num_examples": p.table.num_rows}],
                          "download_size": files[p.name].stat().st_size}
                         for p in parts],
    }
    return header


def _card_body(cfg: Config, key: str, parts: Sequence[Part], license: str,
               prompts: Sequence[tuple[str, str, str]]) -> str:
    """The card's text: what was built and how to load it, the construction, prompts, limits, licence, citation."""
    family, fam = spec(key), BY_KEY[key]
    paper: Paper = family.paper
    rows = "\n".join(f"| `{p.name}` | {p.table.num_rows} | {', '.join(f'{k}: {v}' for k, v in sorted(p.labels.items()))} "
                     f"| {p.license or 'unknown'} | {'; '.join(p.sources)} |" for p in parts)
    conflict = ("\n**The sources' licences conflict**: no one licence covers every configuration; each "
                "configuration carries its own, listed below. Use each under its own terms.\n") if license == "other" else ""
    limits = "\n".join(f"- {x}" for x in family.limits(cfg))
    asked_text = _prompts_section(prompts)
    body = f"""# {fam.title}: a Benchsmith build

{family.description}

Built by Benchsmith from the configuration whose digest is `{version(cfg, key)}`
(scale `{cfg.scale}`, seed `{cfg.seed}`); the same configuration and seed build the same items, and
this folder's Parquet files byte for byte. It follows *{paper.title}* ({paper.where}).
{conflict}
## Configurations

One split each, `{SPLIT}`. Load one with `datasets`:

```python
from datasets import load_dataset
ds = load_dataset("path/to/this/folder", "{parts[0].name}", split="{SPLIT}")
```

| configuration | rows | per label | licence | sources |
| --- | --- | --- | --- | --- |
{rows}

Columns: {", ".join(f"`{n}`" for n in parts[0].table.column_names)}. JSON columns hold JSON text.

## Construction

{family.construction(cfg)}

## Prompts

{asked_text}

## Known limits

{limits}

## Licence

{"Mixed (see above)." if license == "other" else f"`{license}` ({LICENSE_URLS.get(license, license)})"}, from the
sources' licences; data the project generates itself carries `{cfg.release.generated_license}`.

## Citation

Cite the paper the benchmark follows:

```bibtex
{paper.citation}
```
"""
    return body


def _prompts_section(prompts: Sequence[tuple[str, str, str]]) -> str:
    """The card's prompts: each (scope, model, messages as sent) fenced, or why there are none."""
    fence = "````"  # a prompt may hold a ``` fence of its own
    if not prompts:
        return ("No model has answered these items in the warehouse the release was written from; "
                "the prompts are built by the family's evaluation code when a model is evaluated.")
    return ("How the build's run asked them (the first reply of each scope, its messages as sent; the items "
            "themselves carry no prompt):\n\n" + "\n\n".join(
                f"`{scope}` (asked of {model}):\n\n{fence}text\n{text}\n{fence}" for scope, model, text in prompts))


_TYPES = {"string": "TEXT", "large_string": "TEXT", "int64": "INTEGER", "int32": "INTEGER", "int16": "INTEGER",
          "int8": "INTEGER", "bool": "BOOL", "double": "FLOAT", "float": "FLOAT"}


def croissant(cfg: Config, key: str, parts: Sequence[Part], license: str, files: Mapping[str, Path]) -> str:
    """Croissant 1.0 metadata: a file object and a record set (one field per column) per configuration."""
    import mlcroissant as mlc

    family, fam = spec(key), BY_KEY[key]
    with _quiet():
        return _croissant(mlc, cfg, key, family, fam, parts, license, files)


def _croissant(mlc: Any, cfg: Config, key: str, family: Any, fam: Any, parts: Sequence[Part], license: str,
               files: Mapping[str, Path]) -> str:
    ctx = mlc.Context()
    distribution, record_sets = [], []
    for p in parts:
        data = files[p.name].read_bytes()
        fid = f"{p.name}-{SPLIT}"
        distribution.append(mlc.FileObject(ctx=ctx, id=fid, name=fid, content_url=f"{p.name}/{SPLIT}.parquet",
                                           encoding_formats=["application/x-parquet"],
                                           sha256=hashlib.sha256(data).hexdigest(), content_size=f"{len(data)} B"))
        fields = []
        for column in p.table.schema:
            kind = _TYPES.get(str(column.type))
            if kind is None:
                raise ReleaseError(f"{key}/{p.name}: column {column.name} has type {column.type}, which the "
                                   "Croissant metadata does not map")
            fields.append(mlc.Field(ctx=ctx, id=f"{p.name}/{column.name}", name=column.name,
                                    data_types=[getattr(mlc.DataType, kind)],
                                    source=mlc.Source(ctx=ctx, file_object=fid, extract=mlc.Extract(ctx=ctx, column=column.name))))
        record_sets.append(mlc.RecordSet(ctx=ctx, id=p.name, name=p.name, fields=fields,
                                         description=f"{fam.title}, configuration {p.name}, split {SPLIT}"))
    urls = [LICENSE_URLS.get(x, x) for x in ([license] if license != "other" else sorted({p.license or "unknown" for p in parts}))]
    metadata = mlc.Metadata(ctx=ctx, name=f"benchsmith-{key}-{version(cfg, key)}", description=family.description,
                            license=urls, url=f"https://huggingface.co/datasets/benchsmith-{key}",
                            version=f"1.0.0+{version(cfg, key)}", cite_as=family.paper.citation,
                            date_published=datetime.datetime.now(datetime.UTC).replace(
                                hour=0, minute=0, second=0, microsecond=0),
                            in_language=list(family.languages(cfg, [p.name for p in parts])),
                            keywords=["benchsmith", "reasoning", key],
                            distribution=distribution, record_sets=record_sets)
    return json.dumps(metadata.to_json(), indent=2, ensure_ascii=False, default=str) + "\n"


def check_croissant(path: Path) -> None:
    """Load the metadata with `mlcroissant`; an error (not a warning) refuses the release."""
    import mlcroissant as mlc

    try:
        with _quiet():
            ds = mlc.Dataset(jsonld=str(path))
    except mlc.ValidationError as exc:
        raise ReleaseError(f"{path}: the Croissant metadata does not validate: {exc}") from exc
    if ds.metadata.issues.errors:
        raise ReleaseError(f"{path}: the Croissant metadata does not validate: {sorted(ds.metadata.issues.errors)}")


@contextlib.contextmanager
def _quiet() -> Any:
    """mlcroissant logs its warnings (a recommended property left out: datePublished, which would make
    the metadata differ from one writing to the next) through absl; only errors are ours to report."""
    log = logging.getLogger("absl")
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        log.setLevel(level)


# -- a release as a source --------------------------------------------------------------------

def _file_record(path: Path) -> dict[str, Any]:
    data = path.read_bytes()
    return {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}


def manifest(folder: Path, key: str) -> dict[str, Any]:
    """The release's own description, checked to be of family `key` and whole (`verify`)."""
    path = Path(folder) / MANIFEST
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ReleaseError(f"{path}: not a Benchsmith release folder ({exc})") from exc
    if not isinstance(data, dict):
        raise ReleaseError(f"{path}: not a Benchsmith release manifest (a JSON object)")
    if data.get("family") != key:
        raise ReleaseError(f"{path}: a release of {data.get('family')!r}, not of {key!r}")
    verify(Path(folder), data)
    return data


_VERIFIED: dict[tuple[str, float], bool] = {}  # (folder, manifest mtime) checked in this process


def verify(folder: Path, data: Mapping[str, Any]) -> None:
    """A release is loaded only whole, as written: every file the manifest records (each
    configuration's Parquet, the card, the Croissant metadata) matches its size and sha256; the
    Croissant's own sha256 of each Parquet file is the manifest's; each file holds the rows the
    manifest counts. Anything else (a row deleted or repeated, a label changed with its row digest
    recomputed, an edited card or Croissant) is refused, naming the file."""
    where = (str(folder.resolve()), (folder / MANIFEST).stat().st_mtime)
    if where in _VERIFIED:
        return
    files, rows, configs = data.get("files"), data.get("rows"), data.get("configs")
    if not isinstance(files, dict) or not isinstance(rows, dict) or not isinstance(configs, list):
        raise ReleaseError(f"{folder / MANIFEST}: records no file hashes or row counts (a release written before "
                           "releases were checked, or an edited manifest): write the release again")
    for rel in files:
        if not isinstance(rel, str) or not _inside(rel):
            raise ReleaseError(f"{folder / MANIFEST}: records a file {rel!r} outside the release folder; refused")
    for name in configs:
        if not isinstance(name, str) or "/" in name or not _inside(name):
            raise ReleaseError(f"{folder / MANIFEST}: configuration {name!r} is not a folder name; refused")
        if f"{name}/{SPLIT}.parquet" not in files or name not in rows:
            raise ReleaseError(f"{folder / MANIFEST}: configuration {name!r} has no recorded file or row count")
    for rel, want in files.items():
        path = folder / rel
        if not isinstance(want, dict) or not path.is_file():
            raise ReleaseError(f"{_one_line(path)}: missing from the release, or its record in {MANIFEST} is not a hash")
        got = _file_record(path)
        if got != {"sha256": want.get("sha256"), "bytes": want.get("bytes")}:
            raise ReleaseError(f"{_one_line(path)}: does not match the sha256 and size {MANIFEST} records for it (changed after "
                               "the release was written); refused")
    _check_croissant_hashes(folder, files)
    for name in configs:
        path = folder / name / f"{SPLIT}.parquet"
        try:
            n = pq.read_metadata(path).num_rows
        except Exception as exc:  # pyarrow raises several types for a file that is no Parquet
            raise ReleaseError(f"{_one_line(path)}: not a readable Parquet file ({exc!r})") from exc
        if n != rows[name]:
            raise ReleaseError(f"{_one_line(path)}: holds {n} rows, {MANIFEST} records {rows[name]!r}; refused")
    _VERIFIED[where] = True


def _inside(rel: str) -> bool:
    """Whether a name the manifest records stays inside the release folder (relative, no `..`)."""
    parts = Path(rel).parts
    return bool(parts) and not Path(rel).is_absolute() and ".." not in parts and "\0" not in rel


def _one_line(path: Path) -> str:
    """`path` for a one-line error: as written when printable, else quoted with escapes (a file name
    recorded in an edited manifest may hold a line break or a control character)."""
    text = str(path)
    return text if text.isprintable() else repr(text)


def _check_croissant_hashes(folder: Path, files: Mapping[str, Any]) -> None:
    """Each Parquet file's sha256 in `croissant.json` is the one the manifest records."""
    path = folder / CROISSANT
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ReleaseError(f"{path}: not readable Croissant metadata ({exc})") from exc
    listed = {d.get("contentUrl"): d.get("sha256") for d in meta.get("distribution", []) if isinstance(d, dict)}
    for rel, want in files.items():
        if rel.endswith(".parquet") and listed.get(rel) != want.get("sha256"):
            raise ReleaseError(f"{path}: its sha256 for {rel!r} is not the file's ({listed.get(rel)!r}); refused")


def read_part(folder: Path, key: str, name: str) -> dict[str, list[dict[str, Any]]]:
    """Configuration `name` of the release in `folder` (a release of family `key`) as the warehouse
    tables it was made from (`releases.<key>.tables_of`); refuses a configuration the release lacks
    and an item whose stored digest does not match its content (the digest the warehouse writer
    stamps, so the items stored again are the items released)."""
    from warehouse.connection import item_digest
    from warehouse.schema import ITEM_KEYS

    data = manifest(folder, key)
    if name not in data["configs"]:
        raise ReleaseError(f"{folder}: has no configuration {name!r} (it has {data['configs']}); the "
                           "configuration asks for a partition the release was not built with")
    path = Path(folder) / name / f"{SPLIT}.parquet"
    try:
        tables = spec(key).tables_of(pq.read_table(path).to_pylist())
    except (TypeError, ValueError, KeyError, AttributeError) as exc:
        raise ReleaseError(f"{path}: its rows are not {key} items ({type(exc).__name__}: {exc})") from exc
    for table, rows in tables.items():
        if table not in ITEM_KEYS:
            continue
        seen: dict[tuple[Any, ...], int] = {}
        for n, row in enumerate(rows, 1):
            try:
                same = row.get("item_digest") == item_digest(row)
            except (TypeError, ValueError) as exc:
                raise ReleaseError(f"{path}: row {n}: a field of the wrong type ({exc})") from exc
            if not same:
                raise ReleaseError(f"{path}: row {n}: its content does not match its item_digest "
                                   "(the file was changed after the release was written)")
            ident = tuple(row.get(k) for k in ITEM_KEYS[table])
            if ident in seen:
                raise ReleaseError(f"{path}: row {n}: item {ident} appears twice (first on row {seen[ident]}); refused")
            seen[ident] = n
    return tables


def labels(table: pa.Table, column: str) -> dict[str, int]:
    return dict(Counter(str(v) for v in table.column(column).to_pylist())) if column in table.column_names else {}


def main(argv: list[str] | None = None) -> int:
    import argparse
    import sys

    from configuration import load_config

    parser = argparse.ArgumentParser(description="Write benchmark releases (Parquet, dataset card, Croissant).")
    parser.add_argument("--select", action="append", metavar="FAMILY", help="only this family; repeatable")
    parser.add_argument("--out", metavar="DIR", help="where the release folders go (default: release.dir)")
    args = parser.parse_args(argv)
    cfg = load_config()
    wh = open_warehouse(cfg)
    status = 0
    for f in FAMILIES:
        if args.select and f.key not in args.select:
            continue
        try:
            spec(f.key)
        except ReleaseError as exc:  # an optional part the family does not give: said, not a failure
            print(f"{f.title}: {str(exc).split(': ', 1)[1]}")
            continue
        try:
            w = write(cfg, wh, f.key, Path(args.out) if args.out else None)
            print(f"{f.title}: {w.rows} items in {len(w.parts)} configurations, licence {w.license} -> {w.folder}")
        except ReleaseError as exc:
            print(f"{f.title}: not released: {exc}", file=sys.stderr)
            status = 1
    return status
