/**
 * `npm run openapi`: writes the API's OpenAPI description to docs/openapi.json
 * (generated from the routes' schemas: app/http/openapi.ts); `--check` writes
 * nothing and exits 1 when the committed copy differs.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { openApiText } from '../../app/http/openapi.ts';

const USAGE = 'usage: npm run openapi [-- --check]  (writes docs/openapi.json; --check compares instead)';
const FILE = join(import.meta.dirname, '..', '..', 'docs', 'openapi.json');
const args = process.argv.slice(2);

if (args.includes('--help') || args.includes('-h')) {
  console.log(USAGE);
} else if (args.length > 1 || (args.length === 1 && args[0] !== '--check')) {
  console.error(USAGE);
  process.exitCode = 2;
} else if (args[0] === '--check') {
  let committed = '';
  try {
    committed = readFileSync(FILE, 'utf8');
  } catch {
    // absent: differs
  }
  if (committed !== openApiText()) {
    console.error("docs/openapi.json differs from the routes' schemas: run npm run openapi and commit it");
    process.exitCode = 1;
  } else console.log('docs/openapi.json is current');
} else {
  writeFileSync(FILE, openApiText());
  console.log('wrote docs/openapi.json');
}
