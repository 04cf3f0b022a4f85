/**
 * `POST /webhooks/openai` and `POST /webhooks/azure-openai`: OpenAI's (and
 * Azure OpenAI's) deliveries in, through the same receiver as Gemini's
 * (app/http/webhook.ts), each with its own secrets and its provider's
 * reading of the body (providers/openai). Standard Webhooks, signed with the
 * endpoint's `whsec_` secret; like `/webhooks/gemini`, open to anyone (its
 * signature is its credential). Without a secret set, a delivery is answered
 * 503 (`not-configured`) and the sender keeps it for later.
 */
import { Hono } from 'hono';
import { eventFromOpenAIWebhook, type OpenAIWebhookEvent } from '../../../providers/openai/events.ts';
import type { OperationQueries } from '../../ports.ts';
import { awsErrors, IN_APP, json } from '../describe.ts';
import { type DeliveryMapper, MAX_WEBHOOK_BODY_BYTES, type receiveWebhook, type WebhookDeps } from '../webhook.ts';
import { limit, type Route, serve } from './common.ts';
import { answerDeliveries, WEBHOOK_HEADERS } from './gemini-webhook.ts';

type Receiver = ReturnType<typeof receiveWebhook>;

export interface ProviderWebhookDeps {
  /** Each provider's receiver (made with its verifier and its `map`); a route not given one is not served. */
  providerWebhooks?: { openai?: Receiver; 'azure-openai'?: Receiver };
  logger: WebhookDeps['logger'];
}

function webhookRoute(path: string, operationId: string, provider: string, secret: string): Route {
  return {
    method: 'post',
    path,
    doc: () => ({
      operationId,
      tags: ['webhook'],
      summary: `${provider}'s webhook deliveries`,
      description: `A Standard Webhooks delivery signed with the endpoint's secret (${secret}): batch, response, video, fine-tuning and eval run events. Every authentic delivery is answered 200, whatever it holds: applied, discarded with the reason, \`unknown-event-type\`, or unprocessable (kept under \`GET /decisions\`). The event names the job only: its outcome comes by the poll that follows. Its signature is its credential.`,
      security: [],
      parameters: Object.entries(WEBHOOK_HEADERS).map(([name, description]) => ({
        name,
        in: 'header',
        required: true,
        description: name === 'webhook-signature' ? 'Space-separated `v1,<base64>` signatures (HMAC-SHA256).' : description,
        schema: { type: 'string' },
      })),
      requestBody: {
        required: true,
        description: `${provider}'s event (\`{id, object: "event", created_at, type, data: {id}}\`), exactly as signed (at most 256 KiB).`,
        content: { 'application/json': { schema: { type: 'object' } } },
      },
      responses: {
        200: { description: 'An authentic delivery, applied or not.', content: json('WebhookAnswer') },
        ...awsErrors(
          'invalid-signature',
          'payload-too-large',
          'rate-limited',
          'not-recorded',
          'not-configured',
          'overloaded',
          'internal',
          ...IN_APP,
        ),
      },
    }),
  };
}

export const OPENAI_WEBHOOK = webhookRoute('/webhooks/openai', 'receiveOpenAIWebhook', 'OpenAI', 'OPENAI_WEBHOOK_SECRET');
export const AZURE_OPENAI_WEBHOOK = webhookRoute(
  '/webhooks/azure-openai',
  'receiveAzureOpenAIWebhook',
  'Azure OpenAI',
  'AZURE_OPENAI_WEBHOOK_SECRET',
);

export function providerWebhookRoutes(deps: ProviderWebhookDeps): Hono {
  const app = new Hono();
  const { openai, 'azure-openai': azure } = deps.providerWebhooks ?? {};
  if (openai) serve(app, OPENAI_WEBHOOK, limit(MAX_WEBHOOK_BODY_BYTES), answerDeliveries(openai, deps.logger));
  if (azure) serve(app, AZURE_OPENAI_WEBHOOK, limit(MAX_WEBHOOK_BODY_BYTES), answerDeliveries(azure, deps.logger));
  return app;
}

/** Eval runs looked through for the one a run's event names (its event carries the run's id alone). */
const EVAL_RUN_PAGES = 10;

/**
 * How OpenAI's deliveries read (`azureResource`: Azure OpenAI's, from that resource). An eval run's event names the
 * run alone, so it applies to the tracked run of that id; one nobody tracked is `ignored` (noted as unmapped).
 */
export function openAIDeliveries(options: { queries?: OperationQueries; azureResource?: string }): DeliveryMapper {
  return async (body) => {
    const mapping = eventFromOpenAIWebhook(body as OpenAIWebhookEvent, options.azureResource);
    const type = String((body as { type?: unknown } | null)?.type ?? '');
    if (!mapping) return { kind: 'ignored', type };
    if (mapping.kind !== 'openai-eval-run') return { kind: 'event', event: mapping.event };
    const name = options.queries && (await trackedEvalRun(options.queries, mapping.runId));
    return name ? { kind: 'event', event: { ...mapping.event, name } } : { kind: 'ignored', type: `${type} (untracked run)` };
  };
}

async function trackedEvalRun(queries: OperationQueries, runId: string): Promise<string | undefined> {
  let cursor: string | undefined;
  for (let page = 0; page < EVAL_RUN_PAGES; page++) {
    const { operations, nextCursor } = await queries.list({ kind: 'openai-eval-run', limit: 100, ...(cursor && { cursor }) });
    const found = operations.find((operation) => operation.name.endsWith(`/runs/${runId}`));
    if (found) return found.name;
    if (!nextCursor) return undefined;
    cursor = nextCursor;
  }
  return undefined;
}
