/**
 * Every configuration mistake a newcomer makes is refused by `ratchet start`
 * before it opens, writes or spawns anything: exit 2, one line naming the
 * variable and what it accepts, never a stack trace, never a secret's value,
 * and no data folder left behind.
 */
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { SECRET_VARIABLES } from '../../app/config.ts';
import { PROJECT_ROOT, runToExit } from '../support/ratchet-process.ts';

const root = mkdtempSync(join(tmpdir(), 'ratchet-bad-config-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const SECRET = 'whsec_c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0';
const aFile = join(root, 'not-a-folder');
writeFileSync(aFile, 'x');

/** [what, the bad settings, the variable the line must name first, what it must say]. */
const CASES: Array<[string, Record<string, string>, string, RegExp]> = [
  ['PORT not a number', { PORT: 'notaport' }, 'PORT', /a whole number from 0 to 65535.*not "notaport"/],
  ['PORT out of range', { PORT: '70000' }, 'PORT', /from 0 to 65535/],
  ['a period that is not a number', { RECONCILE_INTERVAL_SECONDS: 'abc' }, 'RECONCILE_INTERVAL_SECONDS', /a number of seconds above 0/],
  [
    'an ftp effects URL',
    { EFFECTS_WEBHOOK_URL: 'ftp://127.0.0.1/hook', EFFECTS_SIGNING_SECRET: SECRET },
    'EFFECTS_WEBHOOK_URL',
    /an http\(s\) URL$/,
  ],
  [
    'an effects URL without its secret',
    { EFFECTS_WEBHOOK_URL: 'http://127.0.0.1:9/hook' },
    'EFFECTS_WEBHOOK_URL',
    /needs EFFECTS_SIGNING_SECRET/,
  ],
  [
    'an effects secret that is not one',
    { EFFECTS_WEBHOOK_URL: 'http://127.0.0.1:9/hook', EFFECTS_SIGNING_SECRET: 'topsecret' },
    'EFFECTS_SIGNING_SECRET',
    /whsec_<base64>/,
  ],
  ['a webhook secret that does not decode', { WEBHOOK_SIGNING_SECRETS: 'whsec_abc' }, 'WEBHOOK_SIGNING_SECRETS', /whsec_<base64>/],
  ['a base URL that is no URL', { GEMINI_BASE_URL: 'localhost:8080' }, 'GEMINI_BASE_URL', /an http\(s\) URL/],
  ['a key set URL on another scheme', { GEMINI_WEBHOOK_KEYS_URL: 'file:///etc/passwd' }, 'GEMINI_WEBHOOK_KEYS_URL', /an http\(s\) URL/],
  ['a public URL on another scheme', { PUBLIC_URL: 'ftp://ratchet.example' }, 'PUBLIC_URL', /http\(s\) URLs/],
  ['no room for requests', { HTTP_MAX_IN_FLIGHT: '0' }, 'HTTP_MAX_IN_FLIGHT', /a whole number above 0/],
  ['too many connections', { EFFECTS_WEBHOOK_CONNECTIONS: '1000' }, 'EFFECTS_WEBHOOK_CONNECTIONS', /from 1 to 256/],
  [
    'a statement timeout in seconds',
    { DATABASE_STATEMENT_TIMEOUT_MS: '5s' },
    'DATABASE_STATEMENT_TIMEOUT_MS',
    /milliseconds from 100 to 3600000/,
  ],
  ['no time to connect', { DATABASE_CONNECT_TIMEOUT_MS: '0' }, 'DATABASE_CONNECT_TIMEOUT_MS', /milliseconds from 100 to 600000.*not "0"/],
  ['an unknown signature scheme', { GEMINI_WEBHOOK_SCHEMES: 'md5' }, 'GEMINI_WEBHOOK_SCHEMES', /hmac, v1a, jwt/],
  ['an API version that is none', { GEMINI_API_VERSION: 'latest' }, 'GEMINI_API_VERSION', /such as v1beta/],
  ['effects retried past the queue', { EFFECTS_RETRY_FOR_SECONDS: '99999999' }, 'EFFECTS_RETRY_FOR_SECONDS', /13 days/],
  ['a token too short', { RATCHET_API_TOKEN: 'short' }, 'RATCHET_API_TOKEN', /at least 16 characters/],
  ['a project without its location', { GOOGLE_CLOUD_PROJECT: 'my-project' }, 'GOOGLE_CLOUD_LOCATION', /must be set too/],
  ['credentials that are not JSON', { AGENT_PLATFORM_CREDENTIALS: '{"type": ' }, 'AGENT_PLATFORM_CREDENTIALS', /credentials JSON object/],
  ['an overdue limit without a unit', { OVERDUE_AFTER: 'batch=26' }, 'OVERDUE_AFTER', /kind=duration pairs .*units s, m, h, d/],
  ['an overdue limit for no kind', { OVERDUE_AFTER: 'eternity=2h' }, 'OVERDUE_AFTER', /kind=duration pairs/],
  ['an overdue limit given twice', { OVERDUE_AFTER: 'batch=26h,batch=2h' }, 'OVERDUE_AFTER', /kind=duration pairs/],
  ['Gemini keys that are not label=key pairs', { GEMINI_API_KEYS: 'AIzaSyNotAPair000' }, 'GEMINI_API_KEYS', /label=key pairs/],
  [
    'several Gemini keys beside one',
    { GEMINI_API_KEYS: 'a=AIzaSyKeyOne0000,b=AIzaSyKeyTwo0000', GEMINI_API_KEY: 'AIzaSyKeyThree000' },
    'GEMINI_API_KEYS',
    /GEMINI_API_KEYS and GEMINI_API_KEY are both set/,
  ],
  ['a data folder that is a file', { DATA_DIR: aFile }, 'DATA_DIR', /must be a folder/],
  ['a reachable host without a token', { HOST: '0.0.0.0', RATCHET_API_TOKEN: '' }, 'HOST=0.0.0.0', /set RATCHET_API_TOKEN/],
  [
    'an OTLP protocol not built in',
    { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318', OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' },
    'OTEL_EXPORTER_OTLP_PROTOCOL',
    /must be http\/protobuf or http\/json/,
  ],
  [
    'a metrics export interval that is no number',
    { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318', OTEL_METRIC_EXPORT_INTERVAL: 'often' },
    'OTEL_METRIC_EXPORT_INTERVAL',
    /whole number of milliseconds/,
  ],
];

describe('ratchet start refuses a bad setting', () => {
  it.each(CASES)('%s: exit 2, one line naming the variable, no stack, nothing created', async (_, settings, variable, says) => {
    const dataDir = join(root, `data-${Math.random().toString(36).slice(2)}`);
    const { code, output } = await runToExit([process.execPath, '--import', 'tsx', join(PROJECT_ROOT, 'local/cli/ratchet.ts'), 'start'], {
      PATH: process.env.PATH ?? '',
      HOME: root,
      PORT: '0',
      DATA_DIR: dataDir,
      POWERTOOLS_LOG_LEVEL: 'ERROR',
      ...settings,
    });
    const lines = output.trim().split('\n');
    expect({ code, lines }).toEqual({ code: 2, lines: [expect.stringMatching(new RegExp(`^ratchet: ${variable}\\b`))] });
    expect(lines[0]).toMatch(says);
    expect(output).not.toMatch(/\n\s+at /);
    // A secret is named, never shown.
    for (const [name, value] of Object.entries(settings))
      if (SECRET_VARIABLES.has(name) && value.length > 3) expect(output).not.toContain(value);
    expect(existsSync(settings.DATA_DIR ?? dataDir) && (settings.DATA_DIR ?? dataDir) !== aFile).toBe(false);
  });

  it('a start that fails on a busy port leaves no data folder behind', async () => {
    const first = join(root, 'busy');
    const holder = await import('node:net').then(
      ({ createServer }) =>
        new Promise<import('node:net').Server>((done) => {
          const server = createServer();
          server.listen(0, '127.0.0.1', () => done(server));
        }),
    );
    try {
      const port = String((holder.address() as import('node:net').AddressInfo).port);
      const { code, output } = await runToExit([process.execPath, '--import', 'tsx', join(PROJECT_ROOT, 'local/cli/ratchet.ts'), 'start'], {
        PATH: process.env.PATH ?? '',
        HOME: root,
        PORT: port,
        DATA_DIR: first,
        POWERTOOLS_LOG_LEVEL: 'ERROR',
      });
      expect({ code, lines: output.trim().split('\n') }).toEqual({ code: 1, lines: [expect.stringMatching(/is in use; set PORT/)] });
      expect(existsSync(first)).toBe(false);
    } finally {
      holder.close();
    }
    expect(readdirSync(root).filter((name) => name.startsWith('data-'))).toEqual([]);
  });
});
