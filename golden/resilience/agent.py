"""A currency desk whose model and rate feed both fail over, for the resilience suite.

The suite is served (`serve: true`): each recorded answer reaches the agent through the real
openai client and the bundled server on 127.0.0.1, so the faults a case scripts — a 503, a 429
with Retry-After, a stream cut mid tool call, llama.cpp's quirks, a primary model that is down —
go through the client's retries, its stream accumulation and the `FallbackModel` below. The
rate tool is a `fallback(...)` of two feeds. The models' address is a placeholder: the harness
points them at the endpoint live and at its own server in replay.
"""

from __future__ import annotations

from agentbench import Agent, BusinessFailure, ModelSettings, OpenAIModel, RetryPolicy, tool
from agentbench.runtime.fallback import FallbackModel, fallback

# Milliseconds between attempts, not the default half second and up: the golden run waits for
# every retry its faults cause, and what is checked is that they happen, not how long they take.
QUICK_RETRIES = RetryPolicy(initial_backoff_s=0.01, max_backoff_s=0.05)
LOCAL = "http://127.0.0.1:8080/v1"
PRIMARY = OpenAIModel("reference-resilience", base_url=LOCAL, retry=QUICK_RETRIES)
BACKUP = OpenAIModel("reference-resilience-backup", base_url=LOCAL, retry=QUICK_RETRIES)

CENTRAL_BANK = {"USD": 1.0842, "GBP": 0.8571, "CHF": 0.9412}
MIRROR = {**CENTRAL_BANK, "JPY": 162.41}
FEED_DOWN = {"JPY"}  # the central bank's yen feed is down today


@tool(effect="read_only", idempotent=True)
def central_bank_rates(currency: str) -> dict:
    """The euro reference rate of a currency, from the central bank's feed.

    Args:
        currency: ISO code, e.g. "USD".
    """
    code = currency.strip().upper()
    if code in FEED_DOWN:
        raise ConnectionError(f"central bank feed: connection reset while fetching {code}")
    if code not in MIRROR:
        raise BusinessFailure(f"unknown currency {code!r}", data={"known": sorted(MIRROR)})
    return {"currency": code, "per_euro": CENTRAL_BANK[code], "source": "central bank"}


@tool(effect="read_only", idempotent=True)
def market_mirror_rates(currency: str) -> dict:
    """The euro rate of a currency, from a market data mirror.

    Args:
        currency: ISO code, e.g. "USD".
    """
    code = currency.strip().upper()
    if code not in MIRROR:
        raise BusinessFailure(f"the mirror has no rate for {code!r}")
    return {"currency": code, "per_euro": MIRROR[code], "source": "market mirror"}


exchange_rate = fallback(central_bank_rates, market_mirror_rates, name="exchange_rate")

rates_desk = Agent(
    name="rates_desk",
    instructions="You quote euro exchange rates. Look every rate up; never guess. Be brief.",
    tools=[exchange_rate],
    model=FallbackModel([PRIMARY, BACKUP]),
    # Streamed, with tool_choice sent: what llama.cpp needs to offer tools at all.
    model_settings=ModelSettings(stream=True, tool_choice="auto"),
)
