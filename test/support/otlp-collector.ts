/**
 * An OTLP/HTTP collector on 127.0.0.1 for the tests that turn OpenTelemetry
 * on: it keeps every export as sent (its path, content type and body), and
 * reads the spans and metric names of the `http/json` ones.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Export {
  path: string;
  contentType: string;
  body: Buffer;
}

export interface JsonSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  attributes: Array<{ key: string; value: { stringValue?: string; intValue?: string | number } }>;
}

/** An OTLP/HTTP collector: keeps every export, answers 200 with an empty (partial-success-free) answer. */
export class Collector {
  readonly exports: Export[] = [];
  private server?: Server;

  get url(): string {
    return `http://127.0.0.1:${((this.server as Server).address() as AddressInfo).port}`;
  }

  async start(): Promise<this> {
    this.server = createServer((request, response) => {
      const chunks: Buffer[] = [];
      request.on('data', (chunk) => chunks.push(chunk));
      request.on('end', () => {
        const contentType = request.headers['content-type'] ?? '';
        this.exports.push({ path: request.url ?? '', contentType, body: Buffer.concat(chunks) });
        response.writeHead(200, { 'content-type': contentType });
        response.end(contentType.includes('json') ? '{}' : '');
      });
    });
    await new Promise<void>((done) => this.server?.listen(0, '127.0.0.1', done));
    return this;
  }

  stop(): Promise<void> {
    return new Promise((done) => (this.server ? this.server.close(() => done()) : done()));
  }

  spans(): JsonSpan[] {
    return this.exports
      .filter((one) => one.path === '/v1/traces' && one.contentType.includes('json'))
      .flatMap((one) => JSON.parse(one.body.toString()).resourceSpans)
      .flatMap((resource: { scopeSpans: Array<{ spans: JsonSpan[] }> }) => resource.scopeSpans.flatMap((scope) => scope.spans));
  }

  metricNames(): Set<string> {
    const names = this.exports
      .filter((one) => one.path === '/v1/metrics' && one.contentType.includes('json'))
      .flatMap((one) => JSON.parse(one.body.toString()).resourceMetrics)
      .flatMap((resource: { scopeMetrics: Array<{ metrics: Array<{ name: string }> }> }) =>
        resource.scopeMetrics.flatMap((scope) => scope.metrics.map((metric) => metric.name)),
      );
    return new Set(names);
  }
}
