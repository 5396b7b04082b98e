"""Loading a spec file: YAML -> validated `Spec`, every problem as `file:line: field.path: message`.

`load_spec(path)` returns a validated `Spec` or raises one `SpecError` listing every problem. Line
numbers come from PyYAML's composer (`yaml_lines.py`), so a pydantic error location maps back to
the line the user must edit; `errors.py` words the errors (unknown keys with a suggestion).
Values that would make a sweep meaningless (negative temperature, budget < 0, block size < 2, an
empty grid list, a missing prompts file...) are refused before anything starts.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from sweeper.spec.dataset_files import TOO_DEEP, FileProblem, read_text, text_lines
from sweeper.spec.dataset_load import dataset_prompts
from sweeper.spec.datasets import DatasetSpec
from sweeper.spec.errors import SpecError, SpecIssue, error_loc, error_message
from sweeper.spec.model import Spec
from sweeper.spec.reference import resolve_reference
from sweeper.spec.workload import PromptSpec, WorkloadSpec
from sweeper.spec.yaml_lines import YamlLines
from sweeper.statefile import SPEC, read_state


def load_spec(path: str | os.PathLike[str]) -> Spec:
    """Read, validate and resolve a spec file; raise `SpecError` listing every problem."""
    spec_path = Path(path)
    try:
        raw = read_state(spec_path, SPEC)
    except OSError as exc:
        raise SpecError(
            [SpecIssue(str(spec_path), None, "", f"cannot read spec: {exc.strerror}")]
        ) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        byte = raw[exc.start : exc.start + 1].hex()
        message = f"not UTF-8 text: byte 0x{byte} (save the spec as UTF-8)"
        raise SpecError([SpecIssue(str(spec_path), line, "", message)]) from None
    return parse_spec(text, source=str(spec_path), base_dir=spec_path.parent)


def parse_spec(text: str, *, source: str = "<spec>", base_dir: Path | None = None) -> Spec:
    """Validate spec text; `base_dir` resolves `prompts_file` and `runtime.package` (default: the
    current directory)."""
    lines = YamlLines.parse(text, source)
    data = lines.data
    if not isinstance(data, dict):
        raise SpecError(
            [SpecIssue(source, 1, "", "a spec must be a YAML mapping (key: value lines)")]
        )
    try:
        spec = Spec.model_validate(data)
    except ValidationError as exc:
        issues = [_issue(lines, error) for error in exc.errors()]
        raise SpecError(sorted(issues, key=lambda issue: issue.line or 0)) from None
    if spec.workload.prompts_file is not None:
        spec = _with_prompts_file(spec, lines, base_dir or Path.cwd())
    if spec.workload.datasets:
        spec = _with_datasets(spec, lines, base_dir or Path.cwd())
    if spec.runtime.package is not None:
        spec = _with_package(spec, lines, base_dir or Path.cwd())
    if spec.reference is not None:
        # The datasets the run's records will name: its datasets' and its prompts' own.
        named = [
            *(d.label for d in spec.workload.datasets),
            *(p.dataset for p in spec.workload.prompts),
        ]
        labels = [label for label in dict.fromkeys(named) if label]
        reference = resolve_reference(spec.reference, lines, base_dir or Path.cwd(), labels)
        spec = spec.model_copy(update={"reference": reference})
    return spec


#: What `runtime.package` must hold: the package `python -m ddtree_runtime` runs.
PACKAGE_MARKER = ("ddtree_runtime", "__main__.py")


def _with_package(spec: Spec, lines: YamlLines, base_dir: Path) -> Spec:
    """`runtime.package` made absolute (relative to the spec), refused when no runtime is there."""
    assert spec.runtime.package is not None
    path = (base_dir / spec.runtime.package).resolve()
    if not path.joinpath(*PACKAGE_MARKER).is_file():
        line, field = lines.locate(("runtime", "package"))
        message = f"{str(path)!r} holds no ddtree_runtime package ({'/'.join(PACKAGE_MARKER)})"
        raise SpecError([SpecIssue(lines.source, line, field, message)])
    runtime = spec.runtime.model_copy(update={"package": str(path)})
    return spec.model_copy(update={"runtime": runtime})


def _issue(lines: YamlLines, error: Any) -> SpecIssue:
    line, field = lines.locate(error_loc(error))
    return SpecIssue(lines.source, line, field, error_message(error, Spec))


def _with_prompts_file(spec: Spec, lines: YamlLines, base_dir: Path) -> Spec:
    """Append the prompts of the JSONL file (relative to the spec) to the inline prompts."""
    at = ("workload", "prompts_file")
    line, field = lines.locate(at)
    assert spec.workload.prompts_file is not None
    # realpath, not resolve: a symlink loop is then the read's ELOOP, said in one line.
    path = Path(os.path.realpath(base_dir / spec.workload.prompts_file))
    try:
        raw_lines = text_lines(read_text(path))
    except FileProblem as bad:
        raise SpecError([SpecIssue(str(path), bad.line, "", bad.message)]) from None
    except OSError as exc:
        raise SpecError(
            [
                SpecIssue(
                    lines.source,
                    line,
                    field,
                    f"cannot read prompts file {str(path)!r}: {exc.strerror}",
                )
            ]
        ) from None
    prompts = list(spec.workload.prompts)
    issues: list[SpecIssue] = []
    for number, raw in enumerate(raw_lines, start=1):
        if not raw.strip():
            continue
        try:
            prompts.append(PromptSpec.model_validate(json.loads(raw)))
        except json.JSONDecodeError as exc:
            issues.append(SpecIssue(str(path), number, "", f"not JSON: {exc.msg}"))
        except RecursionError:
            issues.append(SpecIssue(str(path), number, "", TOO_DEEP))
        except ValidationError as exc:
            for error in exc.errors():
                where = ".".join(str(part) for part in error_loc(error))
                message = error_message(error, PromptSpec)
                issues.append(SpecIssue(str(path), number, where, message))
    if not prompts and not issues:
        issues.append(
            SpecIssue(lines.source, line, field, f"prompts file {str(path)!r} has no prompts")
        )
    if issues:
        raise SpecError(issues)
    workload = spec.workload.model_dump()
    workload.update(prompts=[p.model_dump() for p in prompts], prompts_file=str(path))
    try:
        return spec.model_copy(update={"workload": WorkloadSpec.model_validate(workload)})
    except ValidationError as exc:
        raise SpecError(
            [SpecIssue(str(path), None, "", error["msg"]) for error in exc.errors()]
        ) from None


def _with_datasets(spec: Spec, lines: YamlLines, base_dir: Path) -> Spec:
    """Append the prompts of `workload.datasets` (`sweeper.spec.dataset_load`)."""
    resolved: list[DatasetSpec] = []
    found, issues = dataset_prompts(
        spec.workload, lines, base_dir, spec.runtime.max_model_len, resolved
    )
    if issues:
        raise SpecError(issues)
    workload = spec.workload.model_dump()
    workload["prompts"] = [*(p.model_dump() for p in spec.workload.prompts), *found]
    # Each `hf:` dataset with the revision it was read at: the manifest pins it.
    workload["datasets"] = [d.model_dump() for d in resolved]
    try:
        return spec.model_copy(update={"workload": WorkloadSpec.model_validate(workload)})
    except ValidationError as exc:
        line, field = lines.locate(("workload", "datasets"))
        issues = [
            SpecIssue(lines.source, line, field, error_message(error, WorkloadSpec))
            for error in exc.errors()
        ]
        raise SpecError(issues) from None


def spec_json_schema() -> dict[str, Any]:
    """The JSON Schema of a spec file (what `sweeper schema` prints)."""
    return Spec.model_json_schema()
