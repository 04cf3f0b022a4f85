/**
 * The one logger: structured JSON lines (Powertools), never a secret or a
 * signature. (Metrics go through the telemetry port, app/telemetry.ts.)
 *
 * A provider's error can quote the key it was sent (Gemini behind a proxy
 * that echoes the request, an error page): every string of every line is
 * redacted of the keys this process was given (`neverLogged`, redaction.ts),
 * whatever logged it, so no log site has to remember to.
 */
import { LogFormatter, Logger, LogItem } from '@aws-lambda-powertools/logger';
import type { LogLevel } from '@aws-lambda-powertools/logger/types';
import { redacted } from '../core/redaction.ts';

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

/** Applied by JSON.stringify to every value of a line, nested ones and an error's message and stack included. */
const redactStrings = (_key: string, value: unknown) => (typeof value === 'string' ? redacted(value) : value);

/** `logLevel`: where it is not the process's own POWERTOOLS_LOG_LEVEL (the library's `env`). */
export function createLogger(serviceName = 'ratchet', logLevel?: string): Logger {
  return new Logger({
    serviceName,
    logFormatter: new RatchetLogFormatter(),
    jsonReplacerFn: redactStrings,
    ...(logLevel && { logLevel: logLevel.toUpperCase() as LogLevel }),
  });
}
