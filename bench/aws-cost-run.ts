/**
 * What the stack really does per webhook event, counted on moto: the
 * synthesized stack's own bundles (test/support/aws/stack-on-moto.ts) with
 * history and the outbound webhook sink on, driven by the terminal mix (each
 * job tracked, then its webhooks, a first state and its end, with Gemini's
 * redeliveries). Counted per phase (tracking, webhooks): invocations, handler
 * milliseconds, stdout bytes and peak RSS per function; every AWS call the
 * functions make (the recording proxy); write units per table and index
 * (test/support/aws/capacity.ts, from the table's stream images and the
 * items put); read units; the records the effects Pipe takes.
 * bench/aws-cost.ts prices it.
 */
import { matchesFilter, STATE_CHANGE_FILTER } from '../lambda/effects/filter.ts';
import type { RatchetStackProps } from '../lib/ratchet-stack.ts';
import { type Image, shapeOf, type TableShape, writeCost } from '../test/support/aws/capacity.ts';
import type { AwsCall } from '../test/support/aws/recording-proxy.ts';
import { FUNCTIONS, type FunctionName, StackOnMoto } from '../test/support/aws/stack-on-moto.ts';
import { synthesizeWithBundles } from '../test/support/aws/synth.ts';
import { envelope, newSecret, signedDelivery } from '../test/support/deliveries.ts';
import { eventually, Receiver } from '../test/support/receiver.ts';
import { StreamReader } from '../test/support/stream-records.ts';

/** One phase's counts, as they were (divide by `events` for per-event figures). */
export interface PhaseCounts {
  events: number;
  /** Per function: invocations, handler time (wall and CPU, ms in all), stdout bytes, peak RSS, AWS requests it made. */
  functions: Record<
    FunctionName,
    { invocations: number; handlerMs: number; cpuMs: number; stdoutBytes: number; maxRssMb: number; awsCalls: number }
  >;
  /** `service:Action resource-label` → calls, e.g. `dynamodb:PutItem History`, `sqs:ChangeMessageVisibility EffectsQueue`. */
  calls: Record<string, number>;
  /** Table or `Table/index` → write units. */
  writeUnits: Record<string, number>;
  /** Table or `Table/index` → read units. */
  readUnits: Record<string, number>;
  /** Applied writes to the operations table (its stream's records); UpdateItem calls beyond them were refused. */
  operationsRecords: number;
  /** Stream records the effects Pipe's filter keeps (each one Pipe request and one SQS SendMessage). */
  pipeRecords: number;
  /** Effects delivered to the outbound webhook. */
  effects: number;
}

export interface Measured {
  /** The construct's settings the run synthesized. */
  props: Omit<RatchetStackProps, 'env'>;
  /** Per function: memory, tracing mode, application log level (from the template). */
  settings: Record<FunctionName, { memoryMb: number; tracing: string; logLevel?: string; systemLogLevel?: string }>;
  track: PhaseCounts;
  webhooks: PhaseCounts;
}

const progress = (what: string) => process.stderr.write(`  aws cost: ${what}\n`);

const labelOf = (logicalId: string) => logicalId.replace(/[0-9A-F]{8}$/, '');

/** Runs `jobs` jobs through the stack synthesized with `props`. */
export async function measureStack(endpoint: string, props: Omit<RatchetStackProps, 'env'>, jobs: number): Promise<Measured> {
  const synthesized = synthesizeWithBundles(props);
  const inbound = newSecret();
  const outbound = newSecret();
  const receiver = await new Receiver(outbound).start();
  const stack = await new StackOnMoto(synthesized, endpoint, {
    secrets: { WebhookSigningSecrets: inbound, EffectsWebhookUrl: receiver.url, EffectsSigningSecret: outbound, GeminiApiKey: 'unused' },
    // Reconcile is priced apart (per open job polled): its schedule does not come round here.
    reconcileEveryMs: 3_600_000,
    logs: true,
  }).start();
  const { world } = stack;
  try {
    const tables = new Map<string, string>();
    for (const [id] of world.ofType('AWS::DynamoDB::Table')) tables.set(String(world.resolve({ Ref: id })), labelOf(id));
    const queues = new Map<string, string>();
    for (const [id] of world.ofType('AWS::SQS::Queue')) queues.set(String(world.resolve({ 'Fn::GetAtt': [id, 'QueueName'] })), labelOf(id));
    const operations = world.logicalId('AWS::DynamoDB::Table', 'Operations');
    const operationsTable = String(world.resolve({ Ref: operations }));
    /** Each table's keys and global secondary indexes, as the template declares them (by its label). */
    const shapes = new Map<string, TableShape>();
    for (const [id, table] of world.ofType('AWS::DynamoDB::Table'))
      shapes.set(labelOf(id), shapeOf({ ...(table.Properties as Parameters<typeof shapeOf>[0]), TableName: labelOf(id) }));
    const operationsShape = shapes.get('Operations') as TableShape;
    const settings = Object.fromEntries(
      FUNCTIONS.map((fn) => {
        const p = world.resource(world.logicalId('AWS::Lambda::Function', fn)).Properties as {
          MemorySize?: number;
          TracingConfig?: { Mode?: string };
          LoggingConfig?: { ApplicationLogLevel?: string; SystemLogLevel?: string };
        };
        return [
          fn,
          {
            memoryMb: p.MemorySize ?? 128,
            tracing: p.TracingConfig?.Mode ?? 'PassThrough',
            logLevel: p.LoggingConfig?.ApplicationLogLevel,
            systemLogLevel: p.LoggingConfig?.SystemLogLevel,
          },
        ];
      }),
    ) as Measured['settings'];

    const streams = await StreamReader.open(endpoint, operationsTable);
    await streams.read(); // what earlier runs on this moto wrote
    progress('stack up');
    const snapshot = () => ({
      calls: stack.proxy.calls.length,
      hosts: Object.fromEntries(FUNCTIONS.map((fn) => [fn, { ...stack.hosts[fn].stats }])) as Record<FunctionName, HostStats>,
      applied: receiver.applied().length,
    });
    const phase = async (events: number, before: ReturnType<typeof snapshot>): Promise<PhaseCounts> => {
      const after = snapshot();
      const allCalls = stack.proxy.calls.slice(before.calls, after.calls);
      const records = await streams.read();
      const counts: PhaseCounts = {
        events,
        functions: Object.fromEntries(
          FUNCTIONS.map((fn) => [
            fn,
            {
              invocations: after.hosts[fn].invocations - before.hosts[fn].invocations,
              handlerMs: after.hosts[fn].handlerMs - before.hosts[fn].handlerMs,
              cpuMs: after.hosts[fn].cpuMs - before.hosts[fn].cpuMs,
              awsCalls: allCalls.filter((call) => call.caller === fn).length,
              stdoutBytes: after.hosts[fn].stdoutBytes - before.hosts[fn].stdoutBytes,
              maxRssMb: after.hosts[fn].maxRssMb,
            },
          ]),
        ) as PhaseCounts['functions'],
        calls: {},
        writeUnits: {},
        readUnits: {},
        operationsRecords: records.length,
        pipeRecords: records.filter((record) => matchesFilter(STATE_CHANGE_FILTER, record)).length,
        effects: after.applied - before.applied,
      };
      const add = (into: Record<string, number>, key: string, n: number) => {
        into[key] = (into[key] ?? 0) + n;
      };
      const calls = allCalls.filter((call) => call.caller !== 'Reconcile');
      for (const call of calls) add(counts.calls, `${call.action} ${resourceLabel(call, tables, queues)}`, 1);
      /** A write's units, on the table (`label`) and each index it touched (`label/index`). */
      const addCost = (shape: TableShape, before: Image | undefined, after: Image | undefined) => {
        const cost = writeCost(shape, before, after);
        add(counts.writeUnits, shape.name, cost.table.units);
        for (const [index, writes] of Object.entries(cost.indexes))
          add(
            counts.writeUnits,
            `${shape.name}/${index}`,
            writes.reduce((units, write) => units + write.units, 0),
          );
      };
      for (const record of records)
        addCost(operationsShape, record.dynamodb?.OldImage as Image | undefined, record.dynamodb?.NewImage as Image | undefined);
      for (const call of calls) {
        const label = resourceLabel(call, tables, queues);
        if (label.startsWith('Operations')) continue; // counted from its stream, indexes included
        const shape = shapes.get(label);
        // A new item (Ratchet's puts never replace one): the table's units and each index whose keys it carries.
        if (call.action === 'dynamodb:PutItem' && call.item && shape) addCost(shape, undefined, call.item as Image);
        else if (call.action === 'dynamodb:UpdateItem' || call.action === 'dynamodb:DeleteItem') add(counts.writeUnits, label, 1);
      }
      // Reads: every item Ratchet reads is under 4 KB; one unit strongly consistent, half eventually.
      for (const call of calls)
        if (['dynamodb:GetItem', 'dynamodb:Query'].includes(call.action))
          add(counts.readUnits, resourceLabel(call, tables, queues), call.consistentRead ? 1 : 0.5);
      return counts;
    };

    const run = Date.now().toString(36);
    const names = Array.from({ length: jobs }, (_, i) => `interactions/cost-${run}-${i}`);
    // 1. Each job tracked (POST /operations), as an app does when it starts one.
    let before = snapshot();
    await inBatches(names, 8, async (name) => {
      const answer = await fetch(`${stack.apiUrl}/operations`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ name }),
      });
      if (answer.status !== 201 && answer.status !== 200) throw new Error(`track ${name}: ${answer.status}`);
    });
    await eventually(() => historyPuts(stack.proxy.calls, before.calls) >= jobs, 60_000, 'every track in history');
    const track = await phase(jobs, before);
    progress('tracked');

    // 2. Webhooks: a first state (waiting for action) and the end; one in five sent twice (Gemini's redeliveries).
    const deliveries = names.flatMap((id, i) =>
      (
        [
          ['interaction.requires_action', '2026-11-30T10:00:01Z'],
          ['interaction.completed', '2026-11-30T10:00:02Z'],
        ] as const
      ).flatMap(([type, time], step) => {
        const delivery = signedDelivery(inbound, envelope(type, { id }, time));
        return (i * 2 + step) % 5 === 0 ? [delivery, delivery] : [delivery];
      }),
    );
    before = snapshot();
    await inBatches(deliveries, 8, async (delivery) => {
      const answer = await fetch(`${stack.apiUrl}/webhooks/gemini`, { method: 'POST', body: delivery.body, headers: delivery.headers });
      if (answer.status !== 200) throw new Error(`webhook: ${answer.status}`);
    });
    await eventually(() => receiver.applied().length - before.applied >= 2 * jobs, 120_000, 'every effect delivered');
    await eventually(() => historyPuts(stack.proxy.calls, before.calls) >= 2 * jobs, 60_000, 'every change in history');
    // The last batch's ledger writes come after its deliveries: one per effect and sink (the webhook's last).
    const sinks = world.environment('Effects').EVENT_BUS_NAME ? 2 : 1;
    await eventually(() => ledgerPuts(stack.proxy.calls, before.calls, tables) >= sinks * 2 * jobs, 60_000, 'every ledger write');
    const webhooks = await phase(deliveries.length, before);
    progress('webhooks counted');
    if (stack.errors.length > 0) throw stack.errors[0];
    return { props, settings, track, webhooks };
  } finally {
    await stack.stop();
    await receiver.stop();
    synthesized.remove();
  }
}

type HostStats = StackOnMoto['hosts'][FunctionName]['stats'];

const historyPuts = (calls: AwsCall[], from: number) =>
  calls.slice(from).filter((call) => call.caller === 'HistoryWriter' && call.action === 'dynamodb:PutItem').length;

const ledgerPuts = (calls: AwsCall[], from: number, tables: Map<string, string>) =>
  calls.slice(from).filter((call) => call.action === 'dynamodb:PutItem' && resourceLabel(call, tables, new Map()) === 'EffectsLedger')
    .length;

function resourceLabel(call: AwsCall, tables: Map<string, string>, queues: Map<string, string>): string {
  const table = /:table\/([^/]+)(?:\/index\/(.+))?$/.exec(call.resource);
  if (table) return `${tables.get(table[1] as string) ?? table[1]}${table[2] ? `/${table[2]}` : ''}`;
  const queue = /:sqs:[^:]+:[^:]+:(.+)$/.exec(call.resource);
  if (queue) return queues.get(queue[1] as string) ?? (queue[1] as string);
  if (call.action.startsWith('secretsmanager:')) return 'secret';
  if (call.action.startsWith('events:')) return 'bus';
  return call.resource;
}

async function inBatches<T>(items: T[], concurrency: number, each: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < items.length) await each(items[next++] as T);
    }),
  );
}
