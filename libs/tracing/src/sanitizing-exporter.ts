import type { ExportResult } from '@opentelemetry/core';
import type { ReadableSpan, SpanExporter } from '@opentelemetry/sdk-trace';
import { safeAttributes } from './safe-attributes.js';

/**
 * What leaves the process: each span with only its allowed attributes, events without their
 * messages, and a status without its description (an error message may quote a provider's
 * answer). The last gate before export, whatever the instrumentation set on the span.
 */
export function sanitizedSpan(span: ReadableSpan): ReadableSpan {
  const context = span.spanContext();
  return {
    name: span.name,
    kind: span.kind,
    spanContext: () => context,
    ...(span.parentSpanContext === undefined ? {} : { parentSpanContext: span.parentSpanContext }),
    startTime: span.startTime,
    endTime: span.endTime,
    duration: span.duration,
    ended: span.ended,
    status: { code: span.status.code },
    attributes: safeAttributes(span.attributes),
    links: span.links.map((link) => ({ context: link.context })),
    events: span.events.map((event) => ({ name: event.name === 'exception' ? 'exception' : 'event', time: event.time, attributes: safeAttributes(event.attributes) })),
    resource: span.resource,
    instrumentationScope: span.instrumentationScope,
    droppedAttributesCount: span.droppedAttributesCount,
    droppedEventsCount: span.droppedEventsCount,
    droppedLinksCount: span.droppedLinksCount,
  };
}

export class SanitizingExporter implements SpanExporter {
  constructor(private readonly inner: SpanExporter) {}

  export(spans: ReadableSpan[], resultCallback: (result: ExportResult) => void): void {
    this.inner.export(spans.map(sanitizedSpan), resultCallback);
  }

  shutdown(): Promise<void> {
    return this.inner.shutdown();
  }

  forceFlush(): Promise<void> {
    return this.inner.forceFlush?.() ?? Promise.resolve();
  }
}
