/**
 * What watches a deployed Ratchet: one alarm per way it can go wrong, all to
 * one SNS topic (with an e-mail subscription from `-c alarmEmail=…`), and a
 * dashboard with every alarm on it. Thresholds are here, in one table.
 */
import { Duration, Stack } from 'aws-cdk-lib';
import type { HttpApi } from 'aws-cdk-lib/aws-apigatewayv2';
import {
  Alarm,
  AlarmWidget,
  ComparisonOperator,
  Dashboard,
  type IMetric,
  MathExpression,
  Metric,
  TreatMissingData,
} from 'aws-cdk-lib/aws-cloudwatch';
import { SnsAction } from 'aws-cdk-lib/aws-cloudwatch-actions';
import { PolicyStatement, ServicePrincipal } from 'aws-cdk-lib/aws-iam';
import type { IFunction } from 'aws-cdk-lib/aws-lambda';
import { Topic } from 'aws-cdk-lib/aws-sns';
import { EmailSubscription } from 'aws-cdk-lib/aws-sns-subscriptions';
import type { IQueue } from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';
import { UNPROCESSABLE_REASONS } from '../app/ports.ts';
import { METRIC, type WebhookDecision } from '../app/telemetry.ts';

export interface RatchetAlarmsProps {
  api: HttpApi;
  functions: Record<'Api' | 'Effects' | 'Reconcile' | 'PollWorker' | 'History' | 'BedrockEvents', IFunction & { timeout?: Duration }>;
  effectsQueue: IQueue;
  effectsDeadLetterQueue: IQueue;
  /** Poll-queue messages a worker failed five times (their jobs are due again anyway: a worker fails on something else). */
  pollDeadLetterQueue: IQueue;
  pipeFailures: IQueue;
  /** The history stream mapping's on-failure destination. */
  historyFailures: IQueue;
  alarmEmail?: string;
}

const FIVE_MINUTES = Duration.minutes(5);

/** A Ratchet metric (Powertools EMF: namespace Ratchet, dimension service). */
const ratchet = (metricName: string, statistic = 'Sum') =>
  new Metric({ namespace: 'Ratchet', metricName, dimensionsMap: { service: 'ratchet' }, statistic, period: FIVE_MINUTES });

/**
 * Webhook deliveries of one decision and reason, under the one dimension set
 * lambda/telemetry.ts writes them with (service, decision, reason; an empty
 * reason is `none`): CloudWatch matches a metric only by its whole set.
 */
const deliveries = (decision: WebhookDecision, reason: string) =>
  new Metric({
    namespace: 'Ratchet',
    metricName: METRIC.deliveries,
    dimensionsMap: { service: 'ratchet', decision, reason: reason || 'none' },
    statistic: 'Sum',
    period: FIVE_MINUTES,
  });

/** Unprocessable deliveries, whatever their reason (a period with none of one reason counts it 0). */
const unprocessable = new MathExpression({
  expression: UNPROCESSABLE_REASONS.map((_, i) => `FILL(u${i}, 0)`).join(' + '),
  usingMetrics: Object.fromEntries(UNPROCESSABLE_REASONS.map((reason, i) => [`u${i}`, deliveries('unprocessable', reason)])),
  label: 'unprocessable webhook deliveries',
  period: FIVE_MINUTES,
});

export class RatchetAlarms extends Construct {
  readonly topic: Topic;
  readonly alarms: Alarm[] = [];

  constructor(scope: Construct, id: string, props: RatchetAlarmsProps) {
    super(scope, id);
    this.topic = new Topic(this, 'Topic', { displayName: 'Ratchet alarms', enforceSSL: true });
    // A topic policy replaces SNS's default one, which let this account's alarms publish: without this
    // statement (the SSL deny alone) every alarm action would fail with "no resource-based policy allows".
    const { account, region } = Stack.of(this);
    this.topic.addToResourcePolicy(
      new PolicyStatement({
        sid: 'AllowThisAccountsAlarmsToPublish',
        principals: [new ServicePrincipal('cloudwatch.amazonaws.com')],
        actions: ['sns:Publish'],
        resources: [this.topic.topicArn],
        conditions: {
          ArnLike: { 'aws:SourceArn': `arn:${Stack.of(this).partition}:cloudwatch:${region}:${account}:alarm:*` },
          StringEquals: { 'aws:SourceAccount': account },
        },
      }),
    );
    if (props.alarmEmail) this.topic.addSubscription(new EmailSubscription(props.alarmEmail));

    const alarm = (name: string, metric: IMetric, threshold: number, what: string) => {
      const created = new Alarm(this, name, {
        alarmName: `${Stack.of(this).stackName}-${name}`,
        alarmDescription: what,
        metric,
        threshold,
        evaluationPeriods: 1,
        comparisonOperator: ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        treatMissingData: TreatMissingData.NOT_BREACHING,
      });
      created.addAlarmAction(new SnsAction(this.topic));
      this.alarms.push(created);
    };

    alarm(
      'Api5xx',
      props.api.metricServerError({ period: FIVE_MINUTES, statistic: 'Sum' }),
      5,
      'The HTTP API answered 5xx: webhooks are not being recorded.',
    );
    alarm(
      'ApiLatency',
      props.api.metricLatency({ period: FIVE_MINUTES, statistic: 'p99' }),
      3_000,
      'p99 latency ≥ 3 s: Gemini may time out deliveries.',
    );
    for (const [name, fn] of Object.entries(props.functions)) {
      alarm(`${name}Errors`, fn.metricErrors({ period: FIVE_MINUTES }), 1, `The ${name} function failed an invocation.`);
      alarm(`${name}Throttles`, fn.metricThrottles({ period: FIVE_MINUTES }), 1, `The ${name} function was throttled.`);
      const timeoutMs = (fn.timeout ?? Duration.seconds(10)).toMilliseconds();
      alarm(
        `${name}Duration`,
        fn.metricDuration({ period: FIVE_MINUTES, statistic: 'p99' }),
        timeoutMs * 0.8,
        `The ${name} function's p99 duration is near its timeout.`,
      );
    }
    alarm(
      'EffectsBacklogAge',
      props.effectsQueue.metricApproximateAgeOfOldestMessage({ period: FIVE_MINUTES, statistic: 'Maximum' }),
      3_600,
      'An effect has waited an hour: a receiver is failing (see the effects logs).',
    );
    alarm(
      'EffectsBacklogDepth',
      props.effectsQueue.metricApproximateNumberOfMessagesVisible({ period: FIVE_MINUTES, statistic: 'Maximum' }),
      1_000,
      'More than 1,000 effects are waiting.',
    );
    const redrive = 'npx ratchet-aws redrive --stack <name>';
    for (const [name, queue, todo] of [
      ['EffectsQueueDeadLetters', props.effectsDeadLetterQueue, redrive],
      ['EffectsPipeFailures', props.pipeFailures, redrive],
      // Stream positions of history entries not written (the records themselves are in the table; history has a gap there).
      [
        'PollQueueDeadLetters',
        props.pollDeadLetterQueue,
        'poll workers failed these messages five times: see the PollWorker logs; their jobs stay due and are handed out again',
      ],
      [
        'HistoryFailures',
        props.historyFailures,
        'history writes failed: see the HistoryWriter logs; the operations themselves are unaffected',
      ],
    ] as const) {
      alarm(
        name,
        queue.metricApproximateNumberOfMessagesVisible({ period: FIVE_MINUTES, statistic: 'Maximum' }),
        1,
        `${name} holds messages: ${todo}.`,
      );
    }
    alarm(
      'EffectsDeadLettered',
      ratchet('EffectDeadLettered'),
      1,
      'An effect was dead-lettered: npx ratchet-aws redrive --stack <name> --list.',
    );
    alarm('EffectsUndecodable', ratchet('EffectUndecodable'), 1, 'A stream record could not be decoded (dead-lettered raw).');
    alarm(
      'WebhookNotRecorded',
      deliveries('not-recorded', 'not-recorded'),
      1,
      'A webhook was answered 503 (store unavailable): Gemini retries it.',
    );
    alarm(
      'WebhookNotConfigured',
      deliveries('not-configured', 'not-configured'),
      1,
      'Webhooks arrive but no signing secret is set: run npm run connect.',
    );
    alarm(
      'WebhookKeysUnavailable',
      deliveries('not-configured', 'keys-unavailable'),
      1,
      'Dynamic-webhook deliveries answered 503: the key set at GEMINI_WEBHOOK_KEYS_URL could not be fetched.',
    );
    alarm(
      'GeminiWebhookDisabled',
      ratchet('ReconcileWebhooksDisabled', 'Maximum'),
      1,
      'Gemini disabled a webhook pointing here after failed deliveries: fix the cause, then run npm run connect.',
    );
    alarm(
      'GeminiKeyRefused',
      ratchet('RefusedGeminiKeys', 'Maximum'),
      1,
      'Gemini refuses one of the API keys (401 or 403): its jobs are not polled. The reconcile log names the label; replace the key in the GeminiApiKey secret.',
    );
    alarm(
      'ProviderKeyRefused',
      ratchet('RefusedProviderKeys', 'Maximum'),
      1,
      'OpenAI, Anthropic or Azure OpenAI refuses one of the API keys (401 or 403): its jobs are not polled. The reconcile log names the provider and the label; replace the key in the secret the construct names.',
    );
    alarm(
      'WebhookUnprocessable',
      unprocessable,
      1,
      'An authentic webhook could never be used (answered 200, kept): GET /decisions?outcome=unprocessable says why.',
    );
    alarm(
      'JobsNotFound',
      ratchet('ReconcileNotFoundStopped'),
      1,
      'Gemini no longer knows a job Ratchet was polling (404 three times): polling stopped, its state left as it was.',
    );
    alarm(
      'TerminalConflicts',
      deliveries('discarded', 'terminal-conflict'),
      1,
      'Gemini reported two different terminal states for one operation.',
    );
    alarm('ReconcileFailures', ratchet('ReconcileFailed'), 10, 'Polls of Gemini are failing (429, 5xx, timeouts).');
    alarm(
      'StuckOperations',
      ratchet('ReconcileOldestOpenAgeSeconds', 'Maximum'),
      48 * 3600,
      'An operation has been open for 48 hours (a Gemini batch expires after 48 h).',
    );

    const dashboard = new Dashboard(this, 'Dashboard', { dashboardName: Stack.of(this).stackName });
    for (let i = 0; i < this.alarms.length; i += 4) {
      dashboard.addWidgets(...this.alarms.slice(i, i + 4).map((a) => new AlarmWidget({ alarm: a, title: a.node.id, width: 6 })));
    }
  }
}
