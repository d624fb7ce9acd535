"""What a client is shown of a served run: its events, text, answer and error, redacted.

Every answer passes the rules the store records with (the server's keys and the secrets in its
own environment included), through one redactor per run that sees the run's events in the
order they happened, so what it learns from one event it applies to every later one and to
the answer. Once the run has finished, the events it met before it learned its last secret (a
password in the input, named secret by a later tool call) are redacted again, as the store
masks its rows again at the run's end: whoever reads the events after that is sent them so.
(A subscriber streaming them live has been sent the earlier ones already.)

Text that streams arrives a few characters at a time, so a secret is spread over several
pieces and no rule matches any one of them: streamed text is released a word at a time, each
line redacted whole so far, holding back the word still being written (a secret holds no
whitespace), and the rest of a line when its redaction would change what was sent.

Text is also made well-formed Unicode: a lone surrogate (half an emoji, from a tool or a
model) becomes U+FFFD, since JSON answers must be UTF-8.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from agentbench.trace.redaction.redactor import Redactor

LONE_SURROGATE = re.compile("[\ud800-\udfff]")
_LAST_SPACE = re.compile(r"\s(?=\S*\Z)")


def well_formed(value: Any) -> Any:
    """`value` with every lone surrogate in its strings (keys too) replaced by U+FFFD."""
    if isinstance(value, str):
        return LONE_SURROGATE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {well_formed(k): well_formed(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [well_formed(v) for v in value]
    return value


def dumps(value: Any) -> bytes:
    """`value` as JSON bytes, lone surrogates replaced (orjson refuses them)."""
    try:
        encoded = orjson.dumps(value)
    except TypeError:
        encoded = orjson.dumps(well_formed(value))
    # Copied to its own size: orjson's result holds a buffer of at least 4 KB.
    return memoryview(encoded).tobytes()


class StreamedText:
    """One stream's text, released redacted as it comes (see the module's docstring)."""

    def __init__(self, redactor: Redactor) -> None:
        self._redactor = redactor
        self._line = ""  # the line being written
        self._sent = ""  # what was released of it, redacted

    def add(self, piece: str) -> str:
        """The text that may be sent now that `piece` arrived (possibly empty)."""
        self._line += piece
        released: list[str] = []
        while "\n" in self._line:
            whole, _, self._line = self._line.partition("\n")
            released.append(self._rest(whole + "\n"))
        if self._line:
            redacted = self._shown(self._line)
            space = _LAST_SPACE.search(redacted)
            done = redacted[: space.end()] if space is not None else ""
            if len(done) > len(self._sent) and done.startswith(self._sent):
                released.append(done[len(self._sent) :])
                self._sent = done
        return "".join(released)

    def end(self) -> str:
        """The rest, once no more text follows."""
        rest = self._rest(self._line) if self._line else ""
        self._line = ""
        return rest

    def _rest(self, line: str) -> str:
        """The rest of a whole line. Any part of its redaction is safe to send, so when a mask
        reached into what was sent, what follows it still is."""
        redacted = self._shown(line)
        rest = redacted[len(self._sent) :]
        self._sent = ""
        return rest

    def _shown(self, text: str) -> str:
        return well_formed(self._redactor.text(text))


class RunRedaction:
    """A served run's events as clients see them, redacted once each, in order."""

    def __init__(self, redactor: Redactor) -> None:
        self.redactor = redactor
        self._frames: list[bytes] = []  # each event as redacted JSON
        self._learned_at: list[int] = []  # how many secrets the redactor knew for each
        self._texts: dict[int, str] = {}  # the text released by each text_delta, by index
        self._streams: dict[str, StreamedText] = {}  # by run id (a handoff's run streams too)

    @staticmethod
    def ready(events: list[Any], done: bool) -> int:
        """How many events can be shown: all, but a last text delta while more may follow
        (whether it ends its stream decides what it releases)."""
        count = len(events)
        if count and not done and events[-1].kind == "text_delta":
            count -= 1
        return count

    def frame(self, events: list[Any], index: int) -> bytes:
        """Event `index` as redacted JSON (what `GET /v1/runs/{id}/events` sends)."""
        self._advance(events, index + 1)
        return self._frames[index]

    def text(self, events: list[Any], index: int) -> str:
        """What the text delta at `index` releases of the answer's text."""
        self._advance(events, index + 1)
        return self._texts.get(index, "")

    def shown(self, value: Any) -> Any:
        """A value of the run (its output, its error) as a client sees it."""
        return well_formed(self.redactor.value(value))

    def settle(self, events: list[Any]) -> None:
        """Every event through the redactor, before the run's answer is shown; then each
        one redacted before the redactor learned all it knows now, redacted again with it."""
        self._advance(events, len(events))
        learned = len(self.redactor.learned)
        for index, known in enumerate(self._learned_at):
            if known < learned:
                self._frames[index] = self._again(self._frames[index])
                self._learned_at[index] = learned

    def _again(self, frame: bytes) -> bytes:
        if self.redactor.clean(frame):
            return frame
        return dumps(self.redactor.value(orjson.loads(frame)))

    def _advance(self, events: list[Any], upto: int) -> None:
        while len(self._frames) < upto:
            index = len(self._frames)
            event = events[index]
            if event.kind == "text_delta":
                data = event.model_dump(mode="json")
                stream = self._streams.setdefault(event.run_id, StreamedText(self.redactor))
                text = stream.add(event.text)
                following = events[index + 1] if index + 1 < len(events) else None
                if (
                    following is None
                    or following.kind != "text_delta"
                    or (following.run_id != event.run_id)
                ):
                    text += stream.end()
                # Released redacted already: redacting a piece again on its own could mask
                # what the whole line did not, and the pieces would not add up to the text.
                shown = self.redactor.value({**data, "text": ""})
                shown["text"] = self._texts[index] = text
                self._frames.append(dumps(shown))
            else:
                self._frames.append(self._encoded(event))
            # (After: what an event teaches, its own redaction applies to all of it.)
            self._learned_at.append(len(self.redactor.learned))

    def _encoded(self, event: Any) -> bytes:
        """An event as redacted JSON. Most events hold nothing a rule could match (no secret
        key's name, pattern's literal or known secret in their text): those are sent as they
        are, without being taken apart and redacted value by value; such an event could teach
        the redactor nothing either."""
        try:
            encoded = event.model_dump_json().encode()
        except ValueError:  # a lone surrogate: the slow path replaces it
            return dumps(self.redactor.value(event.model_dump(mode="json")))
        if self.redactor.clean(encoded):
            return encoded
        return dumps(self.redactor.value(orjson.loads(encoded)))
