#!/usr/bin/env node
import { App, Validations } from 'aws-cdk-lib';
import { AwsSolutionsChecks } from 'cdk-nag';
import { RatchetStack } from '../lib/ratchet-stack.ts';

const app = new App();
const concurrency = app.node.tryGetContext('apiReservedConcurrency');
const schemes = app.node.tryGetContext('geminiWebhookSchemes');
if (app.node.tryGetContext('effectsWebhookUrl') !== undefined) {
  // Kept in a secret since, so that a plain redeploy cannot turn the sink off.
  throw new Error('effectsWebhookUrl is no longer a context value: deploy without it, then run npm run connect -- --effects-url <url>');
}
new RatchetStack(app, 'Ratchet', {
  env: { account: process.env.CDK_DEFAULT_ACCOUNT, region: process.env.CDK_DEFAULT_REGION },
  // cdk deploy -c alarmEmail=ops@example.com subscribes an address to the alarms.
  alarmEmail: app.node.tryGetContext('alarmEmail'),
  // cdk deploy -c geminiWebhookAudience=<aud> accepts dynamic-webhook JWTs carrying that audience.
  geminiWebhookAudience: app.node.tryGetContext('geminiWebhookAudience'),
  // cdk deploy -c geminiWebhookSchemes=hmac accepts only those signature schemes (GEMINI_WEBHOOK_SCHEMES).
  ...(schemes !== undefined && {
    geminiWebhookSchemes: String(schemes)
      .split(/[\s,]+/)
      .filter(Boolean) as Array<'hmac' | 'v1a' | 'jwt'>,
  }),
  ...(concurrency !== undefined && { apiReservedConcurrency: Number(concurrency) }),
  // cdk deploy -c keepPreviousOpenIndex=true: the first deploy of this version over a stack with open-by-due (docs/operations.md).
  ...(String(app.node.tryGetContext('keepPreviousOpenIndex')) === 'true' && { keepPreviousOpenIndex: true }),
});
// The AWS Solutions checks run on every synth: an unexplained finding fails it.
Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
