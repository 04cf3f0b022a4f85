/**
 * Holds every JSON answer a test receives from Ratchet to the OpenAPI
 * description (docs/openapi.json, generated from the routes' schemas): the
 * route by its path (under any mount path), the status among those the route
 * describes, the body valid against that status's schema. A Ratchet answer
 * the description does not allow is a violation, and so is a 503 without
 * `Retry-After` (the contract: every 503 says when to try again);
 * test/support/openapi-setup.ts fails the test that received it.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import { PROJECT_ROOT } from './ratchet-process.ts';

type Json = Record<string, unknown>;
const DOCUMENT = 'openapi.json';

export const description = JSON.parse(readFileSync(join(PROJECT_ROOT, 'docs', 'openapi.json'), 'utf8')) as {
  paths: Record<string, Record<string, { responses: Record<string, { content?: Record<string, unknown> }> }>>;
};

// The OpenAPI keywords around the schemas (paths, responses, …) are not JSON Schema's: ignored, not refused.
const ajv = new Ajv2020({ strict: false, allErrors: true });
ajv.addSchema(description as Json, DOCUMENT);

const routes = Object.keys(description.paths).map((template) => ({
  template,
  // `{name}` is an operation's name, which holds `/`.
  pattern: new RegExp(`^${template.replace(/\{name\}/g, '(.+)')}$`),
}));

const validators = new Map<string, ValidateFunction>();
function validatorOf(pointer: string): ValidateFunction {
  let validate = validators.get(pointer);
  if (!validate) {
    validate = ajv.compile({ $ref: `${DOCUMENT}#${pointer}` });
    validators.set(pointer, validate);
  }
  return validate;
}
const pointerSegment = (segment: string) => segment.replace(/~/g, '~0').replace(/\//g, '~1');

/** The routes a request path is (after a mount path; never under Gemini's own `/v1…` paths, which the fake Gemini serves). */
export function routesOf(pathname: string): string[] {
  const matches: string[] = [];
  const segments = pathname.split('/');
  for (let at = 1; at < segments.length; at++) {
    const prefix = segments.slice(1, at);
    if (prefix.some((segment) => /^v1/.test(segment))) break;
    const rest = `/${segments.slice(at).join('/')}`;
    for (const route of routes) if (route.pattern.test(rest)) matches.push(route.template);
    if (matches.length > 0) break;
  }
  return matches;
}

/**
 * Why an answer is not one the description allows (undefined when it is, or when it is no Ratchet route's):
 * some route the path matches must describe its status and accept its body; a 503 must carry Retry-After
 * (`headers` left out: not judged).
 */
export function violationOf(method: string, url: string, status: number, body: unknown, headers?: Headers): string | undefined {
  const { pathname } = new URL(url);
  const templates = routesOf(pathname).filter((template) => description.paths[template]?.[method.toLowerCase()]);
  if (templates.length === 0) return undefined;
  if (status === 503 && headers && !headers.has('retry-after'))
    return `${method} ${pathname} answered 503 ${JSON.stringify(body)?.slice(0, 400)} without Retry-After (every 503 carries it)`;
  const why: string[] = [];
  for (const template of templates) {
    const responses = description.paths[template]?.[method.toLowerCase()]?.responses ?? {};
    if (!responses[String(status)]) {
      why.push(`${template}: status ${status} not described (${Object.keys(responses).join(', ')})`);
      continue;
    }
    const pointer = `/paths/${pointerSegment(template)}/${method.toLowerCase()}/responses/${status}/content/${pointerSegment('application/json')}/schema`;
    if (!responses[String(status)]?.content?.['application/json']) {
      why.push(`${template}: ${status} is described without a JSON body`);
      continue;
    }
    const validate = validatorOf(pointer);
    if (validate(body)) return undefined;
    why.push(`${template}: ${ajv.errorsText(validate.errors, { separator: '; ' })}`);
  }
  return `${method} ${pathname} answered ${status} ${JSON.stringify(body).slice(0, 400)}: ${why.join(' | ')}`;
}

/**
 * Why `response`, the answer to `method url`, is not one the description allows (undefined when it is): its body
 * read from a copy, so the caller still reads the answer whole. An answer that is not JSON is judged by its headers.
 */
export async function violationOfAnswer(method: string, url: string, response: Response): Promise<string | undefined> {
  const where = response.url || url;
  if (!/^application\/json/i.test(response.headers.get('content-type') ?? '')) {
    // Not JSON (a page, the metrics, a stream): only its headers to judge, for a 503 carries Retry-After whatever its body.
    const missing = response.status === 503 && !response.headers.has('retry-after') && routesOf(new URL(where).pathname).length > 0;
    return missing
      ? `${method} ${new URL(where).pathname} answered 503 (${response.headers.get('content-type')}) without Retry-After`
      : undefined;
  }
  let text: string;
  try {
    text = await response.clone().text();
  } catch {
    return undefined; // the reader went away (aborted): nothing whole to judge
  }
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    body = text;
  }
  return violationOf(method, where, response.status, body, response.headers);
}
