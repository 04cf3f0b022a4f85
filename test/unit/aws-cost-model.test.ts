/** The cost model's arithmetic (bench/aws-cost-model.ts): per million events, line by line, at its prices; worked by hand. */
import { describe, expect, it } from 'vitest';
import { costLines, pollCostLines, type Shape, totalOf, tracedShare } from '../../bench/aws-cost-model.ts';

const shape: Shape = {
  label: 'one of everything',
  apiRequests: 1,
  functions: [{ name: 'Api', invocations: 1, seconds: 0.1, memoryMb: 1024, logBytes: 1000, traced: true }],
  accessLogBytes: 0,
  writeUnits: { Operations: 1.5, History: 0.5 },
  readUnits: { EffectsLedger: 1 },
  pipeRequests: 1,
  sqsRequests: 3,
  eventBridgeEvents: 0,
  secretsCalls: 0,
  eventsPerSecond: 1,
};

describe('the AWS cost model', () => {
  it('prices a million events line by line: $1.00 API, $0.20 requests, $1.33334 GB-s, $1.25 writes, $0.125 reads, $0.40 Pipe, $1.50 SQS, $5 traces, $0.50 logs', () => {
    const usd = Object.fromEntries(costLines(shape).map((line) => [line.what, Number(line.usd.toFixed(6))]));
    expect(usd).toMatchObject({
      'API Gateway HTTP API requests': 1,
      'Lambda requests: Api': 0.2,
      'Lambda GB-s: Api': 1.33334,
      'DynamoDB writes: Operations': 0.9375,
      'DynamoDB writes: History': 0.3125,
      'DynamoDB reads: EffectsLedger': 0.125,
      'EventBridge Pipe (stream -> effects queue)': 0.4,
      'SQS FIFO requests (send, receive, delete, visibility)': 1.5,
      'EventBridge custom events (the EventBridge sink)': 0,
      'X-Ray traces recorded': 5,
      'CloudWatch Logs: Api': 0.5,
    });
    expect(totalOf(costLines(shape))).toBeCloseTo(11.30834, 6);
  });

  it('samples as Lambda does: every invocation at one a second or less, the first each second and 5 % of the rest above', () => {
    expect(tracedShare(0.5)).toBe(1);
    expect(tracedShare(100)).toBeCloseTo(0.0595, 10);
    const busy = costLines({ ...shape, eventsPerSecond: 100 }).find((line) => line.what === 'X-Ray traces recorded');
    expect(busy?.usd).toBeCloseTo(0.2975, 10);
  });

  it('prices a million polls: a tenth of a worker invocation each, its writes, reads and queue requests', () => {
    const lines = pollCostLines({
      pollsPerInvocation: 10,
      invocationSeconds: 2,
      memoryMb: 512,
      writeUnits: 2,
      readUnits: 0.1,
      sqsRequests: 0.3,
      logBytes: 0,
    });
    expect(Object.fromEntries(lines.map((line) => [line.what, Number(line.usd.toFixed(6))]))).toEqual({
      'Lambda requests: poll worker': 0.02,
      'Lambda GB-s: poll worker': 1.33334,
      'DynamoDB writes: the lease and the next due time': 1.25,
      'DynamoDB reads: the due buckets': 0.0125,
      'SQS requests': 0.15,
      'CloudWatch Logs': 0,
    });
  });
});
