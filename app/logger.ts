/**
 * The one logger and the one metrics emitter: structured JSON lines
 * (Powertools), never a secret or a signature. Metrics are CloudWatch EMF
 * lines in Lambda; the local runtime turns them off unless asked.
 */
import { LogFormatter, Logger, LogItem } from '@aws-lambda-powertools/logger';
import type { LogLevel } from '@aws-lambda-powertools/logger/types';
import { Metrics } from '@aws-lambda-powertools/metrics';

type FormatterInput = Parameters<LogFormatter['formatAttributes']>[0];

/** Powertools' standard keys, without `sampling_rate` when debug sampling is off (it said 0 on every line). */
class RatchetLogFormatter extends LogFormatter {
  formatAttributes(attributes: FormatterInput, additional: Record<string, unknown>): LogItem {
    const context = attributes.lambdaContext;
    return new LogItem({
      attributes: {
        level: attributes.logLevel,
        message: attributes.message,
        timestamp: this.formatTimestamp(attributes.timestamp),
        service: attributes.serviceName,
        cold_start: context?.coldStart,
        function_arn: context?.invokedFunctionArn,
        function_memory_size: context?.memoryLimitInMB,
        function_name: context?.functionName,
        function_request_id: context?.awsRequestId,
        sampling_rate: attributes.sampleRateValue || undefined,
        xray_trace_id: attributes.xRayTraceId,
      },
    }).addAttributes(additional);
  }
}

/** `logLevel`: where it is not the process's own POWERTOOLS_LOG_LEVEL (the library's `env`). */
export function createLogger(serviceName = 'ratchet', logLevel?: string): Logger {
  return new Logger({
    serviceName,
    logFormatter: new RatchetLogFormatter(),
    ...(logLevel && { logLevel: logLevel.toUpperCase() as LogLevel }),
  });
}

export function createMetrics(serviceName = 'ratchet'): Metrics {
  return new Metrics({ namespace: 'Ratchet', serviceName });
}
