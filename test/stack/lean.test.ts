/**
 * Lean by default, every setting a prop (lib/ratchet.ts): X-Ray as built
 * (Lambda's own sampling on the webhook's function; all or none by the prop),
 * the EventBridge sink on only when the app asks for Ratchet's events, and
 * memory and log levels per function. Checked on the synthesized template.
 */
import { App, Stack } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { SqsQueue } from 'aws-cdk-lib/aws-events-targets';
import { Queue } from 'aws-cdk-lib/aws-sqs';
import { describe, expect, it } from 'vitest';
import { DEFAULT_MEMORY_MB, Ratchet, type RatchetProps } from '../../lib/ratchet.ts';

const FUNCTIONS = {
  Api: 'api',
  Effects: 'effects',
  HistoryWriter: 'history',
  Reconcile: 'reconcile',
  PollWorker: 'pollWorker',
  BedrockEvents: 'bedrockEvents',
} as const;

function synth(props: RatchetProps = {}, app?: (ratchet: Ratchet, stack: Stack) => void) {
  const cdk = new App({ context: { 'aws:cdk:bundling-stacks': [] } });
  const stack = new Stack(cdk, 'App', { env: { account: '123456789012', region: 'us-east-1' } });
  const ratchet = new Ratchet(stack, 'Ratchet', props);
  app?.(ratchet, stack);
  const template = Template.fromStack(stack);
  const fn = (prefix: keyof typeof FUNCTIONS) => {
    const [, resource] = Object.entries(template.findResources('AWS::Lambda::Function')).find(([id]) =>
      id.startsWith(`Ratchet${prefix}`),
    ) as [string, { Properties: unknown }];
    return resource.Properties as {
      MemorySize: number;
      TracingConfig?: { Mode: string };
      LoggingConfig: { LogFormat: string; ApplicationLogLevel?: string; SystemLogLevel?: string };
      Environment: { Variables: Record<string, unknown> };
    };
  };
  const actionsOf = (rolePrefix: string) =>
    Object.values(template.findResources('AWS::IAM::Policy'))
      .filter((p) => p.Properties.Roles.some((r: { Ref: string }) => r.Ref.startsWith(rolePrefix)))
      .flatMap((p) => p.Properties.PolicyDocument.Statement)
      .flatMap((st: { Action: string | string[] }) => [st.Action].flat());
  return { template, fn, actionsOf };
}

const tracingOf = (built: ReturnType<typeof synth>) =>
  Object.fromEntries(
    // No TracingConfig is Lambda's PassThrough: nothing recorded unless a caller sampled it (none of Ratchet's does).
    Object.keys(FUNCTIONS).map((name) => [name, built.fn(name as keyof typeof FUNCTIONS).TracingConfig?.Mode ?? 'PassThrough']),
  );

describe('lean by default, every setting a prop', () => {
  it("traces the webhook's function only, at Lambda's own sampling (no sampling rule: Lambda does not read one); all or none by the prop", {
    timeout: 30_000,
  }, () => {
    const lean = synth();
    expect(tracingOf(lean)).toEqual({
      Api: 'Active',
      Effects: 'PassThrough',
      HistoryWriter: 'PassThrough',
      Reconcile: 'PassThrough',
      PollWorker: 'PassThrough',
      BedrockEvents: 'PassThrough',
    });
    expect(Object.keys(lean.template.findResources('AWS::XRay::SamplingRule'))).toEqual([]);
    // X-Ray's permissions only where it traces.
    expect(lean.actionsOf('RatchetApiRole')).toContain('xray:PutTraceSegments');
    expect(lean.actionsOf('RatchetEffectsRole')).not.toContain('xray:PutTraceSegments');
    expect(new Set(Object.values(tracingOf(synth({ tracing: 'all' }))))).toEqual(new Set(['Active']));
    expect(new Set(Object.values(tracingOf(synth({ tracing: 'off' }))))).toEqual(new Set(['PassThrough']));
  });

  it('puts effects on the bus only when the app adds a rule or asks for the sink: the variable and PutEvents come together', {
    timeout: 30_000,
  }, () => {
    const sinkOf = (built: ReturnType<typeof synth>) => ({
      variable: 'EVENT_BUS_NAME' in built.fn('Effects').Environment.Variables,
      grant: built.actionsOf('RatchetEffectsRole').includes('events:PutEvents'),
    });
    expect(sinkOf(synth())).toEqual({ variable: false, grant: false });
    const withRule = (method: 'onStateChange' | 'onOverdue') =>
      synth({}, (ratchet, stack) => ratchet[method]('Changes', new SqsQueue(new Queue(stack, 'Audit'))));
    expect(sinkOf(withRule('onStateChange'))).toEqual({ variable: true, grant: true });
    expect(sinkOf(withRule('onOverdue'))).toEqual({ variable: true, grant: true });
    // A rule of the app's own on `ratchet.bus`.
    expect(sinkOf(synth({ eventBridgeSink: true }))).toEqual({ variable: true, grant: true });
    expect(() =>
      synth({ eventBridgeSink: false }, (ratchet, stack) => ratchet.onStateChange('Changes', new SqsQueue(new Queue(stack, 'A')))),
    ).toThrow(/eventBridgeSink is false/);
  });

  it('sizes each function by its prop (256 MB, the dispatcher and poll worker 512, by default) and logs JSON at INFO without the platform lines', {
    timeout: 30_000,
  }, () => {
    const lean = synth();
    for (const [name, setting] of Object.entries(FUNCTIONS)) {
      const fn = lean.fn(name as keyof typeof FUNCTIONS);
      expect(fn.MemorySize).toBe(DEFAULT_MEMORY_MB[setting]);
      expect(fn.LoggingConfig).toMatchObject({ LogFormat: 'JSON', ApplicationLogLevel: 'INFO', SystemLogLevel: 'WARN' });
    }
    expect(DEFAULT_MEMORY_MB).toMatchObject({ api: 256, effects: 256, history: 256, reconcile: 512, pollWorker: 512, bedrockEvents: 256 });
    const tuned = synth({ memoryMb: { api: 512, history: 128 }, logLevel: 'DEBUG', platformLogLevel: 'INFO' });
    expect([tuned.fn('Api').MemorySize, tuned.fn('HistoryWriter').MemorySize, tuned.fn('Effects').MemorySize]).toEqual([512, 128, 256]);
    expect(tuned.fn('Effects').LoggingConfig).toMatchObject({ ApplicationLogLevel: 'DEBUG', SystemLogLevel: 'INFO' });
  });
});
