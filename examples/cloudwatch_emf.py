"""CloudWatch metrics from s3memory's OpenTelemetry spans, as Lambda functions make them.

A span processor that prints one line of CloudWatch Embedded Metric Format (EMF) per s3memory
call on stdout. In AWS Lambda, stdout goes to CloudWatch Logs, which turns each such line
into metric values: no agent, no ``PutMetricData`` request, nothing on the command's path
but a ``print``. Elsewhere, the CloudWatch agent does the same with a log file.

Metrics per call: ``Latency`` (milliseconds), and over S3 ``Requests``, ``RoundTrips``,
``Retries``, ``BytesSent`` and ``BytesReceived``. Dimensions: ``Operation`` (the s3memory
call: ``view``, ``create``, ``admin.write``...) and ``Outcome`` (``ok``, or the error's
class: ``PathNotFoundError``), so a few dozen metric series whatever the number of users;
never a user, a store id or a path, which would each make a series (and s3memory's spans
carry no path or user anyway).

Use (``pip install -e '.[otel]' opentelemetry-sdk`` in the s3memory checkout)::

    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider

    provider = TracerProvider()
    provider.add_span_processor(EmfSpanProcessor(namespace="MyAgent/Memory"))
    trace.set_tracer_provider(provider)

Run it (``python examples/cloudwatch_emf.py``) to see the lines of a few commands on a
local store (``Latency`` only: a local store makes no requests).
"""

from __future__ import annotations

import json
import sys
from typing import Any, TextIO

from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor

from s3memory import InMemoryStore, S3MemoryError, generate_master_key, open_memory

#: (metric, CloudWatch unit, the span attribute it comes from).
COUNTS = (
    ("Requests", "Count", "s3memory.request.count"),
    ("RoundTrips", "Count", "s3memory.round_trip.count"),
    ("Retries", "Count", "s3memory.retry.count"),
    ("BytesSent", "Bytes", "s3memory.request.body.size"),
    ("BytesReceived", "Bytes", "s3memory.response.body.size"),
)


def emf_record(span: ReadableSpan, namespace: str) -> dict[str, Any] | None:
    """The EMF document of one s3memory span (None for any other span)."""
    scope = span.instrumentation_scope
    attributes = span.attributes or {}
    if scope is None or scope.name != "s3memory" or span.start_time is None or span.end_time is None:
        return None
    record: dict[str, Any] = {
        "Operation": str(attributes.get("s3memory.command", span.name)),
        "Outcome": str(attributes.get("error.type", "ok")),
        "Latency": (span.end_time - span.start_time) / 1e6,
    }
    metrics = [{"Name": "Latency", "Unit": "Milliseconds"}]
    for name, unit, attribute in COUNTS:
        value = attributes.get(attribute)
        if isinstance(value, int):
            record[name] = value
            metrics.append({"Name": name, "Unit": unit})
    record["_aws"] = {
        "Timestamp": span.end_time // 1_000_000,
        "CloudWatchMetrics": [{"Namespace": namespace, "Dimensions": [["Operation", "Outcome"]], "Metrics": metrics}],
    }
    return record


class EmfSpanProcessor(SpanProcessor):
    """Prints an EMF line for each s3memory span as it ends (on the thread that ran the call)."""

    def __init__(self, namespace: str = "s3memory", stream: TextIO | None = None) -> None:
        self.namespace = namespace
        self.stream = stream  # None: sys.stdout at each write (Lambda's log, or a test's capture)

    def on_end(self, span: ReadableSpan) -> None:
        record = emf_record(span, self.namespace)
        if record is not None:
            # One line each: CloudWatch Logs reads a log event as one JSON document.
            print(json.dumps(record, separators=(",", ":")), file=self.stream or sys.stdout, flush=True)


def main() -> None:
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider

    provider = TracerProvider()
    provider.add_span_processor(EmfSpanProcessor(namespace="s3memory/example"))
    trace.set_tracer_provider(provider)
    memory = open_memory(user_id="alice", store=InMemoryStore(), master_key=generate_master_key())
    memory.create("/memories/todo.md", "- write the README\n")
    memory.view("/memories/todo.md")
    try:
        memory.view("/memories/missing.md")
    except S3MemoryError:
        pass  # one line with "Outcome": "PathNotFoundError"
    memory.close()


if __name__ == "__main__":
    main()
