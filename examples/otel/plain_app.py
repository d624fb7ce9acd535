"""A plain openai-SDK program — no agentbench in it — traced by an OpenTelemetry instrumentation.

    python examples/otel/plain_app.py --base-url URL --otlp ENDPOINT [--instrumentation
        openai-v2|openai-v2-events|openinference] [--city Paris] [--no-content]

It answers a weather question with one tool, the way programs are written without a
framework: call the model, run the tools it asks for, send the results back, until it answers.
The instrumentation (`opentelemetry-instrumentation-openai-v2`, with message content on — as
span attributes on the latest conventions, or as v1.30 log events — or OpenInference's
`openinference-instrumentation-openai`) sends its spans over OTLP/HTTP to ENDPOINT, as it
would to a production collector. `agentbench traces import-otel` reads what the collector
wrote; `ask` is the program as a golden suite's agent (`agentbench promote RUN --suite DIR
--agent examples/otel/plain_app.py:ask`), and `examples/otel/weather_agent.py` the same
program written as an agentbench agent.
"""

from __future__ import annotations

import argparse
import json
import os

SYSTEM = "You answer weather questions. Use get_weather; never guess."
CELSIUS = {"paris": 21.0, "oslo": 4.5, "cairo": 33.0}
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current temperature of a city, in Celsius.",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
    }
]


def get_weather(city: str) -> dict[str, object]:
    return {"city": city, "celsius": CELSIUS.get(city.lower())}


def instrument(name: str, endpoint: str, content: bool = True) -> tuple[object, object | None]:
    """Set up the OTel SDK with OTLP/HTTP exporters and the chosen instrumentation."""
    if not content:  # the instrumentations' default: no prompts or answers on the spans
        pass
    elif name == "openai-v2":  # the latest conventions: content as span attributes
        os.environ["OTEL_SEMCONV_STABILITY_OPT_IN"] = "gen_ai_latest_experimental"
        os.environ["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] = "span_only"
    elif name == "openai-v2-events":  # v1.30 conventions: content as log events
        os.environ["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] = "true"
    from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    resource = Resource.create({"service.name": "weather-app", "service.version": "1.4.0"})
    tracer_provider = TracerProvider(resource=resource)
    tracer_provider.add_span_processor(
        BatchSpanProcessor(OTLPSpanExporter(endpoint=f"{endpoint}/v1/traces"))
    )
    logger_provider = None
    if name == "openinference":
        from openinference.instrumentation.openai import OpenAIInstrumentor

        OpenAIInstrumentor().instrument(tracer_provider=tracer_provider)
    else:
        from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor

        logger_provider = LoggerProvider(resource=resource)
        logger_provider.add_log_record_processor(
            BatchLogRecordProcessor(OTLPLogExporter(endpoint=f"{endpoint}/v1/logs"))
        )
        OpenAIInstrumentor().instrument(
            tracer_provider=tracer_provider, logger_provider=logger_provider
        )
    return tracer_provider, logger_provider


def answer(client: object, model: str, question: str) -> str:
    messages: list[dict[str, object]] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": question},
    ]
    for _ in range(5):
        reply = client.chat.completions.create(  # type: ignore[attr-defined]
            model=model, messages=messages, tools=TOOLS, temperature=0
        )
        message = reply.choices[0].message
        if not message.tool_calls:
            return message.content or ""
        messages.append(message.model_dump(exclude_none=True))
        for call in message.tool_calls:
            result = get_weather(**json.loads(call.function.arguments))
            messages.append(
                {"role": "tool", "tool_call_id": call.id, "content": json.dumps(result)}
            )
    return "I could not find out."


def ask(question: str, target: object) -> str:
    """The program's answer with its client pointed where a golden suite says (`target`: an
    `agentbench.TargetContext`, with the loopback server's base URL): the production code
    itself replays its recorded sessions."""
    from openai import OpenAI

    client = OpenAI(base_url=target.base_url, api_key=target.api_key)  # type: ignore[attr-defined]
    return answer(client, target.model, question)  # type: ignore[attr-defined]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--otlp", required=True, help="OTLP/HTTP endpoint (no /v1/traces)")
    parser.add_argument(
        "--instrumentation",
        choices=["openai-v2", "openai-v2-events", "openinference"],
        default="openai-v2",
    )
    parser.add_argument("--model", default="gpt-4o-mini")
    parser.add_argument("--city", default="Paris")
    parser.add_argument(
        "--no-content", action="store_true", help="leave message content capture off (default)"
    )
    args = parser.parse_args()
    tracer_provider, logger_provider = instrument(
        args.instrumentation, args.otlp, content=not args.no_content
    )
    from openai import OpenAI

    client = OpenAI(base_url=args.base_url, api_key=os.environ.get("OPENAI_API_KEY", "sk-local"))
    print(answer(client, args.model, f"How warm is it in {args.city}?"))
    tracer_provider.shutdown()  # type: ignore[attr-defined]  # flushes the batch to the collector
    if logger_provider is not None:
        logger_provider.shutdown()  # type: ignore[attr-defined]


if __name__ == "__main__":
    main()
