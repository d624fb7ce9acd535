"""What a served replay is told to do: the `serve:` key of a suite or a case.

`serve: true` (or `serve: {...}`) makes a case's cassette reach the agent through the real
openai client and the bundled OpenAI-compatible server on 127.0.0.1 (`replay.served`) instead
of being parsed above the SDK. `quirks` make that server behave like a particular real one
(`llama_cpp`, or any single quirk of `agentbench.testing.QUIRKS`); `faults` script what goes
wrong on the way — an HTTP error (with a `Retry-After`), or a stream broken after so many
chunks — by model call, by the model asked, and for how many attempts. A suite's `serve:`
applies to every case; a case's adds its own quirks and faults after the suite's, and a case's
`serve: false` replays that case above the SDK.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    field_validator,
    model_validator,
)

from agentbench.testing.server import QUIRKS, CutStream, HTTPFault, resolve_quirks


class Fault(BaseModel):
    """One scripted failure between the client and the served cassette."""

    model_config = ConfigDict(extra="forbid")

    call: int | None = Field(
        None,
        ge=1,
        description="The model call it hits, 1 the first (every turn and run counted, as "
        "drift numbers them); default: every call.",
    )
    model: str | None = Field(
        None,
        description="Only requests for this model name (a FallbackModel's primary); "
        "default: any model.",
    )
    times: int | Literal["all"] = Field(
        1,
        description="How many attempts of each call it hits (the client's retries are "
        "attempts): a number, or all.",
    )
    status: int | None = Field(
        None, ge=400, le=599, description="Answer with this HTTP error status."
    )
    retry_after: float | None = Field(
        None, ge=0, description="With status: a Retry-After header, in seconds."
    )
    cut_after: int | None = Field(
        None,
        ge=0,
        description="Stream this many chunks of the answer, then break the connection.",
    )
    message: str = Field("injected fault", description="The error's message, with status.")

    @field_validator("times")
    @classmethod
    def _positive(cls, value: int | str) -> int | str:
        if isinstance(value, int) and value < 1:
            raise ValueError("expected a number of attempts of at least 1, or 'all'")
        return value

    @model_validator(mode="after")
    def _one_kind(self) -> Fault:
        if (self.status is None) == (self.cut_after is None):
            raise ValueError("give status (an HTTP error) or cut_after (a broken stream)")
        if self.retry_after is not None and self.status is None:
            raise ValueError("retry_after goes with status")
        return self

    def describe(self) -> str:
        """The fault as it would be written: `{call: 2, status: 503}`."""
        given = self.model_dump(exclude_defaults=True)
        return "{" + ", ".join(f"{key}: {value}" for key, value in given.items()) + "}"

    def hits(self, call: int, model: Any) -> bool:
        """Whether this fault is about model call `call` (1-based) asked of `model`."""
        return self.call in (None, call) and self.model in (None, model)

    def answer(self, reply: Any) -> HTTPFault | CutStream:
        """What the server sends instead of `reply`."""
        if self.status is not None:
            headers = {} if self.retry_after is None else {"retry-after": f"{self.retry_after:g}"}
            return HTTPFault(self.status, self.message, headers)
        # Chunked, so the client sees a broken connection rather than a short, clean stream.
        return CutStream(after_chunks=self.cut_after, chunked=True, reply=reply)


def _quirk(name: str) -> str:
    try:
        resolve_quirks([name])
    except ValueError:
        raise ValueError(
            f"unknown quirk {name!r}; expected one of {', '.join(sorted(QUIRKS))}"
        ) from None
    return name


def _switch(value: Any) -> Any:
    """`serve: true` is `serve: {}`; `serve: false` stays false: no serving, even where the
    suite serves."""
    return {} if value is True else value


class Serve(BaseModel):
    """`serve:` of a suite or a case: the cassette served over HTTP, with quirks and faults."""

    model_config = ConfigDict(extra="forbid")

    quirks: list[Annotated[str, BeforeValidator(_quirk)]] = Field(
        default_factory=list,
        description="Behave like a real server: llama_cpp, or one quirk "
        f"({', '.join(sorted(q for q in QUIRKS if q != 'llama_cpp'))}).",
    )
    faults: list[Fault] = Field(
        default_factory=list,
        description="What goes wrong on the way: [{call, model, times, status, retry_after, "
        "cut_after}].",
    )


# True never gets past `_switch`; False is kept, so a case can turn its suite's serving off.
ServeKey = Annotated[StrictBool | Serve | None, BeforeValidator(_switch)]


@dataclass(frozen=True)
class Served:
    """The serving one case gets: its suite's quirks and faults, then its own."""

    quirks: tuple[str, ...]
    faults: tuple[Fault, ...]
    # Where each fault was written ("the case's serve.faults[0]"), for errors about it.
    where: tuple[str, ...] = ()

    @classmethod
    def of(cls, suite: Serve | bool | None, case: Serve | bool | None = None) -> Served | None:
        """The serving a case gets from its suite's `serve:` and its own, or None: neither is
        set, or the case's is `false`."""
        if case is False or (case is None and not isinstance(suite, Serve)):
            return None
        chosen: Sequence[tuple[str, Serve]] = [
            (whose, key)
            for whose, key in (("suite", suite), ("case", case))
            if isinstance(key, Serve)
        ]
        quirks = tuple(dict.fromkeys(q for _, key in chosen for q in key.quirks))
        faults = tuple(f for _, key in chosen for f in key.faults)
        where = tuple(
            f"the {whose}'s serve.faults[{number}]"
            for whose, key in chosen
            for number in range(len(key.faults))
        )
        return cls(quirks, faults, where)

    def about(self, number: int) -> str:
        """Fault `number` (0-based), named by where it was written and as it was written."""
        where = self.where[number] if number < len(self.where) else f"serve.faults[{number}]"
        return f"{where} {self.faults[number].describe()}"
