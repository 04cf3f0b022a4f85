/** The one logger: structured JSON lines (Powertools), never a secret or a signature. */
import { Logger } from '@aws-lambda-powertools/logger';

export function createLogger(serviceName = 'ratchet'): Logger {
  return new Logger({ serviceName });
}
