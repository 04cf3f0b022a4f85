/**
 * The one logger and the one metrics emitter: structured JSON lines
 * (Powertools), never a secret or a signature. Metrics are CloudWatch EMF
 * lines in Lambda; the local runtime turns them off unless asked.
 */
import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics } from '@aws-lambda-powertools/metrics';

export function createLogger(serviceName = 'ratchet'): Logger {
  return new Logger({ serviceName });
}

export function createMetrics(serviceName = 'ratchet'): Metrics {
  return new Metrics({ namespace: 'Ratchet', serviceName });
}
