import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** One span as an OTLP receiver got it, with the `service.name` of the process that sent it. */
export interface ReceivedSpan {
  service: string;
  traceId: string;
  spanId: string;
  parentSpanId: string;
  name: string;
  kind: number;
  attributes: Record<string, string | number | boolean>;
}

export interface OtlpReceiver {
  /** What `OTEL_EXPORTER_OTLP_ENDPOINT` is set to (the exporters add `/v1/traces`). */
  url: string;
  spans: ReceivedSpan[];
  /** Every body received, as text, to search for canaries (protobuf strings are plain UTF-8 too). */
  text(): string;
  /** Which encodings arrived: `json`, `protobuf`. */
  encodings: Set<string>;
  close(): Promise<void>;
}

/**
 * An OTLP/HTTP trace receiver on loopback: `POST /v1/traces` in `application/json` or
 * `application/x-protobuf`, answered 200 with an empty export response.
 */
export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  const bodies: string[] = [];
  const encodings = new Set<string>();
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      if (req.method !== 'POST' || req.url !== '/v1/traces') {
        res.writeHead(404).end();
        return;
      }
      const body = Buffer.concat(chunks);
      bodies.push(body.toString('utf8'));
      const type = req.headers['content-type'] ?? '';
      try {
        if (type.includes('json')) {
          encodings.add('json');
          spans.push(...fromJson(JSON.parse(body.toString('utf8'))));
        } else {
          encodings.add('protobuf');
          spans.push(...fromProtobuf(body));
        }
      } catch (error) {
        res.writeHead(400).end(String(error));
        return;
      }
      res.writeHead(200, { 'content-type': type.includes('json') ? 'application/json' : 'application/x-protobuf' }).end(type.includes('json') ? '{}' : '');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    spans,
    encodings,
    text: () => bodies.join('\n'),
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

type AnyValue = { stringValue?: string; intValue?: number | string; boolValue?: boolean; doubleValue?: number };

function valueOf(value: AnyValue | undefined): string | number | boolean {
  if (value?.stringValue !== undefined) return value.stringValue;
  if (value?.intValue !== undefined) return Number(value.intValue);
  if (value?.boolValue !== undefined) return value.boolValue;
  return value?.doubleValue ?? '';
}

/** OTLP/JSON ids are hex; tolerate base64 from an exporter that sends the protobuf mapping. */
function idOf(value: string | undefined): string {
  if (!value) return '';
  return /^[0-9a-f]+$/i.test(value) ? value.toLowerCase() : Buffer.from(value, 'base64').toString('hex');
}

function fromJson(request: any): ReceivedSpan[] {
  const out: ReceivedSpan[] = [];
  for (const resourceSpans of request.resourceSpans ?? []) {
    const service = String(valueOf(resourceSpans.resource?.attributes?.find((kv: any) => kv.key === 'service.name')?.value));
    for (const scopeSpans of resourceSpans.scopeSpans ?? []) {
      for (const span of scopeSpans.spans ?? []) {
        out.push({
          service,
          traceId: idOf(span.traceId),
          spanId: idOf(span.spanId),
          parentSpanId: idOf(span.parentSpanId),
          name: span.name,
          kind: span.kind,
          attributes: Object.fromEntries((span.attributes ?? []).map((kv: any) => [kv.key, valueOf(kv.value)])),
        });
      }
    }
  }
  return out;
}

/** The protobuf wire format, as far as ExportTraceServiceRequest needs: field number, wire type, value. */
function* fields(bytes: Uint8Array): Generator<{ field: number; wire: number; value: Uint8Array | bigint }> {
  let pos = 0;
  const varint = (): bigint => {
    let result = 0n;
    let shift = 0n;
    for (;;) {
      const byte = bytes[pos++]!;
      result |= BigInt(byte & 0x7f) << shift;
      if ((byte & 0x80) === 0) return result;
      shift += 7n;
    }
  };
  while (pos < bytes.length) {
    const tag = Number(varint());
    const field = tag >>> 3;
    const wire = tag & 7;
    if (wire === 0) yield { field, wire, value: varint() };
    else if (wire === 1) {
      yield { field, wire, value: bytes.subarray(pos, pos + 8) };
      pos += 8;
    } else if (wire === 2) {
      const length = Number(varint());
      yield { field, wire, value: bytes.subarray(pos, pos + length) };
      pos += length;
    } else if (wire === 5) {
      yield { field, wire, value: bytes.subarray(pos, pos + 4) };
      pos += 4;
    } else throw new Error(`unsupported wire type ${wire}`);
  }
}

const utf8 = new TextDecoder();
const hex = (value: Uint8Array | bigint) => Buffer.from(value as Uint8Array).toString('hex');

function protoValue(bytes: Uint8Array): string | number | boolean {
  for (const { field, value } of fields(bytes)) {
    if (field === 1) return utf8.decode(value as Uint8Array);
    if (field === 2) return (value as bigint) !== 0n;
    if (field === 3) return Number(value as bigint);
    if (field === 4) return Buffer.from(value as Uint8Array).readDoubleLE(0);
  }
  return '';
}

function protoAttribute(bytes: Uint8Array): [string, string | number | boolean] {
  let key = '';
  let value: string | number | boolean = '';
  for (const item of fields(bytes)) {
    if (item.field === 1) key = utf8.decode(item.value as Uint8Array);
    if (item.field === 2) value = protoValue(item.value as Uint8Array);
  }
  return [key, value];
}

function fromProtobuf(body: Uint8Array): ReceivedSpan[] {
  const out: ReceivedSpan[] = [];
  for (const resourceSpans of fields(body)) {
    if (resourceSpans.field !== 1) continue;
    let service = '';
    const scopes: Uint8Array[] = [];
    for (const part of fields(resourceSpans.value as Uint8Array)) {
      if (part.field === 1) {
        for (const attribute of fields(part.value as Uint8Array)) {
          if (attribute.field !== 1) continue;
          const [key, value] = protoAttribute(attribute.value as Uint8Array);
          if (key === 'service.name') service = String(value);
        }
      } else if (part.field === 2) scopes.push(part.value as Uint8Array);
    }
    for (const scope of scopes) {
      for (const spanField of fields(scope)) {
        if (spanField.field !== 2) continue;
        const span: ReceivedSpan = { service, traceId: '', spanId: '', parentSpanId: '', name: '', kind: 0, attributes: {} };
        for (const item of fields(spanField.value as Uint8Array)) {
          if (item.field === 1) span.traceId = hex(item.value);
          else if (item.field === 2) span.spanId = hex(item.value);
          else if (item.field === 4) span.parentSpanId = hex(item.value);
          else if (item.field === 5) span.name = utf8.decode(item.value as Uint8Array);
          else if (item.field === 6) span.kind = Number(item.value as bigint);
          else if (item.field === 9) {
            const [key, value] = protoAttribute(item.value as Uint8Array);
            span.attributes[key] = value;
          }
        }
        out.push(span);
      }
    }
  }
  return out;
}
