"""What a benchmark run measures: the spec given to `bench_start` and stored in the result file."""

from __future__ import annotations

from typing import Any

import msgspec

from sgltui import protocol
from sgltui.bench.apis import APIS


class SpecError(Exception):
    """A spec that cannot run; str() is one line that says what to change."""


class BenchSpec(protocol.BenchSpec):
    """protocol.BenchSpec (the fields `bench_start` takes, declared there once) with the
    checks the runner makes before it measures anything."""

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BenchSpec:
        unknown = set(data) - set(cls.__struct_fields__)
        if unknown:
            raise SpecError(f"unknown bench spec field(s): {', '.join(sorted(unknown))}")
        spec = cls(**data)
        spec.validate()
        return spec

    def to_dict(self) -> dict[str, Any]:
        # to_builtins copies the lists, as dataclasses.asdict did: the dict is the caller's
        return msgspec.to_builtins(self)

    def validate(self) -> None:
        if not self.concurrency or any(not isinstance(c, int) or c < 1 for c in self.concurrency):
            raise SpecError("--concurrency needs positive integers, e.g. --concurrency 1,4,16,64")
        if max(self.concurrency) > 100_000:
            raise SpecError("--concurrency above 100,000 is not supported; use a smaller value")
        if (self.requests is None) == (self.duration is None):
            raise SpecError("give exactly one of --requests N or --duration S")
        if self.requests is not None and self.requests < 1:
            raise SpecError("--requests must be at least 1")
        if self.duration is not None and self.duration <= 0:
            raise SpecError("--duration must be a positive number of seconds")
        if self.repeat < 1:
            raise SpecError("--repeat must be at least 1")
        if self.input_len < 1 or self.output_len < 1:
            raise SpecError("--input-len and --output-len must be at least 1")
        if self.api not in APIS:
            raise SpecError(f"--api must be one of {', '.join(APIS)}")
        if self.url and self.profiles:
            raise SpecError(
                "--url benches a running server directly; drop --profile, or drop --url to swap via the agent"
            )
        if self.job_completions is not None and self.job_completions < 1:
            raise SpecError("--job-completions must be at least 1")
        if self.job_output_len is not None and self.job_output_len < 1:
            raise SpecError("--job-output-len must be at least 1")

    def points(self) -> int:
        return max(1, len(self.profiles)) * len(self.concurrency) * self.repeat
