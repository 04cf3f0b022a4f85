import { Logger } from '@aws-lambda-powertools/logger';

/** A real Powertools logger that prints nothing (tests assert on behaviour, not on log lines). */
export const silentLogger = new Logger({ serviceName: 'ratchet-test', logLevel: 'SILENT' });
